"""The known-issue base: records compiled into one index, matched against decisive messages.

The YAML records under ``knowledge/known-issues/`` are the source; ``known-issues.json`` beside
them is their compiled index (``diagnose known-issues build`` writes it, a test keeps it in
sync), so a diagnosis reads one JSON file instead of hundreds of YAML files, and only when no
hand signature has explained the incident.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import regex
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from diagnose.knowledge.known_issues import _HOLE, KnownIssue, load_record
from diagnose.knowledge.location import records_dir

INDEX_NAME = "known-issues.json"
"""Read only when no hand signature decided (the anchors alone, ``ANCHORS_NAME``, are read on
every run to choose the lines worth keeping)."""
_HOLE_PATTERNS = {
    "int": r"-?\d+",
    "float": r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?",
    "word": r"\S+",
    "path": r"(?!-)\S+",  # a word that starts with a dash is a flag, never a path
    "hex": r"(?:0[xX])?[0-9a-fA-F]+",
    "any": r".*?",
}
_MATCH_TIMEOUT_S = 0.05
_WORD = regex.compile(r"[a-z0-9_]+")
_SPACES = regex.compile(r"\s+")
LOOSE_MIN_WORDS = 12
"""A wording read word for word (case, quotes and punctuation aside) must have at least this
many words: with fewer, a loose match says little."""
CUT_SHORT_MIN_CHARS = 24
"""A message read as the start of a wording (a quote that stops after its first clause) must
be at least this long: a shorter start says little."""
EXCEPTION_PREFIX = regex.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit)\w*: )+")
"""The exception classes a message is printed after (``RuntimeError: ``, chained ones too)."""
LOOSE_KEY_WORDS = 4
"""The first words of a wording's anchor that a message must hold, in order, before it is
compared word for word."""


class Wording:
    """One wording of a record's message: its longest fixed run (the anchor, which must be in a
    message before the regex runs), how much fixed text it has, and its regex, compiled on the
    first message that holds the anchor."""

    __slots__ = ("_loose", "_pattern", "anchor", "fixed_chars", "head", "open_holes", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.open_holes = frozenset(
            hole.group("name")
            for hole in _HOLE.finditer(text)
            if hole.group("name") and (hole.group("type") or "any") == "any"
        )
        """Holes that take any text (a whole argument list), not a number, path or word."""
        runs = _fixed_runs(text)
        self.anchor = max((_SPACES.sub(" ", run) for run in runs), key=len, default="")
        self.head = _SPACES.sub(" ", runs[0]).strip()
        """The fixed text before the first hole."""
        self.fixed_chars = sum(len(run.strip()) for run in runs)
        self._pattern: regex.Pattern[str] | None = None
        self._loose: tuple[str, tuple[str, ...]] | None = None

    @property
    def loose(self) -> tuple[str, tuple[str, ...]]:
        """Its words, lower-cased, and the first of its anchor's (a message must hold them
        before the words are compared): made when a message is first read loosely."""
        if self._loose is None:
            words = tuple(_WORD.findall(" ".join(_fixed_runs(self.text)).lower()))
            key = " ".join(_WORD.findall(self.anchor.lower())[:LOOSE_KEY_WORDS])
            self._loose = (key, words)
        return self._loose

    def cut_after_a_hole(self, message: str) -> bool:
        """Whether ``message`` is this wording cut short after its first hole, at a word's end
        (``..., Required: 106496, Hardware limit`` of ``..., Required: {required:int}, Hardware
        limit: {limit:int}``): each shorter start of the wording is tried as a whole match."""
        start = message.find(self.head) if self.head else -1
        if start < 0 or not _CLASS_PREFIX.fullmatch(message[:start]):
            return False  # the wording starts the message, after the exception's class only
        message = message[start:]
        first_hole = _HOLE.search(self.text)
        if first_hole is None or len(message) <= len(self.head):
            return False
        ends = [m.end() for m in _WORD_END.finditer(self.text, first_hole.end())]
        return any(_shorter(self.text[:end]).fullmatch(message) for end in reversed(ends))

    @property
    def pattern(self) -> regex.Pattern[str]:
        if self._pattern is None:
            self._pattern = compile_template(self.text)
        return self._pattern


_WORD_END = regex.compile(r"\w(?=\W|$)")
"""Where a word of a wording ends (a cut-short message stops at one)."""
_CLASS_PREFIX = regex.compile(r"(?:[A-Za-z_][\w.]*: )*")
"""What may come before a message: the exception classes it is printed after."""


@cache
def _shorter(start: str) -> regex.Pattern[str]:
    """A wording's start as a whole-message pattern (a start that ends in a hole ends there)."""
    return compile_template(start)


