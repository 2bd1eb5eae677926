"""systemd unit names: the one rule for what a name may hold, and how lines name a unit."""

from __future__ import annotations

import re

from diagnose.core.errors import UserError

UNIT_TYPES = ("service", "socket", "scope", "target", "timer", "mount", "slice", "path")
NAME_CHARS = r"[A-Za-z0-9_@.:\\-]+"
"""The characters systemd allows in a unit name (``\\`` for its escapes)."""

_NAME = re.compile(NAME_CHARS)
_FULL_NAME = re.compile(
    rf"(?P<prefix>[A-Za-z0-9_.:\\-]+)(?:@(?P<instance>[A-Za-z0-9_@.:\\-]*))?"
    rf"\.(?:{'|'.join(UNIT_TYPES)})"
)
NAME_MAX = 255
"""systemd's longest unit name (``UNIT_NAME_MAX`` less its NUL)."""
UNIT_PREFIX = re.compile(rf"^(?P<unit>{NAME_CHARS}\.(?:{'|'.join(UNIT_TYPES)})): ")
"""A systemd message about a unit: ``sglang.service: Main process exited, ...``."""
SERVICE_PREFIX = re.compile(rf"^(?P<unit>{NAME_CHARS}\.service): ")
"""The same, for a service."""


def unit_name(name: str) -> str:
    """``sglang-qwen`` -> ``sglang-qwen.service``; refuses names that are not unit names.

    >>> unit_name("sglang-qwen"), unit_name("node@2.service")
    ('sglang-qwen.service', 'node@2.service')
    """
    name = name.strip()
    if not name or not _NAME.fullmatch(name) or ".." in name or name.startswith("-"):
        raise UserError(
            f"{name!r}: not a unit name", help="pass it as journalctl -u takes it: sglang-qwen"
        )
    return name if name.endswith(tuple(f".{t}" for t in UNIT_TYPES)) else f"{name}.service"


_CONTROL_ESCAPE = re.compile(r"\\x(?:[01][0-9a-fA-F]|7[fF])")
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.@-")


def is_unit_name(name: str) -> bool:
    """Whether ``name`` is a whole unit name by systemd's rules (``unit_name_is_valid``): a
    prefix of ``[A-Za-z0-9:_.\\-]``, at most one ``@`` and an instance, a unit type, at most
    255 bytes; and no ``\\xNN`` escape of a control character (what :func:`escape_unit` makes
    of a newline), so a forged name shown escaped is never a name to write files for.

    >>> is_unit_name("node@2.service"), is_unit_name("a.service\\n[Service]")
    (True, False)
    >>> is_unit_name(escape_unit("a.service\\nExecStartPre=/bin/sh\\n.service"))
    False
    """
    return (
        _FULL_NAME.fullmatch(name) is not None
        and len(name.encode("utf-8", "surrogateescape")) <= NAME_MAX
        and _CONTROL_ESCAPE.search(name) is None
    )


def escape_unit(name: str) -> str:
    """``name`` when it is a unit name, else escaped as ``systemd-escape`` does (``\\xNN`` for
    each byte outside the unit-name characters), for showing only: printable, one line.

    >>> escape_unit("sglang.service"), escape_unit("a b.service\\n[Service]")
    ('sglang.service', 'a\\\\x20b.service\\\\x0a\\\\x5bService\\\\x5d')
    """
    if is_unit_name(name):
        return name
    return "".join(
        c if c in _KEEP else "".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape"))
        for c in name
    )


def check_unit_name(unit: str) -> str:
    """``unit`` when it is a full unit name diagnose may write files for, else a user error:
    systemd's rules (the name, then at most one ``@`` and an instance, then a unit type; at
    most 255 bytes), and not starting with ``.`` or ``-`` (a path or an option)."""
    if not is_unit_name(unit) or unit.startswith((".", "-")) or ".." in unit:
        raise UserError(f"{escape_unit(unit)}: not a unit name I can write a drop-in for")
    return unit


def check_dropin_unit(unit: str) -> str:
    """:func:`check_unit_name`, and ``UNIT.d`` a file name the file system takes: a unit name
    of 254 or 255 bytes is valid, but no drop-in directory can be named for it."""
    check_unit_name(unit)
    if len(f"{unit}.d".encode("utf-8", "surrogateescape")) > NAME_MAX:
        raise UserError(
            f"{unit}: its drop-in directory would be a name longer than {NAME_MAX} bytes",
            help="systemd cannot read a drop-in for it either: give the unit a shorter name",
        )
    return unit
