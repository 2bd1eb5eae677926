"""``diagnose hook install|remove -u UNIT``: a postmortem written when the unit fails.

``install`` writes two files and runs nothing (``systemctl daemon-reload`` is the user's):

* ``/etc/systemd/system/UNIT.d/40-diagnose-hook.conf``:
  ``OnFailure=diagnose-postmortem@%n.service``. ``%n`` is the full unit name, already in
  unit-name form, so it passes through the instance unchanged: ``sglang-qwen.service`` gives
  ``diagnose-postmortem@sglang-qwen.service.service``, ``vllm@a-b.service`` gives
  ``diagnose-postmortem@vllm@a-b.service.service`` (an instance may hold ``@``).
* ``/etc/systemd/system/diagnose-postmortem@.service``: a oneshot running
  ``diagnose postmortem write -u %i``. ``%i`` is the instance as written: ``%I`` would unescape
  it and turn ``sglang-qwen.service`` into ``sglang/qwen.service``.

With ``Restart=``, systemd triggers ``OnFailure=`` only when the unit ends up failed (no more
restarts: ``Restart=no``, or the start limit hit), not on every failed attempt (systemd 239+).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.core.dropin import escape_literal, quote_word
from diagnose.core.errors import UserError
from diagnose.core.units import check_unit_name, unit_name
from diagnose.runs.defaults import POSTMORTEM_DIR
from diagnose.systemd.apply import (
    DROPIN_DIR,
    Applied,
    dropin_path,
    install_file,
    unit_path,
)
from diagnose.systemd.unit import UNIT_DIRS, unit_file_names

HOOK_DROPIN = "40-diagnose-hook.conf"
TEMPLATE = "diagnose-postmortem@.service"
RELOAD = "systemctl daemon-reload"
_MARK = "diagnose-postmortem@"


@dataclass
class HookResult:
    unit: str
    written: list[Applied] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Why a file was left in place."""

    @property
    def changed(self) -> bool:
        return bool(self.removed) or any(a.changed for a in self.written)


def hook_unit(unit: str) -> str:
    """The full unit name the hook is for; refuses names that are not unit names."""
    name = check_unit_name(unit_name(unit))
    if name.startswith(_MARK):
        raise UserError(f"{name}: the postmortem service cannot report its own failures")
    return name


