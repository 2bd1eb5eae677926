"""The tiers below the hand signatures: a known issue from resolved public threads, then the
engine's own message templates. Each turns the incident's decisive messages into findings that
say where their knowledge came from (``tier``) and carry lower confidence than a signature."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from diagnose.core.explain import Candidate, IncidentView
from diagnose.core.expr import Arithmetic, format_number
from diagnose.core.models import (
    PLACEHOLDER,
    Confidence,
    Finding,
    PackageAction,
    Patch,
    Role,
    Severity,
)
from diagnose.knowledge import mined
from diagnose.knowledge.issue_base import (
    IssueBase,
    KnownIssueMatch,
    builtin_base,
)
from diagnose.knowledge.known_issues import KnownIssue


def _read_by_a_tier(record: KnownIssue) -> bool:
    """The record says an engine's flag or release tables read its message: the tier below
    that reads them names the flag and the release, so the record gives way to it."""
    return record.covered_by in mined.ARGPARSE_READINGS | mined.RELEASE_TABLES


_HOLE_REF = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
MAX_ALTERNATIVES = 2


def known_issue_findings(
    incident: IncidentView, exclude_threads: Iterable[str] = (), base: IssueBase | None = None
) -> list[Finding]:
    """The best known issue for the incident as a finding (other close ones named in it)."""
    candidates = incident.candidates
    engine, engine_version = incident.engine, incident.engine_version
    base = builtin_base() if base is None else base
    excluded = [url for url in exclude_threads if url]
    if excluded:
        base = base.without_threads(excluded)
    texts = [c.text for c in candidates]
    matches = _kept(base.match(texts, engine, engine_version))
    if not matches:
        return []
    best = matches[0]
    if _RAISE_STATEMENT.match(texts[best.position]):
        # the traceback's code line that raises it; the message it raised, where the log has it
        printed = [("" if _RAISE_STATEMENT.match(t) else t) for t in texts]
        same = [
            m
            for m in _kept(base.match(printed, engine, engine_version))
            if m.record.id == best.record.id
        ]
        best = same[0] if same else best
    others = [m for m in matches[1:] if m.record.category != best.record.category]
    return [_finding(best, candidates[best.position], engine_version, others[:MAX_ALTERNATIVES])]


_RAISE_STATEMENT = re.compile(r"\s*raise\s+[\w.]+\(")
"""A traceback's source line that raises the message (``raise ValueError(f"...")``)."""


def _kept(matches: Iterable[KnownIssueMatch]) -> list[KnownIssueMatch]:
    """Matches of the engine in the log (or of either), and of a generic message only where
    the log's release is one the record affects."""
    return [
        m
        for m in matches
        if m.version_fit != "other-engine"
        and (m.version_fit == "affected" or not m.record.message.generic)
    ]


def _finding(
    match: KnownIssueMatch,
    candidate: Candidate,
    engine_version: str | None,
    others: list[KnownIssueMatch],
) -> Finding:
    record = match.record
    values = _with_derived(record, match.values)
    patch, unresolved = _patch(record, values)
    package = _package(record, values)
    stay = None
    if match.version_fit == "affected" and record.versions and record.versions.fixed_in:
        # the log shows a release the issue affects: the release that fixed it is the fix,
        # and the record's own change keeps the installed release working
        fixed = PackageAction(
            name=record.versions.package, spec=f">={record.versions.fixed_in}", action="upgrade"
        )
        if package is not None and package != fixed:
            stay = (
                f"To stay on this release instead: {package.action} `{package.name}{package.spec}`."
            )
        package = fixed
    explanation = [
        f"A known issue, distilled from resolved public threads: {record.cause.strip()}",
        f"The decisive message: `{candidate.text.strip()[:300]}`.",
    ]
    explanation += _version_sentences(record, match, engine_version)
    if package is not None:
        explanation.append(f"The fix: {package.action} `{package.name}{package.spec}`.")
    notes = [n for n in (stay, record.fix.note, *unresolved) if n]
    return Finding(
        id="f0",
        signature=record.id,
        category=record.category,
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title=record.title,
        explanation=" ".join(explanation),
        confidence=(
            Confidence.LOW
            if match.version_fit == "fixed" or match.open_ended or _read_by_a_tier(record)
            else Confidence.MEDIUM
        ),
        evidence=[candidate.evidence],
        patch=patch,
        patch_note=" ".join(notes) or None,
        next_checks=[f"{c.check} (confirms: {c.value})" for c in record.conditions],
        alternatives=[
            f"{m.record.title} ({m.record.category}; {m.record.threads[0].url})" for m in others
        ],
        references=[thread.url for thread in record.threads],
        phase=candidate.phase,
        fixed_in=(
            f"{record.versions.package} {record.versions.fixed_in}"
            if record.versions and record.versions.fixed_in
            else None
        ),
        applies_to=(
            f"{record.versions.package} {record.versions.affected}"
            if record.versions and record.versions.affected
            else None
        ),
        tier="known_issue",
        package=package,
        system_actions=[_fill(s, values) for s in record.fix.system],
    )


