"""systemd text: the one quoting function for unit-file words, and a patch rendered as a
drop-in (pure text; writing it is the CLI's business)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from diagnose.core.models import Patch

DROPIN_NAME = "50-diagnose.conf"
_SAFE_WORD = re.compile(r"^[^\s'\"\\;]+$")


def quote_word(word: str) -> str:
    """``word`` as one unit-file word that systemd (and ``systemd/unit.split_words``) reads
    back unchanged."""
    if word and _SAFE_WORD.match(word):
        return word
    if "'" not in word and "\\" not in word and not any(c in word for c in "\n\r\t\a\b\f\v"):
        return f"'{word}'"
    escaped = (
        word.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def escape_literal(word: str, variables: bool = True) -> str:
    """A literal value for a unit file: ``%`` doubled so no specifier expands, and ``$``
    doubled where variables expand (``ExecStart=``; not ``Environment=``)."""
    escaped = word.replace("%", "%%")
    return escaped.replace("$", "$$") if variables else escaped


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
        assignment = escape_literal(f"{key}={value}", variables=False)
        service.append(f"Environment={quote_word(assignment)}")
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
