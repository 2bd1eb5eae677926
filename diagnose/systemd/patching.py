"""Patches rendered against the unit that really runs: its command line and environment."""

from __future__ import annotations

from diagnose.core.models import Diagnosis
from diagnose.systemd.unit import UnitConfig, render_patch


def patched_against_unit(diagnosis: Diagnosis, config: UnitConfig, notes: list[str]) -> Diagnosis:
    """Every finding's patch rendered against the unit's real command line and environment."""
    findings = []
    for finding in diagnosis.findings:
        if finding.patch is None:
            findings.append(finding)
            continue
        rendered = render_patch(finding.patch, config)
        patch = finding.patch.model_copy(update={"dropin": rendered.dropin})
        update: dict[str, object] = {"patch": patch}
        if rendered.note and finding.id == diagnosis.primary:
            notes.append(f"{finding.signature}: {rendered.note}")
        findings.append(finding.model_copy(update=update))
    return diagnosis.model_copy(update={"findings": findings, "unit": config.name})
