"""Secrets out of reports: one layer, applied at the edge of every output.

Two kinds of rule find a secret:

- **by its key**: a value after a name that says it is secret (``api_key``, ``hf_token``,
  ``password``, ``aws_secret_access_key``, ``X-Api-Key``, any case, ``_``/``-``/camelCase), in
  every way a log writes one: Python reprs and dicts (``ServerArgs(api_key='...')``,
  ``{'api_key': '...'}``), JSON (``"password": "..."``), env assignments, headers, YAML, flags
  (``--api-key VALUE``); ``Authorization:`` and ``Bearer``; passwords in URLs
  (``redis://:pw@host``);
- **by its shape**: Hugging Face (``hf_…``), OpenAI-style (``sk-…``), GitHub, GitLab, Slack,
  AWS (``AKIA…``), Google (``AIza…``) and NVIDIA (``nvapi-…``) keys, JWTs, and PEM private-key
  blocks, also when they span lines.

A redacted value becomes ``<redacted:KIND:N>``: the same secret gets the same N within one
report, so two mentions of one token are visibly the same token. ``redact`` first learns
every secret in the whole diagnosis, then replaces each one wherever it occurs, so a value that
a template copied into an explanation or a patch is replaced as well as the log line it came
from.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel

from diagnose.core.models import Diagnosis, Evidence

MAX_SECRET = 512
"""The longest value a key rule takes; a longer one is cut there (the rest is not a key)."""

_SECRET_ENDINGS = (
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "credential",
    "credentials",
    "apikey",
    "auth",
    "cookie",
)
"""A name that ends with one of these (separators and case ignored) holds a secret:
``api_key``, ``HF_TOKEN``, ``aws_secret_access_key``, ``X-Api-Key``, ``accessToken``."""

_NOT_SECRET_NAMES = frozenset({"monkey", "hotkey", "sortkey", "partitionkey", "primarykey"})

_NOT_SECRETS = frozenset({"none", "null", "nil", "true", "false", "empty", "hf_...", "***", "-"})
"""Values that say there is no secret."""

_PLAIN_NUMBER = re.compile(r"[0-9]{1,7}(?:\.[0-9]+)?[a-z%]{0,3}")
"""``first token: 0.52s``, ``key: 3``: a short number is a measurement, not a secret."""

# A name, optionally quoted, then = : or => (a repr, a dict, JSON, YAML, env, a header).
_KEY = re.compile(
    r"(?<![A-Za-z0-9_.$-])(?P<key>[A-Za-z][A-Za-z0-9_.-]{0,63})['\"]?[ \t]*(?:=>|[:=])[ \t]*"
)
# ``--api-key VALUE`` / ``--api-key=VALUE``.
_FLAG = re.compile(r"(?<![A-Za-z0-9_-])--(?P<key>[A-Za-z][A-Za-z0-9_-]{0,63})(?:=|[ \t]+|$)")
_LIST_OPEN = re.compile(r"[\[(][ \t]*(?=['\"])")
_QUOTED = re.compile(rf"""(?P<quote>['"])(?P<secret>[^'"\n]{{1,{MAX_SECRET}}})(?P=quote)""")
_BARE = re.compile(rf"""(?P<secret>[^\s'",;)}}\]&<>]{{1,{MAX_SECRET}}})""")

_OPEN_QUOTED = re.compile(rf"""(?P<quote>['"])(?P<secret>[^'"\n]{{1,{MAX_SECRET}}})$""")
"""A quoted value whose closing quote is on the next line: a terminal wrapped it."""
WRAP_WIDTH = 80
"""A line this long or longer that ends inside a bare secret was wrapped by a terminal (the
narrowest one people use); a shorter one ended where the secret did."""
_BARE_REST = re.compile(r"(?P<secret>[A-Za-z0-9_+/.~-]{1,512}={0,2})(?=[\s'\",;)}\]]|$)")
_LOG_LINE_START = re.compile(r"\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]\d |\[|\(")
"""What a new log line starts with (a date, a bracketed prefix): never a secret's rest."""

_WRAP = r"(?:\n[ \t]*[A-Za-z0-9_+/=-]{1,200}(?=\n|$))?"
"""The rest of a token that a terminal or a logger wrapped onto a line of its own."""

_PEM_BEGIN = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")
_BASE64_LINE = re.compile(r"^[ \t]*(?P<secret>[A-Za-z0-9+/]{40,}={0,2})[ \t]*$", re.MULTILINE)

# (kind, needles, regex); the secret is the group named "secret". A regex runs only on a text
# that holds one of its needles, in lower case: a literal every match holds. It is compiled
# when first needed (``re`` caches it): most reports hold none of the needles.
_SHAPES: list[tuple[str, tuple[str, ...], str]] = [
    ("hf_token", ("hf_",), r"(?P<secret>\bhf_[A-Za-z0-9]{20,}" + _WRAP + ")"),
    (
        "api_key",
        ("sk-",),
        r"(?P<secret>\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}" + _WRAP + ")",
    ),
    (
        "api_key",
        ("gh", "glpat", "xox"),
        (
            r"(?P<secret>\b(?:ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{16,}"
            + _WRAP
            + ")"
        ),
    ),
    ("api_key", ("aiza",), r"(?P<secret>\bAIza[0-9A-Za-z_-]{35}\b)"),
    ("api_key", ("nvapi-",), r"(?P<secret>\bnvapi-[A-Za-z0-9_-]{20,}" + _WRAP + ")"),
    ("aws_key", ("akia", "asia"), r"(?P<secret>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"),
    (
        "jwt",
        ("eyj",),
        r"(?P<secret>\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _WRAP + ")",
    ),
    (
        "bearer",
        ("bearer",),
        r"(?i)\bbearer[ \t]+(?P<secret>(?!<redacted)[A-Za-z0-9._~+/=-]{8,}" + _WRAP + ")",
    ),
    (
        "authorization",
        ("author",),  # not the whole word: (?i) lets U+0130 and U+0131 stand for i
        (
            r"(?i)\b(?:proxy-)?authorization['\"]?[ \t]*[:=][ \t]*['\"]?"
            r"(?:basic[ \t]+|token[ \t]+)?"
            r"(?P<secret>(?!<redacted)(?!bearer\b)[A-Za-z0-9._~+/=-]{8,})"
        ),
    ),
    (
        "url_password",
        ("://",),
        rf"\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]{{1,{MAX_SECRET}}})@",
    ),
]


