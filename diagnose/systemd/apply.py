"""``--apply``: fixes written as a drop-in that systemd will honour, proven before "restart".

diagnose keeps its fixes in one drop-in, ``/etc/systemd/system/UNIT.d/zz-diagnose.conf``
(or in ``override.conf`` when asked), one marked block per fix with the incident it came
from; the command line with every fix's flag changes closes the file. The file's name sorts
after every other drop-in systemd reads for the unit (``/etc``, ``/run``, ``/usr/lib``, the
template's, the type's ``service.d``): systemd applies drop-ins by file name, and the last
``ExecStart=`` or ``Environment=`` wins. After writing, the effective configuration is read
back the way systemd reads it; a fix that does not show in it is taken back, and the user is
told what overrides it. Writes are atomic; a file replaced is kept as ``NAME.bak``. It never
reloads or restarts anything: it says which commands to run.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.atomic import write_atomically
from diagnose.core.changes import all_fixes
from diagnose.core.dropin import (
    COMMAND_BEGIN,
    DROPIN_NAME,
    FIX_BEGIN,
    Fix,
    fix_conflicts,
    render_fixes,
    split_fixes,
    winning_settings,
)
from diagnose.core.errors import UserError
from diagnose.core.redact import secret_name
from diagnose.core.units import check_dropin_unit, check_unit_name
from diagnose.systemd.unit import (
    ENCODING,
    ExecCommand,
    UnitConfig,
    dropin_paths,
    find_unit,
    load_unit_file,
    parse_unit_text,
    patch_blocker,
    patched_argv,
)

DROPIN_MODE = 0o644
"""Unit files and drop-ins are world-readable, as systemd's own are."""

DROPIN_DIR = "etc/systemd/system"
OVERRIDE_NAME = "override.conf"
"""What ``systemctl edit`` writes."""


@dataclass(frozen=True)
class Applied:
    path: Path
    changed: bool
    backup: Path | None
    fixes: tuple[str, ...] = ()
    """The fixes the drop-in holds now, oldest first."""
    conflicts: tuple[str, ...] = ()
    moved_from: Path | None = None
    """diagnose's earlier drop-in, renamed so that it sorts after every other one."""
    removed: bool = False
    """The drop-in held nothing else and was deleted (its backup is kept)."""
    left_out: tuple[str, ...] = ()
    """This run's fixes not written, and why (a value only the user can give)."""

    def commands(self, unit: str) -> list[str]:
        return ["systemctl daemon-reload", f"systemctl restart {shlex.quote(unit)}"]


def unit_path(unit: str, root: Path = Path("/")) -> Path:
    """Where a unit file of ours goes (``/etc/systemd/system/UNIT``); refuses a symlink."""
    check_unit_name(unit)
    target = root / DROPIN_DIR / unit
    _inside_root(target.parent, root)
    if target.is_symlink():
        raise UserError(f"{target}: is a symlink; refusing to write through it")
    return target


def dropin_path(unit: str, root: Path = Path("/"), name: str = DROPIN_NAME) -> Path:
    """Where the drop-in goes; refuses a unit name or a symlink that leads out of it."""
    check_dropin_unit(unit)
    base = _inside_root(root / DROPIN_DIR, root)
    target = root / DROPIN_DIR / f"{unit}.d" / name
    resolved_dir = target.parent.resolve()
    if resolved_dir.parent != base or resolved_dir.name != f"{unit}.d":
        raise UserError(
            f"{target.parent}: resolves to {resolved_dir}, outside {base}",
            help="remove the symlink, or write the drop-in by hand",
        )
    if target.is_symlink():
        raise UserError(f"{target}: is a symlink; refusing to write through it")
    return target


def _inside_root(path: Path, root: Path) -> Path:
    """``path`` with its symlinks resolved; refused when one leads out of ``root``."""
    resolved, top = path.resolve(), root.resolve()
    if not resolved.is_relative_to(top):
        raise UserError(
            f"{path}: resolves to {resolved}, outside {top}",
            help="a symlink under --root leads out of it; remove it, or choose another root",
        )
    return resolved


def apply_dropin(unit: str, text: str, root: Path = Path("/"), name: str = DROPIN_NAME) -> Applied:
    """Write ``text`` as a drop-in of the unit under ``root`` (no merging, no proof)."""
    return install_file(dropin_path(unit, root, name), text)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(**ENCODING) if path.exists() else None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None


def install_file(target: Path, text: str) -> Applied:
    """Write ``text`` to ``target`` atomically, keeping a different old file as ``NAME.bak``;
    the same text again writes nothing."""
    current = _read(target)
    if current == text:
        return Applied(target, changed=False, backup=None)
    backup = None
    try:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if current is not None:
            backup = target.with_name(target.name + ".bak")
            write_atomically(backup, current, DROPIN_MODE, errors="surrogateescape")
        write_atomically(target, text, DROPIN_MODE, errors="surrogateescape")
    except PermissionError:
        raise UserError(
            f"{target}: permission denied", help="run with sudo, or --root DIR to write elsewhere"
        ) from None
    except OSError as error:
        raise UserError(f"{target}: cannot write: {error.strerror}") from None
    return Applied(target, changed=True, backup=backup)


