"""The terminal report (rich). Log text goes in as ``Text`` objects: never parsed as markup.

Prose is wrapped to the width here, at spaces, never inside a command: a code span, a
``pip install '...'``, a command in parentheses stays whole on one line (alone on it when it
is longer than the width). What a reader copies (the drop-in or a container's patch, the
commands to run, the docker run options, the commands of the next checks, the links) is
printed as plain lines of their own, never boxed, wrapped or cut, whatever the width: a
terminal folds a long line for display but copies it whole. The drop-in and the commands
stand at the left margin.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import TYPE_CHECKING, cast

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from diagnose.core.incident import clipped
from diagnose.core.models import Diagnosis, Finding, Role
from diagnose.render.common import (
    DOCKER_RUN_WORDS,
    PHASE_WORDS,
    SEVERITY_STYLE,
    action_lines,
    context_fix,
    deployment_sentence,
    evidence_groups,
    host_rows,
    in_unit,
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

if TYPE_CHECKING:
    from rich.table import Table

_ROLE_WORD = {Role.ROOT_CAUSE: "ROOT CAUSE", Role.SYMPTOM: "SYMPTOM", Role.ADVISORY: "ADVISORY"}


class Verbatim(Text):
    """A line to copy: printed whole (no wrap, no crop) at the left margin."""


_WHOLE = re.compile(
    r"`[^`\n]+`"  # a code span
    r"|\((?:pip3?|python3?|uv|conda|systemctl|journalctl|sudo|docker|podman|kill|nvidia-smi)"
    r" [^()\n]*\)"  # a command in parentheses: (pip install -U vllm)
    r"|\bpip3? install(?: -[-\w]+)*(?: '[^'\n]*'| \"[^\"\n]*\")+"  # pip install 'x==1'
)
"""What wrapping never splits."""
_COMMAND_SPAN = re.compile(r"`(?P<command>[a-z][\w./-]* [^`\n]+?)(?<!\.)`")
"""A code span that is a command: a program's name (lower case), then its arguments; not a
flag, a value or a log line (``Capture cuda graph end.``)."""
_OWN_LINE = 24
"""A command this long goes on a line of its own; a shorter one too where it starts or ends
its check, else it stays in its sentence (a list in parentheses), whole."""


def copied_commands(check: str) -> list[re.Match[str]]:
    """The commands of a next check that are printed whole, each on a line of its own."""
    out = []
    for found in _COMMAND_SPAN.finditer(check):
        before, after = check[: found.start()], check[found.end() :]
        listed = before.count("(") > before.count(")")  # one of a list in parentheses
        at_an_end = not before.strip() or not re.search(r"\w", after)
        if len(found.group("command")) >= _OWN_LINE or (at_an_end and not listed):
            out.append(found)
    return out


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken at spaces only, never inside
    what :data:`_WHOLE` finds (longer than ``width``, that stands on a line of its own).

    >>> wrap("run (pip install -U vllm) then restart the server", 20)
    ['run', '(pip install -U vllm)', 'then restart the', 'server']
    """
    keep = {m.start(): m.end() for m in _WHOLE.finditer(text)}
    words: list[str] = []
    position, start = 0, None
    while position < len(text):
        if position in keep and start is None:
            start = position
            position = keep[start]
            continue
        if text[position].isspace():
            if start is not None:
                words.append(text[start:position])
                start = None
        elif start is None:
            start = position
        elif position in keep:
            position = keep[position]
            continue
        position += 1
    if start is not None:
        words.append(text[start:])
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _prose(
    text: str, width: int, indent: int = 2, first: str = "", style: str = "", hang: bool = False
) -> list[Verbatim]:
    """``text`` wrapped to ``width`` at ``indent``, ``first`` before it (with ``hang`` the
    lines after the first stand under the text, not under ``first``)."""
    if not hang:
        lines = wrap(first + text, max(width - indent, 20))
        return [Verbatim(" " * indent + line, style=style) for line in lines]
    lines = wrap(text, max(width - indent - len(first), 20))
    pad = " " * len(first)
    return [
        Verbatim(" " * indent + (first if number == 0 else pad) + line, style=style)
        for number, line in enumerate(lines)
    ]


def _check(check: str, width: int) -> list[Verbatim]:
    """A next check: its words wrapped, each command in it on a line of its own, whole."""
    out: list[Verbatim] = []
    last = 0
    for match in copied_commands(check):
        said, end = check[last : match.start()], match.end()
        after = check[end:]
        if said.rstrip().endswith("(") and after.lstrip().startswith(")"):
            # a command in parentheses leaves its sentence with them: no bracket stays open
            said = said.rstrip()[:-1]
            end += len(after) - len(after.lstrip()) + 1
        before = _said(said, width, first=not out)
        indent = "      " if out or before else "  - "  # a check that starts with it
        out += [*before, Verbatim(indent + match.group("command"))]
        last = end
    out += _said(check[last:], width, first=not out)
    return out


def _said(words: str, width: int, first: bool) -> list[Verbatim]:
    """The words of a check around its commands (none when only punctuation is left)."""
    words = words.strip().lstrip(":;,.").strip() if not first else words.strip()
    if not re.search(r"\w", words):
        return []
    return _prose(words, width, 2, "- ", hang=True) if first else _prose(words, width, 4)


def _heading(text: str) -> Text:
    return Text(text, style="bold")


