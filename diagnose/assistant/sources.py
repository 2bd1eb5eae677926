"""The digest of a run of ``diagnose file`` or ``diagnose journal``: which lines it quotes and
which unit facts it holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.assistant.digest import (
    DEFAULT_TOKEN_BUDGET,
    HEAD_LINES,
    TAIL_LINES,
    Digest,
    build_digest,
    evidence_excerpt,
    wanted_lines,
)
from diagnose.core.models import Diagnosis
from diagnose.inputs.excerpt import read_excerpt
from diagnose.inputs.files import LogInput
from diagnose.systemd.unit import UnitConfig


def file_digest(
    diagnosis: Diagnosis,
    facts: Mapping[str, Any],
    arguments: list[str],
    budget_tokens: int = DEFAULT_TOKEN_BUDGET,
) -> Digest:
    """The digest of saved logs: lines quoted from the file that holds the primary finding's
    evidence (the first file when none does); stdin, read once, is quoted by its evidence."""
    logs = [LogInput.from_argument(a) for a in arguments if a != "-"]
    primary = diagnosis.finding(diagnosis.primary)
    sources = {e.source for e in primary.evidence} if primary else set()
    log = next((log for log in logs if log.name in sources), logs[0] if logs else None)
    if log is None:
        excerpt = evidence_excerpt(diagnosis)
    else:
        excerpt = read_excerpt(log, wanted_lines(diagnosis), HEAD_LINES, TAIL_LINES)
    return build_digest(diagnosis, facts, excerpt, budget_tokens=budget_tokens)


def journal_digest(
    diagnosis: Diagnosis,
    facts: Mapping[str, Any],
    config: UnitConfig | None,
    budget_tokens: int = DEFAULT_TOKEN_BUDGET,
) -> Digest:
    """The digest of a journal diagnosis: its evidence lines and the unit as configured."""
    settings = (
        [f"[{s.section}] {s.key}={s.value}" for s in config.settings] if config is not None else []
    )
    return build_digest(
        diagnosis, facts, evidence_excerpt(diagnosis), settings, budget_tokens=budget_tokens
    )