def _fixed_runs(template: str) -> list[str]:
    runs, position = [], 0
    for hole in _HOLE.finditer(template):
        runs.append(template[position : hole.start()])
        if hole.group(0) in ("{{", "}}"):
            runs[-1] += hole.group(0)[0]
        position = hole.end()
    return [*runs, template[position:]]


def compile_template(template: str) -> regex.Pattern[str]:
    """A template with typed holes as a regex over one message (whitespace re-spaced).

    >>> pattern = compile_template("CUDA error: {what} (code {code:int})")
    >>> pattern.search("RuntimeError: CUDA error: out of memory (code 2)").group("code")
    '2'
    """
    return compile_holes(
        template,  # a hole that ends the template takes the rest of the line
        lambda kind, last: (
            ".*" if last and kind in (None, "any") else _HOLE_PATTERNS[kind or "any"]
        ),
    )


def compile_holes(template: str, body_of: Callable[[str | None, bool], str]) -> regex.Pattern[str]:
    """A ``{name}`` / ``{name:type}`` template as a regex over one re-spaced message: literal
    runs escaped (``{{``/``}}`` are braces), each hole the pattern ``body_of(type, last)``
    gives (``last``: the template ends with it); a name met again matches without a group."""
    parts: list[str] = []
    names: set[str] = set()
    position = 0
    holes = list(_HOLE.finditer(template))
    for number, hole in enumerate(holes):
        literal = template[position : hole.start()]
        position = hole.end()
        if hole.group(0) in ("{{", "}}"):
            parts.append(_literal(literal + hole.group(0)[0]))
            continue
        parts.append(_literal(literal))
        last = number == len(holes) - 1 and not template[position:].strip()
        body = body_of(hole.group("type"), last)
        name = hole.group("name")
        parts.append(f"(?P<{name}>{body})" if name not in names else f"(?:{body})")
        names.add(name)
    parts.append(_literal(template[position:]))
    return regex.compile("".join(parts))


def _literal(text: str) -> str:
    """A literal run, its whitespace as one space (messages are matched re-spaced)."""
    return regex.escape(_SPACES.sub(" ", text))


class IssueEntry:
    """A record of the base: validated when first needed (the shipped index was validated
    when it was built), with its wordings ready to match."""

    __slots__ = ("_raw", "_record", "engine", "id", "thread_urls", "wordings")

    def __init__(self, raw: Mapping[str, Any] | None = None, record: KnownIssue | None = None):
        self._raw, self._record = raw, record
        data: Mapping[str, Any] = raw if raw is not None else record.model_dump()  # type: ignore[union-attr]
        message = data["message"]
        self.id: str = data["id"]
        self.engine: str = data["engine"]
        self.thread_urls = frozenset(thread["url"] for thread in data["threads"])
        self.wordings = tuple(Wording(t) for t in (message["template"], *message.get("also", ())))

    @property
    def record(self) -> KnownIssue:
        if self._record is None:
            self._record = KnownIssue.model_validate(self._raw)
        return self._record


@dataclass(frozen=True)
class KnownIssueMatch:
    """A record whose message is in the incident, with how well the incident fits it."""

    record: KnownIssue
    message: str
    values: dict[str, str]
    version_fit: str  # "affected", "fixed", "unknown", "other-engine"
    specificity: int = 0
    position: int = 0
    own_engine: bool = False
    """The record is about the engine the incident shows (not any engine's)."""
    open_ended: bool = False
    """One hole of any text holds most of the message: the record names a class of message
    (any unrecognized flag), and what the log says in that hole may name more."""

    @classmethod
    def of(
        cls,
        record: KnownIssue,
        message: str,
        values: dict[str, str],
        specificity: int,
        position: int,
        engine: str | None,
        engine_version: str | None,
        open_holes: frozenset[str] = frozenset(),
    ) -> KnownIssueMatch:
        """The match of ``record`` on ``message``, judged against the incident's engine."""
        widest = max(  # words, not one value (a URL, an id) or a list of values that is long
            (
                len(values[name])
                for name in open_holes
                if len(values.get(name, "").split()) > 1 and values[name].lstrip()[:1] not in "[{("
            ),
            default=0,
        )
        return cls(
            record=record,
            message=message,
            values=values,
            version_fit=_version_fit(record, engine, engine_version),
            specificity=specificity,
            position=position,
            own_engine=engine is not None and record.engine == engine,
            open_ended=2 * widest > len(message.strip()),
        )

    @property
    def rank_key(self) -> tuple[int, int, int, int]:
        fit = {"affected": 3, "unknown": 2, "fixed": 1, "other-engine": 0}[self.version_fit]
        return (fit, int(self.own_engine), -self.position, self.specificity)


