"""The digest: what ``--ask`` sends and ``--show-digest`` prints. Built from the diagnosis,
the launch facts the engine read and the release tables, so it carries what a model cannot
see in the log (this release's options and environment variables, the known issues and the
versions that fixed them, the tool's own candidates), then the log lines that matter, each
with its line number. Every line passes the report's redaction layer; the whole stays within
a token budget (estimated as characters / 4, the usual rate of English and log text for
today's tokenizers)."""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.assistant.config import DEFAULT_TOKEN_BUDGET
from diagnose.core.models import Diagnosis, Finding
from diagnose.core.redact import Redactor
from diagnose.inputs.excerpt import Excerpt
from diagnose.knowledge import mined
from diagnose.library import EXCLUDE_THREADS_VARIABLE
from diagnose.render.common import patch_lines

CHARS_PER_TOKEN = 4
"""How tokens are estimated: one token per four characters."""

BEFORE_EVIDENCE = 80
"""Lines read before an evidence line: the traceback that ends in it."""
AFTER_EVIDENCE = 15
HEAD_LINES = 40
TAIL_LINES = 40
SECTION_SHARE = 0.12
"""The most of the budget one section of facts may take; the log excerpt takes the rest."""
WHY_CHARS = 400
"""How much of a candidate's explanation (its mechanism, in the tool's words) the digest keeps."""

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)+")
_ENV_ASSIGNMENT = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)=(\S*)")
_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")
_WORD = re.compile(r"[a-z][a-z0-9]+")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
_EXIT = re.compile(
    r"Main process exited, code=\w+, status=[\w/]+|Failed with result '[\w-]+'"
    r"|Killed process \d+ \([^)]*\)|\bKilled\b$|exited with (?:code|status) -?\d+"
    r"|Start request repeated too quickly|start operation timed out"
)
_ENGINE_VERSIONS = {f"{engine}_version" for engine in mined.ENGINES}


def estimate_tokens(text: str) -> int:
    """The token estimate the budget is kept in: characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Digest:
    """The text sent, and the log lines it shows by number (what evidence may cite)."""

    text: str
    lines: dict[int, str]
    source: str | None
    """The input the line numbers count in; None when they count the digest's own lines
    (journal entries have no line numbers)."""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    def key(self, model: str) -> str:
        """What an answer is cached under: this digest asked of ``model``."""
        return hashlib.sha256(f"{model}\0{self.text}".encode()).hexdigest()


def wanted_lines(diagnosis: Diagnosis) -> set[int]:
    """The line numbers worth reading again: around each evidence line (the traceback
    before it) and each unexplained template's first line."""
    wanted: set[int] = set()
    for number in _anchor_lines(diagnosis):
        wanted.update(range(max(1, number - BEFORE_EVIDENCE), number + AFTER_EVIDENCE + 1))
    return wanted


def _anchor_lines(diagnosis: Diagnosis) -> list[int]:
    """Evidence and template lines, the primary finding's first."""
    anchors: list[int] = []
    for finding in _ranked(diagnosis):
        anchors += [e.line for e in finding.evidence if e.line is not None]
        anchors += [t.first_line for t in finding.templates if t.first_line is not None]
    return list(dict.fromkeys(anchors))


def _ranked(diagnosis: Diagnosis) -> list[Finding]:
    primary = diagnosis.finding(diagnosis.primary)
    rest = [f for f in diagnosis.findings if f is not primary]
    return [primary, *rest] if primary else rest


def evidence_excerpt(diagnosis: Diagnosis) -> Excerpt:
    """For input with no line numbers (the journal, stdin): the findings' evidence lines,
    numbered in the order the digest shows them."""
    texts = dict.fromkeys(
        (e.message or e.text) for f in _ranked(diagnosis) for e in f.evidence if e.text
    )
    return Excerpt("", {i: text for i, text in enumerate(texts, 1)}, len(texts))


