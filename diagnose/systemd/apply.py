"""``--apply``: write a drop-in as ``/etc/systemd/system/UNIT.d/50-diagnose.conf``.

The write is atomic (a temporary file in the same directory, then ``os.replace``); a file
it replaces is kept as ``50-diagnose.conf.bak`` (systemd reads only ``*.conf``); writing
the same text again changes nothing. It never reloads or restarts anything: it says which
commands to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diagnose.atomic import write_atomically
from diagnose.core.dropin import DROPIN_NAME
from diagnose.core.errors import UserError
from diagnose.core.units import check_unit_name

DROPIN_MODE = 0o644
"""Unit files and drop-ins are world-readable, as systemd's own are."""

DROPIN_DIR = "etc/systemd/system"


@dataclass(frozen=True)
class Applied:
    path: Path
    changed: bool
    backup: Path | None

    def commands(self, unit: str) -> list[str]:
        return ["systemctl daemon-reload", f"systemctl restart {unit}"]


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
    check_unit_name(unit)
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
    """Write ``text`` as the unit's diagnose drop-in under ``root``."""
    return install_file(dropin_path(unit, root, name), text)


def install_file(target: Path, text: str) -> Applied:
    """Write ``text`` to ``target`` atomically, keeping a different old file as ``NAME.bak``;
    the same text again writes nothing."""
    try:
        current = target.read_text(encoding="utf-8") if target.exists() else None
    except OSError as error:
        raise UserError(f"{target}: cannot read: {error.strerror}") from None
    if current == text:
        return Applied(target, changed=False, backup=None)
    backup = None
    try:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if current is not None:
            backup = target.with_name(target.name + ".bak")
            write_atomically(backup, current, DROPIN_MODE)
        write_atomically(target, text, DROPIN_MODE)
    except PermissionError:
        raise UserError(
            f"{target}: permission denied", help="run with sudo, or --root DIR to write elsewhere"
        ) from None
    except OSError as error:
        raise UserError(f"{target}: cannot write: {error.strerror}") from None
    return Applied(target, changed=True, backup=backup)