_PRIORITY = {"secret": 1, "env": 1, "flag": 1}
"""A key rule names its kind only where no shape rule knows better (``HF_TOKEN=hf_…``)."""


def secret_name(name: str) -> bool:
    """Whether a key, flag or variable name says its value is a secret."""
    compact = re.sub(r"[^a-z0-9]", "", name.lower())
    return compact.endswith(_SECRET_ENDINGS) and compact not in _NOT_SECRET_NAMES


def _is_secret_value(value: str) -> bool:
    stripped = value.strip()
    return not (
        not stripped
        or stripped.lower() in _NOT_SECRETS
        or stripped.startswith(("<redacted:", "$", "%", "<", "{", "["))
        or _PLAIN_NUMBER.fullmatch(stripped)
        or "..." in stripped
    )


Span = tuple[int, int, str]
"""Start, end and kind of a secret in a text."""


Cut = tuple[int, str, str]
"""Where a secret that goes on in the next line begins, its kind, and the quote that will
close it (empty for a bare value)."""


@functools.lru_cache(maxsize=4096)
def _secret_spans(value: str) -> tuple[tuple[Span, ...], bool, str | None, Cut | None]:
    """Where ``value`` holds secrets; whether it opens a PEM block that goes on past its end;
    the kind of a secret whose value is on the next line, if one is; a secret cut at the end
    of ``value`` (a wrapped line), if one is. Pure, so cached: ``redact`` reads every text
    twice (learning the secrets, then replacing them)."""
    pem, opens_pem = _pem_spans(value)
    spans = [*pem]
    lowered = value.lower()
    for kind, needles, regex in _SHAPES:
        if not any(needle in lowered for needle in needles):
            continue
        for match in re.finditer(regex, value):
            secret = match.group("secret")
            if _is_secret_value(secret):
                spans.append((*match.span("secret"), kind))
    # a secret name, its separators (_ . -) left out, holds one of the endings
    compact = lowered.replace("_", "").replace(".", "").replace("-", "")
    if not any(ending in compact for ending in _SECRET_ENDINGS):
        return (*spans,), opens_pem, None, _cut(value, spans)
    keyed, awaiting = _key_spans(value)
    return (*spans, *keyed), opens_pem, awaiting, _cut(value, [*spans, *keyed])


