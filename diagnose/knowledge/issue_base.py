"""The known-issue base: records compiled into one index, matched against decisive messages.

The YAML records under ``knowledge/known-issues/`` are the source; ``known-issues.json`` beside
them is their compiled index (``diagnose known-issues build`` writes it, a test keeps it in
sync), so a diagnosis reads one JSON file instead of hundreds of YAML files, and only when no
hand signature has explained the incident.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import regex
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from diagnose.knowledge.known_issues import _HOLE, KnownIssue, load_record

INDEX_NAME = "known-issues.json"
_HOLE_PATTERNS = {
    "int": r"-?\d+",
    "float": r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?",
    "word": r"\S+",
    "path": r"\S+",
    "hex": r"(?:0[xX])?[0-9a-fA-F]+",
    "any": r".*?",
}
_MATCH_TIMEOUT_S = 0.05


def knowledge_dir() -> Path:
    """``knowledge/`` as installed (``diagnose/_knowledge``) or beside the source tree."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_knowledge"
    return installed if installed.is_dir() else package.parent / "knowledge"


def records_dir() -> Path:
    return knowledge_dir() / "known-issues"


@dataclass(frozen=True)
class CompiledTemplate:
    """One wording of a record's message: a regex, the longest fixed run (its anchor, which
    must be in a line before the regex runs) and how much fixed text it has."""

    text: str
    pattern: regex.Pattern[str]
    anchor: str
    fixed_chars: int


def compile_template(template: str) -> CompiledTemplate:
    """A template with typed holes as a regex over one message.

    >>> compiled = compile_template("CUDA error: {what} (code {code:int})")
    >>> compiled.anchor
    'CUDA error: '
    >>> compiled.pattern.search("RuntimeError: CUDA error: out of memory (code 2)").group("code")
    '2'
    """
    parts: list[str] = []
    fixed_runs: list[str] = []
    names: set[str] = set()
    position = 0
    for hole in _HOLE.finditer(template):
        literal = template[position : hole.start()]
        position = hole.end()
        if hole.group(0) in ("{{", "}}"):
            literal += hole.group(0)[0]
            parts.append(_literal(literal))
            fixed_runs.append(literal)
            continue
        parts.append(_literal(literal))
        fixed_runs.append(literal)
        name = hole.group("name")
        kind = hole.group("type") or "any"
        body = _HOLE_PATTERNS[kind]
        parts.append(f"(?P<{name}>{body})" if name not in names else f"(?:{body})")
        names.add(name)
    parts.append(_literal(template[position:]))
    fixed_runs.append(template[position:])
    source = "".join(parts)
    anchor = max((regex.sub(r"\s+", " ", run) for run in fixed_runs), key=len, default="")
    return CompiledTemplate(
        text=template,
        pattern=regex.compile(source),
        anchor=anchor,
        fixed_chars=sum(len(run.strip()) for run in fixed_runs),
    )


def _literal(text: str) -> str:
    """A literal run, its whitespace as one space (messages are matched re-spaced)."""
    return regex.escape(regex.sub(r"\s+", " ", text))


@dataclass(frozen=True)
class CompiledIssue:
    record: KnownIssue
    templates: tuple[CompiledTemplate, ...]

    @property
    def thread_urls(self) -> frozenset[str]:
        return frozenset(thread.url for thread in self.record.threads)


@dataclass(frozen=True)
class KnownIssueMatch:
    """A record whose message is in the incident, with how well the incident fits it."""

    record: KnownIssue
    message: str
    values: dict[str, str]
    version_fit: str  # "affected", "fixed", "unknown", "other-engine"
    conditions_unknown: tuple[str, ...] = field(default=())
    specificity: int = 0
    position: int = 0

    @property
    def rank_key(self) -> tuple[int, int, int, int]:
        fit = {"affected": 3, "unknown": 2, "fixed": 1, "other-engine": 0}[self.version_fit]
        own_engine = int(self.record.engine != "any" and self.version_fit != "other-engine")
        return (fit, own_engine, -self.position, self.specificity)


