"""Patches rendered against the unit that really runs: its command line and environment."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from diagnose.core.changes import all_fixes, incident_of, new_fixes, plan, rendered
from diagnose.core.dropin import Fix
from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis, FixPlan
from diagnose.systemd.apply import locate
from diagnose.systemd.unit import ExecCommand, UnitConfig, patch_blocker, patched_argv, render_patch


def patched_against_unit(
    diagnosis: Diagnosis,
    config: UnitConfig,
    notes: list[str],
    earlier: Sequence[Fix] = (),
    head: str = "",
) -> Diagnosis:
    """Every finding's patch rendered against the unit's real command line and environment,
    and the one drop-in that merges them (after the fixes earlier runs wrote: ``earlier``,
    with ``head``, the drop-in's own text outside them)."""
    findings = []
    for finding in diagnosis.findings:
        if finding.patch is None:
            findings.append(finding)
            continue
        rendered_patch = render_patch(finding.patch, config)
        patch = finding.patch.model_copy(update={"dropin": rendered_patch.dropin})
        update: dict[str, object] = {"patch": patch}
        if rendered_patch.note and finding.id == diagnosis.primary:
            notes.append(f"{finding.signature}: {rendered_patch.note}")
        findings.append(finding.model_copy(update=update))
    patched = diagnosis.model_copy(update={"findings": findings, "unit": config.name})
    return patched.model_copy(update={"fix": fix_against_unit(patched, config, earlier, head)})


def earlier_fixes(
    unit: str, root: Path | None, unit_file: Path | None = None
) -> tuple[list[Fix], str]:
    """The fixes earlier ``--apply`` runs wrote for ``unit`` (under ``root``, else this host),
    and their drop-in's own text outside them; none when it cannot be read."""
    try:
        target = locate(unit, root or Path("/"), unit_file)
    except (UserError, OSError):
        return [], ""
    return list(target.fixes), target.head


def fix_against_unit(
    diagnosis: Diagnosis, config: UnitConfig, earlier: Sequence[Fix] = (), head: str = ""
) -> FixPlan:
    """The merged change rendered against ``config``: the command line with every fix's flag
    changes, in order (earlier runs' first), when a drop-in can set it exactly."""
    merged = plan(diagnosis)
    incident = incident_of(diagnosis)
    fixes = all_fixes(earlier, new_fixes(merged, incident))
    exec_start = None
    blocked = None
    command = config.command
    if any(f.patch.args_add or f.patch.args_remove for f in fixes) and command is not None:
        argv = list(command.argv)
        for fix in fixes:
            blocked = blocked or patch_blocker(config, fix.patch)
            argv = patched_argv(argv, fix.patch)
        if blocked is None:
            exec_start = ExecCommand(command.prefix, argv).render()
    out = rendered(merged, config.name, incident, exec_start, earlier, head)
    if blocked is not None and out.reason is None:
        return out.model_copy(update={"reason": blocked})
    return out
