"""The assistant tier (``--ask``): a second opinion from the operator's own model, asked only
on request, fed a redacted and bounded digest of facts, and checked before it is shown.

Only this module is imported by a plain run, to see whether a config file exists at all."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnose.assistant.config import AssistantSettings


def config_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/diagnose/config.toml`` (``~/.config`` by default)."""
    home = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(home) / "diagnose" / "config.toml"


def settings_if_any(asked: bool) -> AssistantSettings | None:
    """The assistant's settings when ``asked`` (``--ask``, ``--show-digest``) or a config file
    may turn it on; None otherwise (nothing more is read or imported)."""
    if not asked and not config_path(os.environ).is_file():
        return None
    from diagnose.assistant.config import settings

    return settings()
