"""Render a patch as a systemd drop-in (pure text; writing it is the CLI's business)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from diagnose.core.models import Patch

DROPIN_NAME = "50-diagnose.conf"


def _quote_assignment(key: str, value: str) -> str:
    """``Environment=`` quoting: one double-quoted word, with backslash escapes."""
    assignment = f"{key}={value}"
    if any(ch in assignment for ch in " \t\"\\'$%;"):
        escaped = assignment.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
        return f'"{escaped}"'
    return assignment


def render_dropin(
    patch: Patch,
    unit: str | None,
    exec_start: str | None = None,
    notes: Sequence[str] = (),
) -> str | None:
    """The drop-in text for ``unit``, or None when the unit is unknown.

    Without the unit's command line (``exec_start``), launch flags cannot be set from a
    drop-in, so they are written as comments that say what to add or remove. With it, the
    drop-in resets ``ExecStart=`` and repeats the whole new command line. ``notes`` become
    comment lines under the header (what the drop-in changes in the effective unit).
    """
    if unit is None or patch.is_empty():
        return None
    sections: dict[str, list[str]] = {"Service": []}
    service = sections["Service"]
    for key, value in patch.env_set.items():
        service.append(f"Environment={_quote_assignment(key, value)}")
    if patch.env_unset:
        service.append("UnsetEnvironment=" + " ".join(patch.env_unset))
    for dotted, value in patch.unit_set.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, []).append(f"{key}={value}")
    if patch.args_add or patch.args_remove:
        if exec_start is not None:
            service += ["ExecStart=", f"ExecStart={exec_start}"]
        else:
            service.append("# Launch flags need the whole command line: reset it with an empty")
            service.append("# ExecStart= and repeat your command with these changes:")
            if patch.args_add:
                service.append("#   add:    " + shlex.join(patch.args_add))
            if patch.args_remove:
                service.append("#   remove: " + " ".join(patch.args_remove))
            service.append(f"# (diagnose journal -u {unit} writes the full ExecStart= for you)")
    header = f"# /etc/systemd/system/{unit}.d/{DROPIN_NAME}\n"
    header += "".join(f"# {note}\n" for note in notes)
    body = "\n\n".join(
        f"[{name}]\n" + "\n".join(lines) for name, lines in sections.items() if lines
    )
    return header + body + "\n"
