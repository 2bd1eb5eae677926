"""Saved logs: plain files, gzip files, standard input and in-memory text, read as a stream.

Two ways through a log, with the same result:

* ``scanned_events`` (the default): reads 8 MiB chunks of bytes, finds the lines that hold
  any needle of the library in one pass over each chunk (``diagnose.core.scan``), and decodes and
  parses only those, plus the lines that follow a ``Traceback`` header. Line numbers come
  from counting newlines between candidates. Cost is set by the few interesting lines.
* ``line_events``: parses every line; used when a signature has a pattern without needles.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import mmap
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain, islice
from pathlib import Path
from typing import BinaryIO

from diagnose.core.errors import UserError
from diagnose.core.incident import LAST_LINES
from diagnose.core.models import InputSummary
from diagnose.core.records import Event, Record
from diagnose.core.scan import NeedleScanner
from diagnose.core.tracebacks import MAX_TRACEBACK_LINES, TRACEBACK_START, TracebackGrouper
from diagnose.inputs.lineformat import LineParser, year_hint

MAX_LINE_BYTES = 1 << 20
"""Longer physical lines are cut here (the rest is skipped), so memory stays bounded."""
CHUNK_BYTES = 8 << 20
YEAR_LOOKAHEAD = 256
HEAD_LINES = 256
"""The scanned path parses the first lines of an input whatever they hold."""
TAIL_LINES = 64
"""How far back from the end to look for the last timestamp of an input."""
BEFORE_EXIT_LINES = LAST_LINES
"""Lines read before a process exit, and at the end of an input, whatever they hold: what
the server said last is evidence when no signature explains the failure."""
EXIT_MARKERS = (b"exited, code=", b"Failed with result")
"""Literals of systemd's process-exit lines: the lines before one are read too."""
_GZIP_MAGIC = b"\x1f\x8b"
_TRACEBACK = TRACEBACK_START.encode()
_READ_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


@dataclass
class LogInput:
    """One saved log to read; ``name`` is how reports refer to it. Reading fills the stats."""

    path: Path | None
    name: str
    kind: str = "file"
    data: bytes | None = None
    """In-memory content (examples, tests) instead of a path or stdin."""
    warnings: list[str] = field(default_factory=list)
    lines: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None

    @classmethod
    def from_argument(cls, argument: str) -> LogInput:
        if argument == "-":
            return cls(path=None, name="<stdin>", kind="stdin")
        return cls(path=Path(argument), name=argument)

    @classmethod
    def from_text(cls, text: str, name: str = "example.log") -> LogInput:
        return cls(path=None, name=name, data=text.encode("utf-8"))

    def summary(self) -> InputSummary:
        return InputSummary(
            kind=self.kind,  # type: ignore[arg-type]
            name=self.name,
            records=self.lines,
            first_ts=self.first_ts,
            last_ts=self.last_ts,
        )


