"""The terminal report (rich). Log text goes in as ``Text`` objects: never parsed as markup.

What a reader copies (the drop-in, the commands to run, the next checks and links) is printed
as plain lines, never boxed, wrapped or cut, whatever the width: a terminal folds a long line
for display but copies it whole. The drop-in and the commands stand at the left margin.
"""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from diagnose.core.models import Diagnosis, Finding, Role
from diagnose.render.common import (
    PHASE_WORDS,
    SEVERITY_STYLE,
    action_lines,
    evidence_groups,
    host_rows,
    no_failure_sentence,
    patch_lines,
    places,
    seen,
    summary,
    tier_words,
    unit_fix_lines,
    versions,
    when,
    where,
)

_ROLE_WORD = {Role.ROOT_CAUSE: "ROOT CAUSE", Role.SYMPTOM: "SYMPTOM", Role.ADVISORY: "ADVISORY"}


class Verbatim(Text):
    """A line to copy: printed whole (no wrap, no crop) at the left margin."""


def _heading(text: str) -> Text:
    return Text(text, style="bold")


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _indent(renderable: RenderableType, by: int = 2) -> Padding:
    return Padding(renderable, (0, 0, 0, by), expand=False)


def _finding(finding: Finding, diagnosis: Diagnosis, full: bool) -> list[RenderableType]:
    head = Text()
    head.append(f"{_ROLE_WORD[finding.role]} ", style=SEVERITY_STYLE[finding.severity.value])
    head.append(finding.title, style="bold")
    source = tier_words(finding)
    tier = f" · {source}" if source else ""
    meta = Text(
        f"{finding.severity.value} · {finding.category} · {finding.confidence.value} confidence"
        f" · {finding.signature}{tier}",
        style="dim",
    )
    extra = seen(finding)
    if finding.phase:
        extra = ", ".join(
            p for p in (extra, f"while {PHASE_WORDS.get(finding.phase, finding.phase)}") if p
        )
    if finding.caused_by:
        cause = diagnosis.finding(finding.caused_by)
        extra = ", ".join(
            p for p in (extra, f"follows from {cause.title if cause else finding.caused_by}") if p
        )
    parts: list[RenderableType] = [head, meta]
    if extra:
        parts.append(Text(extra, style="dim"))
    if versions(finding):
        parts.append(Text(versions(finding), style="dim"))
    if not full:
        return parts
    parts += [Text(""), Text(finding.explanation)]
    parts += [Text(""), _heading("Evidence")]
    for group in evidence_groups(finding.evidence):  # the same line again: said once
        first = group[0]
        message = first.message or first.text
        line = Text()
        line.append(f"{where(first)}", style="cyan")
        line.append(f"  {when(first.timestamp)}  ", style="dim")
        if first.rank:
            line.append(f"[{first.rank}] ", style="magenta")
        line.append(_shorten(message))
        if len(group) > 1:
            line.append(f"  (again at {places(group[1:])})", style="dim")
        parts.append(_indent(line))
    if finding.templates:
        parts += [Text(""), _heading("Unexplained error lines, most frequent first")]
        for template in finding.templates:
            line = Text()
            line.append(f"{template.count:>4}x  ", style="bold")
            line.append(_shorten(template.template, 200))
            at = f"line {template.first_line}, " if template.first_line else ""
            line.append(f"  (first: {at}{when(template.first_ts)})", style="dim")
            parts.append(_indent(line))
    if finding.hypotheses:
        parts += [Text(""), _heading("Likely causes, most likely first")]
        for number, hypothesis in enumerate(finding.hypotheses, 1):
            parts.append(_indent(Text(f"{number}. {hypothesis.cause}")))
            parts.append(_indent(Text(f"check: {hypothesis.check}", style="dim"), 5))
    parts += [Text(""), _heading("Fix")]
    actions = action_lines(finding)
    parts += [_indent(Text(line)) for line in actions]
    if finding.patch is None:
        if finding.patch_note or not actions:
            note = finding.patch_note or "No configuration change fixes this."
            parts.append(_indent(Text(note)))
    elif diagnosis.fix is not None and diagnosis.fix.dropin:
        parts += [_indent(Text(line)) for line in patch_lines(finding.patch)]
        merged = any(change.finding == finding.id for change in diagnosis.fix.changes)
        said = "in the unit's one drop-in" if merged else "not in the unit's drop-in: see why"
        parts.append(_indent(Text(f"({said}, at the end)", style="dim")))
    else:
        parts += [_indent(Text(line)) for line in patch_lines(finding.patch)]
    if finding.patch is not None and finding.patch_note:
        parts.append(_indent(Text(finding.patch_note, style="dim")))
    for alternative in finding.alternatives:
        parts.append(_indent(Text(f"or: {alternative}")))
    if finding.next_checks:
        parts += [Text(""), _heading("Next checks")]
        # commands in them are copied: one line each, left to the terminal to fold
        parts += [Verbatim(f"  - {check}") for check in finding.next_checks]
    if finding.references:
        parts += [Text(""), _heading("References")]
        parts += [Verbatim(f"  {reference}", style="dim") for reference in finding.references]
    return parts


