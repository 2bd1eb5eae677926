"""``diagnose fixes``: the fixes ``--apply`` wrote for a unit; take one back."""

from __future__ import annotations

from pathlib import Path

from diagnose.core.dropin import Fix
from diagnose.core.units import unit_name
from diagnose.systemd.apply import Applied, locate, remove_fix


def listing(unit: str, root: Path, unit_file: Path | None = None) -> tuple[Path | None, list[Fix]]:
    """The file that holds the unit's fixes (None when there is none), and the fixes."""
    target = locate(unit_name(unit), root, unit_file)
    return target.existing, target.fixes


def describe_fix(fix: Fix) -> str:
    patch = fix.patch
    changes = [f"{k}={v}" for k, v in patch.env_set.items()]
    changes += [f"unset {k}" for k in patch.env_unset]
    changes += [f"remove {a}" for a in patch.args_remove]
    changes += [" ".join(patch.args_add)] if patch.args_add else []
    changes += [f"{k}={v}" for k, v in patch.unit_set.items()]
    return f"{fix.id}  (incident {fix.incident}): {'; '.join(changes)}"


def remove(
    unit: str, fix_id: str | None, root: Path, unit_file: Path | None = None
) -> tuple[Fix, Applied]:
    """Take back one fix (by id or signature; None: the last one applied)."""
    return remove_fix(unit_name(unit), fix_id, root, unit_file)


def describe(applied: Applied, unit: str) -> list[str]:
    """What ``--apply`` or ``fixes remove`` did, and what the user runs next."""
    lines: list[str] = []
    if applied.removed:
        lines.append(f"removed {applied.path} (it held no other fix)")
    elif applied.changed:
        lines.append(f"wrote {applied.path}")
    else:
        lines.append(f"{applied.path} already holds this fix; nothing written")
    if applied.moved_from is not None:
        lines.append(
            f"moved the fixes from {applied.moved_from} to {applied.path.name}, which sorts after "
            "every other drop-in of the unit"
        )
    if applied.backup:
        lines.append(f"the previous file is kept as {applied.backup}")
    if applied.fixes:
        lines.append(f"fixes in effect after a restart: {', '.join(applied.fixes)}")
        lines.append("checked: the effective configuration (unit file and every drop-in) has them")
    for conflict in applied.conflicts:
        lines.append(f"conflict: {conflict} (the later fix wins)")
    for item in applied.left_out:
        lines.append(f"not written: {item} (fill it into the drop-in --patch-only prints)")
    if applied.changed:
        lines.append("to use it, run:")
        lines += [f"  {command}" for command in applied.commands(unit)]
    return lines
