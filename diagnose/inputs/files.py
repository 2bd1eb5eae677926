"""Saved logs: plain files, gzip files, standard input and in-memory text, read as a stream.

Two ways through a log, with the same result:

* ``scanned_events`` (the default): reads 8 MiB chunks of bytes, finds the lines that hold
  any needle of the library in one pass over each chunk (``diagnose.core.scan``), and decodes and
  parses only those, plus the lines that follow a ``Traceback`` header. Line numbers come
  from counting newlines between candidates. Cost is set by the few interesting lines. A
  large regular file is read by several worker processes (``jobs``), chunk by chunk, and
  merged into exactly the events one process would give.
* ``line_events``: parses every line; used when a signature has a pattern without needles.
"""

from __future__ import annotations

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
from typing import Any, BinaryIO, NamedTuple, TypeVar

from diagnose.core.errors import UserError
from diagnose.core.incident import LAST_LINES
from diagnose.core.models import InputSummary
from diagnose.core.records import Event, Record
from diagnose.core.scan import NeedleScanner
from diagnose.core.tracebacks import MAX_TRACEBACK_LINES, TRACEBACK_START, TracebackGrouper
from diagnose.inputs.lineformat import LineParser, out_of_range_note, year_hint

MAX_LINE_BYTES = 1 << 20
"""Longer physical lines are cut here (the rest is skipped), so memory stays bounded."""
CHUNK_BYTES = 8 << 20
PARALLEL_MIN_BYTES = 64 << 20
"""A mapped file this large is read by several processes when more than one CPU is usable
(below it, starting them costs more than they save)."""
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
_Item = TypeVar("_Item")


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
    mapped to find the line ends it is cut at, and each chunk read with one ``pread``; pipes
    and gzip are read in blocks."""
    stream = _open(log)
    mapped = _lf_mapped(stream)
    try:
        if mapped is not None:
            yield from _mapped_chunks(mapped, stream.fileno())
        else:
            yield from _stream_chunks(stream, log)
    finally:
        if mapped is not None:
            mapped.close()
        _close(log, stream)


def cr_line_ends(head: bytes | bytearray) -> bool:
    """Whether an input whose first block is ``head`` ends its lines in a lone ``\\r`` (old
    Mac style): no ``\\n`` in it, and a ``\\r``. Elsewhere a ``\\r`` inside a line is a
    progress bar redrawing it, and the line stays one record."""
    return b"\n" not in head and b"\r" in head


def _stream_chunks(stream: BinaryIO, log: LogInput) -> Iterator[bytes]:
    """:func:`raw_chunks` of a pipe or a gzip stream, read in blocks. When the first block
    says the lines end in ``\\r`` (:func:`cr_line_ends`), each block's line ends are made
    ``\\n`` as it is read (a ``\\r`` that ends a block waits for the next one's first byte)."""
    rest = b""
    skipping = False
    ended = False
    cr_ends: bool | None = None
    held_cr = False
    while True:
        raw, ended = (b"", True) if ended else _read_block(stream, log)
        if cr_ends is None:
            cr_ends = cr_line_ends(raw)
        block = raw
        if cr_ends:
            block, held_cr = _cr_to_lf(raw, held_cr)
            if raw and not block:
                continue  # a block of one \r, held back
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


def _cr_to_lf(block: bytes, held: bool) -> tuple[bytes, bool]:
    """``block`` with its line ends (``\\r``, ``\\r\\n``) made ``\\n``, and whether a ``\\r``
    that ends it is held back (the next block may start with its ``\\n``); ``held``: one was
    held back from the block before. At the end (no block) a held ``\\r`` ends the last line."""
    if not block:
        return (b"\n" if held else b""), False
    if held:
        block = b"\r" + block
    hold = block.endswith(b"\r")
    if hold:
        block = block[:-1]
    return block.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), hold


def _lf_mapped(stream: BinaryIO) -> mmap.mmap | None:
    """:func:`_mapped`, for a file whose lines end in ``\\n``: one whose lines end in a
    lone ``\\r`` is read as a stream, its line ends made ``\\n`` as it goes."""
    mapped = _mapped(stream)
    if mapped is None or mapped.find(b"\n", 0, CHUNK_BYTES) >= 0:
        return mapped
    if mapped.find(b"\r", 0, CHUNK_BYTES) < 0:
        return mapped
    mapped.close()
    return None


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