def build_digest(
    diagnosis: Diagnosis,
    facts: Mapping[str, Any],
    excerpt: Excerpt,
    unit_settings: Iterable[str] = (),
    budget_tokens: int = DEFAULT_TOKEN_BUDGET,
) -> Digest:
    """The digest of ``diagnosis``: facts first, then as much of ``excerpt`` as the budget
    leaves, nearest the evidence first."""
    engine = diagnosis.engine or _engine_of(facts)
    guessed = engine is None and (engine := _engine_by_flags(excerpt)) is not None
    version = facts.get(f"{engine}_version") if engine else None
    release = mined.nearest_version(engine, version) if engine in mined.ENGINES else None
    first_error = _first_error(diagnosis, excerpt)
    decisive = _decisive_text(diagnosis)
    sections = [
        ("Engine", _engine_lines(engine, version, release, guessed)),
        ("What ran it", _deployment_lines(diagnosis)),
        ("Launch command", _launch_lines(facts)),
        ("Unit (systemd, as configured)", list(unit_settings)),
        ("Timeline", _timeline_lines(diagnosis) + _exit_lines(excerpt)),
        ("Other facts the tool read from the log", _fact_lines(facts)),
        ("The tool's own candidates", _candidate_lines(diagnosis, excerpt)),
        ("Unexplained error templates (count, first line)", _template_lines(diagnosis)),
        *_release_sections(engine, release, facts, excerpt, decisive),
        (
            "Known issues that match, with the versions that fixed them",
            _issue_lines(diagnosis, engine, version),
        ),
        ("Notes", list(diagnosis.notes)),
    ]
    redactor = Redactor()
    every = [line for _, lines in sections for line in lines] + list(excerpt.lines.values())
    redactor.learn(every)
    budget = budget_tokens * CHARS_PER_TOKEN
    head = _head(excerpt, first_error)
    parts = [head]
    for title, lines in sections:
        if lines:
            parts.append(_section(title, redactor.lines(lines), int(budget * SECTION_SHARE)))
    text = "\n".join(p for p in parts if p)
    shown_lines = _fit_excerpt(
        excerpt, dict(zip(excerpt.lines, redactor.lines(excerpt.lines.values()), strict=True)),
        _anchor_lines(diagnosis), budget - len(text) - 200,
    )  # fmt: skip
    text += "\n" + _excerpt_section(excerpt, shown_lines)
    return Digest(text, shown_lines, excerpt.source or None)


def _decisive_text(diagnosis: Diagnosis) -> str:
    """The primary finding's evidence; with no primary, every finding's and template's."""
    primary = diagnosis.finding(diagnosis.primary)
    findings = [primary] if primary else diagnosis.findings
    texts = [e.message or e.text for f in findings for e in f.evidence]
    texts += [t.template for f in findings for t in f.templates]
    return "\n".join(texts)


def _release_sections(
    engine: str | None,
    release: str | None,
    facts: Mapping[str, Any],
    excerpt: Excerpt,
    decisive: str,
) -> list[tuple[str, list[str]]]:
    """The options and variables of the log's release; when the log names no engine, of each
    engine's newest release."""
    if engine is not None:
        releases = [(engine, release, _release_name(engine, release))]
    else:
        releases = [
            (name, newest, f"{_release_name(name, newest)} (if the engine is {name})")
            for name in mined.ENGINES
            if (newest := mined.nearest_version(name, None))
        ]
    sections = []
    for name, table, title in releases:
        sections.append(
            (
                f"{title}: options near the flags given",
                _option_lines(name, table, _given_flags(facts, name, table), decisive),
            )
        )
        sections.append(
            (f"{title}: environment variables", _env_lines(name, table, excerpt, decisive))
        )
    return sections


def _head(excerpt: Excerpt, first_error: int | None) -> str:
    where = (
        f"log lines are numbered as in {_base_name(excerpt.source)} ({excerpt.total} lines)"
        if excerpt.source
        else "log lines are the journal entries the tool kept, numbered in this digest"
    )
    first = f"; the first error: L{first_error}" if first_error else ""
    return f"# diagnose digest\n({where}{first}; secrets are shown as <redacted:KIND:N>)"


def _base_name(source: str) -> str:
    """A file's name without its folders (a path can name a user)."""
    return source.rstrip("/").rsplit("/", 1)[-1]


