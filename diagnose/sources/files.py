"""Saved logs: plain files, gzip files and standard input, read as a stream."""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain, islice
from pathlib import Path
from typing import BinaryIO

from diagnose.errors import UserError
from diagnose.lineformat import LineParser, year_hint
from diagnose.records import Event
from diagnose.tracebacks import TracebackGrouper

MAX_LINE_BYTES = 1 << 20
"""Longer physical lines are cut here (the rest is skipped), so memory stays bounded."""
YEAR_LOOKAHEAD = 256
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class LogInput:
    """One saved log to read; ``name`` is how reports refer to it."""

    path: Path | None
    name: str
    kind: str = "file"
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_argument(cls, argument: str) -> LogInput:
        if argument == "-":
            return cls(path=None, name="<stdin>", kind="stdin")
        return cls(path=Path(argument), name=argument)


def _open(log: LogInput) -> BinaryIO:
    handle: io.BufferedReader = sys.stdin.buffer if log.path is None else _open_path(log.path)  # type: ignore[assignment]
    if handle.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
    return handle


def _open_path(path: Path) -> io.BufferedReader:
    try:
        if path.is_dir():
            raise UserError(
                f"{path}: is a directory", help="pass log files, or use -D with journal"
            )
        handle = path.open("rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except PermissionError:
        raise UserError(
            f"{path}: permission denied", help="run with sudo or fix the file mode"
        ) from None
    except OSError as error:
        raise UserError(f"{path}: cannot open: {error.strerror}") from None
    return handle


def raw_lines(log: LogInput) -> Iterator[str]:
    """Decoded physical lines, each cut at ``MAX_LINE_BYTES``; never the whole file at once."""
    stream = _open(log)
    try:
        while True:
            try:
                chunk = stream.readline(MAX_LINE_BYTES)
            except (EOFError, gzip.BadGzipFile, zlib.error) as error:
                log.warnings.append(
                    f"{log.name}: compressed data ends early ({error}); read what came before"
                )
                return
            if not chunk:
                return
            if not chunk.endswith(b"\n"):
                while True:  # skip the rest of an over-long line
                    try:
                        rest = stream.readline(MAX_LINE_BYTES)
                    except (EOFError, gzip.BadGzipFile, zlib.error):
                        rest = b""
                    if not rest or rest.endswith(b"\n"):
                        break
            yield chunk.rstrip(b"\n").decode("utf-8", "replace")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _default_year(log: LogInput, head: list[str]) -> int:
    for line in head:
        year = year_hint(line)
        if year:
            return year
    if log.path is not None:
        try:
            return datetime.fromtimestamp(os.stat(log.path).st_mtime, tz=timezone.utc).year
        except OSError:
            pass
    return datetime.now(tz=timezone.utc).year


def events(log: LogInput, first_seq: int = 0) -> Iterator[Event]:
    """Events of one saved log: lines, with Python tracebacks grouped."""
    lines = raw_lines(log)
    head = list(islice(lines, YEAR_LOOKAHEAD))
    yield from events_from_lines(chain(head, lines), log.name, _default_year(log, head), first_seq)


def events_from_lines(
    lines: Iterable[str], name: str, default_year: int, first_seq: int = 0
) -> Iterator[Event]:
    """Events from decoded lines: parsed one by one, tracebacks grouped."""
    parser = LineParser(name, default_year)
    grouper = TracebackGrouper()
    seq = first_seq
    for line_no, line in enumerate(lines, 1):
        record = parser.parse(line_no, line)
        if record is None:
            continue
        seq += 1
        record.seq = seq
        yield from grouper.feed(record, seq)
    yield from grouper.flush()
