"""The assistant for a run of ``diagnose file`` or ``diagnose journal``: the digest (which lines
it quotes, which unit facts it holds), whether to ask, and the drop-in made again with the
model's finding in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.assistant.answer import Release
from diagnose.assistant.ask import second_opinion, wants_answer
from diagnose.assistant.config import DEFAULT_TOKEN_BUDGET, AssistantSettings
from diagnose.assistant.digest import (
    HEAD_LINES,
    TAIL_LINES,
    Digest,
    build_digest,
    evidence_excerpt,
    wanted_lines,
)
from diagnose.core.changes import with_plan
from diagnose.core.models import Diagnosis
from diagnose.inputs.excerpt import read_excerpt
from diagnose.inputs.files import LogInput
from diagnose.knowledge import mined
from diagnose.runs.journal import JournalResult
from diagnose.systemd.patching import earlier_fixes, patched_against_unit
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


def release_of(
    diagnosis: Diagnosis, facts: Mapping[str, Any], given: tuple[str, str] | None
) -> Release:
    """The engine and version the answer is checked against: as given, else as the log says."""
    if given is not None:
        return Release(*given)
    engine = diagnosis.engine or next((e for e in mined.ENGINES if facts.get(f"{e}_version")), None)
    return Release(engine, facts.get(f"{engine}_version") if engine else None)


def file_opinion(
    diagnosis: Diagnosis,
    facts: Mapping[str, Any],
    arguments: list[str],
    settings: AssistantSettings,
    ask: bool,
    given: tuple[str, str] | None,
) -> Diagnosis:
    """``diagnose file``'s report with the model's checked finding, when it is to be asked."""
    if not wants_answer(ask, settings, diagnosis):
        return diagnosis
    digest = file_digest(diagnosis, facts, arguments, settings.token_budget)
    release = release_of(diagnosis, facts, given)
    return second_opinion(diagnosis, digest, settings, release, with_plan)


def journal_opinion(result: JournalResult, settings: AssistantSettings, ask: bool) -> Diagnosis:
    """``diagnose journal``'s report with the model's checked finding, its drop-in rendered
    against the unit as the deterministic one is."""
    diagnosis = result.diagnosis
    if not wants_answer(ask, settings, diagnosis):
        return diagnosis
    config = result.config
    options = result.options

    def replan(changed: Diagnosis) -> Diagnosis:
        if config is None:
            return with_plan(changed)
        user = options is not None and options.user
        root = options.root if options is not None else None
        unit_file = options.unit_file if options is not None else None
        earlier, head = ([], "") if user else earlier_fixes(config.name, root, unit_file)
        return patched_against_unit(changed, config, [], earlier, head)

    digest = journal_digest(diagnosis, result.facts, config, settings.token_budget)
    given = options.engine_version if options is not None else None
    release = release_of(diagnosis, result.facts, given)
    return second_opinion(diagnosis, digest, settings, release, replan)
