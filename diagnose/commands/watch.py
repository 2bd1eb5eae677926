"""``diagnose watch``: follow a start as it happens and report a finding the moment it fires.

Hangs are judged against the clock: a startup step followed by silence is reported when the
silence passes the threshold, not when the user gives up. Silence is measured by when lines
*arrive* (a monotonic clock), never by a line's own timestamp, which may be in another zone,
from a skewed clock, or missing; the times shown are those arrival times, in UTC. The clock
and the sleep are parameters, so tests drive time themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from rich.console import Console, RenderableType
from rich.live import Live

from diagnose.core.engine import Engine
from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis, Finding, InputSummary, Severity
from diagnose.core.records import Event, Record
from diagnose.core.redact import Redactor
from diagnose.core.tracebacks import TracebackGrouper
from diagnose.inputs import gpu
from diagnose.inputs.follow import follow, journal_follower, open_followed
from diagnose.inputs.lineformat import LineParser
from diagnose.library import engine_for, load_library
from diagnose.render.live import finding_line, phase_line, status_panel

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(tz=timezone.utc)


@dataclass
class ArrivalClock:
    """The UTC time a watch started plus the monotonic time since: when a line arrived,
    unmoved by wall-clock steps (NTP, a clock set by hand)."""

    wall: Clock = system_clock
    monotonic: Callable[[], float] = time.monotonic
    _started: tuple[datetime, float] = field(init=False)

    def __post_init__(self) -> None:
        self._started = (self.wall(), self.monotonic())

    def __call__(self) -> datetime:
        wall, monotonic = self._started
        return wall + timedelta(seconds=self.monotonic() - monotonic)


@dataclass
class PhaseChange:
    phase: str
    at: datetime


@dataclass
class Watcher:
    """Feeds lines to an engine as they arrive and says what is new on each tick."""

    engine: Engine
    name: str
    clock: Clock = field(default_factory=ArrivalClock)
    lines: int = 0
    phase: str | None = None
    phase_since: datetime | None = None
    last_line: str = ""
    reported: set[str] = field(default_factory=set)
    redactor: Redactor | None = field(default_factory=Redactor)
    """Secrets out of what is shown live; None shows them (``--no-redact``)."""
    _parser: LineParser = field(init=False)
    _grouper: TracebackGrouper = field(init=False, default_factory=TracebackGrouper)
    _first_ts: datetime | None = None

    def __post_init__(self) -> None:
        self._parser = LineParser(self.name, self.clock().year)

    def feed(self, lines: Iterable[str]) -> list[PhaseChange]:
        now = self.clock()
        changes = []
        for text in lines:
            self.lines += 1
            record = self._parser.parse(self.lines, text)
            if record is None:
                continue
            record.ts = now  # arrival time: the line's own stamp stays in its text
            record.seq = self.lines
            self.last_line = self.redactor.line(record.text) if self.redactor else record.text
            self._first_ts = self._first_ts or record.ts
            for event in self._grouper.feed(record, record.seq):
                self.engine.feed(event)
            phase = self.engine.phase
            if phase is not None and phase != self.phase:
                self.phase, self.phase_since = phase, record.ts
                changes.append(PhaseChange(phase, record.ts))
        return changes

    def feed_records(self, records: Iterable[Record]) -> None:
        """Records that did not come from the log (a GPU snapshot), timed now."""
        now = self.clock()
        for record in records:
            self.lines += 1
            record.ts, record.seq = now, self.lines
            self.engine.feed(Event([record], record.seq))

    def idle(self) -> None:
        """Nothing arrived for a poll interval: a finished traceback is complete."""
        for event in self._grouper.flush():
            self.engine.feed(event)

    def diagnosis(self) -> Diagnosis:
        now = self.clock()
        kind = "journal" if self.name.startswith("journal:") else "file"
        summary = InputSummary(
            kind="stdin" if self.name == "<stdin>" else kind,  # type: ignore[arg-type]
            name=self.name,
            records=self.lines,
            first_ts=self._first_ts,
            last_ts=now,
        )
        return self.engine.snapshot(now, inputs=[summary])

    def new_findings(self, diagnosis: Diagnosis) -> list[Finding]:
        """Findings not shown yet (redacted, as everything watch shows)."""
        fresh = [f for f in diagnosis.findings if f.signature not in self.reported]
        self.reported.update(f.signature for f in fresh)
        if self.redactor is None:
            return fresh
        return [self.redactor.value(f) for f in fresh]


def watch(
    watcher: Watcher,
    batches: Iterable[list[str]],
    on_phase: Callable[[PhaseChange], None],
    on_finding: Callable[[Finding, Diagnosis], None],
    on_tick: Callable[[Watcher], None] = lambda _: None,
    exit_on: Severity | None = None,
) -> Diagnosis:
    """Run until the input ends, or until a finding reaches ``exit_on``; the last diagnosis."""
    diagnosis = watcher.diagnosis()
    for batch in batches:
        if batch:
            for change in watcher.feed(batch):
                on_phase(change)
        else:
            watcher.idle()
        diagnosis = watcher.diagnosis()
        for finding in watcher.new_findings(diagnosis):
            on_finding(finding, diagnosis)
        on_tick(watcher)
        if exit_on is not None and any(f.severity.rank >= exit_on.rank for f in diagnosis.findings):
            return diagnosis
    watcher.idle()
    return watcher.diagnosis()


@dataclass
class GpuPoller:
    """A GPU snapshot every ``every`` seconds into the engine (the ~1 GB-per-GPU evidence of a
    stalled start) and into the display; silent for good once nvidia-smi is missing."""

    every: float = 5.0
    summary: str = ""
    _last: datetime | None = None
    _off: bool = False

    def __call__(self, watcher: Watcher) -> None:
        now = watcher.clock()
        if self._off or (self._last and (now - self._last).total_seconds() < self.every):
            return
        self._last = now
        shot = gpu.snapshot(timeout=self.every)
        if shot.missing:
            self._off, self.summary = True, ""
            return
        watcher.feed_records(shot.records())
        self.summary = "  ".join(
            f"{g.index}: {g.used_mib / 1024:.1f}/{g.total_mib / 1024:.0f} GiB" for g in shot.gpus
        )


def run_watch(
    path: str | None,
    unit: str | None,
    signature_dirs: list[Path],
    hang_after: float | None,
    poll: float,
    exit_on_finding: bool,
    interactive: bool,
    echo: Callable[[str], None],
    redact: bool = True,
) -> Diagnosis:
    """Follow a file, a pipe or a unit's journal until it ends, a finding stops it (with
    ``exit_on_finding``), or the user presses Ctrl-C; then return the diagnosis so far."""
    if (path is None) == (unit is None):
        raise UserError("watch needs a log file, - for a pipe, or -u UNIT (one of them)")
    engine = engine_for(load_library(signature_dirs), hang_after=hang_after)
    process = None
    if unit is not None:
        stream, process = journal_follower(unit)
        name, is_pipe = f"journal:{unit}", True
    else:
        assert path is not None
        stream, is_pipe = open_followed(path)
        name = "<stdin>" if path == "-" else path
    watcher = Watcher(engine, name, redactor=Redactor() if redact else None)
    followed = Path(path) if path not in (None, "-") and not is_pipe else None
    batches = follow(stream, poll, is_pipe=is_pipe, path=followed)
    exit_on = Severity.ERROR if exit_on_finding else None
    gpus = GpuPoller()
    try:
        if interactive:
            return _watch_live(watcher, batches, exit_on, gpus)
        return watch(
            watcher,
            batches,
            on_phase=lambda change: echo(phase_line(change.phase, change.at)),
            on_finding=lambda finding, _: echo(finding_line(finding, watcher.clock())),
            on_tick=gpus,
            exit_on=exit_on,
        )
    except KeyboardInterrupt:
        return watcher.diagnosis()
    finally:
        if process is not None:
            process.terminate()


def _watch_live(
    watcher: Watcher, batches: Iterable[list[str]], exit_on: Severity | None, gpus: GpuPoller
) -> Diagnosis:
    console = Console(stderr=True)
    found: list[Finding] = []

    def panel() -> RenderableType:
        return status_panel(
            watcher.name, watcher.phase, watcher.phase_since, watcher.clock(),
            watcher.lines, watcher.last_line, found, gpus.summary,
        )  # fmt: skip

    def tick(_: Watcher) -> None:
        gpus(watcher)
        live.update(panel())

    with Live(panel(), console=console, refresh_per_second=4, transient=False) as live:
        return watch(
            watcher,
            batches,
            on_phase=lambda _: None,
            on_finding=lambda finding, _: found.append(finding),
            on_tick=tick,
            exit_on=exit_on,
        )
