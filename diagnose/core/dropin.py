"""systemd text: the one quoting function for unit-file words, and a patch rendered as a
drop-in (pure text; writing it is the CLI's business)."""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation
# from a string at every start.

import json
import re
import shlex
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from diagnose.core.errors import UserError
from diagnose.core.models import Patch
from diagnose.core.redact import secret_name
from diagnose.core.units import is_unit_name

DROPIN_NAME = "zz-diagnose.conf"
"""diagnose's drop-in: after ``override.conf`` and numbered ones (systemd applies them by name)."""
_SAFE_WORD = re.compile(r"^[^\s'\"\\;]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class UnsafeDropin(UserError):
    """A key or value with a control character: written into a unit file, a newline would
    start a setting of its own. Never written (exit 2 where nothing else is shown)."""


def _words(patch: Patch) -> list[str]:
    """Every key and value of ``patch`` that a drop-in would carry."""
    return [
        *patch.env_set, *patch.env_set.values(), *patch.env_unset, *patch.unit_set,
        *patch.unit_set.values(), *patch.args_add, *patch.args_remove,
    ]  # fmt: skip


def refuse_control(*texts: str) -> None:
    """Raise :class:`UnsafeDropin` when any of ``texts`` holds a control character."""
    for text in texts:
        if _CONTROL.search(text):
            raise UnsafeDropin(
                f"refused: a control character in {text!r} for a drop-in",
                help="a value from the log may not start a line of a unit file",
            )


def quote_word(word: str) -> str:
    """``word`` as one unit-file word that systemd (and ``systemd/unit.split_words``) reads
    back unchanged."""
    if word and _SAFE_WORD.match(word) and not word.startswith("#"):
        return word  # (a word starting with # would be a comment at the start of a line)
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


SECRETS_NAME = "secrets.env"
"""Where a fix's secrets go: an ``EnvironmentFile=`` beside diagnose's drop-in (systemd reads
only ``*.conf`` there as drop-ins), owned by root with mode 0600. ``Environment=`` values are
shown to every user by ``systemctl show``; an environment file's are not."""


def secrets_path(unit: str) -> str:
    """The environment file a fix's secrets go in (``/etc/systemd/system/UNIT.d/secrets.env``)."""
    return f"/etc/systemd/system/{unit}.d/{SECRETS_NAME}"


def secret_names(patch: Patch) -> list[str]:
    """The variables ``patch`` sets whose values are secrets (``HF_TOKEN``, ``*_API_KEY``)."""
    return [key for key in patch.env_set if secret_name(key)]


SECRET_KEPT = f"(in {SECRETS_NAME})"
"""What a fix's record in the drop-in holds in place of a secret's value."""


def without_secrets(patch: Patch) -> Patch:
    """``patch`` with each secret's value replaced by :data:`SECRET_KEPT` (the drop-in keeps a
    record of every fix; a secret's value belongs in the environment file only)."""
    hidden = secret_names(patch)
    if not hidden:
        return patch
    env_set = {k: SECRET_KEPT if k in hidden else v for k, v in patch.env_set.items()}
    return patch.model_copy(update={"env_set": env_set})


def environment_lines(env_set: Mapping[str, str], unit: str) -> list[str]:
    """``Environment=`` lines for the plain variables; a secret (by its name) is never written
    as a value: the lines say where to put it and read it with ``EnvironmentFile=``."""
    lines: list[str] = []
    secrets = [key for key in env_set if secret_name(key)]
    for key, value in env_set.items():
        if key not in secrets:
            assignment = escape_literal(f"{key}={value}", variables=False)
            lines.append(f"Environment={quote_word(assignment)}")
    if secrets:
        path = secrets_path(unit)
        lines += [
            # (no "NAME: value" shape here: the report's redaction would read it as a secret)
            f"# {' and '.join(secrets)} {'is a secret' if len(secrets) == 1 else 'are secrets'}, "
            "so not written here (`systemctl show`",
            "# prints Environment= values to every user): put it in a file only root reads:",
            f"#   sudo install -m 0600 -o root -g root /dev/null {path}",
            f"#   sudoedit {path}   # one line each: " + " ".join(f"{k}=..." for k in secrets),
            f"EnvironmentFile={path}",
        ]
    return lines


LIST_SETTINGS = frozenset(
    {"ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecReload"}
)
"""Settings a drop-in appends to: an empty assignment first clears the unit's own."""


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
    if unit is None or patch.is_empty() or not is_unit_name(unit):
        return None  # (a name that is not a unit name is never part of a path)
    # (ExecCommand.render continues a long command line on the next with a backslash)
    refuse_control(*_words(patch), (exec_start or "").replace("\\\n", ""), *notes)
    sections: dict[str, list[str]] = {"Service": []}
    service = sections["Service"]
    service += environment_lines(patch.env_set, unit)
    if patch.env_unset:
        service.append("UnsetEnvironment=" + " ".join(patch.env_unset))
    for dotted, value in patch.unit_set.items():
        section, key = dotted.split(".", 1)
        reset = [f"{key}="] if key in LIST_SETTINGS else []  # a drop-in adds to a list
        sections.setdefault(section, []).extend([*reset, f"{key}={value}"])
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
    hidden = {patch.env_set[key] for key in secret_names(patch)}
    public = [p for p in patch.placeholders() if p not in hidden]
    if public:
        header += f"# Fill in {', '.join(public)} before installing this file.\n"
    body = "\n\n".join(
        f"[{name}]\n" + "\n".join(lines) for name, lines in sections.items() if lines
    )
    return header + body + "\n"


# -- fixes that accumulate -----------------------------------------------------------------

FIX_BEGIN = "# >>> diagnose fix "
FIX_END = "# <<< diagnose fix "
COMMAND_BEGIN = "# >>> diagnose command line"
COMMAND_END = "# <<< diagnose command line"
_PATCH_LINE = "# patch: "
_INCIDENT_LINE = "# incident: "
_WHY_LINE = "# why: "


class Fix(BaseModel):
    """One fix in diagnose's drop-in: the patch of one finding, and the incident it came from."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    signature: str
    incident: str
    """When the failure happened (UTC, ISO 8601), or ``preflight``."""
    patch: Patch
    why: str = ""
    """The reason for its lines, in words (the finding's title)."""


def fix_id(signature: str, incident: str) -> str:
    """``sglang-spec-v2-required@20260303T115331Z``: stable for one incident's fix."""
    stamp = re.sub(r"[^0-9A-Za-z]", "", incident.replace("+00:00", "Z"))
    return f"{signature}@{stamp}"


def winning_settings(fixes: Sequence[Fix]) -> list[Patch]:
    """Each fix's settings less what a later fix sets again (the later fix wins; written
    out, systemd would let an earlier ``UnsetEnvironment=`` beat a later ``Environment=``)."""
    later_env: set[str] = set()
    later_unit: set[str] = set()
    out: list[Patch] = []
    for fix in reversed(fixes):
        patch = fix.patch
        out.append(
            patch.model_copy(
                update={
                    "env_set": {k: v for k, v in patch.env_set.items() if k not in later_env},
                    "env_unset": [k for k in patch.env_unset if k not in later_env],
                    "unit_set": {k: v for k, v in patch.unit_set.items() if k not in later_unit},
                }
            )
        )
        later_env |= {*patch.env_set, *patch.env_unset}
        later_unit |= set(patch.unit_set)
    return out[::-1]


def render_fix(fix: Fix, settings: Patch | None = None, unit: str = "UNIT") -> str:
    """A fix as a marked block: its settings (environment, unit settings; ``settings`` when a
    later fix overrides some of them), and its whole patch as JSON so a later ``--apply`` or
    ``--remove`` can rebuild the drop-in."""
    whole = without_secrets(fix.patch).model_copy(update={"dropin": None})
    patch = settings if settings is not None else whole
    refuse_control(fix.id, fix.incident, fix.signature, *_words(whole))
    lines = [
        f"{FIX_BEGIN}{fix.id}",
        f"{_INCIDENT_LINE}{fix.incident}  signature: {fix.signature}",
        *([f"{_WHY_LINE}{fix.why}"] if fix.why else []),
        _PATCH_LINE + json.dumps(whole.record(), sort_keys=True),
    ]
    sections: dict[str, list[str]] = {"Service": []}
    sections["Service"] += environment_lines(patch.env_set, unit)
    if patch.env_unset:
        sections["Service"].append("UnsetEnvironment=" + " ".join(patch.env_unset))
    for dotted, value in patch.unit_set.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, []).append(f"{key}={value}")
    for name, body in sections.items():
        if body:
            lines += [f"[{name}]", *body]
    lines.append(f"{FIX_END}{fix.id}")
    return "\n".join(lines) + "\n"


def render_fixes(unit: str, fixes: Sequence[Fix], exec_start: str | None, head: str = "") -> str:
    """diagnose's drop-in for ``unit``: ``head`` (text that is not ours, kept as it was), every
    fix's block in order, then the command line with all their flag changes."""
    if not is_unit_name(unit):
        raise UnsafeDropin(f"refused: {unit!r} is not a unit name")
    refuse_control((exec_start or "").replace("\\\n", ""))
    out = head
    if out and not out.endswith("\n"):
        out += "\n"
    if not head:
        out += (
            f"# diagnose: fixes for {unit}, one marked block each; edit outside them only.\n"
            f"# List them: diagnose fixes list -u {unit}; take one back: diagnose fixes remove.\n"
        )
    for fix, settings in zip(fixes, winning_settings(fixes), strict=True):
        out += "\n" + render_fix(fix, settings, unit)
    flags = flag_reasons(fixes)
    if exec_start is not None:
        out += f"\n{COMMAND_BEGIN}\n{flags}[Service]\nExecStart=\nExecStart={exec_start}\n"
        out += f"{COMMAND_END}\n"
    elif flags:
        out += (
            f"\n{COMMAND_BEGIN}\n{flags}# These flags are comments only: the unit's command line is"
            f" not known here\n# (diagnose journal -u {unit} or --unit-file writes ExecStart=).\n"
            f"{COMMAND_END}\n"
        )
    return out


def flag_reasons(fixes: Sequence[Fix]) -> str:
    """Comment lines, one per flag change of the fixes, each with the fix it comes from."""
    lines = []
    for fix in fixes:
        for group in flag_groups(fix.patch.args_add):
            lines.append(f"#   {shlex.join(group)}  ({fix.signature})")
        added = {g[0] for g in flag_groups(fix.patch.args_add)}
        removed = [flag for flag in fix.patch.args_remove if flag not in added]
        if removed:
            lines.append(f"#   remove {' '.join(removed)}  ({fix.signature})")
    return "".join(f"{line}\n" for line in ["# Command-line changes:", *lines]) if lines else ""


def split_fixes(text: str) -> tuple[str, list[Fix]]:
    """The text outside diagnose's marked blocks, byte for byte (less the blank line written
    before each block), and the fixes inside them, in order. A block whose patch line cannot
    be read is dropped from both (it is rewritten from the others)."""
    outside: list[str] = []
    fixes: list[Fix] = []
    block: list[str] | None = None
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if block is None and (stripped.startswith(FIX_BEGIN) or stripped == COMMAND_BEGIN):
            if outside and outside[-1] in ("\n", "\r\n"):
                outside.pop()  # the blank line render_fixes puts before a block
            block = [stripped]
            continue
        if block is not None:
            if stripped.startswith(FIX_END) or stripped == COMMAND_END:
                fix = _read_fix(block)
                if fix is not None:
                    fixes.append(fix)
                block = None
            else:
                block.append(stripped)
            continue
        outside.append(line)
    return "".join(outside), fixes


def _read_fix(block: list[str]) -> Fix | None:
    if not block[0].startswith(FIX_BEGIN):
        return None
    fix_id_text = block[0][len(FIX_BEGIN) :].strip()
    incident, signature, why, patch = "", "", "", None
    for line in block[1:]:
        if line.startswith(_WHY_LINE):
            why = line[len(_WHY_LINE) :].strip()
        elif line.startswith(_INCIDENT_LINE):
            rest = line[len(_INCIDENT_LINE) :]
            incident, _, signature = rest.partition("  signature: ")
        elif line.startswith(_PATCH_LINE):
            try:
                patch = Patch.model_validate(json.loads(line[len(_PATCH_LINE) :]))
            except (ValueError, ValidationError):
                return None
    if patch is None:
        return None
    return Fix(
        id=fix_id_text,
        signature=signature.strip(),
        incident=incident.strip(),
        patch=patch,
        why=why,
    )


def fix_conflicts(fixes: Sequence[Fix]) -> list[str]:
    """Where two fixes disagree: one variable or flag set to two values, or set by one and
    removed by another. The later fix wins in the drop-in; the user is told."""
    out: list[str] = []
    env: dict[str, tuple[str, str]] = {}
    unset: dict[str, str] = {}
    unit: dict[str, tuple[str, str]] = {}
    flags: dict[str, tuple[str, list[str]]] = {}
    for fix in fixes:
        patch = fix.patch
        for key, value in patch.env_set.items():
            if key in env and env[key][1] != value:
                out.append(f"{fix.id} sets {key}={value}; {env[key][0]} set {key}={env[key][1]}")
            if key in unset:
                out.append(f"{fix.id} sets {key}, which {unset.pop(key)} unsets")
            env[key] = (fix.id, value)
        for key in patch.env_unset:
            if key in env:
                out.append(f"{fix.id} unsets {key}, which {env.pop(key)[0]} sets")
            unset[key] = fix.id
        for key, value in patch.unit_set.items():
            if key in unit and unit[key][1] != value:
                out.append(f"{fix.id} sets {key}={value}; {unit[key][0]} set {unit[key][1]}")
            unit[key] = (fix.id, value)
        for group in flag_groups(patch.args_add):
            flag = group[0].replace("_", "-")
            if flag in flags and flags[flag][1] != group[1:]:
                before = " ".join(flags[flag][1]) or "(on)"
                now = " ".join(group[1:]) or "(on)"
                out.append(f"{fix.id} sets {flag} {now}; {flags[flag][0]} set it to {before}")
            flags[flag] = (fix.id, group[1:])
        added_here = {g[0].replace("_", "-") for g in flag_groups(patch.args_add)}
        for removed in patch.args_remove:
            flag = removed.replace("_", "-")
            if flag in flags and flag not in added_here:
                out.append(f"{fix.id} removes {flag}, which {flags[flag][0]} sets")
                del flags[flag]
    return out


def flag_groups(args: Sequence[str]) -> list[list[str]]:
    """Command-line words grouped as a flag with the values after it (``--tp 4`` is one)."""
    groups: list[list[str]] = []
    for word in args:
        if word.startswith("-") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups
