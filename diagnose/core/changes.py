"""One drop-in per unit per run: every finding's change merged into one change set.

Findings are taken by rank (the primary first): a later finding's setting that an earlier one
already decides is left out of it, and named as a conflict when the two disagree. Only
failures' fixes are merged (a warning's fix is listed as left out: it may not apply to the
release in use). The drop-in is the one ``--apply`` writes and later runs read back: one
marked block per fix, each with its reason, after the fixes earlier runs wrote (a new fix of
the same setting wins over an earlier run's, as ``--apply`` has it). Pure: no files.

>>> from diagnose.core.models import Patch
>>> one = Patch(env_set={"A": "1"}, args_add=["--tp-size", "4"], args_remove=["--tp"])
>>> two = Patch(env_set={"A": "2", "B": "x"}, args_add=["--tp-size", "8"])
>>> kept, conflicts = merge([("first", "first", one), ("second", "second", two)])
>>> [(name, p.env_set, p.args_add) for name, _, p in kept]
[('first', {'A': '1'}, ['--tp-size', '4']), ('second', {'B': 'x'}, [])]
>>> for line in conflicts: print(line)
second wanted A=2; first (ranked higher) sets A=1
second wanted --tp-size 8; first (ranked higher) sets --tp-size 4
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from datetime import timezone

from diagnose.core.dropin import (
    DROPIN_NAME,
    Fix,
    fix_conflicts,
    flag_groups,
    render_fixes,
)
from diagnose.core.models import (
    Diagnosis,
    Finding,
    FixPlan,
    Patch,
    PlannedChange,
    Role,
    Severity,
)
from diagnose.core.units import escape_unit, is_unit_name


def _flag(word: str) -> str:
    return word.replace("_", "-")


Ranked = tuple[str, str, Patch]
"""A finding's id, its signature and its patch."""


def merge(patches: Sequence[Ranked]) -> tuple[list[Ranked], list[str]]:
    """``(id, name, patch)`` in rank order -> each patch less what a higher-ranked one already
    decides, and the conflicts (a different value wanted for the same setting) in words."""
    env: dict[str, tuple[str, str | None]] = {}  # key -> (who, value; None: unset)
    unit: dict[str, tuple[str, str]] = {}
    flags: dict[str, tuple[str, list[str] | None]] = {}  # flag -> (who, values; None: removed)
    kept: list[Ranked] = []
    conflicts: list[str] = []

    def said(values: list[str] | None) -> str:
        return "removes it" if values is None else "sets it"

    for ident, name, patch in patches:
        env_set: dict[str, str] = {}
        for key, value in patch.env_set.items():
            if key in env:
                who, was = env[key]
                if was != value:
                    shown = f"sets {key}={was}" if was is not None else f"unsets {key}"
                    conflicts.append(f"{name} wanted {key}={value}; {who} (ranked higher) {shown}")
                continue
            env[key] = (name, value)
            env_set[key] = value
        env_unset: list[str] = []
        for key in patch.env_unset:
            if key in env:
                who, was = env[key]
                if was is not None:
                    conflicts.append(f"{name} wanted {key} unset; {who} (ranked higher) sets it")
                continue
            env[key] = (name, None)
            env_unset.append(key)
        unit_set: dict[str, str] = {}
        for key, value in patch.unit_set.items():
            if key in unit:
                if unit[key][1] != value:
                    conflicts.append(
                        f"{name} wanted {key}={value}; {unit[key][0]} (ranked higher) sets "
                        f"{unit[key][1]}"
                    )
                continue
            unit[key] = (name, value)
            unit_set[key] = value
        args_add: list[str] = []
        dropped: set[str] = set()  # its removal went with the setting: no second conflict
        for group in flag_groups(patch.args_add):
            flag = _flag(group[0])
            if flag in flags:
                dropped.add(flag)
                who, values = flags[flag]
                if values != group[1:]:
                    shown = (
                        said(values) if values is None else f"sets {shlex.join([flag, *values])}"
                    )
                    wanted = shlex.join(group)
                    conflicts.append(f"{name} wanted {wanted}; {who} (ranked higher) {shown}")
                continue
            args_add += group
        added = {_flag(g[0]) for g in flag_groups(args_add)}
        args_remove: list[str] = []
        for word in patch.args_remove:
            flag = _flag(word)
            if flag in flags and flag not in added:
                who, values = flags[flag]
                if values is not None and flag not in dropped:
                    conflicts.append(
                        f"{name} wanted {flag} removed; {who} (ranked higher) {said(values)}"
                    )
                continue
            args_remove.append(word)
        for group in flag_groups(args_add):
            flags[_flag(group[0])] = (name, group[1:])
        for word in args_remove:
            flags.setdefault(_flag(word), (name, None))
        share = Patch(
            env_set=env_set,
            env_unset=env_unset,
            unit_set=unit_set,
            args_add=args_add,
            args_remove=args_remove,
        )
        if not share.is_empty():
            kept.append((ident, name, share))
    return kept, conflicts


