"""The engine-source index: the error templates an engine or library release can raise, keyed
so that one message costs one dict lookup per word before any regex runs.

``knowledge/mined/<source>/templates.jsonl.gz`` holds every template the miner found (8 MB of
JSON for the three sources, a tenth of a second and more to read). A diagnosis needs only the
few whose words are in its decisive messages, so ``build_index`` compiles each source into
``knowledge/source-index/<source>.idx``:

* one line of header JSON: the source's versions and, per *key word*, the rows that hold it;
  a template's key is the rarest whole word of its fixed text, so a message's words select a
  few dozen rows out of thousands;
* the rows (text, where it is raised, which versions), in zlib chunks of ``CHUNK_ROWS``: only
  the chunks a message selects are ever decompressed.
* the source's own classes (those with a method the miner read) and the module of each: a
  message that names one is about the source's own code.

Only error templates are kept (raises, assertions, error and critical logs), one row per
distinct text. ``scripts/build_source_index.py`` writes the files; a test keeps them in sync
with the mined templates. Nothing is read until the engine-source tier is asked.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import regex

from diagnose.knowledge.issue_base import (
    EXCEPTION_PREFIX,
    common_words,
    compile_holes,
)
from diagnose.knowledge.known_issues import _HOLE
from diagnose.knowledge.location import knowledge_dir

SOURCES = ("sglang", "vllm", "libraries")
MAGIC = b"diagnose-source-index 1\n"
CHUNK_ROWS = 32
GENERIC_FIXED_CHARS = 15
"""A template with fewer fixed characters is generic: it only matches a whole message."""
HEAD_FIXED_CHARS = 24
"""A message cut short (a multi-line message's first line, a truncated quote) may match the
start of a template whose fixed text before the first hole is at least this long."""
CUT_VALUE_CHARS = 40
"""In a message cut short, the longest value a hole may take."""
REWORDED_MIN_WORDS = 8
"""A message reworded by another release must have at least this many words to be read as
a template's (with fewer, a shared start says little)."""
REWORDED_MAX_MISSING = 2
"""Words of a reworded message that the template may lack (a value, a word changed)."""
ELSEWHERE_KEPT = 4
"""The most other modules a template row names that write its text too."""
_WORD = re.compile(r"[A-Za-z0-9_]+")
_CLASS_NAME = re.compile(r"[A-Z]\w*")
_ERROR_LEVELS = frozenset({"error", "critical"})
_HOLE_PATTERNS = {"int": r"-?\d+", "float": r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"}
_MATCH_TIMEOUT_S = 0.05


def index_dir() -> Path:
    return knowledge_dir() / "source-index"


@dataclass(frozen=True)
class SourceTemplate:
    """One error template of a source as the index keeps it."""

    id: str
    text: str
    exception: str | None
    level: str
    kind: str
    module: str
    function: str
    startup: bool
    versions: tuple[str, ...]
    source: str
    elsewhere: tuple[str, ...] = ()
    """The other modules that write this same text (a check each model's file repeats), at
    most ``ELSEWHERE_KEPT`` of them."""

    @property
    def fixed_chars(self) -> int:
        return sum(len(run.strip()) for run in fixed_runs(self.text))

    @property
    def generic(self) -> bool:
        return self.fixed_chars < GENERIC_FIXED_CHARS

    @property
    def anchor(self) -> str:
        """The longest fixed run, re-spaced: it must be in a message before the regex runs."""
        runs = [" ".join(run.split()) for run in fixed_runs(self.text)]
        return max(runs, key=len, default="")


def fixed_runs(template: str) -> list[str]:
    """The literal text between a template's holes (``{{`` and ``}}`` read as braces)."""
    runs, position = [""], 0
    for hole in _HOLE.finditer(template):
        runs[-1] += template[position : hole.start()]
        position = hole.end()
        if hole.group(0) in ("{{", "}}"):
            runs[-1] += hole.group(0)[0]
        else:
            runs.append("")
    runs[-1] += template[position:]
    return runs


def _head(template: str) -> str | None:
    """The fixed text before the first hole, when it is long enough to stand for the template
    in a message cut short."""
    runs = fixed_runs(template)
    head = " ".join(runs[0].split())
    return head if len(runs) > 1 and len(head) >= HEAD_FIXED_CHARS else None


def _bounded_words(template: str, head_only: bool = False) -> set[str]:
    """Words of the fixed text that a message holds whole whatever fills the holes: a word at
    the edge of a run may be glued to a hole's value."""
    runs = fixed_runs(template)
    found = set()
    for index, run in enumerate(runs[:1] if head_only else runs):
        for word in _WORD.finditer(run):
            left = word.start() > 0 or index == 0
            right = word.end() < len(run) or index == len(runs) - 1
            text = word.group(0)
            if left and right and len(text) >= 3 and not text.isdigit():
                found.add(text)
    return found


def message_words(message: str) -> set[str]:
    return set(_WORD.findall(message))


_PYDANTIC_ERROR = regex.compile(
    r"^\d+ validation errors? for \w+ (?:[\w.]+ )?(?:Value|Assertion) error, (?P<message>.*?)"
    r"(?: \[type=\w+, input_value=.*)?$"
)
"""pydantic's wrapping of a validator's message: its header, the field, the kind of error before
it, and the input after it (``1 validation error for ModelConfig Value error, MSG [type=...``)."""


def strip_exception(message: str) -> str:
    """A message without the ``ValueError: `` its traceback line starts with, and without
    pydantic's wrapping where a validator raised it."""
    bare = EXCEPTION_PREFIX.sub("", message, count=1)
    wrapped = _PYDANTIC_ERROR.match(bare)
    return wrapped.group("message") if wrapped else bare


def compile_pattern(template: str) -> regex.Pattern[str]:
    """A template as a regex over one re-spaced message; a hole at the end takes the rest."""
    return compile_holes(
        template, lambda kind, last: _HOLE_PATTERNS.get(kind or "", r".*" if last else r".*?")
    )


# -- building ----------------------------------------------------------------------------


def _kept(row: Mapping[str, Any]) -> bool:
    return (row["level"] in _ERROR_LEVELS or row["kind"] in ("raise", "assert")) and bool(
        _bounded_words(row["text"])
    )


def _distinct(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per text, versions merged, the other modules that write it listed: named after
    where the newest release writes it (then the start-up path's first), as a report should
    say."""
    by_text: dict[str, dict[str, Any]] = {}

    def newest_first(row: Mapping[str, Any]) -> tuple[Any, ...]:
        newest = max((_version_key(v) for v in row["versions"]), default=())
        return (tuple(-part for part in newest), not row["startup"], row["module"], row["id"])

    order = sorted(rows, key=newest_first)
    for row in order:
        seen = by_text.get(row["text"])
        if seen is None:
            by_text[row["text"]] = {**row, "versions": list(row["versions"]), "elsewhere": []}
            continue
        if row["module"] != seen["module"] and row["module"] not in seen["elsewhere"]:
            seen["elsewhere"].append(row["module"])
        seen["versions"] = sorted(set(seen["versions"]) | set(row["versions"]))
    for row in by_text.values():
        row["elsewhere"] = sorted(row["elsewhere"])[:ELSEWHERE_KEPT]
    return sorted(by_text.values(), key=lambda r: r["id"])


def build_index(source: str, rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The compiled index of one source's template rows (the same rows give the same bytes)."""
    kept = _distinct(r for r in rows if _kept(r))
    versions = sorted({v for r in kept for v in r["versions"]}, key=_version_key)
    bit = {version: 1 << i for i, version in enumerate(versions)}
    words = [_bounded_words(r["text"]) for r in kept]
    frequency = Counter(w for found in words for w in found)
    key_of = [min(found, key=lambda w: (frequency[w], -len(w), w)) for found in words]
    order = sorted(range(len(kept)), key=lambda n: (key_of[n], kept[n]["id"]))
    kept = [kept[n] for n in order]  # a key's rows side by side: one chunk to read
    keys: dict[str, list[int]] = {}
    heads: dict[str, list[int]] = {}
    for number, n in enumerate(order):
        keys.setdefault(key_of[n], []).append(number)
        head_words = _bounded_words(kept[number]["text"], head_only=True)
        if _head(kept[number]["text"]) and head_words:
            head_key = min(head_words, key=lambda w: (frequency[w], -len(w), w))
            heads.setdefault(head_key, []).append(number)
    compact = [
        [
            r["id"],
            r["text"],
            r.get("exception"),
            r["level"],
            r["kind"],
            r["module"],
            r["function"],
            int(r["startup"]),
            sum(bit[v] for v in r["versions"]),
            r["elsewhere"],
        ]
        for r in kept
    ]
    chunks, offsets, position = [], [], 0
    for start in range(0, len(compact), CHUNK_ROWS):
        data = json.dumps(compact[start : start + CHUNK_ROWS], ensure_ascii=False).encode()
        chunk = zlib.compress(data, 9)
        chunks.append(chunk)
        offsets.append([position, len(chunk)])
        position += len(chunk)
    header = {
        "source": source,
        "versions": versions,
        "rows": len(compact),
        "chunk_rows": CHUNK_ROWS,
        "chunks": offsets,
        "keys": dict(sorted(keys.items())),
        "heads": dict(sorted(heads.items())),
    }
    header["classes"] = source_classes(rows)
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    return MAGIC + head + b"\n" + b"".join(chunks)


def source_classes(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each class a method of which the source's rows name (``Scheduler.__init__``), with the
    module that defines it (the first by id where several do)."""
    classes: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        owner = row["function"].partition(".")[0]
        if "." in row["function"] and _CLASS_NAME.fullmatch(owner):
            classes.setdefault(owner, row["module"])
    return dict(sorted(classes.items()))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() and len(p) <= 18 else 0 for p in version.split("."))


# -- reading ----------------------------------------------------------------------------


class SourceIndex:
    """One source's compiled index: rows decompressed a chunk at a time, when first asked."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(MAGIC):
            raise ValueError("not a diagnose source index")
        end = data.index(b"\n", len(MAGIC))
        header = json.loads(data[len(MAGIC) : end])
        self.source: str = header["source"]
        self.versions: tuple[str, ...] = tuple(header["versions"])
        self.size: int = header["rows"]
        self._keys: dict[str, list[int]] = header["keys"]
        self._heads: dict[str, list[int]] = header["heads"]
        self._chunk_rows: int = header["chunk_rows"]
        self._spans: list[list[int]] = header["chunks"]
        self.classes: dict[str, str] = header.get("classes", {})
        """The source's own classes and the module of each."""
        self._body = memoryview(data)[end + 1 :]
        self._chunks: dict[int, list[list[Any]]] = {}
        self._patterns: dict[int, regex.Pattern[str]] = {}

    def candidates(self, words: Iterable[str], heads: bool = False) -> list[int]:
        """Rows whose key word (or, with ``heads``, the key word of their head) is one of
        ``words``."""
        keys = self._heads if heads else self._keys
        found: set[int] = set()
        for word in words:
            found.update(keys.get(word, ()))
        return sorted(found)

    def row(self, number: int) -> SourceTemplate:
        chunk_no, offset = divmod(number, self._chunk_rows)
        chunk = self._chunks.get(chunk_no)
        if chunk is None:
            start, length = self._spans[chunk_no]
            chunk = json.loads(zlib.decompress(self._body[start : start + length]))
            self._chunks[chunk_no] = chunk
        id_, text, exception, level, kind, module, function, startup, mask, elsewhere = chunk[
            offset
        ]
        versions = tuple(v for i, v in enumerate(self.versions) if mask >> i & 1)
        return SourceTemplate(
            id_, text, exception, level, kind, module, function, bool(startup), versions,
            self.source, tuple(elsewhere),
        )  # fmt: skip

    def rows(self) -> list[SourceTemplate]:
        return [self.row(number) for number in range(self.size)]

    def pattern(self, number: int, text: str) -> regex.Pattern[str]:
        found = self._patterns.get(number)
        if found is None:
            found = self._patterns[number] = compile_pattern(text)
        return found

    def unquoted_pattern(self, number: int, text: str) -> regex.Pattern[str]:
        """The row's pattern with the quotes of its fixed text left out (keyed apart)."""
        return self.pattern(-1 - number, unquoted(text))


@dataclass(frozen=True)
class TemplateHit:
    template: SourceTemplate
    values: dict[str, str]
    message: str
    cut_short: bool = False
    """The message matches only the template's start: the log shows its first line, or a
    truncated copy."""
    reworded: bool = False
    """The message is the template as another release words it: it begins alike and has the
    template's words in order, a clause more or less."""


def match_message(index: SourceIndex, message: str) -> list[TemplateHit]:
    """The templates of ``index`` that ``message`` is an instance of, most specific first: a
    generic one only when it is the whole message (its exception class aside)."""
    spaced = " ".join(message.split())
    whole = strip_exception(spaced)
    hits = []
    words = message_words(spaced)
    for number in index.candidates(words):
        template = index.row(number)
        if template.anchor not in spaced:
            continue
        pattern = index.pattern(number, template.text)
        if template.generic:
            found = _search(pattern.fullmatch, whole)
        else:  # without its exception class first: a leading hole would take it in
            found = _search(pattern.search, whole, spaced)
        if found is not None and not _sentence_goes_on(template.text, found):
            hits.append(TemplateHit(template, _bound(found), message))
    if not hits or all(2 * h.template.fixed_chars < len(whole) for h in hits):
        # none, or only templates whose holes took most of the message (``{type} is not
        # supported.``): a longer template the message is cut or requoted from says more
        strongest = max((h.template.fixed_chars for h in hits), default=0)
        more = (
            _requoted(index, words, whole, message)
            or _cut_short(index, words, whole, message)
            or _reworded(index, words, whole, message)
        )
        hits = [h for h in more if h.template.fixed_chars > strongest] or hits
    return sorted(hits, key=lambda h: (-h.template.fixed_chars, h.template.id))


_GOES_ON = re.compile(r" [a-z]")


def _sentence_goes_on(text: str, found: regex.Match[str]) -> bool:
    """A template that ends in fixed words, found where the message's sentence goes on with
    another word (``An unexpected error occurred`` in ``An unexpected error occurred while
    talking to vLLM``): another program's sentence that begins alike, not this message."""
    return text[-1:].isalnum() and _GOES_ON.match(found.string, found.end()) is not None


_QUOTES = re.compile("[`'\"\u2018\u2019\u201c\u201d]")


def unquoted(text: str) -> str:
    """``text`` without quote characters: releases quote a name with backticks, quotes or not
    at all, and a page the log was copied from renders backticks away."""
    return _QUOTES.sub("", text)


def _search(method: Callable[..., regex.Match[str] | None], *texts: str) -> regex.Match[str] | None:
    """The first of ``texts`` that ``method`` (a pattern's search or fullmatch) matches within
    the time allowed for one message."""
    for text in texts:
        try:
            found = method(text, timeout=_MATCH_TIMEOUT_S)
        except TimeoutError:
            continue
        if found is not None:
            return found
    return None


def _bound(found: regex.Match[str]) -> dict[str, str]:
    return {k: v.strip() for k, v in found.groupdict().items() if v is not None}


def _requoted(index: SourceIndex, words: set[str], whole: str, message: str) -> list[TemplateHit]:
    """Templates the message is an instance of once quotes are left out of both."""
    bare = unquoted(whole)
    hits = []
    for number in index.candidates(words):
        template = index.row(number)
        text = unquoted(template.text)
        if template.generic or (text == template.text and bare == whole):
            continue  # nothing quoted on either side: the plain match already said no
        if max((" ".join(run.split()) for run in fixed_runs(text)), key=len) not in bare:
            continue
        found = _search(index.unquoted_pattern(number, template.text).search, bare)
        if found is not None and not _sentence_goes_on(text, found):
            hits.append(TemplateHit(template, _bound(found), message))
    return hits


def _cut_short(index: SourceIndex, words: set[str], whole: str, message: str) -> list[TemplateHit]:
    """Templates the message begins like and ends inside of: it continues on lines the log
    shows apart, or was cut (quotes left out of both where the log has none). Values the
    message does not reach are left unbound."""
    hits = []
    bare = unquoted(whole)
    for number in index.candidates(words, heads=True):
        template = index.row(number)
        readings = [(template.text, whole, index.pattern)]
        if unquoted(template.text) != template.text or bare != whole:  # quotes the log dropped
            readings.append((unquoted(template.text), bare, index.unquoted_pattern))
        for text, said, pattern in readings:
            head = _head(text)
            if head is None or head not in said:
                continue
            try:
                found = pattern(number, template.text).search(
                    said, partial=True, timeout=_MATCH_TIMEOUT_S
                )
            except TimeoutError:
                found = None
            if found is None or not found.partial or found.start() != 0:
                continue  # the message must begin as the template does
            values = _values_cut_short(text, said)
            if values is None or any(len(v) > CUT_VALUE_CHARS for v in values.values()):
                continue  # a hole that swallowed the rest of an unrelated line
            hits.append(TemplateHit(template, values, message, cut_short=True))
            break
    return hits


def _reworded(index: SourceIndex, words: set[str], whole: str, message: str) -> list[TemplateHit]:
    """Templates the message begins like and follows word for word, but for a clause the
    template has and the message lacks (or up to ``REWORDED_MAX_MISSING`` words the other way):
    the same check as a release that was not mined words it. Only the first hole is bound."""
    said = _WORD.findall(whole.lower())
    if len(said) < REWORDED_MIN_WORDS:
        return []
    hits = []
    for number in index.candidates(words, heads=True):
        template = index.row(number)
        head = _head(template.text)
        if head is None or not whole.startswith(head):
            continue
        fixed = _WORD.findall(" ".join(fixed_runs(template.text)).lower())
        if len(said) - common_words(said, fixed) > REWORDED_MAX_MISSING:
            continue
        value = re.match(r"[^\s,;]+", whole[len(head) :].lstrip())
        first = next(
            (h.group("name") for h in _HOLE.finditer(template.text) if h.group("name")), None
        )
        values = {first: value.group(0)} if first and value else {}
        hits.append(TemplateHit(template, values, message, reworded=True))
    return hits


def _values_cut_short(template: str, message: str) -> dict[str, str] | None:
    """The holes a message cut short fills: the longest part of the template that matches its
    beginning whole, then the next hole takes what is left, less the start of the text that
    follows that hole (``--frac=0.88.`` against ``--frac={frac}. Raise...`` gives ``0.88``)."""
    holes = [h for h in _HOLE.finditer(template) if h.group(0) not in ("{{", "}}")]
    for number in range(len(holes) - 1, -1, -1):
        hole = holes[number]
        found = compile_pattern(template[: hole.start()]).match(message)
        if found is None:
            continue
        rest = message[found.end() :]
        after = " ".join(fixed_runs(template[hole.end() :])[0].split())
        cut = next((n for n in range(len(rest)) if after.startswith(rest[n:])), len(rest))
        values = {k: v.strip() for k, v in found.groupdict().items() if v is not None}
        if rest[:cut].strip():
            values[hole.group("name")] = rest[:cut].strip()
        return values
    return None


@cache
def builtin_index(source: str) -> SourceIndex | None:
    """The shipped index of ``source``, read on first use (None when none is shipped)."""
    path = index_dir() / f"{source}.idx"
    return SourceIndex(path.read_bytes()) if path.is_file() else None