def _cut(value: str, spans: list[Span]) -> Cut | None:
    """The secret that ``value`` ends inside, if a terminal cut it there: a quoted value not
    yet closed, or a bare one that fills a line as wide as a terminal."""
    for start, end, kind in spans:
        if end != len(value) or kind == "private_key":
            continue
        if start and value[start - 1] in "'\"" and value[start - 1] not in value[start:]:
            return start, kind, value[start - 1]
        if len(value) >= WRAP_WIDTH:
            return start, kind, ""
    return None


def _pem_spans(value: str) -> tuple[list[Span], bool]:
    """Private-key bodies, and whether the last block goes on past the end of ``value``."""
    spans = []
    opens = False
    for begin in _PEM_BEGIN.finditer(value):
        end = _PEM_END.search(value, begin.end())
        stop = end.start() if end else len(value)
        if stop > begin.end():
            spans.append((begin.end(), stop, "private_key"))
        if end is None:
            opens = True
    for line in _BASE64_LINE.finditer(value):
        secret = line.group("secret")
        if re.search(r"[a-z]", secret) and re.search(r"[A-Z]", secret) and re.search(r"\d", secret):
            spans.append((*line.span("secret"), "private_key"))
    return spans, opens


def _key_spans(value: str) -> tuple[list[Span], str | None]:
    """Values after a secret name or flag, and the kind of the last one whose value is on
    the next line (``--api-key`` at the end of a line)."""
    spans = []
    awaiting = None
    for pattern, kind in ((_KEY, "secret"), (_FLAG, "flag")):
        for match in pattern.finditer(value):
            if not secret_name(match.group("key")):
                continue
            rest = match.end()
            if rest >= len(value) or value[rest] == "\n":
                if value[rest:].strip() == "":
                    awaiting = kind
                found = re.compile(r"[ \t]*\n[ \t]*").match(value, rest)
                if found is None:
                    continue
                rest = found.end()
            listed = _LIST_OPEN.match(value, rest)  # {'api_key': ['...']}
            rest = listed.end() if listed else rest
            quoted = _QUOTED.match(value, rest) or _OPEN_QUOTED.match(value, rest)
            bare = None if quoted else _BARE.match(value, rest)
            secret = quoted or bare
            if secret is None:
                continue
            cut = secret.end("secret") == len(value) and len(value) >= WRAP_WIDTH
            shown = secret.group("secret")
            if not _is_secret_value(shown) and not (cut and _PLAIN_NUMBER.fullmatch(shown)):
                continue  # (a short number is a secret's start where a terminal cut it)
            start = secret.start("secret")
            if value[start : start + 6].lower() == "bearer":
                continue  # the bearer rule takes the token after it
            name = match.group("key")
            named = "env" if kind == "secret" and name.isupper() else kind
            spans.append((*secret.span("secret"), named))
    return spans, awaiting


