"""The postmortem as one self-contained HTML file: inline CSS, no script, no network (a
Content-Security-Policy forbids fetching anything), so it opens the same from a ticket, a
mail or a disk years later. The timeline is drawn by our own HTML and CSS (bars placed on one
time axis), since Mermaid would need its script from the network.
"""

from __future__ import annotations

import re
from datetime import datetime
from html import escape

from diagnose.core.models import Diagnosis, Finding, Role
from diagnose.render.common import (
    DOCKER_RUN_WORDS,
    PHASE_WORDS,
    TIER_WORDS,
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

_CODE_SPAN = re.compile(r"(`+)([^`]+?)\1")

_STYLE = """
:root { color-scheme: light; --ink: #1f2328; --dim: #59636e; --line: #d1d9e0;
  --bad: #cf222e; --ok: #1a7f37; --done: #8c959f; --code: #f6f8fa; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0; background: #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 24px; }
h1 { font-size: 1.6em; border-bottom: 1px solid var(--line); padding-bottom: .3em; }
h2 { font-size: 1.3em; border-bottom: 1px solid var(--line); padding-bottom: .2em;
  margin-top: 1.6em; }
.facts { color: var(--dim); }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { background: var(--code); padding: .1em .3em; border-radius: 4px; }
pre { background: var(--code); padding: 12px; border-radius: 6px; overflow-x: auto;
  white-space: pre; }
pre.evidence { white-space: pre-wrap; overflow-wrap: anywhere; }
pre.dropin, pre.commands { border-left: 4px solid var(--ok); }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left;
  vertical-align: top; }
th { background: var(--code); }
.chart { margin: 12px 0; }
.attempt { margin: 6px 0 10px; }
.track { position: relative; height: 22px; background: var(--code);
  border: 1px solid var(--line); border-radius: 4px; }
.bar { position: absolute; top: 2px; bottom: 2px; min-width: 3px; border-radius: 3px;
  background: var(--done); overflow: hidden; white-space: nowrap; color: #fff;
  font-size: 11px; line-height: 18px; padding: 0 3px; box-sizing: border-box; }
@media (max-width: 799px) { .bar .wide { display: none; } }
.bar.stopped { background: var(--bad); }
.bar.ready { background: var(--ok); }
.caption { font-size: 13px; color: var(--dim); }
.caption strong { color: var(--ink); }
.axis { display: flex; justify-content: space-between; font-size: 12px; color: var(--dim); }
.legend span { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: middle; margin: 0 4px 0 12px; }
footer { color: var(--dim); font-size: 13px; margin-top: 2em; }
"""


def _text(text: str) -> str:
    """Text with its `code spans` as ``<code>``; everything escaped."""
    out, position = [], 0
    for found in _CODE_SPAN.finditer(text):
        out.append(escape(text[position : found.start()]))
        out.append(f"<code>{escape(found.group(2))}</code>")
        position = found.end()
    out.append(escape(text[position:]))
    return "".join(out)


def _table(head: list[str], rows: list[list[str]], css: str = "") -> str:
    """A table whose cells are already HTML."""
    attribute = f' class="{css}"' if css else ""
    out = [f"<table{attribute}><thead><tr>"]
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


_NARROW_CHART_PX = 342
"""The chart on a 390-pixel-wide screen (less the page's padding)."""
_WIDE_CHART_PX = 752
"""The chart at 800 pixels, where ``.wide`` labels start to show."""
_LABEL_CHAR_PX = 6.5
"""An 11-pixel character of the bars' font, at its widest on average (and 8 more for the
padding)."""


def _bar_label(words: str, percent: float) -> str:
    """A bar's words where they fit whole: always, only on a wide screen (``.wide``), or
    not at all (the bar's tooltip and the attempts' table say them): never cut."""
    needed = len(words) * _LABEL_CHAR_PX + 8
    if percent / 100 * _NARROW_CHART_PX >= needed:
        return escape(words)
    if percent / 100 * _WIDE_CHART_PX >= needed:
        return f'<span class="wide">{escape(words)}</span>'
    return ""


def _chart(rows: list[AttemptRow]) -> str:
    """Every attempt on one time axis: a bar per phase, the one it stopped in in red."""
    drawn = [(row, bars(row)) for row in rows]
    drawn = [(row, shown) for row, shown in drawn if shown]
    if not drawn:
        return ""
    first = min(utc(bar.start) for _, shown in drawn for bar in shown)
    last = max(utc(bar.end) for _, shown in drawn for bar in shown)
    total = max((last - first).total_seconds(), 1e-3)

    def at(stamp: datetime) -> float:
        return 100 * (utc(stamp) - first).total_seconds() / total

    out = ['<div class="chart" id="timeline-chart">']
    for row, shown in drawn:
        out.append(f'<div class="attempt" data-attempt="{row.number}"><div class="track">')
        for bar in shown:
            css = "stopped" if bar.stopped else ("ready" if row.ready and bar is shown[-1] else "")
            left, width = at(bar.start), at(bar.end) - at(bar.start)
            out.append(
                f'<div class="bar {css}" style="left:{left:.2f}%;width:{width:.2f}%" '
                f'title="{escape(bar.label)}">{_bar_label(bar.words, width)}</div>'
            )
        outcome = (
            "reached ready"
            if row.ready
            else f"stopped in {row.stopped_in}"
            + (f", by {row.ended_by.title}" if row.ended_by else "")
        )
        out.append(
            f'</div><div class="caption"><strong>Attempt {row.number}</strong> · '
            f"{escape(when(row.start))} · {duration(span(row.start, row.end))} · "
            f"{escape(outcome)}</div></div>"
        )
    out.append(
        f'<div class="axis"><span>{escape(when(first))} UTC</span>'
        f"<span>{escape(when(last))} UTC</span></div>"
    )
    out.append(
        '<div class="legend caption"><span style="background:var(--done)"></span>phase passed'
        '<span style="background:var(--bad)"></span>where the attempt stopped'
        '<span style="background:var(--ok)"></span>ready</div></div>'
    )
    return "".join(out)


def _timeline(diagnosis: Diagnosis) -> str:
    rows = attempt_rows(diagnosis)
    if not rows:
        return ""
    table = _table(
        ["attempt", "started (UTC)", "lasted", "phases reached", "stopped in", "ended by"],
        [
            [
                str(row.number),
                escape(when(row.start)),
                duration(span(row.start, row.end)),
                escape(
                    ", ".join(f"{p.words} ({duration(span(p.start, p.end))})" for p in row.phases)
                    or "-"
                ),
                escape("-" if row.ready else row.stopped_in),
                escape(
                    "reached ready" if row.ready else (row.ended_by.title if row.ended_by else "-")
                ),
            ]
            for row in rows
        ],
        "attempts",
    )
    folded = folded_attempts(rows)
    note = f'<p class="caption">{escape(folded.capitalize())}.</p>' if folded else ""
    return f'<section id="timeline"><h2>Timeline</h2>{_chart(rows)}{table}{note}</section>'


def _hosts(diagnosis: Diagnosis) -> str:
    """Fleet reports: one row per host, as the Markdown's Hosts table; the sections below are
    the decisive host's."""
    rows = [[_text(cell) for cell in row] for row in host_rows(diagnosis)]
    out = [
        '<section id="hosts"><h2>Hosts</h2>',
        _table(["host", "state", "root cause", "fix"], rows),
    ]
    fleet = diagnosis.fleet
    if fleet and fleet.primary_host:
        out.append(
            f"<p>The sections below are {escape(fleet.primary_host)}'s, the host that failed "
            f"first on its own (clock skew allowed: {fleet.skew_tolerance_s:g} s).</p>"
        )
    return "".join(out) + "</section>"


def _evidence(finding: Finding) -> str:
    lines = []
    for group in evidence_groups(finding.evidence):
        first = group[0]
        lines.append(f"{where(first)}  {when(first.timestamp)}  {first.text}")
        if len(group) > 1:
            lines.append(f"    ... the same line {len(group) - 1} more times: {places(group[1:])}")
    return f'<pre class="evidence">{escape(chr(10).join(lines))}</pre>'


def _finding(finding: Finding, diagnosis: Diagnosis) -> str:
    facts = [
        f"signature <code>{escape(finding.signature)}</code>",
        escape(finding.category),
        escape(finding.severity.value),
        f"{escape(finding.confidence.value)} confidence",
    ]
    if seen(finding):
        facts.append(escape(seen(finding)))
    if finding.phase:
        facts.append(escape(f"while {PHASE_WORDS.get(finding.phase, finding.phase)}"))
    if finding.caused_by:
        cause = diagnosis.finding(finding.caused_by)
        facts.append(escape(f"follows from {cause.title if cause else finding.caused_by}"))
    for label, value in (("applies to", finding.applies_to), ("fixed in", finding.fixed_in)):
        if value:
            facts.append(escape(f"{label} {value}"))
    if finding.tier in TIER_WORDS:
        facts.append(escape(TIER_WORDS[finding.tier]))
    out = [
        f"<h3>{escape(finding.title)}</h3>",
        f'<p class="facts">{" · ".join(facts)}</p>',
        f"<p>{_text(finding.explanation)}</p>",
        "<h4>Evidence</h4>",
        _evidence(finding),
    ]
    if finding.templates:
        out.append("<h4>Unexplained error lines, most frequent first</h4>")
        out.append(
            _table(
                ["count", "template", "first seen"],
                [
                    [
                        str(t.count),
                        f"<code>{escape(t.template)}</code>",
                        escape(
                            f"{f'line {t.first_line}, ' if t.first_line else ''}{when(t.first_ts)}"
                        ),
                    ]
                    for t in finding.templates
                ],
            )
        )
    if finding.hypotheses:
        out.append("<h4>Likely causes, most likely first</h4><ol>")
        out += [
            f'<li>{_text(h.cause)}<br><span class="facts">check: {_text(h.check)}</span></li>'
            for h in finding.hypotheses
        ]
        out.append("</ol>")
    return "".join(out)


def _fix(finding: Finding, diagnosis: Diagnosis) -> str:
    out = ['<section id="fix"><h2>Fix</h2>']
    actions = action_lines(finding, diagnosis.deployment.kind)
    if actions:
        out.append("<ul>" + "".join(f"<li>{_text(a)}</li>" for a in actions) + "</ul>")
    if finding.patch is None:
        if finding.patch_note or not actions:
            out.append(
                f"<p>{_text(finding.patch_note or 'No configuration change fixes this.')}</p>"
            )
    else:
        out.append(
            "<ul>"
            + "".join(
                f"<li>{_text(p)}</li>" for p in patch_lines(finding.patch, in_unit(diagnosis))
            )
            + "</ul>"
        )
    if finding.patch is not None and finding.patch_note:
        out.append(f"<p>{_text(finding.patch_note)}</p>")
    if finding.alternatives:
        out.append(
            "<ul>"
            + "".join(f"<li>Alternative: {_text(a)}</li>" for a in finding.alternatives)
            + "</ul>"
        )
    contextual = context_fix(finding, diagnosis)
    if contextual is not None:
        out.append(f"<h3>{_text(contextual.heading)}</h3>")
        if contextual.said:
            out.append("<ul>" + "".join(f"<li>{_text(s)}</li>" for s in contextual.said) + "</ul>")
        if contextual.saved:
            out.append(f'<pre class="dropin">{escape(contextual.saved.rstrip())}</pre>')
        if contextual.commands:
            out.append(f'<pre class="commands">{escape(chr(10).join(contextual.commands))}</pre>')
        if contextual.docker_run:
            out.append(f"<p>{_text(DOCKER_RUN_WORDS)}</p>")
            out.append(f'<pre class="commands">{escape(contextual.docker_run)}</pre>')
    dropin, said, commands = unit_fix_lines(diagnosis)
    if dropin is not None or said:
        out.append(f"<h3>The one drop-in for {_text(diagnosis.unit or 'the unit')}</h3>")
    if said:
        out.append("<ul>" + "".join(f"<li>{_text(line)}</li>" for line in said) + "</ul>")
    if dropin:
        out.append(f'<pre class="dropin">{escape(dropin.rstrip())}</pre>')
    if commands:
        out.append("<p>Save it as the file its first line names, then run:</p>")
        out.append(f'<pre class="commands">{escape(chr(10).join(commands))}</pre>')
    out.append("</section>")
    return "".join(out)


def render_html(diagnosis: Diagnosis, **_: object) -> str:
    primary = diagnosis.finding(diagnosis.primary)
    title = f"Postmortem: {primary.title}" if primary else "Diagnosis: no failure found"
    body = [f"<h1>{escape(title)}</h1>", '<section id="summary"><h2>Summary</h2>']
    body.append(f"<p>{escape(summary(diagnosis))}.</p>")
    body.append(f"<p>{_text(deployment_sentence(diagnosis))}.</p>")
    if primary:
        body.append(
            f"<p>Root cause: <strong>{escape(primary.title)}</strong> "
            f"({escape(primary.category)}, {escape(primary.confidence.value)} confidence).</p>"
        )
    else:
        body.append("<p>Nothing in the input matches a known failure.</p>")
    body.append(
        _table(
            ["input", "kind", "lines", "first (UTC)", "last (UTC)"],
            [
                [
                    escape(i.name),
                    i.kind,
                    str(i.records),
                    escape(when(i.first_ts)),
                    escape(when(i.last_ts)),
                ]
                for i in diagnosis.inputs
            ],
        )
    )
    body.append("</section>")
    if diagnosis.hosts is not None:
        body.append(_hosts(diagnosis))
    body.append(_timeline(diagnosis))
    if primary:
        body.append(
            f'<section id="root-cause"><h2>Root cause</h2>{_finding(primary, diagnosis)}</section>'
        )
        body.append(_fix(primary, diagnosis))
        if primary.next_checks:
            body.append(
                '<section id="next-checks"><h2>Next checks</h2><ul>'
                + "".join(f"<li>{_text(c)}</li>" for c in primary.next_checks)
                + "</ul></section>"
            )
        if primary.references:
            body.append(
                '<section id="references"><h2>References</h2><ul>'
                + "".join(
                    f'<li><a href="{escape(r)}">{escape(r)}</a></li>' for r in primary.references
                )
                + "</ul></section>"
            )
    for role, heading in (
        (Role.ROOT_CAUSE, "Other failures"),
        (Role.SYMPTOM, "Symptoms"),
        (Role.ADVISORY, "Advisories"),
    ):
        group = [f for f in diagnosis.findings if f.role is role and f is not primary]
        if group:
            body.append(f"<section><h2>{heading}</h2>")
            body += [_finding(f, diagnosis) for f in group]
            body.append("</section>")
    if diagnosis.notes:
        body.append(
            "<section><h2>Notes on the evidence</h2><ul>"
            + "".join(f"<li>{_text(n)}</li>" for n in diagnosis.notes)
            + "</ul></section>"
        )
    footer = []
    if diagnosis.redactions:
        kinds = ", ".join(f"{count} {kind}" for kind, count in diagnosis.redactions.items())
        footer.append(f"Secrets redacted from this report: {escape(kinds)}.")
    footer.append(f"Written by diagnose {escape(diagnosis.tool.version)}. Times are UTC.")
    body.append(f"<footer>{' '.join(footer)}</footer>")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body><main>\n{chr(10).join(body)}\n</main></body></html>\n"
    )
