"""Following a log as it grows: a file being written, or a pipe (``journalctl -f | ...``).

``follow`` yields batches of new lines, and an empty batch at least once per ``poll``
seconds when nothing arrives, so the caller can check the clock (a hang is silence).
"""

from __future__ import annotations

import os
import select
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from diagnose.core.errors import UserError
from diagnose.core.units import unit_name
from diagnose.inputs.files import MAX_LINE_BYTES

Sleep = Callable[[float], None]


def _split(buffer: bytes) -> tuple[list[bytes], bytes]:
    *lines, rest = buffer.split(b"\n")
    if len(rest) > MAX_LINE_BYTES:  # an endless line: keep its head, drop the rest
        lines.append(rest[:MAX_LINE_BYTES])
        rest = b""
    return lines, rest


def follow(
    stream: BinaryIO,
    poll: float,
    sleep: Sleep = time.sleep,
    is_pipe: bool | None = None,
    path: Path | None = None,
) -> Iterator[list[str]]:
    """Batches of decoded lines; an empty batch means "nothing new for ``poll`` seconds".

    Ends when a pipe closes (a FIFO: once a writer came and went). A regular file is followed
    until the caller stops, by name when ``path`` is given, as ``tail -F`` does: a file
    rotated away (renamed, a new one created) is read to its end and the new one from its
    start; a file truncated in place (copytruncate) is read again from its start."""
    descriptor = stream.fileno()
    if is_pipe is None:
        is_pipe = not _is_regular(descriptor)
    rest = b""
    heard = False
    while True:
        if is_pipe:
            ready, _, _ = select.select([descriptor], [], [], poll)
            chunk = _read_ready(descriptor) if ready else None
            if chunk == b"" and not heard and _is_fifo(descriptor):
                sleep(poll)  # a FIFO nobody has opened for writing yet: wait for one
                chunk = None
            elif chunk == b"":
                if rest:
                    yield [rest.decode("utf-8", "replace")]
                return
            heard = heard or bool(chunk)
        else:
            chunk = stream.read(1 << 16) or None
            if chunk is None and path is not None:
                moved = _moved(stream, path)
                if moved is not None:
                    stream, rest = moved, b""
                    descriptor = stream.fileno()
                    continue
            if chunk is None:
                sleep(poll)
        if chunk is None:
            yield []
            continue
        lines, rest = _split(rest + chunk)
        yield [line.decode("utf-8", "replace") for line in lines]


def _read_ready(descriptor: int) -> bytes | None:
    try:
        return os.read(descriptor, 1 << 16)
    except BlockingIOError:  # a non-blocking FIFO with nothing after all
        return None


def _moved(stream: BinaryIO, path: Path) -> BinaryIO | None:
    """The stream to read on when ``path`` was rotated or truncated, else None."""
    try:
        now = os.stat(path)
    except OSError:
        return None  # rotated away, the new file not there yet: keep waiting
    here = os.fstat(stream.fileno())
    if (now.st_dev, now.st_ino) != (here.st_dev, here.st_ino):
        try:
            fresh = path.open("rb")
        except OSError:
            return None
        stream.close()
        return fresh
    if now.st_size < stream.tell():
        stream.seek(0)
        return stream
    return None


def _is_fifo(descriptor: int) -> bool:
    return stat.S_ISFIFO(os.fstat(descriptor).st_mode)


def _is_regular(descriptor: int) -> bool:
    return stat.S_ISREG(os.fstat(descriptor).st_mode)


def open_followed(argument: str) -> tuple[BinaryIO, bool]:
    """The stream to follow (a file, read from its start, or stdin) and whether it is a pipe."""
    if argument == "-":
        return sys.stdin.buffer, not _is_regular(sys.stdin.fileno())
    path = Path(argument)
    if path.is_dir():
        raise UserError(f"{path}: is a directory", help="watch a log file, or a unit with -u")
    try:
        if path.is_fifo():  # opened without waiting for a writer; read as a pipe
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            return os.fdopen(descriptor, "rb"), True
        return path.open("rb"), False
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def journal_follower(unit: str) -> tuple[BinaryIO, subprocess.Popen[bytes]]:
    """``journalctl -f -o json`` for the unit and what PID 1 says about it, from now on."""
    name = unit_name(unit)
    command = [
        "journalctl", "-f", "-n", "0", "-o", "json",
        f"_SYSTEMD_UNIT={name}", "+", f"UNIT={name}", "_PID=1",
    ]  # fmt: skip
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UserError(
            "journalctl not found", help="watch the log file instead: diagnose watch FILE"
        ) from None
    assert process.stdout is not None
    return process.stdout, process  # type: ignore[return-value]
