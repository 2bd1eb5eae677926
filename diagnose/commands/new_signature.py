"""``diagnose signatures new --from FILE``: a draft signature from an incident nothing explains.

The engine reads the log; the first unexplained error (an exception line first, else the
earliest error template) becomes the match: its longest literal part the needle, the rest a
regex whose numbers, ids, paths and addresses are named groups. The draft carries a positive
example (that line), a negative one (a healthy line of the same log) and a fixture with the
incident's evidence, all redacted, and TODO markers where a person has to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from diagnose.core.errors import UserError
from diagnose.core.incident import is_error_line
from diagnose.core.models import Diagnosis
from diagnose.core.redact import Redactor
from diagnose.inputs.lineformat import LineParser

_PIECES = re.compile(
    r"(?P<id>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<addr>\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b)"
    r"|(?P<path>(?<![\w.])(?:~|\.{1,2})?(?:/[\w.@+%=,-]+)+/?)"
    r"|(?P<hex>\b0x[0-9a-fA-F]+\b)"
    r"|(?P<num>(?<![\w])\d+(?:\.\d+)?)"
)
_GROUP_REGEX = {
    "id": r"[0-9a-fA-F-]{36}",
    "addr": r"[\d.]+(?::\d+)?",
    "path": r"\S+",
    "hex": r"0x[0-9a-fA-F]+",
    "num": r"\d+(?:\.\d+)?",
}
_EXCEPTION = re.compile(r"\b[A-Za-z_.]*(?:Error|Exception)\b:")
_SPECIAL = re.compile(r"([.^$*+?{}\[\]\\|()])")


def _escape(literal: str) -> str:
    """``re.escape`` that leaves spaces and punctuation readable."""
    return _SPECIAL.sub(r"\\\1", literal)


@dataclass
class Draft:
    signature: Path
    fixture: Path
    id: str


def regex_of(message: str) -> tuple[str, list[str]]:
    """A regex for ``message`` (literals escaped, variable parts as named groups) and its
    literal pieces, longest first."""
    parts: list[str] = []
    literals: list[str] = []
    counts: dict[str, int] = {}
    position = 0
    for found in _PIECES.finditer(message):
        kind = found.lastgroup or "num"
        literal = message[position : found.start()]
        parts.append(_escape(literal))
        literals.append(literal)
        counts[kind] = counts.get(kind, 0) + 1
        parts.append(f"(?P<{kind}{counts[kind]}>{_GROUP_REGEX[kind]})")
        position = found.end()
    parts.append(_escape(message[position:]))
    literals.append(message[position:])
    pieces = sorted({p.strip() for p in literals if len(p.strip()) >= 4}, key=len, reverse=True)
    return "".join(parts).strip(), pieces


def _slug(text: str) -> str:
    words = re.findall(r"[a-z][a-z0-9]+", text.lower())
    slug = "-".join(words[:6])[:48].strip("-")
    return slug or "unknown-incident"


def _salient(diagnosis: Diagnosis, lines: list[str]) -> int:
    """The line number of the error to build the match from."""
    primary = diagnosis.finding(diagnosis.primary)
    candidates = [t for t in (primary.templates if primary else []) if t.first_line]
    if not candidates:
        raise UserError(
            "no unexplained error lines in the log: nothing to draft a signature from",
            help="`diagnose file` shows what the library already recognises in it",
        )
    exceptions = [t for t in candidates if _EXCEPTION.search(t.template)]
    chosen = min(exceptions or candidates, key=lambda t: t.first_line or 0)
    assert chosen.first_line is not None and chosen.first_line <= len(lines)
    return chosen.first_line


class _Literal(str):
    """A string YAML writes as a ``|`` block."""


def _literal(dumper: yaml.SafeDumper, value: _Literal) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Literal, _literal)


def draft(
    path: Path,
    diagnosis: Diagnosis,
    signature_id: str | None,
    out: Path,
) -> Draft:
    """Write ``out/<id>.yaml`` and ``out/<id>.log``; refuse to overwrite either."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None
    number = _salient(diagnosis, lines)
    parser = LineParser(str(path), 2026)
    record = parser.parse(number, lines[number - 1])
    message = (record.text if record else lines[number - 1]).strip()
    redactor = Redactor()
    message = redactor.text(message)
    regex, pieces = regex_of(message)
    if not pieces:
        raise UserError(
            f"{path}:{number}: the error line has no literal text to match on",
            help="start from `diagnose signatures show python-exception-unexplained`",
        )
    exc = _EXCEPTION.search(message)
    identifier = signature_id or _slug(exc.group(0) if exc else pieces[0])
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", identifier):
        raise UserError(f"--id {identifier!r}: use lowercase letters, digits and dashes")
    signature_path, fixture_path = out / f"{identifier}.yaml", out / f"{identifier}.log"
    for existing in (signature_path, fixture_path):
        if existing.exists():
            raise UserError(
                f"{existing}: already exists; not overwritten",
                help="pass another --id or --out, or remove the file",
            )
    healthy = next(
        (
            line
            for line in lines
            if (parsed := parser.parse(None, line)) is not None
            and parsed.origin == "app"
            and parsed.text.strip()
            and not is_error_line(parsed)
            and not re.search(regex, parsed.text)
            and "Traceback" not in line
        ),
        None,
    )
    positive = redactor.text(lines[number - 1])
    negative = redactor.text(healthy) if healthy else "[2026-01-01 00:00:00] TODO: a healthy line"
    primary = diagnosis.finding(diagnosis.primary)
    evidence = sorted({e.line for e in (primary.evidence if primary else []) if e.line} | {number})
    fixture = "".join(redactor.text(lines[n - 1]) + "\n" for n in evidence if n <= len(lines))
    data: dict[str, Any] = {
        "title": f"TODO: one line on what failed ({message[:60]})",
        "engines": [diagnosis.engine or "any"],
        "category": "unknown",
        "severity": "error",
        "confidence": "medium",
        "match": {"type": "line", "needles": [pieces[0]], "regex": regex},
        "explanation": [
            f"TODO: say what was seen, why it fails and what to change. The log said: {message}"
        ],
        "patch_note": "TODO: the configuration change that fixes it (then add `patches:`), "
        "or why no configuration change helps.",
        "next_checks": ["TODO: a command that confirms or rules out this cause."],
        "references": ["TODO: link the upstream issue or documentation"],
        "examples": {
            "positive": [{"name": "from-incident", "log": _Literal(positive + "\n"), "lines": [1]}],
            "negative": [{"name": "healthy-line", "log": _Literal(negative + "\n")}],
        },
    }
    header = (
        f"# Drafted by `diagnose signatures new --from {path}` (line {number}).\n"
        f"# Finish the TODOs, then check it: diagnose signatures test {out}\n"
        f"# The reduced incident is in {fixture_path.name}.\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    signature_path.write_text(header + text, encoding="utf-8")
    fixture_path.write_text(fixture, encoding="utf-8")
    return Draft(signature_path, fixture_path, identifier)