def _mapped_chunks(mapped: mmap.mmap, descriptor: int) -> Iterator[bytes]:
    """:func:`raw_chunks` of a regular file: the mapping finds where each chunk ends
    (:func:`_mapped_bounds`, a page touched per chunk) and one ``pread`` copies it, at a
    fraction of what faulting the mapped pages in would cost."""
    for start, end in _mapped_bounds(mapped):
        yield _chunk_at(descriptor, start, end)


def _mapped_bounds(mapped: mmap.mmap) -> Iterator[tuple[int, int]]:
    """Where the chunks of a mapped file begin and end: each is cut at the last line end
    within ``CHUNK_BYTES``; a line longer than a chunk is a chunk of its own."""
    size = len(mapped)
    start = 0
    while start < size:
        limit = start + CHUNK_BYTES
        if limit >= size:
            yield start, size
            return
        end = mapped.rfind(b"\n", start, limit) + 1
        if end <= 0:  # one endless line
            line_end = mapped.find(b"\n", limit)
            end = size if line_end < 0 else line_end + 1
        yield start, end
        start = end


def _chunk_size(start: int, end: int) -> int:
    """How much of a chunk is read: all of it, but of a line longer than a chunk only its
    first ``MAX_LINE_BYTES``."""
    return MAX_LINE_BYTES if end - start > CHUNK_BYTES else end - start


def _chunk_at(descriptor: int, start: int, end: int) -> bytes:
    """The bytes of one chunk, ending in a newline."""
    chunk = os.pread(descriptor, _chunk_size(start, end), start)
    return chunk if chunk.endswith(b"\n") else chunk + b"\n"