def diagnose_command(path: str | None = None) -> list[str]:
    """The absolute command that runs diagnose: ``path``, this very ``diagnose`` script, the
    one on PATH, or this Python with ``-m diagnose``."""
    if path is not None:
        if not os.path.isabs(path):
            raise UserError(f"--diagnose-path {path}: not an absolute path")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UserError(f"--diagnose-path {path}: not an executable file")
        return [path]
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "diagnose" and os.access(script, os.X_OK):
        return [str(script.resolve())]
    found = shutil.which("diagnose")
    if found:
        return [str(Path(found).resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "diagnose"]


def dropin_text() -> str:
    return (
        "# Written by diagnose hook install; diagnose hook remove takes it away.\n"
        "# When the unit fails (with Restart=: when it stops restarting), write a postmortem\n"
        f"# to {POSTMORTEM_DIR}/ (diagnose postmortems list).\n"
        "[Unit]\n"
        f"OnFailure={_MARK}%n.service\n"
    )


def template_text(command: list[str], directory: Path = POSTMORTEM_DIR) -> str:
    words = [quote_word(escape_literal(word)) for word in [*command, "postmortem", "write"]]
    exec_start = " ".join([*words, "-u", "%i", "--dir", quote_word(escape_literal(str(directory)))])
    return (
        "# Written by diagnose hook install; diagnose hook remove takes it away.\n"
        "# The instance is the failed unit's full name (OnFailure=diagnose-postmortem@%n.service)\n"
        "# and %i passes it on as written (%I would turn '-' into '/').\n"
        "[Unit]\n"
        "Description=diagnose postmortem of %i\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "StateDirectory=diagnose\n"
        "StateDirectoryMode=0750\n"
        "TimeoutStartSec=5min\n"
        "Nice=10\n"
        f"ExecStart={exec_start}\n"
    )


def install(unit: str, root: Path = Path("/"), diagnose_path: str | None = None) -> HookResult:
    """Write the drop-in and the template (each only when its text changed)."""
    name = hook_unit(unit)
    result = HookResult(name)
    template = template_text(diagnose_command(diagnose_path))
    result.written.append(install_file(unit_path(TEMPLATE, root), template))
    result.written.append(install_file(dropin_path(name, root, HOOK_DROPIN), dropin_text()))
    if not _unit_exists(name, root):
        result.kept.append(
            f"warning: no unit file for {name} under {root} ({', '.join(UNIT_DIRS)}); "
            "the hook takes effect once the unit exists"
        )
    return result


def _unit_exists(name: str, root: Path) -> bool:
    """A unit file for ``name`` (or its template) on the unit search path under ``root``."""
    return any((root / d / n).exists() for d in UNIT_DIRS for n in unit_file_names(name))


def _other_hooks(root: Path, but: Path) -> list[Path]:
    """Drop-ins of other units that still trigger the postmortem service."""
    base = root / DROPIN_DIR
    found = []
    for conf in sorted(base.glob("*.d/*.conf")):
        if conf == but or not conf.is_file():
            continue
        try:
            text = conf.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(
            line.strip().startswith("OnFailure=") and _MARK in line for line in text.splitlines()
        ):
            found.append(conf)
    return found


def _unlink(path: Path, result: HookResult) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except PermissionError:
        raise UserError(
            f"{path}: permission denied", help="run with sudo, or --root DIR to work elsewhere"
        ) from None
    except OSError as error:
        raise UserError(f"{path}: cannot remove: {error.strerror}") from None
    result.removed.append(path)


def remove(unit: str, root: Path = Path("/")) -> HookResult:
    """Take the unit's drop-in away, and the template when no other unit's hook uses it."""
    name = hook_unit(unit)
    result = HookResult(name)
    dropin = dropin_path(name, root, HOOK_DROPIN)
    _unlink(dropin, result)
    _restore_backup(dropin, result)
    with contextlib.suppress(OSError):
        dropin.parent.rmdir()  # only when nothing else is in it
    others = _other_hooks(root, dropin)
    template = unit_path(TEMPLATE, root)
    if others:
        if template.exists():
            users = ", ".join(p.parent.name.removesuffix(".d") for p in others)
            result.kept.append(f"{template}: kept, still used by {users}")
    else:
        _unlink(template, result)
        _restore_backup(template, result)
    return result


def _restore_backup(path: Path, result: HookResult) -> None:
    """``install`` kept what it replaced as ``NAME.bak``: a file of the user's goes back in
    place; only an older copy of our own hook is removed."""
    backup = path.with_name(path.name + ".bak")
    try:
        text = backup.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    except OSError as error:
        result.kept.append(f"{backup}: kept (cannot read it: {error.strerror})")
        return
    if "Written by diagnose hook install" in text:
        _unlink(backup, result)
        return
    try:
        backup.replace(path)
    except OSError as error:
        raise UserError(f"{backup}: cannot restore: {error.strerror}") from None
    result.kept.append(f"{path}: restored from {backup.name} (the file the hook replaced)")


def describe(result: HookResult, installing: bool) -> list[str]:
    """What happened, and the command to run, as lines for stderr."""
    lines = []
    if installing:
        for applied in result.written:
            if applied.changed:
                lines.append(f"wrote {applied.path}")
                if applied.backup:
                    lines.append(f"the previous file is kept as {applied.backup}")
        if not result.changed:
            lines.append(f"the hook for {result.unit} is already installed; nothing written")
    else:
        lines += [f"removed {path}" for path in result.removed]
        if not result.removed:
            lines.append(f"no hook for {result.unit} was installed; nothing removed")
    lines += result.kept
    if result.changed:
        lines += ["then run:", f"  {RELOAD}"]
    return lines
