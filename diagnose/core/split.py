"""One incident per unit: an input that holds the lines of several systemd services (a whole
journal, ``journalctl --since`` without ``-u``) is diagnosed once per service.

:class:`UnitSplitter` stands where an :class:`~diagnose.core.engine.Engine` stands: it feeds
every event to one engine, as for a single unit, and as long as the input names one service
that is all it does (its report is that engine's, unchanged). When a second service appears,
it starts one engine per service and replays what it kept; from then on each event goes to the
service it belongs to:

- systemd's lines name their unit;
- an application line names it in a JSON export (``_SYSTEMD_UNIT``); in a text export a
  process (host, identifier, PID) is given to the service started last that has no process
  yet, when its first line that an engine prints arrives (a text export does not say more);
- the kernel's lines, and lines of processes no service claimed, go to every service;
- a process of one engine (vLLM) is never given to the one service known so far when that
  service's processes are another engine's (SGLang): its lines are held until a service
  that is not yet known appears (its exit, its next start) and then given to it, before
  that service's line. Services never share a process, so no finding of one follows from
  a finding of the other.

Memory stays bounded: the events kept before a second service appears are capped, for the
whole input however many hosts it names (their splitters share one :class:`KeptBudget`); a
splitter that runs out gives its events up, and if a second service appears after that, its
input is diagnosed as one incident and a note says why.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import datetime

from diagnose.core.engine import Engine
from diagnose.core.models import Diagnosis, InputSummary
from diagnose.core.records import Event
from diagnose.core.tracebacks import TRACEBACK_START

MAX_KEPT_EVENTS = 50_000
"""Events kept for a replay until a second service appears, all hosts of an input together."""
_EVERYONE = "\0every unit"
_HELD = "\0held"
_STARTS = ("Started ", "Starting ")


class KeptBudget:
    """How many more events the splitters of one input may keep for a replay."""

    def __init__(self, events: int = MAX_KEPT_EVENTS) -> None:
        self.size = events
        self.left = events


class UnitSplitter:
    """Feed events, then finish: one diagnosis, with one per service in ``units`` when the
    input holds several. The splitters of one input's hosts share ``budget``."""

    def __init__(self, make_engine: Callable[[], Engine], budget: KeptBudget | None = None) -> None:
        self._make_engine = make_engine
        self._budget = budget or KeptBudget()
        self.engine = make_engine()
        """The engine that sees every event: the report of a single-unit input."""
        self._units: list[str] = []
        self._per_unit: dict[str, Engine] = {}
        self._kept: list[tuple[str | None, Event]] | None = []
        self._streams: dict[str, str] = {}
        self._waiting: deque[str] = deque()
        """Services started whose process has not printed yet, oldest first."""
        self.notes: list[str] = []
        self._engines: dict[str, str] = {}
        """The engine whose processes each service runs (from the processes given to it)."""
        self._held: list[tuple[str, Event]] = []
        """Events of processes no service claims yet (another engine's than the one known)."""
        self._dropped_held = False
        self._guessed = False
        """A process was given to a service by start order (a text export)."""

    @property
    def skipped(self) -> dict[str, str]:
        return self.engine.skipped

    def needles(self) -> set[str] | None:
        return self.engine.needles()

    def feed(self, event: Event) -> None:
        self.engine.feed(event)
        unit = self._route(event)
        if unit == _HELD:
            return
        if unit not in (None, _EVERYONE) and unit not in self._units:
            self._units.append(unit)
            claimed = self._claim(unit)
            if len(self._units) == 2:
                self._split()
            for held in claimed:
                self._deliver(unit, held)
        self._deliver(unit, event)

    def _deliver(self, unit: str | None, event: Event) -> None:
        if self._per_unit:
            self._send(unit, event)
        elif self._kept is not None:
            if self._budget.left:
                self._kept.append((unit, event))
                self._budget.left -= 1
            else:
                self._give_up_kept()

    def _claim(self, unit: str) -> list[Event]:
        """The held events, now ``unit``'s (a service not known before): their processes
        are its from now on."""
        claimed = [event for _, event in self._held]
        for process, owner in self._streams.items():
            if owner == _HELD:
                self._streams[process] = unit
        self._budget.left += len(self._held)
        self._held = []
        return claimed

    def _route(self, event: Event) -> str | None:
        """The service ``event`` belongs to; ``_EVERYONE`` for lines every service sees;
        None for lines of no service (they go to every service too)."""
        record = event.first
        if record.origin == "systemd":
            unit = record.unit if record.unit and record.unit.endswith(".service") else None
            if unit and record.text.startswith(_STARTS):
                self._waiting.append(unit)
            return unit or _EVERYONE
        if record.origin != "app":
            return _EVERYONE
        if record.unit:
            return record.unit
        process = record.stream.split("|", 1)[0]
        if process in self._streams:
            return self._hold(process, event, self._streams[process])
        if record.engine is None and TRACEBACK_START not in record.text:
            return None  # not (yet) an engine's process: sudo, a shell, a wrapper
        fitting = [u for u in self._waiting if self._engines.get(u) in (None, record.engine)]
        if fitting:  # the service started last whose processes are this engine's (or unknown)
            unit = fitting[0]
            self._waiting.remove(unit)
        elif len(self._units) == 1 and self._engines.get(self._units[0]) in (None, record.engine):
            unit = self._units[0]
        elif len(self._units) == 1 and record.engine is not None:
            unit = _HELD  # another engine's process: not the known service's
        else:
            return None
        self._streams[process] = unit
        if unit != _HELD and record.engine is not None:
            self._engines.setdefault(unit, record.engine)
        self._guessed = True
        return self._hold(process, event, unit)

    def _hold(self, process: str, event: Event, unit: str) -> str:
        """``unit``; an event of a held process is kept aside while the budget lasts (after
        that, the held lines go to no service's report, and a note says so)."""
        if unit != _HELD:
            return unit
        if self._budget.left:
            self._held.append((process, event))
            self._budget.left -= 1
        else:
            self._dropped_held = True
        return _HELD

    def _give_up_kept(self) -> None:
        """No replay: the kept events go back to the budget, for the other hosts."""
        if self._kept is not None:
            self._budget.left += len(self._kept)
            self._kept = None

    def _split(self) -> None:
        if self._kept is None:
            self.notes.append(
                f"{self._units[1]} appeared after more events than are kept for a replay "
                f"({self._budget.size}, all hosts together): the input was diagnosed as one "
                "incident"
            )
            return
        for name in self._units:
            self._per_unit[name] = self._make_engine()
        for unit, event in self._kept:
            self._send(unit, event)
        self._give_up_kept()

    def _send(self, unit: str | None, event: Event) -> None:
        if unit in self._per_unit:
            self._per_unit[unit].feed(event)
            return
        if unit not in (None, _EVERYONE):  # a service that appeared after the split
            self._per_unit[unit] = self._make_engine()
            self._per_unit[unit].feed(event)
            return
        for engine in self._per_unit.values():
            engine.feed(event)

    def finish(
        self, observed_until: datetime | None = None, inputs: list[InputSummary] | None = None
    ) -> Diagnosis:
        """The single engine's diagnosis; for several services, the first that failed (or
        the first one) with every service's diagnosis in ``units``."""
        if not self._per_unit:
            diagnosis = self.engine.finish(observed_until=observed_until, inputs=inputs)
            return diagnosis.model_copy(update={"notes": [*diagnosis.notes, *self.notes]})
        each = [
            engine.finish(observed_until=observed_until, inputs=inputs).model_copy(
                update={"unit": unit}
            )
            for unit, engine in self._per_unit.items()
        ]
        failed = [d for d in each if d.primary is not None]
        chosen = failed[0] if failed else each[0]
        names = ", ".join(d.unit or "?" for d in each)
        said = (
            f"The input holds {len(each)} services ({names}); each is diagnosed on its own "
            f"(`units`). This report is about {chosen.unit}"
            + (", the one that failed." if len(failed) == 1 else ".")
        )
        if self._held or self._dropped_held:
            said += (
                " Lines of a process of another engine than the services' own, which no "
                "service claimed, are in no service's report."
            )
        if self._guessed:
            said += (
                " Application lines were given to services by start order: a text export "
                "does not say which service wrote them."
            )
        return chosen.model_copy(update={"units": each, "notes": [*self.notes, said]})
