"""The postmortem: a Markdown document to keep with the incident.

Written for GitHub and GitLab alike (CommonMark with GFM tables): log text is escaped only
where Markdown would read it as markup; a code span is never escaped inside (a backslash
there is shown), so in a table a code span holding ``|`` becomes ``<code>`` with entities;
repeated lines are said once with a count; the attempts and their phases are drawn as a
Mermaid gantt chart, which both render, with a table of the same facts beside it.
"""

from __future__ import annotations

import re
from datetime import datetime

from diagnose.core.incident import clipped
from diagnose.core.models import Diagnosis, Evidence, Finding, Role
from diagnose.render.common import (
    DOCKER_RUN_WORDS,
    PHASE_WORDS,
    action_lines,
    context_fix,
    deployment_sentence,
    evidence_groups,
    host_rows,
    in_unit,
    patch_lines,
    places,
    seen,
    summary,
    tier_words,
    unit_fix_lines,
    when,
    where,
)
from diagnose.render.timeline import (
    AttemptRow,
    attempt_rows,
    bars,
    duration,
    folded_attempts,
    span,
    utc,
)

_ALWAYS = re.compile(r"([\\`*\[\]<>~])")
"""Escaped wherever they stand: emphasis, links, HTML, code, strike-through."""
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
"""An underscore inside a word (``extra_buffer``) is never emphasis; elsewhere it may be."""
_ENTITY = re.compile(r"&(?=#?\w+;)")
_BLOCK_START = re.compile(r"^(\s*)([#+=>-]|\d+(?=[.)]))")
"""What a paragraph may not start with: a heading, a list item, a quote, a setext line (an
ordered list's number gets its dot escaped: ``1\\.``)."""
_CODE_SPAN = re.compile(r"(`+)([^`]+?)\1")
_ENTITY_CHARS = set("\\`*_[]<>~|&#!()")


def _escape(text: str, table: bool) -> str:
    text = _ALWAYS.sub(r"\\\1", text)
    text = _LONE_UNDERSCORE.sub(r"\\_", text)
    text = _ENTITY.sub(r"\\&", text)
    return text.replace("|", "\\|") if table else text


def _code(span: str, table: bool) -> str:
    """A code span as written; in a table cell, one holding ``|`` as ``<code>`` with the
    special characters as entities (a ``\\|`` inside backticks would show its backslash)."""
    content = span.strip("`")
    if not table or "|" not in content:
        return span
    return (
        "<code>"
        + "".join(f"&#{ord(c)};" if c in _ENTITY_CHARS else c for c in content)
        + ("</code>")
    )


def _block_escape(found: re.Match[str]) -> str:
    indent, marker = found.group(1), found.group(2)
    if marker.isdigit():
        return f"{indent}{marker}\\"  # the backslash goes before the dot that follows
    return f"{indent}\\{marker}"


def inline(text: str, table: bool = False) -> str:
    """Text safe in running Markdown (or a table cell), on one line: special characters
    escaped, except inside `code spans`, which stay code."""
    text = " ".join(text.split())
    out, position = [], 0
    for found in _CODE_SPAN.finditer(text):
        out.append(_escape(text[position : found.start()], table))
        out.append(_code(found.group(0), table))
        position = found.end()
    out.append(_escape(text[position:], table))
    joined = "".join(out)
    return joined if table else _BLOCK_START.sub(_block_escape, joined, count=1)


def cell(text: str) -> str:
    return inline(text, table=True)