class IssueBase:
    """The compiled records, matched against an incident's decisive messages."""

    def __init__(self, records: Iterable[KnownIssue]) -> None:
        self.issues = tuple(
            CompiledIssue(
                record,
                tuple(
                    compile_template(text)
                    for text in (record.message.template, *record.message.also)
                ),
            )
            for record in records
        )

    def without_threads(self, urls: Iterable[str]) -> IssueBase:
        """The base less every record drawn from one of ``urls`` (leave-one-thread-out)."""
        excluded = {url.rstrip("/") for url in urls if url}
        kept = [i.record for i in self.issues if not (i.thread_urls & excluded)]
        return IssueBase(kept)

    def match(
        self,
        messages: Sequence[str],
        engine: str | None = None,
        engine_version: str | None = None,
    ) -> list[KnownIssueMatch]:
        """Records whose message is one of ``messages`` (earliest first in the incident),
        best first: records at a version they affect, the engine's own before any engine's,
        then the earliest message (a cause comes before its consequences), then the most
        specific wording."""
        found: dict[str, KnownIssueMatch] = {}
        for position, original in enumerate(messages):
            message = " ".join(original.split())  # as a wrapped or re-spaced log shows it
            for issue in self.issues:
                record = issue.record
                if record.id in found:
                    continue
                for template in issue.templates:
                    if template.anchor not in message:
                        continue
                    hit = _search(template, message)
                    if hit is None:
                        continue
                    found[record.id] = KnownIssueMatch(
                        record=record,
                        message=original,
                        values={k: v for k, v in hit.groupdict().items() if v is not None},
                        version_fit=_version_fit(record, engine, engine_version),
                        conditions_unknown=tuple(c.check for c in record.conditions),
                        specificity=template.fixed_chars,
                        position=position,
                    )
                    break
        return sorted(found.values(), key=lambda m: m.rank_key, reverse=True)


def _search(template: CompiledTemplate, message: str) -> regex.Match[str] | None:
    try:
        return template.pattern.search(message, timeout=_MATCH_TIMEOUT_S)
    except TimeoutError:
        return None


def _version_fit(record: KnownIssue, engine: str | None, engine_version: str | None) -> str:
    if record.engine != "any" and engine is not None and record.engine != engine:
        return "other-engine"
    versions = record.versions
    if versions is None or engine_version is None or versions.package != (engine or record.engine):
        return "unknown"
    try:
        version = Version(engine_version)
    except InvalidVersion:
        return "unknown"
    if versions.fixed_in:
        try:
            if version >= Version(versions.fixed_in):
                return "fixed"
        except InvalidVersion:
            pass
    if versions.affected:
        try:
            return "affected" if version in SpecifierSet(versions.affected) else "fixed"
        except InvalidSpecifier:
            return "unknown"
    return "affected" if versions.fixed_in else "unknown"


def load_records(directory: Path) -> list[KnownIssue]:
    """Every record under ``directory``, in path order."""
    return [load_record(path) for path in sorted(directory.rglob("*.yaml"))]


def index_payload(records: Sequence[KnownIssue]) -> str:
    """The compiled index of ``records`` as JSON text (stable bytes for the same records)."""
    data = [record.model_dump(mode="json", exclude_defaults=True) for record in records]
    return json.dumps({"records": data}, sort_keys=True, indent=0, ensure_ascii=False) + "\n"


@cache
def builtin_base() -> IssueBase:
    """The shipped base, from its compiled index (empty when none is shipped)."""
    index = records_dir() / INDEX_NAME
    if not index.is_file():
        return IssueBase(())
    payload: Mapping[str, Any] = json.loads(index.read_text(encoding="utf-8"))
    return IssueBase(KnownIssue.model_validate(item) for item in payload["records"])