# -- fixes that accumulate -------------------------------------------------------------------


@dataclass
class Target:
    """Where a unit's fixes live, and what is around them."""

    unit: str
    root: Path
    unit_file: Path | None = None
    into_override: bool = False
    existing: Path | None = None
    """The file that holds diagnose's fixes now, if any."""
    head: str = ""
    """Its text outside diagnose's blocks (kept as it is)."""
    fixes: list[Fix] = field(default_factory=list)


def _holds_fixes(text: str) -> bool:
    return any(line.startswith((FIX_BEGIN, COMMAND_BEGIN)) for line in text.splitlines())


def locate(unit: str, root: Path, unit_file: Path | None = None) -> Target:
    """The unit's drop-in directory under ``root`` and the fixes diagnose wrote there."""
    folder = dropin_path(unit, root).parent
    target = Target(unit, root, unit_file)
    if not folder.is_dir():
        return target
    for conf in sorted(folder.glob("*.conf")):
        text = _read(conf) or ""
        if _holds_fixes(text):
            target.existing = conf
            target.head, target.fixes = split_fixes(text)
            target.into_override = conf.name == OVERRIDE_NAME
            break
    return target


def effective(unit: str, root: Path, unit_file: Path | None, without_fixes: bool) -> UnitConfig:
    """The unit as systemd would load it under ``root`` (with ``--unit-file``: that file, its
    ``PATH.d`` and the root's drop-in directories)."""
    config = (
        load_unit_file(unit_file, unit, root, without_fixes=without_fixes)
        if unit_file is not None
        else find_unit(unit, root, without_fixes=without_fixes)
    )
    if config is None:
        raise UserError(
            f"{unit}: no unit file under {root} (searched the systemd unit paths): nothing written",
            help="pass --unit-file PATH, or check the unit name (systemctl cat UNIT)",
        )
    return config


def _winning_name(others: list[str]) -> str:
    """A name that sorts after every other drop-in name (systemd compares bytes)."""
    name = DROPIN_NAME
    while any(other.encode(**ENCODING) >= name.encode() for other in others):
        name = "z" + name
    return name


def _refuse_partial(base: UnitConfig, fixes: list[Fix]) -> None:
    for fix in fixes:
        patch = fix.patch
        if patch.args_add or patch.args_remove:
            reason = patch_blocker(base, patch)
            if reason is not None:
                raise UserError(
                    f"{base.name}: {fix.signature}: {reason}; nothing written",
                    help="change it by hand, then run `diagnose preflight -u UNIT` to check",
                )
    missing = [f for f in base.environment_files if f.unreadable]
    if missing and any(fix.patch.env_set or fix.patch.env_unset for fix in fixes):
        raise UserError(
            f"{base.name}: EnvironmentFile={missing[0].path}: {missing[0].unreadable}; its "
            "variables override Environment=, so the fix cannot be proven: nothing written",
            help="run with the rights to read it (sudo), or set the variable there by hand",
        )


def _command_line(base: UnitConfig, fixes: list[Fix]) -> tuple[str | None, list[str] | None]:
    """The ExecStart= value with every fix's flag changes, in order (None: no flag changes)."""
    if not any(f.patch.args_add or f.patch.args_remove for f in fixes):
        return None, None
    command = base.command
    assert command is not None  # _refuse_partial refused a unit without one
    argv = list(command.argv)
    for fix in fixes:
        argv = patched_argv(argv, fix.patch)
    return ExecCommand(command.prefix, argv).render(), argv


def _last_setting(config: UnitConfig, section: str, key: str) -> str:
    found = [s for s in config.settings if s.section == section and s.key == key]
    return f"{found[-1].path}:{found[-1].line}" if found else "nothing"


def disproof(config: UnitConfig, fixes: list[Fix], argv: list[str] | None) -> str | None:
    """What in the effective configuration ``config`` is not what the fixes set, or None."""
    environment = config.effective_environment
    for fix, patch in zip(fixes, winning_settings(fixes), strict=True):
        for key, value in patch.env_set.items():
            if secret_name(key):
                continue  # read from the secrets file, which holds what only the admin knows
            if environment.get(key) != value:
                setter = next(
                    (f.path for f in config.environment_files if key in f.values),
                    None,
                )
                where = (
                    f"EnvironmentFile={setter} sets it, and systemd applies environment files "
                    "after Environment="
                    if setter
                    else "a later UnsetEnvironment= or Environment= changes it"
                )
                return f"{fix.id}: {key} would be {environment.get(key)!r}, not {value!r}: {where}"
        for key in patch.env_unset:
            if key in environment and key not in patch.env_set:
                return f"{fix.id}: {key} would still be set ({key}={environment[key]})"
        for dotted, value in patch.unit_set.items():
            section, key = dotted.split(".", 1)
            if config.get(section, key) != value:
                return (
                    f"{fix.id}: {key}= would be {config.get(section, key)!r}, not {value!r} "
                    f"(set last by {_last_setting(config, section, key)})"
                )
    if argv is not None:
        command = config.command
        if command is None or command.argv != argv or len(config.exec_start) != 1:
            return (
                "ExecStart= would not be the fixed command line: it is set last by "
                f"{_last_setting(config, 'Service', 'ExecStart')}"
            )
    return None


