"""Defaults the command line shows before any command module is imported."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

POSTMORTEM_DIR = Path("/var/lib/diagnose/postmortems")
"""Where the OnFailure= hook writes postmortems and `postmortems list` looks."""
SIGNATURE_DRAFTS_DIR = Path("signatures-draft")
"""Where `signatures new` writes a draft signature and its fixture."""


class ListFormat(str, Enum):
    """Output of the commands that print a listing or a verdict."""

    text = "text"
    json = "json"
