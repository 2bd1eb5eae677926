"""The event pipeline every input shares: the library's needles decide which lines reach
the engine (one prefilter), and the events go to the engine in order, on one timeline."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Protocol, TypeVar

from diagnose.core.engine import Engine
from diagnose.core.records import Event
from diagnose.core.scan import NeedleScanner
from diagnose.core.tracebacks import MAX_TRACEBACK_LINES, TRACEBACK_START
from diagnose.inputs.files import BEFORE_EXIT_LINES, EXIT_MARKERS, LogInput, events

Warn = Callable[[str], None]
Progress = Callable[[int], None]
SMALL_INPUT_BYTES = 1 << 20
"""Below this, importing Hyperscan and compiling its database (about 25 ms) costs more than its
faster scan saves. The automaton reads about 60 MB/s, so the two are even at a megabyte; a 50 MB
file took the automaton 0.9 s and Hyperscan 0.14 s on the development machine."""


def _backend_for_size(size: int) -> str | None:
    """The automaton for an input under ``SMALL_INPUT_BYTES``, else the fastest scanner."""
    return "pyahocorasick" if size < SMALL_INPUT_BYTES else None


def _backend_for(logs: list[LogInput]) -> str | None:
    """pyahocorasick for small inputs of known size (no Hyperscan to import and compile);
    otherwise the fastest scanner there is."""
    total = 0
    for log in logs:
        if log.data is not None:
            total += len(log.data)
        elif log.path is not None and log.path.suffix != ".gz":
            try:
                total += log.path.stat().st_size
            except OSError:
                return None
        else:
            return None  # stdin or compressed: size unknown
    return _backend_for_size(total)


class Feedable(Protocol):
    """What the pipeline feeds: an engine, or a splitter of engines per unit."""

    def needles(self) -> set[str] | None: ...

    def feed(self, event: Event) -> None: ...


FeedableT = TypeVar("FeedableT", bound=Feedable)


def run_logs(
    engine: Feedable,
    logs: list[LogInput],
    warn: Warn | None = None,
    progress: Progress | None = None,
    jobs: int = 1,
) -> None:
    """Feed every log through ``engine``, one after the other, on one timeline of positions.
    ``progress`` is told the size of each chunk read; ``jobs`` processes may read a large file."""
    needles = engine.needles()
    scanner = NeedleScanner(needles, backend=_backend_for(logs)) if needles else None
    first_seq = 0
    for log in logs:
        for event in events(log, scanner, first_seq, progress, jobs):
            engine.feed(event)
        first_seq += log.lines
        for warning in log.warnings:
            if warn is not None:
                warn(warning)


def run_logs_by_host(
    new_engine: Callable[[], FeedableT],
    logs: list[LogInput],
    warn: Warn | None = None,
    progress: Progress | None = None,
    jobs: int = 1,
) -> dict[str | None, FeedableT]:
    """Like :func:`run_logs`, but one engine per host named in the lines (journalctl's short
    formats name it in their fourth field); the scanner is shared. A line without a host
    (a traceback's continuation, a plain log such as nvidia-smi output) goes with the last
    host read; lines before the first host name go with that first host; inputs without
    any host name are the one group ``None``."""
    unnamed = new_engine()
    engines: dict[str | None, FeedableT] = {None: unnamed}
    needles = unnamed.needles()
    scanner = NeedleScanner(needles, backend=_backend_for(logs)) if needles else None
    first_seq = 0
    host: str | None = None
    for log in logs:
        for event in events(log, scanner, first_seq, progress, jobs):
            host = event.first.host or host
            engine = engines.get(host)
            if engine is None:
                # the first host takes the lines read before it
                engine = engines.pop(None) if None in engines else new_engine()
                engines[host] = engine
            engine.feed(event)
        first_seq += log.lines
        for warning in log.warnings:
            if warn is not None:
                warn(warning)
    return engines


HEAD_ENTRIES = 256
"""The first entries are always read whole: they tell the engine and the launch arguments."""


class NeedlePrefilter:
    """Keeps the entries whose raw message holds one of the engine's needles, the first
    entries of the input, and the entries after a traceback header (its continuation lines
    hold no needle). One scan per batch: the messages are joined and scanned at once.

    A journal's size is not known before it is read: the first ``SMALL_INPUT_BYTES`` are
    scanned with the automaton, and only a journal that goes on past them pays for the
    fastest scanner."""

    def __init__(self, needles: frozenset[str]) -> None:
        self.needles = needles
        self.context = HEAD_ENTRIES
        self.scanned = 0

    def scanner(self) -> NeedleScanner:
        """The scanner for the next batch: the automaton until the input proves large."""
        return NeedleScanner.shared(self.needles, _backend_for_size(self.scanned))

    def __call__(self, raws: list[bytes]) -> list[int]:
        joined = b"\n".join(raw.replace(b"\n", b" ") if b"\n" in raw else raw for raw in raws)
        starts = list(accumulate((len(raw) + 1 for raw in raws), initial=0))
        hits = {bisect_right(starts, end - 1) - 1 for end in self.scanner().ends(joined)}
        self.scanned += len(joined)
        for index in [i for i in hits if any(m in raws[i] for m in EXIT_MARKERS)]:
            hits.update(range(max(0, index - BEFORE_EXIT_LINES), index))  # what it said last
        chosen = []
        for index, raw in enumerate(raws):
            if self.context:
                self.context -= 1
            elif index not in hits:
                continue
            chosen.append(index)
            if index in hits and _TRACEBACK in raw:
                self.context = MAX_TRACEBACK_LINES
        return chosen


_TRACEBACK = TRACEBACK_START.encode()


JOURNAL_NEEDLES = ("Suppressed ",)
"""What the journal source itself reads: journald's rate-limit messages."""


def journal_prefilter(engine: Engine) -> NeedlePrefilter | None:
    needles = engine.needles()
    if not needles:
        return None
    return NeedlePrefilter(frozenset({*needles, *JOURNAL_NEEDLES}))
