"""The incident as a timeline: each start attempt, the startup phases it reached with the time
each began, and when it stopped. What the postmortem's diagram is drawn from.

Bounded memory: the first attempt and the last ``MAX_ATTEMPTS - 1`` are kept (a restart loop
can run for days); their numbers say how many lie between.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime

from diagnose.core.models import AttemptTimeline, PhaseSpan
from diagnose.engines.phases import PHASE_ORDER

MAX_ATTEMPTS = 20
RESTART_SCHEDULED = ": Scheduled restart job"
"""systemd's line at the end of ``RestartSec=``: the attempt before it had already stopped."""


class _Attempt:
    def __init__(self, number: int) -> None:
        self.number = number
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.restart_scheduled = False
        self.phases: list[tuple[str, datetime | None]] = []

    def frozen(self) -> AttemptTimeline:
        return AttemptTimeline(
            number=self.number,
            started_at=self.started_at,
            ended_at=self.ended_at,
            phases=[PhaseSpan(phase=phase, started_at=at) for phase, at in self.phases],
        )


class TimelineTracker:
    """Fed every observed record's attempt index, time and phase, in input order."""

    def __init__(self) -> None:
        self._first: _Attempt | None = None
        self._recent: deque[_Attempt] = deque(maxlen=MAX_ATTEMPTS - 1)

    def _current(self, index: int) -> _Attempt:
        current = self._recent[-1] if self._recent else self._first
        if current is None:
            self._first = current = _Attempt(number=1)
        elif index + 1 > current.number:
            current = _Attempt(number=index + 1)
            self._recent.append(current)
        return current

    def observe(
        self, index: int, at: datetime | None, systemd: bool, text: str, phase: str | None
    ) -> None:
        """A record of attempt ``index`` (0-based) at ``at``; ``phase`` is the startup phase
        the line announces, if any."""
        attempt = self._current(index)
        if systemd and RESTART_SCHEDULED in text:
            attempt.restart_scheduled = True
        if at is not None:
            if attempt.started_at is None or at < attempt.started_at:
                attempt.started_at = at
            if not attempt.restart_scheduled and (
                attempt.ended_at is None or at > attempt.ended_at
            ):
                attempt.ended_at = at
        if phase is not None and (
            not attempt.phases or PHASE_ORDER[phase] > PHASE_ORDER[attempt.phases[-1][0]]
        ):
            attempt.phases.append((phase, at))

    def retract(self, index: int, phase: str) -> None:
        """Attempt ``index`` (0-based) did not reach ``phase`` after all."""
        attempt = self._current(index)
        attempt.phases = [(p, at) for p, at in attempt.phases if p != phase]

    def attempts(self) -> list[AttemptTimeline]:
        kept = ([self._first] if self._first else []) + list(self._recent)
        return [attempt.frozen() for attempt in kept]
