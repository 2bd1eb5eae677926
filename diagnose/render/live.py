"""What `diagnose watch` shows while it follows a start."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from diagnose.core.models import Finding
from diagnose.render.common import PHASE_WORDS, SEVERITY_STYLE


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def status_panel(
    name: str,
    phase: str | None,
    phase_since: datetime | None,
    now: datetime,
    lines: int,
    last_line: str,
    findings: list[Finding],
    gpus: str = "",
) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("following", Text(name))
    phase_text = Text(PHASE_WORDS.get(phase, phase) if phase else "waiting for the first line")
    if phase_since is not None:
        phase_text.append(f"  for {_duration((now - phase_since).total_seconds())}", style="dim")
    table.add_row("phase", phase_text)
    table.add_row("lines", Text(str(lines)))
    if gpus:
        table.add_row("GPU memory", Text(gpus))
    table.add_row("last", Text(last_line[:160], style="dim"))
    parts: list[RenderableType] = [table]
    for finding in findings:
        line = Text()
        line.append(
            f"{finding.severity.value.upper()} ", style=SEVERITY_STYLE[finding.severity.value]
        )
        line.append(finding.title)
        line.append(f"  ({finding.signature})", style="dim")
        parts.append(line)
    return Group(*parts)


def clock_time(at: datetime) -> str:
    """A time of day as diagnose shows every time: in UTC, and saying so (``09:14:07Z``);
    reports and postmortem file names use UTC too."""
    aware = at if at.tzinfo is not None else at.astimezone()
    return aware.astimezone(timezone.utc).strftime("%H:%M:%SZ")


def finding_line(finding: Finding, at: datetime) -> str:
    """One plain line per finding, for logs and pipes."""
    return (
        f"{clock_time(at)} {finding.severity.value.upper()} {finding.category}: "
        f"{finding.title} ({finding.signature})"
    )


def phase_line(phase: str, at: datetime) -> str:
    return f"{clock_time(at)} phase: {PHASE_WORDS.get(phase, phase)}"
