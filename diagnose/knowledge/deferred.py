"""The knowledge tiers as the engine is given them: their needles at once (a small JSON list),
their code and data only when a run asks them, so a run a hand signature decides never
imports the tiers, their schemas or their YAML."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from diagnose.core.explain import IncidentView
from diagnose.core.models import Finding

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


@dataclass(frozen=True)
class KnownIssueTier:
    """``tiers.KnownIssueExplainer`` over the shipped base, imported when first asked."""

    exclude_threads: tuple[str, ...] = ()

    @property
    def needles(self) -> frozenset[str]:
        return builtin_anchors()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.tiers import KnownIssueExplainer

        return KnownIssueExplainer(self.exclude_threads)(incident)


@dataclass(frozen=True)
class EngineSourceTier:
    """``source_tier.EngineSourceExplainer``, imported when first asked; like it, no needles."""

    @property
    def needles(self) -> frozenset[str]:
        return frozenset()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.source_tier import EngineSourceExplainer

        return EngineSourceExplainer()(incident)


@dataclass(frozen=True)
class ReleaseFactsTier:
    """``release_facts.ReleaseFactsExplainer``, imported when first asked; like it, no
    needles."""

    @property
    def needles(self) -> frozenset[str]:
        return frozenset()

    def __call__(self, incident: IncidentView) -> list[Finding]:
        from diagnose.knowledge.release_facts import ReleaseFactsExplainer

        return ReleaseFactsExplainer()(incident)
