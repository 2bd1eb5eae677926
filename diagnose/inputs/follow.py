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
    stream: BinaryIO, poll: float, sleep: Sleep = time.sleep, is_pipe: bool | None = None
) -> Iterator[list[str]]:
    """Batches of decoded lines; an empty batch means "nothing new for ``poll`` seconds".

    Ends when a pipe closes. A regular file is followed until the caller stops."""
    descriptor = stream.fileno()
    if is_pipe is None:
        is_pipe = not _is_regular(descriptor)
    rest = b""
    while True:
        if is_pipe:
            ready, _, _ = select.select([descriptor], [], [], poll)
            chunk = os.read(descriptor, 1 << 16) if ready else None
            if chunk == b"":
                if rest:
                    yield [rest.decode("utf-8", "replace")]
                return
        else:
            chunk = stream.read(1 << 16) or None
            if chunk is None:
                sleep(poll)
        if chunk is None:
            yield []
            continue
        lines, rest = _split(rest + chunk)
        yield [line.decode("utf-8", "replace") for line in lines]


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