def _open_path(path: Path) -> io.BufferedReader:
    try:
        if path.is_dir():
            raise UserError(f"{path}: is a directory", help="pass log files, not a directory")
        return path.open("rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except PermissionError:
        raise UserError(
            f"{path}: permission denied", help="run with sudo or fix the file mode"
        ) from None
    except OSError as error:
        raise UserError(f"{path}: cannot open: {error.strerror}") from None


def _open(log: LogInput) -> BinaryIO:
    if log.data is not None:
        handle: io.BufferedReader = io.BufferedReader(io.BytesIO(log.data))  # type: ignore[arg-type]
    elif log.path is None:
        handle = sys.stdin.buffer  # type: ignore[assignment]
    else:
        handle = _open_path(log.path)
    if handle.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
    return handle


def _close(log: LogInput, stream: BinaryIO) -> None:
    if log.path is not None or log.data is not None:
        stream.close()


def raw_chunks(log: LogInput) -> Iterator[bytes]:
    """Chunks of whole lines, each ending in a newline; a line over ``MAX_LINE_BYTES`` keeps
    its head and the rest is skipped, so no chunk grows without bound. A plain file is
    mapped and cut at line ends (one copy per chunk); pipes and gzip are read in blocks."""
    stream = _open(log)
    mapped = _mapped(stream)
    if mapped is not None:
        try:
            yield from _mapped_chunks(mapped)
        finally:
            mapped.close()
            _close(log, stream)
        return
    rest = b""
    skipping = False
    ended = False
    try:
        while True:
            block, ended = (b"", True) if ended else _read_block(stream, log)
            if not block:
                if rest and not skipping:
                    yield rest + b"\n"
                return
            if skipping:
                newline = block.find(b"\n")
                if newline < 0:
                    continue
                block, skipping = block[newline + 1 :], False
            data = rest + block
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if len(tail) > MAX_LINE_BYTES:
                rest, skipping = b"", True
                yield data[:cut] + tail[:MAX_LINE_BYTES] + b"\n"
                continue
            rest = tail
            if cut:
                yield data[:cut]
    finally:
        _close(log, stream)


def _mapped(stream: BinaryIO) -> mmap.mmap | None:
    """The whole of a regular, non-empty, uncompressed file, mapped read-only; else None."""
    if isinstance(stream, gzip.GzipFile) or stream is sys.stdin.buffer:
        return None
    try:
        descriptor = stream.fileno()
        if not stat.S_ISREG(os.fstat(descriptor).st_mode) or os.fstat(descriptor).st_size == 0:
            return None
        return mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _mapped_chunks(mapped: mmap.mmap) -> Iterator[bytes]:
    """:func:`raw_chunks` over a mapped file: each chunk is cut at the last line end within
    ``CHUNK_BYTES`` and copied once; a line longer than a chunk keeps ``MAX_LINE_BYTES``."""
    size = len(mapped)
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    start = 0
    while start < size:
        limit = start + CHUNK_BYTES
        if limit >= size:
            chunk = mapped[start:size]
            yield chunk if chunk.endswith(b"\n") else chunk + b"\n"
            return
        end = mapped.rfind(b"\n", start, limit) + 1
        if end > 0:
            yield mapped[start:end]
        else:
            yield mapped[start : start + MAX_LINE_BYTES] + b"\n"  # one endless line: its head
            line_end = mapped.find(b"\n", limit)
            end = size if line_end < 0 else line_end + 1
        _release(mapped, start, end)
        start = end


def _release(mapped: mmap.mmap, start: int, end: int) -> None:
    """Drop the pages of a part already read from this process (memory stays flat; the
    kernel keeps them in its page cache)."""
    first = start - start % mmap.PAGESIZE
    with contextlib.suppress(OSError):
        mapped.madvise(mmap.MADV_DONTNEED, first, end - first)


def _read_block(stream: BinaryIO, log: LogInput) -> tuple[bytes, bool]:
    """Up to ``CHUNK_BYTES``, and whether the input ended early. A gzip stream is read piece
    by piece, so that what decompressed before a truncation is kept."""
    if not isinstance(stream, gzip.GzipFile):
        return stream.read(CHUNK_BYTES), False
    pieces: list[bytes] = []
    size = 0
    while size < CHUNK_BYTES:
        try:
            piece = stream.read1(CHUNK_BYTES - size)
        except _READ_ERRORS as error:
            log.warnings.append(
                f"{log.name}: compressed data ends early ({error}); read what came before"
            )
            return b"".join(pieces), True
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces), False


def _decode(line: bytes) -> str:
    return line[:MAX_LINE_BYTES].decode("utf-8", "replace")


def _default_year(log: LogInput, head: Iterable[str]) -> int:
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


def _last_timestamp(parser: LineParser, tail: list[bytes]) -> datetime | None:
    """The timestamp of the last line that has one (a copy of the parser keeps its year)."""
    probe = LineParser(parser.source, parser.year)
    for line in reversed(tail):
        record = probe.parse(None, _decode(line))
        if record is not None and record.ts is not None:
            return record.ts
    return None


class _Stats:
    """First and last timestamps of an input, from its records as they pass."""

    def __init__(self, log: LogInput) -> None:
        self.log = log

    def see(self, record: Record) -> None:
        if record.ts is None:
            return
        if self.log.first_ts is None:
            self.log.first_ts = record.ts
        if self.log.last_ts is None or record.ts > self.log.last_ts:
            self.log.last_ts = record.ts


def _take_lines(
    chunk: bytes, cursor: int, count: int, spans: list[tuple[int, int]]
) -> tuple[int, int]:
    """Add up to ``count`` whole lines from ``cursor`` to ``spans``; the new cursor, and how
    many lines are still to take from the next chunk."""
    while count and cursor < len(chunk):
        end = chunk.index(b"\n", cursor)
        spans.append((cursor, end))
        cursor = end + 1
        count -= 1
    return cursor, count


def _lines_before(chunk: bytes, start: int, floor: int, spans: list[tuple[int, int]]) -> None:
    """Add up to ``BEFORE_EXIT_LINES`` whole lines that end before ``start`` (and begin at or
    after ``floor``) to ``spans``, in order."""
    found: list[tuple[int, int]] = []
    end = start - 1
    while len(found) < BEFORE_EXIT_LINES and end > floor:
        begin = chunk.rfind(b"\n", floor, end) + 1
        begin = max(begin, floor)
        found.append((begin, end))
        end = begin - 1
    spans.extend(reversed(found))