def package_line(finding: Finding) -> str | None:
    """The finding's package change in words, with the command, or None."""
    package = finding.package
    if package is None:
        return None
    if not package.spec.strip() and package.action in ("pin", "downgrade"):
        # with no version, `pip install x` keeps the installed one: the version is a check away
        return (
            f"{package.action} {package.name} to the release the packages that use it require "
            f"(`pip check` names it): pip install '{package.name}==<that version>' in the "
            "server's environment"
        )
    # only -U moves an installed package that already fits the spec (or when there is none):
    # plain `pip install` keeps it, as it keeps a broken install of the same version unless
    # forced
    flag = (
        "-U "
        if package.action == "upgrade"
        else "--force-reinstall "
        if package.action == "reinstall"
        else ""
    )
    return (
        f"{package.action} {package.name}{package.spec}: "
        f"pip install {flag}'{package.name}{package.spec}' in the server's environment"
    )


def _host_actions(finding: Finding) -> list[str]:
    line = package_line(finding)
    return ([line] if line else []) + list(finding.system_actions)


def _in_rank_order(diagnosis: Diagnosis) -> list[Finding]:
    primary = diagnosis.finding(diagnosis.primary)
    rest = [f for f in diagnosis.findings if f is not primary]
    return ([primary] if primary is not None else []) + rest


def plan(diagnosis: Diagnosis) -> FixPlan:
    """The findings' changes merged by rank (no drop-in text yet: :func:`rendered` writes it)."""
    patches: list[Ranked] = []
    left_out: list[str] = []
    host: list[str] = []
    titles: dict[str, Finding] = {}
    for finding in _in_rank_order(diagnosis):
        host += [a for a in _host_actions(finding) if a not in host]
        patch = finding.patch
        if patch is None or patch.is_empty():
            continue
        failure = finding.severity.rank >= Severity.ERROR.rank and finding.role is not Role.ADVISORY
        if not failure:
            left_out.append(
                f"{finding.signature}: a {finding.severity.value}, not a failure: its change is "
                "left to you (it may not apply to the release in use)"
            )
            continue
        titles[finding.id] = finding
        patches.append((finding.id, finding.signature, patch))
    kept, conflicts = merge(patches)
    changes = [
        PlannedChange(finding=ident, signature=name, reason=titles[ident].title, patch=share)
        for ident, name, share in kept
    ]
    return FixPlan(
        unit=diagnosis.unit,
        changes=changes,
        conflicts=conflicts,
        left_out=left_out,
        host_actions=host,
    )


def new_fixes(fix_plan: FixPlan, incident: str) -> list[Fix]:
    """This run's changes as fixes of the unit's diagnose drop-in (one per finding)."""
    from diagnose.core.dropin import fix_id

    return [
        Fix(
            id=fix_id(change.signature, incident),
            signature=change.signature,
            incident=incident,
            patch=_as_recorded(change.patch),
            why=change.reason,
        )
        for change in fix_plan.changes
    ]


def _as_recorded(patch: Patch) -> Patch:
    """``patch`` as the drop-in's record reads back (keys sorted), so that a fix written by
    an earlier run is recognised as the same and the file is not rewritten."""
    record = json.dumps(patch.record(), sort_keys=True)
    return Patch.model_validate(json.loads(record))


def all_fixes(earlier: Sequence[Fix], new: Sequence[Fix]) -> list[Fix]:
    """The earlier runs' fixes, then this run's: a fix already there (same signature, same
    change) is kept once; one with the same id is replaced."""
    same = [(f.signature, f.patch) for f in earlier]
    fresh = [f for f in new if (f.signature, f.patch) not in same]
    replaced = {f.id for f in fresh}
    return [f for f in earlier if f.id not in replaced] + fresh