def _clipped(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word's end to at most ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit].rsplit(" ", 1)[0] + " …"


def _section(title: str, lines: list[str], limit: int) -> str:
    """A titled section, cut to ``limit`` characters at a line's end."""
    body: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        if size + len(line) + 1 > limit:
            body.append(f"… ({len(lines) - index} more)")
            break
        body.append(line)
        size += len(line) + 1
    return f"\n## {title}\n" + "\n".join(body)


def _engine_of(facts: Mapping[str, Any]) -> str | None:
    return next((e for e in mined.ENGINES if facts.get(f"{e}_version")), None)


def _release_name(engine: str | None, release: str | None) -> str:
    if engine in mined.ENGINE_NAMES and release:
        return f"{mined.ENGINE_NAMES[engine]} {release}"
    return "The engine release"


def _engine_by_flags(excerpt: Excerpt) -> str | None:
    """The one engine whose newest release has more of the flags the log names than the
    other's (a log of only an argparse error names no engine)."""
    flags = {f for text in excerpt.lines.values() for f in _FLAG.findall(text)}
    if not flags:
        return None
    known = {}
    for engine in mined.ENGINES:
        newest = mined.nearest_version(engine, None)
        table = mined.flag_table(engine, newest) if newest else None
        known[engine] = sum(table is not None and table.lookup(f).outcome == "exact" for f in flags)
    ranked = sorted(known, key=known.__getitem__, reverse=True)
    return ranked[0] if known[ranked[0]] > known[ranked[1]] else None


def _engine_lines(
    engine: str | None, version: str | None, release: str | None, guessed: bool
) -> list[str]:
    if engine is None:
        return ["engine: not recognised from the log"]
    how = " (not named by the log: the one whose options the log's flags are)" if guessed else ""
    lines = [f"engine: {engine}{how}", f"version: {version or 'not shown in the log'}"]
    if release:
        why = (
            "the nearest mined release"
            if version
            else "the newest mined: the log shows none, so the running release is unknown; this "
            "one is no evidence of a fix, and an upgrade must name the release that fixed the "
            "failure"
        )
        lines.append(f"option and variable tables below are from release {release} ({why})")
    return lines


def _deployment_lines(diagnosis: Diagnosis) -> list[str]:
    seen = diagnosis.deployment
    if seen.kind == "unknown" and seen.orchestrator is None:
        return ["not shown by the log (systemd, a container, a pod or a program that starts it)"]
    on_top = f", under {seen.orchestrator}" if seen.orchestrator else ""
    said = f" ({'; '.join(seen.evidence)})" if seen.evidence else ""
    return [f"{seen.kind}{on_top}{said}"]


def _launch_lines(facts: Mapping[str, Any]) -> list[str]:
    lines = []
    if facts.get("launch_command"):
        lines.append(f"command line: {str(facts['launch_command']).strip()}")
    if facts.get("launch_settings"):
        lines.append(f"settings the engine printed: {facts['launch_settings']}")
    return lines


def _fact_lines(facts: Mapping[str, Any]) -> list[str]:
    skip = {"launch_command", "launch_settings", "launch_program", "launch_settings_from"}
    return [
        f"{name}: {value}"
        for name, value in sorted(facts.items())
        if name not in skip and name not in _ENGINE_VERSIONS and value not in (None, "")
    ]


def _timeline_lines(diagnosis: Diagnosis) -> list[str]:
    lines = [
        f"start attempts: {diagnosis.attempts}",
        f"furthest phase of the last attempt: {diagnosis.phase_reached or 'unknown'}",
    ]
    if diagnosis.unit:
        lines.append(f"unit: {diagnosis.unit}")
    hosts = sorted({e.host for f in diagnosis.findings for e in f.evidence if e.host})
    if hosts:
        lines.append(f"hosts: {', '.join(hosts)}")
    timeline = diagnosis.timeline
    if timeline is None:
        return lines
    for attempt in timeline.attempts:
        phases = " > ".join(
            p.phase + (f" {p.started_at:%H:%M:%S}" if p.started_at else "") for p in attempt.phases
        )
        times = " to ".join(f"{t:%Y-%m-%d %H:%M:%S}" for t in (attempt.started_at,
                                                              attempt.ended_at) if t)  # fmt: skip
        lines.append(f"attempt {attempt.number}: {times or 'untimed'}; {phases or 'no phase'}")
    for rank in timeline.ranks:
        last = f", last line {rank.last_line_at:%H:%M:%S}" if rank.last_line_at else ""
        lines.append(f"rank {rank.rank}: reached {rank.phase or 'no phase'}{last}")
    for name in ("ready_at", "stop_requested_at", "stopped_by", "stopped_by_user", "stalled_for_s"):
        value = getattr(timeline, name)
        if value is not None:
            lines.append(f"{name}: {value}")
    return lines


def _exit_lines(excerpt: Excerpt) -> list[str]:
    """How processes ended, as systemd, the shell and the kernel say it, by line."""
    exits: dict[str, list[int]] = {}
    for number, text in excerpt.lines.items():
        match = _EXIT.search(text)
        if match:
            exits.setdefault(match.group(0), []).append(number)
    return [
        f"exit: {said} (L{', L'.join(map(str, numbers[:6]))}"
        + (f", {len(numbers) - 6} more)" if len(numbers) > 6 else ")")
        for said, numbers in list(exits.items())[:10]
    ]


def _first_error(diagnosis: Diagnosis, excerpt: Excerpt) -> int | None:
    """The primary finding's first evidence line, by its number in the excerpt."""
    primary = diagnosis.finding(diagnosis.primary)
    if primary is None:
        return None
    for evidence in primary.evidence:
        number = _number_of(evidence.line, evidence.message or evidence.text, excerpt)
        if number is not None:
            return number
    return None


def _number_of(line: int | None, text: str, excerpt: Excerpt) -> int | None:
    if excerpt.source:
        return line
    return next((n for n, shown in excerpt.lines.items() if shown == text), None)


def _candidate_lines(diagnosis: Diagnosis, excerpt: Excerpt) -> list[str]:
    """The tool's findings that carry knowledge the log does not (signatures, known issues,
    release tables, the engine's source): not its reading of the message's own words, which
    the model reads itself and would only be led by."""
    lines = []
    for finding in _ranked(diagnosis):
        if finding.tier == "generic":
            continue
        where = [
            f"L{n}"
            for e in finding.evidence
            if (n := _number_of(e.line, e.message or e.text, excerpt)) is not None
        ]
        lines.append(
            f"- {finding.id} {finding.role.value} [{finding.category}, {finding.severity.value}, "
            f"confidence {finding.confidence.value}, tier {finding.tier}, {finding.signature}]: "
            f"{finding.title}"
        )
        if where:
            lines.append(f"  evidence: {', '.join(dict.fromkeys(where))}")
        if finding.explanation:
            lines.append(f"  why: {_clipped(finding.explanation, WHY_CHARS)}")
        if finding.patch is not None and not finding.patch.is_empty():
            lines.append(f"  fix: {'; '.join(patch_lines(finding.patch))}")
        if finding.package is not None:
            package = finding.package
            lines.append(f"  package: {package.action} {package.name}{package.spec}")
        lines += [f"  host action: {action}" for action in finding.system_actions[:3]]
        if finding.fixed_in:
            lines.append(f"  fixed in: {finding.fixed_in}")
    return lines


def _template_lines(diagnosis: Diagnosis) -> list[str]:
    seen: dict[str, str] = {}
    for finding in _ranked(diagnosis):
        for template in finding.templates:
            first = f", L{template.first_line}" if template.first_line else ""
            seen.setdefault(template.template, f"- {template.count}x{first}: {template.template}")
    return list(seen.values())


def _given_flags(facts: Mapping[str, Any], engine: str, release: str | None) -> list[str]:
    """The flags of the command line, then the settings the engine printed (as flags), then
    the launch values the tool read that are settings of this release (``tp_size``)."""
    flags: list[str] = []
    command = str(facts.get("launch_command") or "")
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    flags += [w.split("=", 1)[0] for w in words if w.startswith("--")]
    settings = str(facts.get("launch_settings") or "")
    if settings and len(settings) < 20000:
        try:
            parsed = ast.literal_eval(settings)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            flags += ["--" + str(key).replace("_", "-") for key in parsed]
    if release is not None:
        table = mined.flag_table(engine, release)
        flags += [option.flags[0] for name in facts if (option := table.setting(name))]
    return list(dict.fromkeys(flags))


def _option_lines(
    engine: str | None, release: str | None, given: list[str], decisive: str
) -> list[str]:
    if engine not in mined.ENGINES or release is None:
        return []
    table = mined.flag_table(engine, release)
    lines = []
    for flag in given:
        lookup = table.lookup(flag)
        if lookup.outcome in ("exact", "abbreviation") and lookup.option is not None:
            lines.append(f"{flag}: {_option_words(lookup.option)}")
            continue
        history = mined.flag_history(engine, flag, release)
        if history is not None:
            then = " ".join(history.successors) or "nothing"
            lines.append(f"{flag}: {history.kind} in {history.gone_in} (now: {then})")
            continue
        added = mined.first_release_with_flag(engine, flag)
        close = table.close_flags(flag) or list(lookup.candidates)
        lines.append(
            f"{flag}: NOT an option of this release"
            + (f" (came in {added})" if added else "")
            + (f"; closest: {', '.join(close)}" if close else "")
        )
    for flag in related_options(engine, release, decisive):
        if flag not in given:
            option = table.lookup(flag).option
            if option is not None:
                lines.append(f"{flag} (the error names it): {_option_words(option)}")
    registry = mined.registries(engine).get(release)
    for dest, kind in _REGISTERED.items():
        names = sorted(getattr(registry, kind, ()))
        option = table.setting(dest)
        if names and option is not None and any(f in decisive for f in option.flags):
            lines.append(f"{option.flags[0]}: the names this release registers: {', '.join(names)}")
    return lines


_REGISTERED = {
    "tool_call_parser": "tool_parsers",
    "reasoning_parser": "reasoning_parsers",
    "quantization": "quantization_methods",
}
"""Options whose values a release registers at run time (not argparse choices)."""


def _option_words(option: mined.FlagOption) -> str:
    words = ["a switch" if "True" in option.action or "False" in option.action else "takes a value"]
    if option.type and not option.type.startswith("_"):
        words[0] += f" ({option.type})"
    if option.choices:
        words.append("choices " + ", ".join(str(c) for c in option.choices[:60]))
    if option.default not in (None, "", False):
        words.append(f"default {option.default}")
    if option.deprecated:
        words.append("deprecated" + (f", use {option.successor}" if option.successor else ""))
    if option.help:
        words.append(" ".join(option.help.split())[:160])
    return "; ".join(words)


def related_options(engine: str, release: str, text: str, limit: int = 8) -> list[str]:
    """This release's flags whose names the words of ``text`` name (``max_model_len``,
    ``kv-cache``), nearest first."""
    table = mined.flag_table(engine, release)
    flags = {f for o in table.options for f in o.flags if f.startswith("--")}
    spoken = " " + " ".join(_WORD.findall(text.lower().replace("_", " "))) + " "
    found = sorted(
        f for f in flags if f.count("-") > 2 and f" {f[2:].replace('-', ' ')} " in spoken
    )
    for identifier in dict.fromkeys(m.lower() for m in _IDENTIFIER.findall(text)):
        spelled = "--" + identifier.replace("_", "-")
        found += difflib.get_close_matches(spelled, sorted(flags), n=2, cutoff=0.8)
        found += sorted(f for f in flags if spelled[2:] in f and len(spelled) > 8)[:2]
    return list(dict.fromkeys(found))[:limit]


def _env_lines(
    engine: str | None, release: str | None, excerpt: Excerpt, decisive: str
) -> list[str]:
    """The variables set in the log or named by the error, as this release reads them; and
    those whose name shares three words with the error."""
    if engine not in mined.ENGINES or release is None:
        return []
    declared = mined.env_vars(engine)
    prefix = engine.upper() + "_"
    text = "\n".join(excerpt.lines.values())
    named = dict.fromkeys(m.group(1) for m in _ENV_ASSIGNMENT.finditer(text))
    named.update(dict.fromkeys(n for n in _ENV_NAME.findall(decisive) if n in declared))
    lines = []
    for name in named:
        if name in declared:
            lines.append(f"{name}: {_env_words(declared[name], release)}")
        elif name.startswith(prefix):
            close = mined.close_env_vars(engine, name)
            lines.append(
                f"{name}: NOT read by {mined.ENGINE_NAMES[engine]}"
                + (f"; closest: {', '.join(close)}" if close else "")
            )
    words = {word for word in _WORD.findall(decisive.lower()) if len(word) > 3}
    scored = []
    for var in declared.values():
        overlap = len(set(var.name.lower().split("_")) - {engine} & words)
        if overlap >= 3 and var.name not in named:
            scored.append((-overlap, var.name))
    for _, name in sorted(scored)[:5]:
        lines.append(f"{name} (its words are in the error): {_env_words(declared[name], release)}")
    return lines


def _env_words(var: mined.EnvVar, release: str) -> str:
    words = [var.type]
    if var.default not in (None, ""):
        words.append(f"default {var.default}")
    if var.choices:
        words.append("choices " + ", ".join(var.choices[:10]))
    if release in var.versions:
        words.append("read by this release")
    elif var.versions:
        words.append(f"NOT read by this release (read in {var.versions[0]} to {var.versions[-1]})")
    return "; ".join(words)


def _issue_lines(diagnosis: Diagnosis, engine: str | None, version: str | None) -> list[str]:
    from diagnose.knowledge.issue_base import builtin_base

    messages = [e.message or e.text for f in _ranked(diagnosis) for e in f.evidence if e.text] + [
        t.template for f in diagnosis.findings for t in f.templates
    ]
    excluded = [u.strip() for u in os.environ.get(EXCLUDE_THREADS_VARIABLE, "").split(",")]
    base = builtin_base().without_threads(u for u in excluded if u)
    lines = []
    for match in base.match(list(dict.fromkeys(messages))[:40], engine, version)[:5]:
        record = match.record
        versions = record.versions
        fixed = f"; fixed in {versions.package} {versions.fixed_in}" if versions and (
            versions.fixed_in) else ""  # fmt: skip
        affected = f"; affects {versions.affected}" if versions and versions.affected else ""
        lines.append(
            f"- {record.id} [{record.category}; this version: {match.version_fit}{fixed}"
            f"{affected}]: {record.title}. Cause: {' '.join(record.cause.split())[:300]}"
        )
    return lines


def _fit_excerpt(
    excerpt: Excerpt, redacted: dict[int, str], anchors: list[int], budget_chars: int
) -> dict[int, str]:
    """The excerpt's lines that fit ``budget_chars``: the evidence lines, then those nearest
    them (before them first: the traceback), the log's head and tail, then the rest."""
    anchor_set = set(anchors)

    def distance(number: int) -> float:
        near = min(
            ((a - number) if number <= a else 3 * (number - a) for a in anchor_set), default=1e9
        )
        edge = min(2 * number, 2 * (excerpt.total - number + 1))
        return min(near, edge)

    chosen: dict[int, str] = {}
    size = 0
    for number in sorted(redacted, key=lambda n: (distance(n), n)):
        cost = len(redacted[number]) + len(str(number)) + 3
        if size + cost > budget_chars:
            continue
        chosen[number] = redacted[number]
        size += cost
    return dict(sorted(chosen.items()))


def _excerpt_section(excerpt: Excerpt, lines: dict[int, str]) -> str:
    whole = len(lines) == excerpt.total
    title = "The whole log" if whole else "Log excerpt (lines nearest the evidence; … marks gaps)"
    out = [f"\n## {title}"]
    previous = 0
    for number, text in lines.items():
        if number != previous + 1:
            out.append("…")
        out.append(f"L{number}: {text}")
        previous = number
    if lines and previous != excerpt.total and not whole:
        out.append("…")
    return "\n".join(out) + "\n"