def _version_sentences(
    record: KnownIssue, match: KnownIssueMatch, engine_version: str | None
) -> list[str]:
    versions = record.versions
    if versions is None:
        return []
    said = []
    if versions.affected:
        said.append(f"It affects {versions.package} {versions.affected}.")
    if versions.fixed_in:
        said.append(f"Fixed in {versions.package} {versions.fixed_in}.")
    if match.version_fit == "fixed" and engine_version:
        said.append(
            f"This log shows version {engine_version}, outside the affected range: the match is "
            "weaker, and the cause may be another."
        )
    return said


def _with_derived(record: KnownIssue, values: Mapping[str, str]) -> Mapping[str, str]:
    """The message's values with the record's derived ones (``fix.derive``) added; one whose
    holes the log did not fill stays out, so the setting naming it is left unapplied."""
    if not record.fix.derive:
        return values
    derived = dict(values)
    for name, expression in record.fix.derive.items():
        value = Arithmetic(expression).value(values)
        if value is not None:
            derived[name] = format_number(value)
    return derived


def _fill(text: str, values: Mapping[str, str]) -> str:
    return _HOLE_REF.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _patch(record: KnownIssue, values: Mapping[str, str]) -> tuple[Patch | None, list[str]]:
    """The record's configuration change with the log's values filled in; a part whose hole
    the log did not fill is left out of the patch and said in words instead (a ``<...>`` value
    only the user knows stays: the patch is shown and not applied until it is filled in)."""
    fix = record.fix
    unresolved: list[str] = []

    def usable(text: str) -> bool:
        if _HOLE_REF.search(text):  # a hole of the message the log did not fill
            unresolved.append(f"Set by hand: `{text}`.")
            return False
        return True

    settings = [_fill(setting, values) for setting in fix.args_add]
    args_add = [t for s in settings for t in _words(s)] if all(map(usable, settings)) else []
    env_set = {k: _fill(v, values) for k, v in fix.env_set.items()}
    env_set = {k: v for k, v in env_set.items() if usable(f"{k}={v}")}
    unit_set = {k: _fill(v, values) for k, v in fix.unit_set.items()}
    unit_set = {k: v for k, v in unit_set.items() if usable(f"{k}={v}")}
    patch = Patch(
        env_set=env_set,
        env_unset=list(fix.env_unset),
        args_add=args_add,
        args_remove=list(
            dict.fromkeys(f for s in fix.args_remove for f in _flags(_fill(s, values)))
        ),
        unit_set=unit_set,
    )
    return (None if patch.is_empty() else patch), unresolved


def _flags(text: str) -> list[str]:
    """The flags a filled ``args_remove`` entry names (``--task embedding`` names ``--task``);
    a ``<placeholder>`` stays whole."""
    if text.startswith("<"):
        return [text]
    return [word for word in text.split() if word.startswith("-")]


def _words(setting: str) -> list[str]:
    """``--flag value`` as command-line words (a ``<placeholder>`` or a value that does not
    parse as shell words, such as a quoted text with an apostrophe, stays one word)."""
    holes = PLACEHOLDER.findall(setting)
    masked = PLACEHOLDER.sub("\0", setting)  # a placeholder's spaces are not word breaks
    try:
        words = shlex.split(masked)
    except ValueError:
        words = masked.split(maxsplit=1)
    filled = iter(holes)
    return [re.sub("\0", lambda _: next(filled), word) for word in words]


def _package(record: KnownIssue, values: Mapping[str, str]) -> PackageAction | None:
    """The record's package change, its version filled in from the log (a version the log
    did not show is left out: the newest release is then the one to take)."""
    change = record.fix.package
    if change is None:
        return None
    spec = _fill(change.spec, values)
    spec = "" if _HOLE_REF.search(spec) else spec
    return PackageAction(name=change.name, spec=spec, action=change.action)