def scanned_events(
    log: LogInput,
    scanner: NeedleScanner,
    first_seq: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Event]:
    """Events of the lines that hold a needle, and of the tracebacks they start.
    ``progress`` is told the size of each chunk once it is done."""
    parser: LineParser | None = None
    grouper = TracebackGrouper()
    stats = _Stats(log)
    lines_before = 0
    context_left = HEAD_LINES  # the head tells the engine, the year and the first timestamp
    tail: list[bytes] = []
    last: tuple[bytes, int, int] | None = None
    for chunk in raw_chunks(log):
        if parser is None:
            head = chunk[: 1 << 16].split(b"\n", YEAR_LOOKAHEAD)[:YEAR_LOOKAHEAD]
            parser = LineParser(log.name, _default_year(log, (_decode(h) for h in head)))
        spans: list[tuple[int, int]] = []
        cursor, context_left = _take_lines(chunk, 0, context_left, spans)
        for match_end in scanner.ends(chunk):
            if match_end <= cursor:
                continue
            start = chunk.rfind(b"\n", 0, match_end) + 1
            end = chunk.index(b"\n", match_end - 1)
            if any(marker in chunk[start:end] for marker in EXIT_MARKERS):
                _lines_before(chunk, start, cursor, spans)
            spans.append((start, end))
            cursor = end + 1
            if _TRACEBACK in chunk[start:end]:
                cursor, context_left = _take_lines(chunk, cursor, MAX_TRACEBACK_LINES, spans)
        last = (chunk, cursor, lines_before)
        counted_at, counted = 0, lines_before
        for start, end in spans:
            counted += chunk.count(b"\n", counted_at, start)
            counted_at = start
            record = parser.parse(counted + 1, _decode(chunk[start:end]))
            if record is None:
                continue
            record.seq = first_seq + counted + 1
            stats.see(record)
            yield from grouper.feed(record, record.seq)
        lines_before = counted + chunk.count(b"\n", counted_at)
        if progress is not None:
            progress(len(chunk))
        tail = chunk[max(0, len(chunk) - (1 << 16)) :].split(b"\n")[-TAIL_LINES - 1 : -1]
    log.lines = lines_before
    if parser is not None and last is not None:  # the input's last lines, not yet read
        chunk, cursor, base = last
        spans = []
        _lines_before(chunk, len(chunk), cursor, spans)
        for start, end in spans:
            record = parser.parse(
                base + chunk.count(b"\n", 0, start) + 1, _decode(chunk[start:end])
            )
            if record is None:
                continue
            record.seq = first_seq + (record.line or 0)
            stats.see(record)
            yield from grouper.feed(record, record.seq)
    if parser is not None:
        last_ts = _last_timestamp(parser, tail)
        if last_ts is not None and (log.last_ts is None or last_ts > log.last_ts):
            log.last_ts = last_ts
    yield from grouper.flush()


def line_events(log: LogInput, first_seq: int = 0) -> Iterator[Event]:
    """Events of every line: the path for signatures whose patterns have no needles."""

    def lines() -> Iterator[str]:
        for chunk in raw_chunks(log):
            for line in chunk.split(b"\n")[:-1]:
                yield _decode(line)

    yield from events_from_lines(lines(), log, first_seq)


def events_from_lines(lines: Iterable[str], log: LogInput, first_seq: int = 0) -> Iterator[Event]:
    """Events from decoded lines: each parsed, tracebacks grouped; fills the input's stats."""
    iterator = iter(lines)
    head = list(islice(iterator, YEAR_LOOKAHEAD))
    parser = LineParser(log.name, _default_year(log, head))
    grouper = TracebackGrouper()
    stats = _Stats(log)
    line_no = 0
    for line_no, line in enumerate(chain(head, iterator), 1):
        record = parser.parse(line_no, line)
        if record is None:
            continue
        record.seq = first_seq + line_no
        stats.see(record)
        yield from grouper.feed(record, record.seq)
    log.lines = line_no
    yield from grouper.flush()


def events(
    log: LogInput,
    scanner: NeedleScanner | None,
    first_seq: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Event]:
    """The scanned path when there is a scanner, else every line."""
    if scanner is None:
        return line_events(log, first_seq)
    return scanned_events(log, scanner, first_seq, progress)
