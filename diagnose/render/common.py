"""Wording shared by the human-readable renderers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from diagnose.core.models import AttemptTimeline, Diagnosis, Evidence, Finding, Patch, Role

PHASE_WORDS = {
    "launch": "argument parsing and launch",
    "dist_init": "distributed (NCCL) initialisation",
    "load_weights": "loading weights",
    "kv_cache": "sizing the KV cache",
    "cuda_graph": "capturing CUDA graphs",
    "http_server": "starting the HTTP server",
    "warmup": "the warmup request",
    "ready": "ready and serving",
}
TIER_WORDS = {
    "known_issue": "known issue from resolved public threads",
    "engine_source": "from the engine's own source",
    "generic": "generic analysis",
}
"""How a finding's source is named when it is not a hand-written signature."""
SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
"""The rich style of each severity, on the terminal report and the live display."""


def when(stamp: datetime | None) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M:%S") if stamp else "-"


def where(evidence: Evidence) -> str:
    if evidence.line is not None:
        return f"{evidence.source}:{evidence.line}"
    return evidence.source


def seen(finding: Finding) -> str:
    parts = []
    if finding.count > 1:
        parts.append(f"seen {finding.count}x")
    if finding.attempts > 1:
        parts.append(f"in {finding.attempts} start attempts")
    return " ".join(parts)


def versions(finding: Finding) -> str:
    """``applies to SGLang 0.5.10; fixed in SGLang 0.5.23``, or nothing."""
    parts = []
    if finding.applies_to:
        parts.append(f"applies to {finding.applies_to}")
    if finding.fixed_in:
        parts.append(f"fixed in {finding.fixed_in}")
    return "; ".join(parts)


def summary(diagnosis: Diagnosis) -> str:
    """One sentence on what the input was and how far the server got."""
    subject = diagnosis.unit or ", ".join(i.name for i in diagnosis.inputs) or "input"
    records = sum(i.records for i in diagnosis.inputs)
    parts = [f"{subject}: {records} lines"]
    if diagnosis.engine:
        parts.append(diagnosis.engine)
    if diagnosis.attempts > 1:
        parts.append(f"{diagnosis.attempts} start attempts")
    if diagnosis.phase_reached:
        parts.append(
            f"got as far as {PHASE_WORDS.get(diagnosis.phase_reached, diagnosis.phase_reached)}"
        )
    return ", ".join(parts)


def patch_lines(patch: Patch) -> list[str]:
    """The patch as a list of changes, for reports without a unit to write a drop-in for."""
    lines = [f"set environment {key}={value}" for key, value in patch.env_set.items()]
    lines += [f"unset environment {key}" for key in patch.env_unset]
    if patch.args_remove:
        lines.append("remove flags: " + " ".join(patch.args_remove))
    if patch.args_add:
        lines.append("add flags: " + " ".join(patch.args_add))
    lines += [f"set {key}={value} in the unit" for key, value in patch.unit_set.items()]
    return lines


def action_lines(finding: Finding) -> list[str]:
    """What to change outside the unit: a package change and host actions."""
    lines = []
    if finding.package is not None:
        package = finding.package
        lines.append(
            f"{package.action} {package.name}{package.spec}: "
            f"pip install '{package.name}{package.spec}' in the server's environment"
        )
    lines += [f"on the host: {action}" for action in finding.system_actions]
    return lines


def primary_dropin(diagnosis: Diagnosis) -> str | None:
    """The primary finding's drop-in text (what ``--patch-only`` prints), or None."""
    primary = diagnosis.finding(diagnosis.primary)
    if primary is None or primary.patch is None or not primary.patch.dropin:
        return None
    return primary.patch.dropin.rstrip("\n") + "\n"


def no_dropin_reason(diagnosis: Diagnosis) -> str:
    """Why ``--patch-only`` has nothing to print, in words that say what to do instead."""
    primary = diagnosis.finding(diagnosis.primary)
    if primary is None:
        return "no failure found"
    if primary.patch is None:
        return primary.patch_note or "no configuration change fixes this failure"
    return (
        "the unit is not known, so the changes cannot be a drop-in; "
        "run without --patch-only to see them, or use diagnose journal -u UNIT"
    )


def render_patch_only(diagnosis: Diagnosis, **_: object) -> str:
    """``--patch-only``: the primary finding's drop-in and nothing else, ready for
    ``systemctl edit --stdin UNIT`` or ``tee``; empty when there is none."""
    return primary_dropin(diagnosis) or ""


def apply_commands(unit: str | None) -> list[str]:
    """The commands that make systemd use a drop-in once it is written."""
    if not unit:
        return []
    return ["systemctl daemon-reload", f"systemctl restart {unit}"]


@dataclass(frozen=True)
class Terminal:
    """How to draw for the place the output goes: colour, width, live displays."""

    color: bool
    width: int
    live: bool
    """Progress bars and live panels (they redraw lines): a real terminal that is not dumb."""


DEFAULT_WIDTH = 100
"""Columns of a report written to a pipe or a file when ``COLUMNS`` does not say."""


def terminal(env: Mapping[str, str], is_tty: bool, tty_width: int | None = None) -> Terminal:
    """The conventions: ``NO_COLOR`` (any value) turns colour off and wins over
    ``FORCE_COLOR``, which turns it on even in a pipe; ``TERM=dumb`` means no colour and no
    redrawing; ``COLUMNS`` sets the width, else the terminal's, else 100 columns."""
    dumb = env.get("TERM", "") == "dumb"
    if env.get("NO_COLOR"):
        color = False
    elif env.get("FORCE_COLOR", "") not in ("", "0"):
        color = True
    else:
        color = is_tty and not dumb
    columns = env.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    return Terminal(
        color=color,
        width=width or (tty_width if is_tty and tty_width else DEFAULT_WIDTH),
        live=is_tty and not dumb,
    )


# -- the incident's timeline (postmortems) -----------------------------------------------------


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
    for attempt in diagnosis.timeline:
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


def evidence_groups(evidence: list[Evidence]) -> list[list[Evidence]]:
    """The evidence with the same line (other ranks, other attempts) grouped, in order."""
    groups: dict[str, list[Evidence]] = {}
    for item in evidence:
        groups.setdefault(item.message or item.text, []).append(item)
    return list(groups.values())


def places(evidence: list[Evidence]) -> str:
    """Where repeats of a line are: line numbers in a file, times in the journal."""

    def place(e: Evidence) -> str:
        at = str(e.line) if e.line is not None else when(e.timestamp)
        return f"{at} [{e.rank}]" if e.rank else at

    lines = all(e.line is not None for e in evidence)
    return ("lines " if lines else "") + ", ".join(place(e) for e in evidence)