def changes_behaviour(fixes: Sequence[Fix], exec_start: str | None) -> str | None:
    """None when the drop-in changes what the unit does; else why it does not."""
    settings = any(f.patch.env_set or f.patch.env_unset or f.patch.unit_set for f in fixes)
    flags = any(f.patch.args_add or f.patch.args_remove for f in fixes)
    if settings or (flags and exec_start is not None):
        return None
    if flags:
        return (
            "the flag changes can only be comments: the unit's command line is not known here "
            "(run diagnose journal -u UNIT, or pass --unit-file)"
        )
    return "no configuration change fixes this: only what is done on the host helps"


def rendered(
    fix_plan: FixPlan,
    unit: str | None,
    incident: str,
    exec_start: str | None = None,
    earlier: Sequence[Fix] = (),
    head: str = "",
) -> FixPlan:
    """``fix_plan`` with its drop-in for ``unit``: the fixes earlier runs wrote, then this
    run's, and the command line with every flag change (when the unit's is known)."""
    fixes = all_fixes(earlier, new_fixes(fix_plan, incident))
    why_not = changes_behaviour(fixes, exec_start)
    left_out = list(fix_plan.left_out)
    flags = any(f.patch.args_add or f.patch.args_remove for f in fixes)
    if why_not is None and flags and exec_start is None:
        left_out.append(
            "the command-line changes are comments only (the unit's command line is not known "
            "here): make them in ExecStart= too, or the restart fails the same way"
        )
    dropin = None
    if unit is not None and not is_unit_name(unit):  # a name from the log, never a file's
        why_not = f"`{escape_unit(unit)}` is not a unit name, so no drop-in is written for it"
    elif unit is not None and fix_plan.changes:  # nothing new: the installed file stands
        dropin = render_fixes(unit, fixes, exec_start, head)
        if not head:  # a new file: say where it goes (kept as its own text once written)
            dropin = f"# /etc/systemd/system/{unit}.d/{DROPIN_NAME}\n" + dropin
    elif unit is None and fix_plan.changes:
        why_not = "the unit is not known, so the changes cannot be a drop-in"
    if not fix_plan.changes:
        why_not = "no finding has a configuration change" + (
            " (the fixes earlier --apply runs wrote stand)" if earlier else ""
        )
    return fix_plan.model_copy(
        update={
            "unit": unit,
            "earlier": [f.id for f in earlier],
            "conflicts": [
                *fix_plan.conflicts,
                *(f"{c} (this run's fix wins)" for c in fix_conflicts(fixes) if earlier),
            ],
            "changes_behaviour": why_not is None,
            "complete": why_not is None and not (flags and exec_start is None),
            "left_out": left_out,
            "reason": why_not,
            "dropin": dropin,
        }
    )


def incident_of(diagnosis: Diagnosis) -> str:
    """When the diagnosed failure happened (its first timestamped evidence), UTC ISO 8601;
    ``preflight`` when nothing has happened yet, ``unknown`` when nothing says."""
    primary = diagnosis.finding(diagnosis.primary)
    stamps = [e.timestamp for e in (primary.evidence if primary else []) if e.timestamp]
    stamps += [i.last_ts for i in diagnosis.inputs if i.last_ts]
    if not stamps:
        return "preflight" if diagnosis.attempts == 0 and diagnosis.findings else "unknown"
    return stamps[0].astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_plan(diagnosis: Diagnosis) -> Diagnosis:
    """``diagnosis`` with its one drop-in, the unit's command line not known (``diagnose
    file``: flag changes are comments)."""
    fix_plan = rendered(plan(diagnosis), diagnosis.unit, incident_of(diagnosis))
    return diagnosis.model_copy(update={"fix": fix_plan})


def describe(fix_plan: FixPlan) -> list[str]:
    """What a report says of the plan beside the drop-in: conflicts, what is left out, what
    to do on the host first."""
    lines = [f"conflict: {c}" for c in fix_plan.conflicts]
    lines += [f"not in the drop-in: {item}" for item in fix_plan.left_out]
    lines += [f"on the host first: {action}" for action in fix_plan.host_actions]
    return lines


def flags_line(patch: Patch) -> str:
    """``--tp-size 4; remove --tp``: a patch's flag changes in one line."""
    parts = [shlex.join(g) for g in flag_groups(patch.args_add)]
    if patch.args_remove:
        parts.append("remove " + " ".join(patch.args_remove))
    return "; ".join(parts)