def _unit_fix(diagnosis: Diagnosis) -> list[RenderableType]:
    """The unit's one drop-in: every finding's change merged, each block with its reason."""
    dropin, said, commands = unit_fix_lines(diagnosis)
    if dropin is None and not said:
        return []
    parts: list[RenderableType] = [Rule(f"The fix: one drop-in for {diagnosis.unit}", style="dim")]
    parts += [_indent(Text(line, style="yellow")) for line in said]
    if dropin:
        parts += [Verbatim(line, style="green") for line in dropin.rstrip("\n").split("\n")]
    if commands:
        parts.append(
            _indent(
                Text(
                    "Save it as the file its first line names (--patch-only prints just the "
                    "drop-in), then run:",
                    style="dim",
                )
            )
        )
        parts += [Verbatim(command, style="bold") for command in commands]
    return parts


def _print(console: Console, parts: list[RenderableType]) -> None:
    for part in parts:
        console.print(part, soft_wrap=isinstance(part, Verbatim))


def _host_table(diagnosis: Diagnosis) -> Table:
    """Fleet reports: one row per host; the decisive host's report follows."""
    fleet = diagnosis.fleet
    caption = (
        f"Report below: {fleet.primary_host} (clock skew allowed: {fleet.skew_tolerance_s:g} s)"
        if fleet and fleet.primary_host
        else None
    )
    table = Table("host", "state", "root cause", "fix", caption=caption, caption_justify="left")
    for host, state, cause, fix in host_rows(diagnosis):
        style = {"healthy": "green", "symptom": "yellow"}.get(state, "red")
        table.add_row(Text(host), Text(state, style=style), Text(cause), Text(fix))
    return table


def render_text(diagnosis: Diagnosis, width: int = 100, color: bool = False, **_: object) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    console.print(Text(summary(diagnosis), style="bold"))
    if diagnosis.hosts is not None:
        console.print(_host_table(diagnosis))
    primary = diagnosis.finding(diagnosis.primary)
    if primary is None:
        console.print(Text(no_failure_sentence(diagnosis), style="green"))
    else:
        console.print(Rule(style="red"))
        _print(console, _finding(primary, diagnosis, full=True))
    others = [f for f in diagnosis.findings if f is not primary]
    for role, label in (
        (Role.ROOT_CAUSE, "Other failures"),
        (Role.SYMPTOM, "Symptoms"),
        (Role.ADVISORY, "Advisories"),
    ):
        group = [f for f in others if f.role is role]
        if not group:
            continue
        console.print(Rule(label, style="dim"))
        for finding in group:
            _print(console, _finding(finding, diagnosis, full=role is not Role.SYMPTOM))
            console.print()
    _print(console, _unit_fix(diagnosis))
    if diagnosis.notes:
        console.print(Rule("Notes", style="dim"))
        for note in diagnosis.notes:
            console.print(_indent(Text(f"- {note}", style="yellow")))
    if diagnosis.redactions:
        kinds = ", ".join(f"{count} {kind}" for kind, count in diagnosis.redactions.items())
        console.print(Text(f"Redacted: {kinds} (--no-redact shows them)", style="dim"))
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
