"""The incident's timeline as the postmortems draw it: each attempt's phases with their spans,
where it stopped and the finding that stopped it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from diagnose.core.models import AttemptTimeline, Diagnosis, Finding, Role
from diagnose.render.common import PHASE_WORDS


def utc(stamp: datetime) -> datetime:
    """A time in UTC (a time without a zone is taken as UTC already)."""
    return (
        stamp.replace(tzinfo=timezone.utc)
        if stamp.tzinfo is None
        else stamp.astimezone(timezone.utc)
    )


def duration(seconds: float | None) -> str:
    """``0.4s``, ``22s``, ``11m 02s``, ``1h 03m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def span(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (utc(end) - utc(start)).total_seconds())


BEFORE_PHASES = "starting, before the first phase marker"


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    words: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class AttemptRow:
    """One start attempt as a postmortem shows it: its phases with their spans, where it
    stopped and the finding that stopped it."""

    number: int
    start: datetime | None
    end: datetime | None
    phases: list[PhaseRow]
    ready: bool
    ended_by: Finding | None

    @property
    def stopped_in(self) -> str:
        return self.phases[-1].words if self.phases else BEFORE_PHASES


def _ended_by(attempt: AttemptTimeline, diagnosis: Diagnosis) -> Finding | None:
    """The failure whose evidence lies inside the attempt: root causes first, the primary
    before them, then symptoms; the earliest evidence within each."""
    if attempt.started_at is None or attempt.ended_at is None:
        return None
    start, end = utc(attempt.started_at), utc(attempt.ended_at)
    order = {Role.ROOT_CAUSE: 0, Role.SYMPTOM: 1, Role.ADVISORY: 2}
    inside = [
        f
        for f in diagnosis.findings
        if any(e.timestamp and start <= utc(e.timestamp) <= end for e in f.evidence)
    ]
    inside.sort(key=lambda f: (order[f.role], f.id != diagnosis.primary))
    return inside[0] if inside else None


def attempt_rows(diagnosis: Diagnosis) -> list[AttemptRow]:
    rows = []
    for attempt in diagnosis.timeline.attempts if diagnosis.timeline else []:
        ends = [phase.started_at for phase in attempt.phases[1:]] + [attempt.ended_at]
        phases = [
            PhaseRow(phase.phase, PHASE_WORDS.get(phase.phase, phase.phase), phase.started_at, end)
            for phase, end in zip(attempt.phases, ends, strict=False)
        ]
        ready = bool(phases) and phases[-1].phase == "ready"
        rows.append(
            AttemptRow(
                attempt.number,
                attempt.started_at,
                attempt.ended_at,
                phases,
                ready,
                None if ready else _ended_by(attempt, diagnosis),
            )
        )
    return rows


@dataclass(frozen=True)
class Bar:
    """One bar of the timeline chart: a phase of an attempt, or the time before its first."""

    words: str
    start: datetime
    end: datetime
    stopped: bool
    """The phase the attempt stopped in (it never reached ready)."""
    label: str


def bars(row: AttemptRow) -> list[Bar]:
    """The attempt's phases as bars, with the time before its first phase marker as a bar of
    its own; empty when the attempt has no times."""
    if row.start is None or row.end is None:
        return []
    spans = [(p.words, p.start or row.start, p.end or row.end) for p in row.phases]
    first = spans[0][1] if spans else row.end
    if not spans or utc(first) > utc(row.start):
        spans.insert(0, (BEFORE_PHASES, row.start, first))
    out = []
    for number, (words, start, end) in enumerate(spans, 1):
        stopped = number == len(spans) and not row.ready
        label = f"{words}, {duration(span(start, end))}"
        if stopped:
            label += f", stopped by {row.ended_by.title}" if row.ended_by else ", stopped"
        out.append(Bar(words, start, end, stopped, label))
    return out


def folded_attempts(rows: list[AttemptRow]) -> str | None:
    """What the kept attempts leave out (``attempts 2-41 are not shown``), or nothing."""
    if len(rows) > 1 and rows[1].number > 2:
        return f"attempts 2-{rows[1].number - 1} are not shown"
    return None