class Redactor:
    """Redacts strings, remembering which secret got which placeholder."""

    def __init__(self) -> None:
        self._placeholders: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._known: re.Pattern[str] | None = None
        self._in_pem = False
        self._awaiting_value: str | None = None
        self._cut: tuple[str, str, str] | None = None
        """The kind, closing quote and first part of a secret the last line ended inside."""

    # -- placeholders ----------------------------------------------------------------------

    def _placeholder(self, kind: str, secret: str) -> str:
        """The secret's placeholder; ``counts`` counts distinct secrets, not mentions."""
        if secret not in self._placeholders:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self._placeholders[secret] = f"<redacted:{kind}:{self.counts[kind]}>"
            self._known = None
        return self._placeholders[secret]

    def learn(self, values: Iterable[Any]) -> None:
        """Find the secrets in ``values`` (placeholders are numbered in this order) without
        changing anything, so that ``text`` also replaces them where no rule would see them."""
        for value in values:
            self.value(value)
        self._in_pem = False
        self._awaiting_value = None
        self._cut = None

    # -- strings ---------------------------------------------------------------------------

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        spans, opens_pem, awaiting, cut = _secret_spans(value)
        self._cut = (cut[1], cut[2], value[cut[0] :]) if cut is not None else None
        if opens_pem:
            self._in_pem = True  # the block goes on in the next line
        if awaiting is not None:
            self._awaiting_value = awaiting  # the value is on the next line
        out, last = [], 0
        for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1], _PRIORITY.get(s[2], 0))):
            if start < last:
                continue  # inside a span already replaced
            secret = value[start:end]
            out += [value[last:start], self._placeholder(kind, secret)]
            last = end
        out.append(value[last:])
        return self._replace_known("".join(out))

    def lines(self, lines: Iterable[str]) -> list[str]:
        """Consecutive lines of one log: a PEM block or a secret's value may go on past a
        line's end (``--api-key`` at the end of one line, the value at the start of the next)."""
        return [self.line(line) for line in lines]

    def line(self, line: str) -> str:
        """The next line of a log read line by line (``watch``): see ``lines``."""
        if self._in_pem:
            end = _PEM_END.search(line)
            if end is None:
                return self._placeholder("private_key", line) if line.strip() else line
            self._in_pem = False
            body = line[: end.start()]
            hidden = self._placeholder("private_key", body) if body.strip() else body
            return hidden + self.text(line[end.start() :])
        awaiting, self._awaiting_value = self._awaiting_value, None
        cut, self._cut = self._cut, None
        if cut is not None:
            line = self._rest_of(cut, line)
        if awaiting is not None:
            first = re.match(r"[ \t]*(?P<secret>[^\s'\",;)}\]]+)", line)
            if first and _is_secret_value(first.group("secret")):
                begin, stop = first.span("secret")
                line = line[:begin] + self._placeholder(awaiting, line[begin:stop]) + line[stop:]
        return self.text(line)

    def _rest_of(self, cut: tuple[str, str, str], line: str) -> str:
        """``line`` with the start that completes a secret cut at the end of the line before
        (up to its closing quote, or a bare token) hidden as that secret is."""
        kind, quote, first = cut
        if quote:
            rest = re.match(rf"(?P<secret>[^{quote}\n]{{1,{MAX_SECRET}}}){quote}", line)
        else:
            rest = None if _LOG_LINE_START.match(line) else _BARE_REST.match(line)
        if rest is None:
            return line
        placeholder = self._placeholder(kind, first)
        if len(rest.group("secret")) >= 6:
            self._placeholders.setdefault(rest.group("secret"), placeholder)
            self._known = None
        return placeholder + line[rest.end("secret") :]

    def _replace_known(self, value: str) -> str:
        """Every secret learnt so far, wherever it occurs (a value a template copied)."""
        if not self._placeholders:
            return value
        if self._known is None:
            secrets = sorted((s for s in self._placeholders if len(s) >= 6), key=len, reverse=True)
            self._known = (
                re.compile("|".join(map(re.escape, secrets))) if secrets else re.compile("(?!)")
            )
        return self._known.sub(lambda m: self._placeholders[m.group(0)], value)

    # -- models ----------------------------------------------------------------------------

    def value(self, value: Any) -> Any:
        if isinstance(value, Enum):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return self._items(value)
        if isinstance(value, dict):
            return {key: self._entry(key, item) for key, item in value.items()}
        if isinstance(value, BaseModel):
            return self._model(value, {})
        return value

    def _model(self, model: BaseModel, done: dict[str, Any]) -> BaseModel:
        """A copy of ``model`` with its fields redacted (those in ``done`` already are)."""
        fields = [name for name in type(model).model_fields if name not in done]
        return model.model_copy(
            update={**{name: self.value(getattr(model, name)) for name in fields}, **done}
        )

    def _items(self, items: list[Any]) -> list[Any]:
        """A list; the texts of consecutive evidence lines are read as lines of one log."""
        if items and all(
            isinstance(i, BaseModel) and isinstance(getattr(i, "text", None), str) for i in items
        ):
            done: list[dict[str, Any]] = [{} for _ in items]
            # evidence of a journal export: its text is the JSON line, its message the line
            names = ("message", "text") if all(isinstance(i, Evidence) for i in items) else ()
            for name in names or ("text",):
                values = [getattr(item, name) for item in items]
                shown = self.lines(value or "" for value in values)
                for update, value, text in zip(done, values, shown, strict=True):
                    update[name] = None if value is None else text
                self._in_pem, self._awaiting_value, self._cut = False, None, None
            return [self._model(item, update) for item, update in zip(items, done, strict=True)]
        return [self.value(item) for item in items]

    def _entry(self, key: Any, item: Any) -> Any:
        if isinstance(key, str) and isinstance(item, str) and secret_name(key):
            kind = "env" if key.isupper() else "secret"
            return self._placeholder(kind, item) if _is_secret_value(item) else item
        return self.value(item)


def redact(diagnosis: Diagnosis) -> Diagnosis:
    """The same diagnosis with every secret replaced, and the counts of what was replaced."""
    redactor = Redactor()
    bare = diagnosis.model_copy(update={"redactions": {}})
    redactor.learn([bare])
    cleaned = redactor.value(bare)
    return cleaned.model_copy(update={"redactions": dict(sorted(redactor.counts.items()))})
