"""Terminal conventions, decided from the environment the caller passes in (no I/O here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Terminal(NamedTuple):
    """How to draw for the place the output goes: colour, width, live displays."""

    color: bool
    width: int
    live: bool
    """Progress bars and live panels (they redraw lines): a real terminal that is not dumb."""


DEFAULT_WIDTH = 80
"""Columns of a report written to a pipe or a file when ``COLUMNS`` does not say: a pipe
most often ends in a terminal (``| less``), and 80 columns is the narrowest one in use."""


def terminal(env: Mapping[str, str], is_tty: bool, tty_width: int | None = None) -> Terminal:
    """The conventions: ``NO_COLOR`` (any value) turns colour off and wins over
    ``FORCE_COLOR``, which turns it on even in a pipe; ``TERM=dumb`` means no colour and no
    redrawing; ``COLUMNS`` sets the width, else the terminal's, else 80 columns."""
    dumb = env.get("TERM", "") == "dumb"
    if env.get("NO_COLOR"):
        color = False
    elif env.get("FORCE_COLOR", "") not in ("", "0"):
        color = True
    else:
        color = is_tty and not dumb
    columns = env.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    return Terminal(
        color=color,
        width=width or (tty_width if is_tty and tty_width else DEFAULT_WIDTH),
        live=is_tty and not dumb,
    )