def _indent(renderable: RenderableType, by: int = 2) -> Padding:
    return Padding(renderable, (0, 0, 0, by), expand=False)


def _finding(
    finding: Finding, diagnosis: Diagnosis, full: bool, width: int
) -> list[RenderableType]:
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
    parts += [Text(""), *_prose(finding.explanation, width, 0)]
    parts += [Text(""), _heading("Evidence")]
    for group in evidence_groups(finding.evidence):  # the same line again: said once
        first = group[0]
        message = first.message or first.text
        line = Text()
        line.append(f"{where(first)}", style="cyan")
        line.append(f"  {when(first.timestamp)}  ", style="dim")
        if first.rank:
            line.append(f"[{first.rank}] ", style="magenta")
        line.append(clipped(message, 300))
        if len(group) > 1:
            line.append(f"  (again at {places(group[1:])})", style="dim")
        parts.append(_indent(line))
    if finding.templates:
        parts += [Text(""), _heading("Unexplained error lines, most frequent first")]
        for template in finding.templates:
            line = Text()
            line.append(f"{template.count:>4}x  ", style="bold")
            line.append(clipped(template.template, 200))
            at = f"line {template.first_line}, " if template.first_line else ""
            line.append(f"  (first: {at}{when(template.first_ts)})", style="dim")
            parts.append(_indent(line))
    if finding.hypotheses:
        parts += [Text(""), _heading("Likely causes, most likely first")]
        for number, hypothesis in enumerate(finding.hypotheses, 1):
            parts += _prose(hypothesis.cause, width, 2, f"{number}. ")
            parts += _prose(hypothesis.check, width, 5, "check: ", style="dim")
    parts += [Text(""), _heading("Fix")]
    actions = action_lines(finding, diagnosis.deployment.kind)
    parts += [line for action in actions for line in _prose(action, width)]
    if finding.patch is None:
        if finding.patch_note or not actions:
            note = finding.patch_note or "No configuration change fixes this."
            parts += _prose(note, width)
    elif in_unit(diagnosis) and diagnosis.fix is not None and diagnosis.fix.dropin:
        parts += [line for change in patch_lines(finding.patch) for line in _prose(change, width)]
        merged = any(change.finding == finding.id for change in diagnosis.fix.changes)
        said = "in the unit's one drop-in" if merged else "not in the unit's drop-in: see why"
        parts.append(_indent(Text(f"({said}, at the end)", style="dim")))
    else:
        changes = patch_lines(finding.patch, in_unit(diagnosis))
        parts += [line for change in changes for line in _prose(change, width)]
    contextual = context_fix(finding, diagnosis)
    if contextual is not None and contextual.forms:
        said = f"(in the container's form below: {contextual.forms})"
        parts += _prose(said, width, style="dim")
    if finding.patch is not None and finding.patch_note:
        parts += _prose(finding.patch_note, width, style="dim")
    if contextual is not None:
        parts += [Text(""), _heading(contextual.heading)]
        for words in contextual.said:
            parts += _prose(words, width, style="yellow")
        if contextual.saved:
            saved = contextual.saved.rstrip("\n").split("\n")
            parts += [Verbatim(line, style="green") for line in saved]
        parts += [Verbatim(command, style="bold") for command in contextual.commands]
        if contextual.docker_run:
            parts += _prose(DOCKER_RUN_WORDS, width, style="dim")
            parts.append(Verbatim(contextual.docker_run, style="bold"))
    for alternative in finding.alternatives:
        parts += _prose(alternative, width, 2, "or: ")
    if finding.next_checks:
        parts += [Text(""), _heading("Next checks")]
        # their commands are copied: each whole on a line of its own
        parts += [line for check in finding.next_checks for line in _check(check, width)]
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


def _print(console: Console, parts: Sequence[RenderableType]) -> None:
    """Consecutive lines to copy go out as one text (a print costs more than such a line)."""
    for copied, group in groupby(parts, key=lambda part: isinstance(part, Verbatim)):
        if copied:
            console.print(Text("\n").join(cast("Iterator[Verbatim]", group)), soft_wrap=True)
        else:
            for part in group:
                console.print(part)


def _host_table(diagnosis: Diagnosis) -> Table:
    """Fleet reports: one row per host; the decisive host's report follows."""
    from rich.table import Table  # only here: a one-host report draws no table

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
    _print(console, _prose(deployment_sentence(diagnosis), width, style="dim"))
    if diagnosis.hosts is not None:
        console.print(_host_table(diagnosis))
    primary = diagnosis.finding(diagnosis.primary)
    if primary is None:
        console.print(Text(no_failure_sentence(diagnosis), style="green"))
    else:
        console.print(Rule(style="red"))
        _print(console, _finding(primary, diagnosis, full=True, width=width))
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
            _print(console, _finding(finding, diagnosis, role is not Role.SYMPTOM, width))
            console.print()
    _print(console, _unit_fix(diagnosis))
    if diagnosis.notes:
        console.print(Rule("Notes", style="dim"))
        for note in diagnosis.notes:
            _print(console, _prose(note, width, 2, "- ", style="yellow"))
    if diagnosis.redactions:
        kinds = ", ".join(f"{count} {kind}" for kind, count in diagnosis.redactions.items())
        console.print(Text(f"Redacted: {kinds} (--no-redact shows them)", style="dim"))
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