def write_fixes(target: Target, fixes: list[Fix]) -> Applied:
    """Write ``fixes`` (all of them, in order) as the unit's diagnose drop-in, prove that
    systemd would apply them, and take the write back when it would not."""
    unit, root = target.unit, target.root
    base = effective(unit, root, target.unit_file, without_fixes=True)
    _refuse_partial(base, fixes)
    exec_start, argv = _command_line(base, fixes)
    others = [
        path.name
        for path in dropin_paths(unit, root)
        if target.existing is None or path != target.existing
    ]
    if target.unit_file is not None:
        beside = Path(f"{target.unit_file}.d")
        others += [p.name for p in beside.glob("*.conf")] if beside.is_dir() else []
    name = OVERRIDE_NAME if target.into_override else _winning_name(others)
    path = dropin_path(unit, root, name)
    head = target.head
    if target.existing is not None and target.existing.name != name:
        head = ""  # the old file's own text stays with the old file
    if name == OVERRIDE_NAME and target.existing != path:
        head = split_fixes(_read(path) or "")[0]
    text = render_fixes(unit, fixes, exec_start, head) if fixes else head
    before: dict[Path, str | None] = {path: _read(path)}
    moved_from = None
    if target.existing is not None and target.existing != path:
        moved_from = target.existing
        before[moved_from] = _read(moved_from)
    if not fixes and not parse_unit_text(head).settings and name != OVERRIDE_NAME:
        return _remove_file(path, before[path], target)
    applied = install_file(path, text)
    if moved_from is not None:
        old_head = split_fixes(before[moved_from] or "")[0]
        if parse_unit_text(old_head).settings or moved_from.name == OVERRIDE_NAME:
            install_file(moved_from, old_head)
        else:
            _remove_file(moved_from, before[moved_from], target)
    proof = disproof(effective(unit, root, target.unit_file, without_fixes=False), fixes, argv)
    if proof is not None:
        _restore(before)
        raise UserError(
            f"{unit}: the fix would not take effect: {proof}; nothing written",
            help="change what overrides it (or pass --into-override to write into "
            "override.conf), then apply again",
        )
    return Applied(
        path,
        changed=applied.changed or moved_from is not None,
        backup=applied.backup,
        fixes=tuple(f.id for f in fixes),
        conflicts=tuple(fix_conflicts(fixes)),
        moved_from=moved_from,
    )


def _remove_file(path: Path, current: str | None, target: Target) -> Applied:
    backup = None
    if current is not None:
        backup = path.with_name(path.name + ".bak")
        try:
            write_atomically(backup, current, DROPIN_MODE, errors="surrogateescape")
            path.unlink()
        except OSError as error:
            raise UserError(f"{path}: cannot remove: {error.strerror}") from None
    return Applied(path, changed=current is not None, backup=backup, removed=True)


def _restore(before: dict[Path, str | None]) -> None:
    """Put every file back as it was (the proof failed)."""
    for path, text in before.items():
        if text is None:
            path.unlink(missing_ok=True)
        else:
            write_atomically(path, text, DROPIN_MODE, errors="surrogateescape")


def apply_fix(
    fix: Fix,
    unit: str,
    root: Path = Path("/"),
    unit_file: Path | None = None,
    into_override: bool = False,
) -> Applied:
    """Add ``fix`` to the unit's diagnose drop-in (replacing an earlier fix with its id)."""
    return apply_fixes([fix], unit, root, unit_file, into_override)


def apply_fixes(
    fixes: Sequence[Fix],
    unit: str,
    root: Path = Path("/"),
    unit_file: Path | None = None,
    into_override: bool = False,
) -> Applied:
    """Add this run's ``fixes`` (one change set, merged by rank) to the unit's diagnose
    drop-in, after the fixes earlier runs wrote (a fix already there, from this or an
    earlier incident, is kept once; one with the same id is replaced)."""
    target = locate(unit, root, unit_file)
    target.into_override = target.into_override or into_override
    return write_fixes(target, all_fixes(target.fixes, fixes))


def remove_fix(
    unit: str, fix_id: str | None, root: Path = Path("/"), unit_file: Path | None = None
) -> tuple[Fix, Applied]:
    """Take one fix back (``fix_id``: its id or its signature; None: the last one added)."""
    target = locate(unit, root, unit_file)
    if not target.fixes:
        raise UserError(f"{unit}: diagnose has written no fix for it under {root}")
    if fix_id is None:
        chosen = target.fixes[-1]
    else:
        matches = [f for f in target.fixes if fix_id in (f.id, f.signature)]
        if len(matches) != 1:
            known = ", ".join(f.id for f in target.fixes)
            what = "no fix" if not matches else "several fixes"
            raise UserError(f"{unit}: {what} named {fix_id!r}", help=f"the fixes: {known}")
        chosen = matches[0]
    remaining = [f for f in target.fixes if f.id != chosen.id]
    return chosen, write_fixes(target, remaining)
