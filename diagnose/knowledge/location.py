"""Where the shipped knowledge lives on disk: the one module every tier reads it through, and
the bottom of the knowledge package (it imports none of the others)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

ANCHORS_NAME = "anchors.json"
"""The anchors alone, read on every run to choose the lines worth keeping; the index itself
is read only when no hand signature decided."""


def knowledge_dir() -> Path:
    """``knowledge/`` as installed (``diagnose/_knowledge``) or beside the source tree."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_knowledge"
    return installed if installed.is_dir() else package.parent / "knowledge"


def records_dir() -> Path:
    return knowledge_dir() / "known-issues"


@cache
def builtin_anchors() -> frozenset[str]:
    """The anchors of the shipped known-issue records (a line holding one is kept)."""
    path = records_dir() / ANCHORS_NAME
    if not path.is_file():
        return frozenset()
    return frozenset(json.loads(path.read_text(encoding="utf-8")))


@cache
def flag_vocabulary(engine: str) -> frozenset[str]:
    """Every long flag any mined release of ``engine`` defines (empty when none was mined):
    read without the release tables, for a fix whose release is not known."""
    path = knowledge_dir() / "mined" / engine / "flag_vocabulary.json"
    if not path.is_file():
        return frozenset()
    return frozenset(json.loads(path.read_text(encoding="utf-8")))


def defined_by_some_release(engine: str, flag: str) -> bool:
    """Whether some mined release of ``engine`` defines ``flag`` (SGLang's parser reads only
    dashes, vLLM's reads ``_`` as ``-``); True where nothing was mined for ``engine``."""
    vocabulary = flag_vocabulary(engine)
    dashed = "--" + flag[2:].replace("_", "-")
    return not vocabulary or flag in vocabulary or (engine == "vllm" and dashed in vocabulary)