def fenced(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def _evidence_block(evidence: list[Evidence]) -> str:
    """Each distinct line once, as logged (its own prefix names the rank), and where the
    same line came again."""
    lines = []
    for group in evidence_groups(evidence):
        first = group[0]
        lines.append(f"{where(first)}  {when(first.timestamp)}  {first.text}")
        if len(group) > 1:
            lines.append(f"    ... the same line {len(group) - 1} more times: {places(group[1:])}")
    return fenced("\n".join(lines), "text")


# -- the timeline ------------------------------------------------------------------------------

_MERMAID_UNSAFE = re.compile(r"[:;#`\"<>{}\[\]]")
_MERMAID_TIME = "%Y-%m-%d %H:%M:%S.%f"


def _mermaid_text(text: str, limit: int = 110) -> str:
    """A task or section name: Mermaid reads ``:`` as the start of the task's data and
    ``#``/``;`` as entities and statement ends, so they go."""
    cleaned = " ".join(_MERMAID_UNSAFE.sub(" ", text).split())
    return clipped(cleaned, limit)


def _mermaid_time(stamp: datetime) -> str:
    return utc(stamp).strftime(_MERMAID_TIME)[:-3]  # milliseconds


def mermaid_gantt(diagnosis: Diagnosis, rows: list[AttemptRow]) -> str | None:
    """The attempts as a Mermaid gantt chart: a section per attempt, a bar per phase (or one
    bar when no phase marker was seen); the phase an attempt stopped in is marked ``crit``
    and names what stopped it. None when the log has no times to draw."""
    drawn = [row for row in rows if bars(row)]
    if not drawn:
        return None
    subject = diagnosis.unit or "the server"
    out = [
        "gantt",
        f"    title {_mermaid_text(f'Start attempts of {subject} (UTC)')}",
        "    dateFormat YYYY-MM-DD HH:mm:ss.SSS",
        "    axisFormat %H:%M:%S",
    ]
    for row in drawn:
        out.append(f"    section Attempt {row.number}")
        for number, bar in enumerate(bars(row), 1):
            tag = "crit" if bar.stopped else "done"
            out.append(
                f"    {_mermaid_text(bar.label)} :{tag}, a{row.number}p{number}, "
                f"{_mermaid_time(bar.start)}, {_mermaid_time(bar.end)}"
            )
    return fenced("\n".join(out), "mermaid")


def _attempt_table(rows: list[AttemptRow]) -> list[str]:
    out = [
        "| attempt | started (UTC) | lasted | phases reached | stopped in | ended by |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        phases = ", ".join(f"{p.words} ({duration(span(p.start, p.end))})" for p in row.phases)
        ended = "reached ready" if row.ready else (row.ended_by.title if row.ended_by else "-")
        out.append(
            f"| {row.number} | {when(row.start)} | {duration(span(row.start, row.end))} "
            f"| {cell(phases or '-')} | {cell('-' if row.ready else row.stopped_in)} "
            f"| {cell(ended)} |"
        )
    return out


_NUMBER = re.compile(r"\d+")


def _key_lines(diagnosis: Diagnosis) -> list[str]:
    """Each finding's distinct lines in time order, by the finding's title; lines that differ
    only in their numbers (a restart counter) are one row with a count."""
    groups: dict[tuple[str, str], tuple[datetime, Finding, Evidence, int]] = {}
    for finding in diagnosis.findings:
        for item in finding.evidence:
            if item.timestamp is None:
                continue
            key = (finding.id, _NUMBER.sub("0", item.message or item.text))
            if key in groups:
                at, _, first, count = groups[key]
                groups[key] = (at, finding, first, count + 1)
            else:
                groups[key] = (utc(item.timestamp), finding, item, 1)
    rows = list(groups.values())
    rows.sort(key=lambda row: row[0])
    if not rows:
        return []
    out = ["| first seen (UTC) | times | finding | line |", "|---|---|---|---|"]
    out += [
        f"| {when(at)} | {count} | {cell(finding.title)} "
        f"| {cell((first.message or first.text)[:160])} |"
        for at, finding, first, count in rows[:40]
    ]
    return out


def _timeline_section(diagnosis: Diagnosis) -> list[str]:
    rows = attempt_rows(diagnosis)
    lines = _key_lines(diagnosis)
    if not rows and not lines:
        return []
    out = ["## Timeline", ""]
    chart = mermaid_gantt(diagnosis, rows)
    if chart:
        out += [chart, ""]
    if rows:
        out += [*_attempt_table(rows), ""]
        if folded := folded_attempts(rows):
            out += [f"_{folded.capitalize()} (the first and the most recent are kept)._", ""]
    if lines:
        out += ["**Key lines**", "", *lines, ""]
    return out


# -- findings ----------------------------------------------------------------------------------


def _finding_section(finding: Finding, diagnosis: Diagnosis, level: str) -> list[str]:
    out = [f"{level} {inline(finding.title)}", ""]
    facts = [
        f"**Signature:** `{finding.signature}`",
        f"**Category:** {inline(finding.category)}",
        f"**Severity:** {finding.severity.value}",
        f"**Confidence:** {finding.confidence.value}",
    ]
    if seen(finding):
        facts.append(f"**Seen:** {seen(finding)}")
    if finding.phase:
        facts.append(f"**Phase:** {inline(PHASE_WORDS.get(finding.phase, finding.phase))}")
    if finding.caused_by:
        cause = diagnosis.finding(finding.caused_by)
        facts.append(f"**Follows from:** {inline(cause.title if cause else finding.caused_by)}")
    if finding.applies_to:
        facts.append(f"**Applies to:** {inline(finding.applies_to)}")
    if finding.fixed_in:
        facts.append(f"**Fixed in:** {inline(finding.fixed_in)}")
    source = tier_words(finding)
    if source:
        facts.append(f"**Source:** {inline(source)}")
    out += [
        " · ".join(facts),
        "",
        inline(finding.explanation),
        "",
        "**Evidence**",
        "",
        _evidence_block(finding.evidence),
        "",
    ]
    if finding.templates:
        out += [
            "**Unexplained error lines, most frequent first**",
            "",
            "| count | template | first seen |",
            "|---|---|---|",
        ]
        out += [
            f"| {t.count} | {cell(t.template)} | "
            f"{f'line {t.first_line}, ' if t.first_line else ''}{when(t.first_ts)} |"
            for t in finding.templates
        ]
        out.append("")
    if finding.hypotheses:
        out += ["**Likely causes, most likely first**", ""]
        out += [
            f"{n}. {inline(h.cause)} — check: {inline(h.check)}"
            for n, h in enumerate(finding.hypotheses, 1)
        ]
        out.append("")
    return out


def _fix_section(finding: Finding, diagnosis: Diagnosis) -> list[str]:
    out = ["## Fix", ""]
    actions = action_lines(finding, diagnosis.deployment.kind)
    out += [f"- {inline(line)}" for line in actions] + ([""] if actions else [])
    if finding.patch is None:
        if finding.patch_note or not actions:
            out += [inline(finding.patch_note or "No configuration change fixes this."), ""]
    else:
        out += [f"- {inline(line)}" for line in patch_lines(finding.patch, in_unit(diagnosis))] + [
            ""
        ]
    if finding.patch is not None and finding.patch_note:
        out += [inline(finding.patch_note), ""]
    out += [f"- Alternative: {inline(text)}" for text in finding.alternatives]
    if finding.alternatives:
        out.append("")
    contextual = context_fix(finding, diagnosis)
    if contextual is not None:
        out += [f"### {inline(contextual.heading)}", ""]
        out += [f"- {inline(line)}" for line in contextual.said] + ([""] if contextual.said else [])
        if contextual.saved:
            out += [fenced(contextual.saved, "yaml"), ""]
        if contextual.commands:
            out += [fenced("\n".join(contextual.commands), "sh"), ""]
        if contextual.docker_run:
            out += [DOCKER_RUN_WORDS, "", fenced(contextual.docker_run), ""]
    dropin, said, commands = unit_fix_lines(diagnosis)
    if dropin is not None or said:
        out += [f"### The one drop-in for {inline(diagnosis.unit or 'the unit')}", ""]
        out += [f"- {inline(line)}" for line in said] + ([""] if said else [])
    if dropin:
        out += [fenced(dropin, "ini"), ""]
    if commands:
        out += ["Save it as the file its first line names, then run:", ""]
        out += [fenced("\n".join(commands), "sh"), ""]
    return out


def _host_table(diagnosis: Diagnosis) -> list[str]:
    """Fleet reports: one row per host; the sections below are the decisive host's."""
    out = ["## Hosts", "", "| host | state | root cause | fix |", "|---|---|---|---|"]
    out += [f"| {' | '.join(inline(cell) for cell in row)} |" for row in host_rows(diagnosis)]
    fleet = diagnosis.fleet
    if fleet and fleet.primary_host:
        out += [
            "",
            f"The sections below are {inline(fleet.primary_host)}'s, the host that failed first "
            f"on its own (clock skew allowed: {fleet.skew_tolerance_s:g} s).",
        ]
    return [*out, ""]


def render_markdown(diagnosis: Diagnosis, **_: object) -> str:
    primary = diagnosis.finding(diagnosis.primary)
    title = f"Postmortem: {inline(primary.title)}" if primary else "Diagnosis: no failure found"
    out = [f"# {title}", "", "## Summary", "", inline(summary(diagnosis)) + ".", ""]
    out += [inline(deployment_sentence(diagnosis)) + ".", ""]
    if primary:
        out += [
            f"Root cause: **{inline(primary.title)}** ({inline(primary.category)}, "
            f"{primary.confidence.value} confidence).",
            "",
        ]
    else:
        out += ["Nothing in the input matches a known failure.", ""]
    out += ["| input | kind | lines | first (UTC) | last (UTC) |", "|---|---|---|---|---|"]
    out += [
        f"| {cell(i.name)} | {i.kind} | {i.records} | {when(i.first_ts)} | {when(i.last_ts)} |"
        for i in diagnosis.inputs
    ]
    out.append("")
    if diagnosis.hosts is not None:
        out += _host_table(diagnosis)
    out += _timeline_section(diagnosis)
    if primary:
        out += ["## Root cause", "", *_finding_section(primary, diagnosis, "###")]
        out += _fix_section(primary, diagnosis)
        if primary.next_checks:
            out += ["## Next checks", ""] + [f"- {inline(c)}" for c in primary.next_checks] + [""]
        if primary.references:
            out += ["## References", ""] + [f"- <{r}>" for r in primary.references] + [""]
    for role, heading in (
        (Role.ROOT_CAUSE, "Other failures"),
        (Role.SYMPTOM, "Symptoms"),
        (Role.ADVISORY, "Advisories"),
    ):
        group = [f for f in diagnosis.findings if f.role is role and f is not primary]
        if group:
            out += [f"## {heading}", ""]
            for finding in group:
                out += _finding_section(finding, diagnosis, "###")
    if diagnosis.notes:
        out += ["## Notes on the evidence", ""] + [f"- {inline(note)}" for note in diagnosis.notes]
        out.append("")
    if diagnosis.redactions:
        kinds = ", ".join(f"{count} {kind}" for kind, count in diagnosis.redactions.items())
        out += [f"_Secrets redacted from this report: {kinds}._", ""]
    out.append(f"_Written by diagnose {diagnosis.tool.version}._")
    return "\n".join(out) + "\n"