class _ChunkReader:
    """Reads the chunks of a regular file into one buffer, reused: a new 8 MiB object per
    chunk has its pages faulted in each time, two thirds of the cost of reading it."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self._buffer = bytearray()

    def read(self, start: int, end: int) -> bytearray:
        """Like :func:`_chunk_at`, in the reused buffer: valid until the next read."""
        buffer = self._buffer
        size = _chunk_size(start, end)
        if len(buffer) > size:
            del buffer[size:]
        elif len(buffer) < size:
            buffer.extend(bytes(size - len(buffer)))
        read = os.preadv(self.descriptor, [buffer], start)
        if read < size:  # the file shrank since it was mapped
            del buffer[read:]
        if not buffer.endswith(b"\n"):
            buffer.append(ord("\n"))
        return buffer


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
    chunk: bytes | bytearray, cursor: int, count: int, spans: list[tuple[int, int]]
) -> tuple[int, int]:
    """Add up to ``count`` whole lines from ``cursor`` to ``spans``; the new cursor, and how
    many lines are still to take from the next chunk."""
    while count and cursor < len(chunk):
        end = chunk.index(b"\n", cursor)
        spans.append((cursor, end))
        cursor = end + 1
        count -= 1
    return cursor, count


def _lines_before(
    chunk: bytes | bytearray, start: int, floor: int, spans: list[tuple[int, int]]
) -> None:
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


class _Chosen(NamedTuple):
    """The lines one chunk gives the events, each with its number within the chunk (from 0),
    and what the next chunk and the end of the input need to know."""

    lines: list[tuple[int, bytes]]
    newlines: int
    """How many lines the chunk holds."""
    context_out: int
    """Lines after a traceback header (or of the input's head) still owed by the next chunk."""
    size: int
    head: list[bytes]
    """The input's first lines (only in its first chunk): they tell the year."""
    trailing: list[tuple[int, bytes]]
    """The input's last lines not yet chosen (only in its last chunk)."""
    tail: list[bytes]
    """The input's last ``TAIL_LINES`` lines (only in its last chunk): its last timestamp."""
    last: bool


def _choose(
    chunk: bytes | bytearray, scanner: NeedleScanner, context_left: int, first: bool, last: bool
) -> _Chosen:
    """The lines of ``chunk`` that hold a needle, with the lines a traceback header or a
    process exit brings along; ``context_left`` lines are owed from the chunk before."""
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
    lines = []
    counted_at, counted = 0, 0
    for start, end in spans:
        counted += chunk.count(b"\n", counted_at, start)
        counted_at = start
        lines.append((counted, bytes(chunk[start:end])))
    newlines = counted + chunk.count(b"\n", counted_at)
    head: list[bytes] = []
    if first:
        head = [bytes(h) for h in chunk[: 1 << 16].split(b"\n", YEAR_LOOKAHEAD)[:YEAR_LOOKAHEAD]]
    trailing: list[tuple[int, bytes]] = []
    tail: list[bytes] = []
    if last:
        ends: list[tuple[int, int]] = []
        _lines_before(chunk, len(chunk), cursor, ends)
        trailing = [(chunk.count(b"\n", 0, start), bytes(chunk[start:end])) for start, end in ends]
        end_part = chunk[max(0, len(chunk) - (1 << 16)) :]
        tail = [bytes(line) for line in end_part.split(b"\n")[-TAIL_LINES - 1 : -1]]
    return _Chosen(lines, newlines, context_left, len(chunk), head, trailing, tail, last)


def _with_last(items: Iterable[_Item]) -> Iterator[tuple[_Item, bool]]:
    """Each item, and whether it is the last (one item read ahead)."""
    iterator = iter(items)
    for previous in iterator:
        for item in iterator:
            yield previous, False
            previous = item
        yield previous, True


def _chosen_chunks(log: LogInput, scanner: NeedleScanner, jobs: int) -> Iterator[_Chosen]:
    """What each chunk of the input gives, in order: in this process, or, for a large
    mapped file and ``jobs`` over 1, by that many worker processes."""
    stream = _open(log)
    mapped = _lf_mapped(stream)
    try:
        if mapped is not None and jobs > 1 and len(mapped) >= PARALLEL_MIN_BYTES and _FORK:
            yield from _chosen_in_parallel(mapped, stream.fileno(), scanner, jobs)
            return
        chunks: Iterator[tuple[bytes | bytearray, bool]]
        if mapped is not None:  # the end is known: no chunk is read ahead
            reader = _ChunkReader(stream.fileno())
            bounds = _with_last(_mapped_bounds(mapped))
            chunks = ((reader.read(*span), last) for span, last in bounds)
        else:
            chunks = _with_last(_stream_chunks(stream, log))
        context, first = HEAD_LINES, True
        for chunk, last in chunks:
            chosen = _choose(chunk, scanner, context, first, last)
            context, first = chosen.context_out, False
            yield chosen
    finally:
        if mapped is not None:
            mapped.close()
        _close(log, stream)


def _chosen_in_parallel(
    mapped: mmap.mmap, descriptor: int, scanner: NeedleScanner, jobs: int
) -> Iterator[_Chosen]:
    """:func:`_chosen_chunks` by this process and ``jobs - 1`` forked workers. Each takes the
    next chunk nobody has taken (cut where one process would cut it), so a worker whose CPU
    is busy with other work takes fewer, and this process reads rather than waits; the
    chunks are merged in order. Who reads a chunk does not know what the chunk before owes
    it (the lines after a traceback header that chunk ends with): it assumes nothing, and
    where the chunk before did owe lines, the chunk is chosen again here, so the result is
    exactly one process's."""
    import multiprocessing  # only here: a small input never starts a process

    bounds = list(_mapped_bounds(mapped))
    context = multiprocessing.get_context("fork")
    taken = context.Value("q", 0)
    workers: list[_Worker] = []
    try:
        for _ in range(min(jobs, len(bounds)) - 1):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(
                target=_work, args=(descriptor, scanner, bounds, taken, sender), daemon=True
            )
            process.start()
            sender.close()
            workers.append(_Worker(process, receiver))
        reader = _ChunkReader(descriptor)
        ready: dict[int, _Chosen] = {}
        owed = HEAD_LINES
        for index, (start, end) in enumerate(bounds):
            while index not in ready:
                mine = _take(taken, len(bounds))
                if mine is not None:
                    ready[mine] = _choose_chunk(reader, bounds, mine, scanner)
                _collect(workers, ready, wait_for_one=mine is None)
            chosen = ready.pop(index)
            if (HEAD_LINES if index == 0 else 0) != owed:
                last = index == len(bounds) - 1
                chosen = _choose(reader.read(start, end), scanner, owed, index == 0, last)
            owed = chosen.context_out
            yield chosen
    finally:
        for worker in workers:
            worker.process.terminate()  # done already, unless the reading stopped early
            worker.process.join()
            worker.receiver.close()


class _Worker(NamedTuple):
    process: Any
    receiver: Any
    """Where the worker sends ``(index, chosen)`` for each chunk it took."""


def _take(taken: Any, count: int) -> int | None:
    """The next chunk nobody has taken (a counter shared by the processes), or None."""
    with taken.get_lock():
        index = int(taken.value)
        if index >= count:
            return None
        taken.value = index + 1
        return index


def _choose_chunk(
    reader: _ChunkReader, bounds: list[tuple[int, int]], index: int, scanner: NeedleScanner
) -> _Chosen:
    """:func:`_choose` of chunk ``index``, assuming the chunk before owes it nothing."""
    start, end = bounds[index]
    first, last = index == 0, index == len(bounds) - 1
    return _choose(reader.read(start, end), scanner, HEAD_LINES if first else 0, first, last)


def _collect(workers: list[_Worker], ready: dict[int, _Chosen], wait_for_one: bool) -> None:
    """Add the chunks the workers have sent to ``ready``; with ``wait_for_one``, wait until
    one comes (every chunk is taken, and the one needed next is a worker's)."""
    from multiprocessing.connection import wait

    while True:
        open_receivers = [w.receiver for w in workers if not w.receiver.closed]
        if wait_for_one and not open_receivers:
            raise RuntimeError("a process reading the file stopped before sending its chunks")
        readable: list[Any] = wait(open_receivers, timeout=None if wait_for_one else 0)
        for receiver in readable:
            try:
                index, sent = receiver.recv()
            except EOFError:  # that worker is done
                receiver.close()
                continue
            if index < 0:
                raise RuntimeError(f"a process reading the file failed: {sent}")
            ready[index] = sent
            wait_for_one = False
        if not wait_for_one:
            return


def _work(
    descriptor: int,
    scanner: NeedleScanner,
    bounds: list[tuple[int, int]],
    taken: Any,
    sender: Any,
) -> None:
    """A worker process: choose the lines of each chunk it takes, and send them."""
    import signal  # only here: a run without workers does not load it

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers on Ctrl-C
    reader = _ChunkReader(descriptor)
    try:
        while (index := _take(taken, len(bounds))) is not None:
            sender.send((index, _choose_chunk(reader, bounds, index, scanner)))
    except Exception as error:  # the parent stops with it
        sender.send((-1, f"{type(error).__name__}: {error}"))
    finally:
        sender.close()


_FORK = hasattr(os, "fork")
"""Workers are forked: they inherit the open file and the compiled scanner as they are."""


DEFAULT_MAX_JOBS = 8
"""Reading processes by default on a machine of many CPUs: past a few, memory bandwidth, not
CPU, bounds the reading, and each process holds a chunk."""


def usable_cpus() -> int:
    """How many CPUs this process may run on (its affinity, which containers and ``taskset``
    narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs() -> int:
    """How many processes read a large file unless told: one per usable CPU, up to
    ``DEFAULT_MAX_JOBS``."""
    return min(usable_cpus(), DEFAULT_MAX_JOBS)


def scanned_events(
    log: LogInput,
    scanner: NeedleScanner,
    first_seq: int = 0,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> Iterator[Event]:
    """Events of the lines that hold a needle, and of the tracebacks they start.
    ``progress`` is told the size of each chunk once it is done; ``jobs`` over 1 lets that
    many processes read a large file (the events are the same)."""
    parser: LineParser | None = None
    grouper = TracebackGrouper()
    stats = _Stats(log)
    lines_before = 0
    trailing: list[tuple[int, bytes]] = []
    tail: list[bytes] = []
    for chosen in _chosen_chunks(log, scanner, jobs):
        if parser is None:
            head = (_decode(h) for h in chosen.head)
            parser = LineParser(log.name, _default_year(log, head))
        for index, raw in chosen.lines:
            record = parser.parse(lines_before + index + 1, _decode(raw))
            if record is None:
                continue
            record.seq = first_seq + lines_before + index + 1
            stats.see(record)
            yield from grouper.feed(record, record.seq)
        if chosen.last:
            trailing = [(lines_before + index, raw) for index, raw in chosen.trailing]
            tail = chosen.tail
        lines_before += chosen.newlines
        if progress is not None:
            progress(chosen.size)
    log.lines = lines_before
    if parser is not None:  # the input's last lines, not yet read
        for index, raw in trailing:
            record = parser.parse(index + 1, _decode(raw))
            if record is None:
                continue
            record.seq = first_seq + (record.line or 0)
            stats.see(record)
            yield from grouper.feed(record, record.seq)
        last_ts = _last_timestamp(parser, tail)
        if last_ts is not None and (log.last_ts is None or last_ts > log.last_ts):
            log.last_ts = last_ts
    log.warnings += out_of_range_note(parser)
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
    log.warnings += out_of_range_note(parser)
    yield from grouper.flush()


def events(
    log: LogInput,
    scanner: NeedleScanner | None,
    first_seq: int = 0,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> Iterator[Event]:
    """The scanned path when there is a scanner, else every line."""
    if scanner is None:
        return line_events(log, first_seq)
    return scanned_events(log, scanner, first_seq, progress, jobs)
