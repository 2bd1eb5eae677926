"""Tables that are not in Python: CUDA and NCCL result codes from the published headers, errno
names, and the fixed strings of native libraries (``.so`` files inside wheels)."""

from __future__ import annotations

import errno
import os
import re

ENUM_ENTRY = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>-?\d+)\s*,?", re.M)
DOC_COMMENT = re.compile(r"/\*\*(?P<body>.*?)\*/", re.S)
TRAILING_COMMENT = re.compile(r"/\*\*<(?P<body>.*?)\*/", re.S)
PRINTABLE_RUN = re.compile(rb"[\x20-\x7e]{16,400}")
# A native string worth keeping reads like a sentence: words, spaces, few symbols.
SENTENCE = re.compile(r"^[A-Za-z%\[(][^\x00]*[a-z]{3,}[^\x00]* [^\x00]*[a-z]{2,}")
NOT_PROSE = re.compile(
    r"(_Z[A-Za-z0-9_]{6,}|\.(cpp|cu|cc|h|hpp):|/[a-z_]+/[a-z_]+/|GLIBC|GCC:|\\x)"
)


def _first_sentence(comment: str) -> str:
    text = " ".join(line.strip(" *\t") for line in comment.splitlines()).strip()
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\\(ref|p|c|b|e|note|deprecated)\s*", "", text)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def enum_codes(header: str, enum_name: str, prefix: str) -> list[dict[str, object]]:
    """Entries ``NAME = VALUE`` of one C enum, each with the first sentence of its comment."""
    start = header.find(enum_name)
    if start < 0:
        return []
    if header[:start].rstrip().endswith("}"):  # typedef enum { ... } name;
        body_end = header[:start].rstrip().rindex("}")
        body_start = header.rfind("{", 0, body_end)
    else:  # enum name { ... };
        body_start = header.find("{", start)
        body_end = header.find("}", body_start)
    body = header[body_start + 1 : body_end]
    entries = []
    last = 0
    for match in ENUM_ENTRY.finditer(body):
        if not match.group("name").startswith(prefix):
            continue
        comments = DOC_COMMENT.findall(body[last : match.start()])
        trailing = TRAILING_COMMENT.match(body[match.end() :].lstrip())
        doc = trailing.group("body") if trailing else (comments[-1] if comments else "")
        entries.append(
            {
                "code": int(match.group("value")),
                "name": match.group("name"),
                "doc": _first_sentence(doc),
            }
        )
        last = match.end()
    return sorted(entries, key=lambda entry: (entry["code"], entry["name"]))


def errno_table() -> list[dict[str, object]]:
    """Linux errno names, numbers and the C library's message for each."""
    return [
        {"code": code, "name": name, "message": os.strerror(code)}
        for code, name in sorted(errno.errorcode.items())
    ]


def native_strings(binary: bytes, limit: int) -> list[str]:
    """Sentence-like fixed strings of a shared library, in first-seen order, at most ``limit``."""
    seen: dict[str, None] = {}
    for match in PRINTABLE_RUN.finditer(binary):
        text = match.group().decode("ascii").strip()
        if len(text) < 16 or NOT_PROSE.search(text) or not SENTENCE.match(text):
            continue
        letters = sum(ch.isalpha() or ch == " " for ch in text)
        if letters < 0.75 * len(text):
            continue
        seen.setdefault(text, None)
        if len(seen) >= limit:
            break
    return list(seen)
