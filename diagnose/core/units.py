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


def check_unit_name(unit: str) -> str:
    """``unit`` when it is a full unit name diagnose may write files for, else a user error:
    systemd's rules (the name, then at most one ``@`` and an instance, then a unit type; at
    most 255 bytes), and not starting with ``.`` or ``-`` (a path or an option)."""
    if (
        not _FULL_NAME.fullmatch(unit)
        or unit.startswith((".", "-"))
        or ".." in unit
        or len(unit.encode("utf-8", "surrogateescape")) > NAME_MAX
    ):
        raise UserError(f"{unit!r}: not a unit name I can write a drop-in for")
    return unit
