"""The postmortem: a Markdown document to keep with the incident."""

from __future__ import annotations

import re

from diagnose.core.models import Diagnosis, Evidence, Finding, Role
from diagnose.render.common import (
    PHASE_WORDS,
    TIER_WORDS,
    action_lines,
    host_rows,
    patch_lines,
    seen,
    summary,
    when,
    where,
)

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")
_CODE_SPAN = re.compile(r"(`+)([^`]+?)\1")


def inline(text: str) -> str:
    """Text safe in running Markdown, on one line: special characters escaped, except inside
    `code spans`, which stay code (a code span shows its content literally)."""
    text = " ".join(text.split())
    out, position = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_MARKDOWN_SPECIAL.sub(r"\\\1", text[position : span.start()]))
        out.append(span.group(0).replace("|", "\\|"))
        position = span.end()
    out.append(_MARKDOWN_SPECIAL.sub(r"\\\1", text[position:]))
    return "".join(out)


def fenced(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def _evidence_block(evidence: list[Evidence]) -> str:
    lines = []
    for item in evidence:  # the whole line as logged: its own prefix names the rank
        lines.append(f"{where(item)}  {when(item.timestamp)}  {item.text}")
    return fenced("\n".join(lines), "text")


def _finding_section(finding: Finding, diagnosis: Diagnosis, level: str) -> list[str]:
    out = [f"{level} {inline(finding.title)}", ""]
    facts = [
        f"**Signature:** `{finding.signature}`",
        f"**Category:** {finding.category}",
        f"**Severity:** {finding.severity.value}",
        f"**Confidence:** {finding.confidence.value}",
    ]
    if seen(finding):
        facts.append(f"**Seen:** {seen(finding)}")
    if finding.phase:
        facts.append(f"**Phase:** {PHASE_WORDS.get(finding.phase, finding.phase)}")
    if finding.caused_by:
        cause = diagnosis.finding(finding.caused_by)
        facts.append(f"**Follows from:** {inline(cause.title) if cause else finding.caused_by}")
    if finding.applies_to:
        facts.append(f"**Applies to:** {inline(finding.applies_to)}")
    if finding.fixed_in:
        facts.append(f"**Fixed in:** {inline(finding.fixed_in)}")
    if finding.tier in TIER_WORDS:
        facts.append(f"**Source:** {TIER_WORDS[finding.tier]}")
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
            f"| {t.count} | {inline(t.template)} | "
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


def _fix_section(finding: Finding) -> list[str]:
    out = ["## Fix", ""]
    actions = action_lines(finding)
    out += [f"- {inline(line)}" for line in actions] + ([""] if actions else [])
    if finding.patch is None:
        if finding.patch_note or not actions:
            out += [inline(finding.patch_note or "No configuration change fixes this."), ""]
    elif finding.patch.dropin:
        out += [fenced(finding.patch.dropin, "ini"), ""]
    else:
        out += [f"- {inline(line)}" for line in patch_lines(finding.patch)] + [""]
    if finding.patch is not None and finding.patch_note:
        out += [inline(finding.patch_note), ""]
    out += [f"- Alternative: {inline(text)}" for text in finding.alternatives]
    if finding.alternatives:
        out.append("")
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
    if primary:
        out += [
            f"Root cause: **{inline(primary.title)}** ({primary.category}, "
            f"{primary.confidence.value} confidence).",
            "",
        ]
    else:
        out += ["Nothing in the input matches a known failure.", ""]
    out += ["| input | kind | lines | first | last |", "|---|---|---|---|---|"]
    out += [
        f"| {inline(i.name)} | {i.kind} | {i.records} | {when(i.first_ts)} | {when(i.last_ts)} |"
        for i in diagnosis.inputs
    ]
    out.append("")
    if diagnosis.hosts is not None:
        out += _host_table(diagnosis)
    timeline = sorted(
        ((e, f) for f in diagnosis.findings for e in f.evidence if e.timestamp),
        key=lambda pair: pair[0].timestamp,  # type: ignore[arg-type,return-value]
    )
    if timeline:
        out += ["## Timeline", "", "| time | finding | line |", "|---|---|---|"]
        out += [
            f"| {when(e.timestamp)} | {f.id} {inline(f.signature)} | {inline(e.text[:160])} |"
            for e, f in timeline[:40]
        ]
        out.append("")
    if primary:
        out += ["## Root cause", "", *_finding_section(primary, diagnosis, "###")]
        out += _fix_section(primary)
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