class IssueBase:
    """The records, matched against an incident's decisive messages."""

    def __init__(self, records: Iterable[KnownIssue] = (), entries: Iterable[IssueEntry] = ()):
        self.entries = (*entries, *(IssueEntry(record=record) for record in records))

    @property
    def anchors(self) -> frozenset[str]:
        """Every wording's anchor: a line holding none of them matches no record."""
        return frozenset(w.anchor for e in self.entries for w in e.wordings if w.anchor)

    def without_threads(self, urls: Iterable[str]) -> IssueBase:
        """The base less every record drawn from one of ``urls`` (leave-one-thread-out)."""
        excluded = {url.rstrip("/") for url in urls if url}
        return IssueBase(entries=[e for e in self.entries if not (e.thread_urls & excluded)])

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
            for entry in self.entries:
                if entry.id in found:
                    continue
                for wording in entry.wordings:
                    if wording.anchor not in message:
                        continue
                    hit = _search(wording.pattern, message)
                    if hit is None:
                        continue
                    values = {k: v for k, v in hit.groupdict().items() if v is not None}
                    found[entry.id] = KnownIssueMatch.of(
                        entry.record,
                        original,
                        values,
                        wording.fixed_chars,
                        position,
                        engine,
                        engine_version,
                        wording.open_holes,
                    )
                    break
        if not found:
            found = self._loose(messages, engine, engine_version)
        if not found:
            found = self._cut_short(messages, engine, engine_version)
        return sorted(found.values(), key=lambda m: m.rank_key, reverse=True)

    def _cut_short(
        self, messages: Sequence[str], engine: str | None, engine_version: str | None
    ) -> dict[str, KnownIssueMatch]:
        """Records whose wording begins with a whole message, up to a word's end: the message
        was quoted only up to its first clause (``CUDA_HOME environment variable is not set``
        of ``... is not set. Please set it to your CUDA install root.``), a line was cut after
        a value (only a record of any engine, or of the log's), or its rest is on lines the log
        shows apart. Nothing is bound."""
        found: dict[str, KnownIssueMatch] = {}
        for position, original in enumerate(messages):
            message = EXCEPTION_PREFIX.sub("", " ".join(original.split())).rstrip(" .:;,")
            if len(message) < CUT_SHORT_MIN_CHARS:
                continue
            for entry in self.entries:
                cut = any(
                    (
                        w.head.startswith(message)
                        and not w.head[len(message) : len(message) + 1].isalnum()
                    )
                    or (entry.record.engine in ("any", engine) and w.cut_after_a_hole(message))
                    for w in entry.wordings
                )
                if entry.id in found or not cut:
                    continue
                found[entry.id] = KnownIssueMatch.of(
                    entry.record, original, {}, len(message), position, engine, engine_version
                )
        return found

    def _loose(
        self, messages: Sequence[str], engine: str | None, engine_version: str | None
    ) -> dict[str, KnownIssueMatch]:
        """Records whose long wording a message holds word for word, in order, case, quoting
        and punctuation aside (a log that lower-cased or re-quoted the text). Nothing is bound:
        the fix's holes are left to the user."""
        found: dict[str, KnownIssueMatch] = {}
        for position, original in enumerate(messages):
            said = _WORD.findall(original.lower())
            spoken = " ".join(said)
            for entry in self.entries:
                for wording in entry.wordings:
                    key, wanted = wording.loose
                    if len(wanted) < LOOSE_MIN_WORDS or key not in spoken:
                        continue
                    if entry.id in found or common_words(wanted, said) < len(wanted):
                        continue
                    found[entry.id] = KnownIssueMatch.of(
                        entry.record,
                        original,
                        {},
                        wording.fixed_chars,
                        position,
                        engine,
                        engine_version,
                    )
        return found


def common_words(first: Sequence[str], second: Sequence[str]) -> int:
    """How many words ``first`` and ``second`` hold in the same order (difflib's matching
    blocks): a message read against a template whatever its case, quotes and punctuation."""
    matcher = difflib.SequenceMatcher(None, first, second, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def _search(pattern: regex.Pattern[str], message: str) -> regex.Match[str] | None:
    try:
        return pattern.search(message, timeout=_MATCH_TIMEOUT_S)
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
    return IssueBase(entries=[IssueEntry(raw=item) for item in payload["records"]])


def anchors_payload(records: Sequence[KnownIssue]) -> str:
    """The anchors of ``records`` as JSON text (stable bytes)."""
    return json.dumps(sorted(IssueBase(records).anchors), indent=0, ensure_ascii=False) + "\n"
