"""Start attempts, counted one way for every input.

Structured fields first: when records carry systemd's invocation ID (the journal, a
``journalctl -o json`` export), a new ID is a new attempt and nothing else is. Without them
(saved text), systemd's lines and the engine's launch banner mark attempts, in the wordings
of systemd 245 to 257:

* ``Starting X.service - Desc...`` and ``Started X.service - Desc.`` (249 and later), or
  ``Starting X.service...`` for a unit without a description;
* ``Starting Desc...`` and ``Started Desc.`` (before 249): these do not name the unit, so
  they count only after ``X.service: Scheduled restart job, restart counter is at N.``;
* the engine's launch banner printed again (a restart no systemd line shows).

A systemd line starts an attempt only when the application spoke since the last one.
"""

from __future__ import annotations

import re

from diagnose.core.records import Record
from diagnose.core.units import NAME_CHARS

NAMED_JOB_START = re.compile(r"^(?:Started|Starting) (?P<unit>\S+\.service)\b")
"""systemd starting a service it names (249 and later, or a unit without a description)."""
_ANY_JOB_START = re.compile(r"^(?:Started|Starting) \S")
_RESTART_SCHEDULED = re.compile(rf"^{NAME_CHARS}\.service: Scheduled restart job\b")


class AttemptCounter:
    """Says which record begins a new start attempt."""

    def __init__(self) -> None:
        self._invocation: str | None = None
        self._structured = False
        self._app_spoke = False
        self._restart_scheduled = False
        self._launch_banners: set[str] = set()

    def begins_attempt(self, record: Record, launch_banner: str | None) -> bool:
        """Whether ``record`` begins a start attempt after the first; ``launch_banner`` is the
        engine's launch banner the record is, if any."""
        if record.invocation:
            self._structured = True
            begins = self._invocation is not None and record.invocation != self._invocation
            self._invocation = record.invocation
            return begins
        if self._structured:
            return False
        if record.origin == "systemd":
            return self._systemd_line(record.text)
        if record.origin != "app":
            return False
        begins = launch_banner is not None and launch_banner in self._launch_banners
        if begins:
            self._reset()
        if launch_banner is not None:
            self._launch_banners.add(launch_banner)
        self._app_spoke = True
        return begins

    def _systemd_line(self, text: str) -> bool:
        if _RESTART_SCHEDULED.match(text):
            self._restart_scheduled = True
            return False
        starts = NAMED_JOB_START.match(text) or (
            self._restart_scheduled and _ANY_JOB_START.match(text)
        )
        if starts and self._app_spoke:
            self._reset()
            return True
        return False

    def _reset(self) -> None:
        self._app_spoke = False
        self._restart_scheduled = False
        self._launch_banners = set()
