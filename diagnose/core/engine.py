"""The engine: events in, a ranked diagnosis out. No I/O, no clock, no printing.

``Engine.feed`` takes events one at a time (memory stays bounded: per signature it keeps a
few hits, not the log); ``Engine.finish`` ranks the findings. The end of observation for
absence signatures is the input's last timestamp unless the caller passes its own clock
reading (a live follower passes "now").
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from diagnose.core import expr
from diagnose.core.attempts import NAMED_JOB_START, AttemptCounter
from diagnose.core.changes import with_plan
from diagnose.core.dropin import render_dropin
from diagnose.core.incident import (
    ERROR_NEEDLES,
    Failure,
    IncidentTracker,
    clipped,
    is_error_line,
    is_noise,
    may_state_a_cause,
    raised_line,
)
from diagnose.core.models import (
    Confidence,
    Diagnosis,
    ErrorTemplate,
    Evidence,
    Finding,
    Hypothesis,
    InputSummary,
    PackageAction,
    Patch,
    PhaseTime,
    RankTime,
    Role,
    Severity,
    Timeline,
)
from diagnose.core.optionlink import (
    OptionLink,
    env_assignments,
    forced_test_switch,
    launch_options,
    linked_option,
)
from diagnose.core.ranking import (
    Draft,
    catch_all_failures,
    choose_patch,
    derive,
    fill_texts,
    is_catch_all,
    is_failure,
    no_signature_decided,
    primary_of,
    rank,
    version_check,
    with_primary,
)
from diagnose.core.records import Event, Record
from diagnose.core.scan import NeedleSet
from diagnose.core.signature import (
    AbsenceMatch,
    CountMatch,
    LineMatch,
    Pattern,
    SequenceMatch,
    Signature,
)
from diagnose.core.timeline import TimelineTracker
from diagnose.core.tracebacks import (
    TRACEBACK_START,
    names_frame,
    raised_message,
    starts_traceback,
    stops_in_frame,
)
from diagnose.core.units import SERVICE_PREFIX
from diagnose.engines import cause_elsewhere_lines, death_notices, profile, profiles
from diagnose.engines.base import SERVING
from diagnose.engines.phases import PHASE_ORDER, all_markers, launch_marker, phase_of

if TYPE_CHECKING:
    from diagnose.core.explain import Explainer, PackagePins

REGEX_TIMEOUT_S = 1.0
MAX_HITS = 64
"""Hits kept per signature: the first ones, and a running count of the rest."""
MAX_EVIDENCE = 6
MAX_ENGINE_VARIABLES = 64
"""Engine variables kept from the log: a pasted environment dump stays small."""
EXCERPT_LINES = 40
"""An input this short may be a pasted excerpt: its lines are read even with no error word."""
PRINTED_BY = "printed_by"
"""A regex group of this name that the line's text left empty takes the name of the process
whose prefix the line parser took off (vLLM's ``(Name pid=N)``, a Ray task's or actor's
``(task pid=N)``, SGLang's rank tags): who printed the line."""
MAX_RANKS = 256
"""Ranks whose last line the timeline keeps."""

MESSAGE_CONTINUATION_LINES = 4
"""How far below an error its own detail lines reach (NCCL's ``Last error:`` and the next)."""
_ENDS_SENTENCE = re.compile(r"[.!?:]\s*$")
_GOES_ON = re.compile(r"[a-z0-9(]")
"""How a line that carries on a wrapped sentence starts."""

_ENGINE_OF_PACKAGE = {package: p.name for p in profiles() for package in (p.name, *p.code_packages)}
"""Each engine's Python packages (its own name, its kernels), to the engine."""
_ENGINE_IN_CODE = re.compile(
    r"(?:/|\bfrom |\bimport |(?<![\w-])-m\s+"
    r"|(?<![\w./-])(?=\w+\.(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b))("
    + "|".join(_ENGINE_OF_PACKAGE)
    + r")(?=[./\s]|$)"
    r"|(?<![A-Za-z0-9_./-])("
    + "|".join(p.name for p in profiles())
    + r")(?= serve(?![A-Za-z0-9_]))"
)
"""An engine's package in a traceback frame's path, an import statement, ``python -m`` or the
module of an exception class (``vllm.exceptions.VLLMValidationError``), or its own command
(``vllm serve``, ``sglang serve``) on a launch line, or in a sentence of a language that writes
no space before it (``使用vllm serve部署``)."""

ALWAYS_INTERESTING = (
    "Started ",
    "Starting ",
    ".service: ",
    "COMMAND=",
    "sigquit",
    "SIGQUIT",
    "crashed",
    "died",
    TRACEBACK_START,
    *ERROR_NEEDLES,
)
"""Literals the engine itself watches: attempt boundaries, unit names, tracebacks, and the
error words, stops and exits that tell of a failure no signature knows."""
UNKNOWN_SIGNATURE = "unknown-failure"
_STOP_COMMAND = r"^\s*(?P<user>[\w.-]+) : .*COMMAND=\S*systemctl (?:stop|restart|kill)\b"
"""sudo's line for a person's ``systemctl stop``: who stopped the service. This and the
other patterns of lines few runs see compile when first used (``re`` caches them)."""
_NEVER_LISTENED = "error while attempting to bind on address"
"""uvicorn's bind failure: it says "Application startup complete." before it binds the port,
so a start that then fails to bind was never ready."""
_DEATH_NOTICE = "|".join(death_notices())
"""The engine's own words for a process of it that died (the profiles' ``death_notices``)."""
ENGINE_VALUES = frozenset(
    ("engine", "engine_version", "unit", "phase", "count", "attempts", "ranks", "error_before",
     "error_here_or_before", "error_earlier", "stop_requested", "stop_job", "quiet_minutes",
     "quiet_for", "threshold")
)  # fmt: skip
"""Values this engine gives every match beside its captures (``_match`` for conditions,
``_draft`` for the finding): the engine and unit it detected, where and how often it happened,
what came before, how long an absence lasted. A signature's text may name them; keep the list
with the two methods."""
_RAISED = re.compile(r"\s*(?:[A-Za-z_][\w.]*(?:Error|Exception): |\[(?i:error|critical)\])")
"""A line that is an exception as Python prints it (``ImportError: ...``), or one a log viewer
marks as an error (``[error]...``)."""
_CAUSE_ELSEWHERE = re.compile("|".join(cause_elsewhere_lines()))
"""Lines that say a failure happened without saying which (wrappers and death notices)."""


_EXPLAINING = ("match", "step")
"""Roles whose hit says a failure happened (not a value, a progress line or a support)."""


def _explains(state: _State, role: str, index: int) -> bool:
    """Whether a hit explains its line: a specific signature's match, or the last step of a
    sequence whose earlier steps were seen (a first step alone, the last one without them, or
    an absence's progress line, explains nothing yet)."""
    if not _specific(state.signature):
        return False
    last_step = role == "step" and index == len(state.steps) - 1
    return role == "match" or (last_step and all(state.steps[:index]))


class Hit(NamedTuple):
    event: Event
    record: Record
    captures: dict[str, str]
    seq: int
    ts: datetime | None
    attempt: int
    phase: str | None


class _AbsenceWindow:
    def __init__(self, start: datetime | None, hits: list[Hit]) -> None:
        self.start = start
        self.hits = hits


class _State:
    """What the engine has seen of one signature."""

    def __init__(self, signature: Signature) -> None:
        self.signature = signature
        self.hits: list[Hit] = []
        self.extra_hits = 0
        self.steps: list[list[Hit]] = []
        self.window: _AbsenceWindow | None = None
        self.fired: list[list[Hit]] = []
        self.quiet_s = 0.0
        self.context: dict[str, str] = {}
        self.support: list[Hit] = []


class Engine:
    """Feed events, then finish. One engine per diagnosis."""

    def __init__(
        self,
        signatures: Iterable[Signature],
        facts: Iterable[Pattern] = (),
        hang_after: float | None = None,
        explainers: Sequence[Explainer] = (),
        engine_version: tuple[str, str] | None = None,
        pins: PackagePins | None = None,
    ) -> None:
        self._states = [_State(signature) for signature in signatures]
        self.facts: dict[str, Any] = {}
        """Values every signature sees: launch arguments, versions (from ``_facts.yaml``)."""
        self.env_given: dict[str, str] = {}
        """The engine variables the log shows set, each with its latest value."""
        if engine_version is not None:  # given by the user: it outranks what the log shows
            self.facts[f"{engine_version[0]}_version"] = engine_version[1]
        self._given_version = engine_version
        self.hang_after = hang_after
        self.pins = pins
        """Makes the findings' package changes exact from the engine release's requirements."""
        self.explainers = tuple(explainers)
        """Tiers below the hand signatures, asked in turn when none of them decided."""
        self._explainer_needles = tuple(
            sorted({n for explainer in self.explainers for n in explainer.needles})
        )
        self.skipped: dict[str, str] = {}
        self._awaiting: list[tuple[_State, int, Hit, dict[str, Any]]] = []
        """Lines a signature matched whose conditions wait for a value its context may capture
        later in the input (judged again at the end)."""
        self._patterns: list[tuple[_State, str, int, Pattern]] = []
        for state in self._states:
            self._index(state)
        self._facts_state = _State(signature=None)  # type: ignore[arg-type]
        for i, pattern in enumerate(facts):
            self._patterns.append((self._facts_state, "fact", i, pattern))
        self._always = [entry for entry in self._patterns if not entry[3].needles]
        self._by_needle: dict[str, list[int]] = {}
        """For each needle, the positions in ``_patterns`` of the patterns that need it."""
        for position, (_, _, _, pattern) in enumerate(self._patterns):
            for needle in pattern.needles:
                self._by_needle.setdefault(needle, []).append(position)
        self._needles = frozenset(
            [*self._by_needle, *self._explainer_needles, *all_markers(), *ALWAYS_INTERESTING]
        )
        """Every literal that can make a line matter (see ``needles``). The set that tells
        which patterns to try holds them all (the others select none), so the input's scanner
        over the same literals shares its automaton."""
        self._needle_set = NeedleSet.shared(self._needles)
        self._last_ts: datetime | None = None
        self._records_seen = False
        self._excerpt: list[Record] = []
        """The first lines, kept while the input may be a pasted excerpt."""
        self._record_count = 0
        self._attempt_starts: list[int] = []
        """Seq of the first record of each start attempt after the first."""
        self.attempt_history = TimelineTracker()
        self._attempts = AttemptCounter()
        self._phases: dict[str | None, list[tuple[int, str]]] = {}
        self._ready_seqs: list[int] = []
        """Where the any-rank history records "ready", in order (bisected, never scanned)."""
        """Per rank (None: any rank), the seq at which each startup phase began."""
        self.unit_counts: dict[str, int] = {}
        self.engines: dict[str, int] = {}
        self._engine_code_hints: dict[str, int] = {}
        """Engines named by lines of no engine's format: a traceback frame in the engine's
        package, an import of it. Asked only when no line carries an engine's prefix."""
        self.values: dict[str, dict[str, Any]] = {}
        """After ``finish``: what each firing signature captured and derived."""
        self.incident = IncidentTracker()
        self._live = False
        self._last_app_ts: dict[int, datetime] = {}
        """Per start attempt, the time of the engine's last line before a stop request."""
        self._ready_ts: dict[int, datetime] = {}
        self._stops: dict[int, tuple[datetime | None, int]] = {}
        """Per start attempt, when its first stop was requested (time, seq)."""
        self._stop_user: str | None = None
        self._rank_last: dict[int, dict[str, datetime]] = {}
        """Per start attempt, each rank's last line (at most ``MAX_RANKS`` ranks)."""
        self._phase_ts: dict[tuple[int, str], datetime] = {}
        """When each start attempt first reached each phase."""
        self._deaths: set[int] = set()
        """Start attempts in which the engine said one of its processes died."""

    def needles(self) -> set[str] | None:
        """Every literal that can make a line matter to this engine: the library's needles,
        startup-phase markers, attempt boundaries and traceback headers. None when some
        pattern has no needles, so every line has to be looked at."""
        return None if self._always else set(self._needles)

    def _index(self, state: _State) -> None:
        signature = state.signature
        match = signature.match
        for i, pattern in enumerate(signature.context):  # before the match: a value on an
            self._patterns.append((state, "context", i, pattern))  # event's earlier line counts
        if isinstance(match, SequenceMatch):
            state.steps = [[] for _ in match.steps]
            for i, step in enumerate(match.steps):
                self._patterns.append((state, "step", i, step))
        elif isinstance(match, AbsenceMatch):
            self._patterns.append((state, "after", 0, match.after))
            for i, expect in enumerate(match.expect):
                self._patterns.append((state, "expect", i, expect))
            for i, until in enumerate(match.until):
                self._patterns.append((state, "until", i, until))
        else:
            self._patterns.append((state, "match", 0, match))
        for i, pattern in enumerate(signature.supporting):
            self._patterns.append((state, "support", i, pattern))

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        for record in event.records:
            self._observe(record)
        text = event.text
        found = self._needle_set.found(text)
        positions = sorted({p for needle in found for p in self._by_needle.get(needle, ())})
        candidates = [self._patterns[p] for p in positions] + self._always
        matched = False
        for state, role, index, pattern in candidates:
            if state.signature is not None and state.signature.id in self.skipped:
                continue
            hit = self._match(state, pattern, event, role, index)
            if hit is not None and role in _EXPLAINING and is_noise(hit.record.text):
                continue  # known noise is no failure, whatever a pattern says of it
            if hit is not None:
                self._record_hit(state, role, index, hit)
                matched = matched or _explains(state, role, index)
        attempt = self._attempt_of(event.first.seq)
        self.incident.feed(event, attempt, matched)
        said = _CAUSE_ELSEWHERE.search(text) if event.first.origin == "app" else None
        if said is not None:
            self.incident.note_failure_notice(event.record_at(said.start()), attempt)
        # a death notice is one of those lines: it is looked for only where one of them is
        if said is not None and re.search(_DEATH_NOTICE, text):  # after the matching:
            self._deaths.add(attempt)  # a kill on the same line is still judged on its own
            if self._ready_between(self._attempt_starts[attempt - 1] if attempt else -1, event.seq):
                self.incident.died_serving.add(attempt)
        if not matched and self._explainer_needles:
            known = sorted(found.intersection(self._explainer_needles))
            if known:  # the first needle in order, as the tiers' needles are kept sorted
                record = event.record_at(text.find(known[0]))
                self.incident.keep_unexplained(record, self._attempt_of(record.seq))

    def _observe(self, record: Record) -> None:
        self._records_seen = True
        self._record_count += 1
        if self._record_count <= EXCERPT_LINES and may_state_a_cause(record):
            self._excerpt.append(record)
        if record.ts is not None and (self._last_ts is None or record.ts > self._last_ts):
            self._last_ts = record.ts
        if record.engine:
            self.engines[record.engine] = self.engines.get(record.engine, 0) + 1
        elif not self.engines:
            for package, command in _ENGINE_IN_CODE.findall(record.text):
                named = _ENGINE_OF_PACKAGE[package or command]
                self._engine_code_hints[named] = self._engine_code_hints.get(named, 0) + 1
        phase = phase_of(record.text, record.engine) if record.origin == "app" else None
        banner = launch_marker(record.text) if phase == "launch" else None
        if self._attempts.begins_attempt(record, banner):
            self._new_attempt(record.ts, record.seq)
        attempt = self._attempt_of(record.seq)
        self.attempt_history.observe(
            len(self._attempt_starts), record.ts, record.origin == "systemd", record.text, phase
        )
        if record.origin == "systemd":
            if record.text.startswith("Stopping ") and attempt not in self._stops:
                self._stops[attempt] = (record.ts, record.seq)
            unit = SERVICE_PREFIX.match(record.text) or NAMED_JOB_START.match(record.text)
            if unit:
                name = unit.group("unit")
                self.unit_counts[name] = self.unit_counts.get(name, 0) + 1
            return
        if record.origin != "app":
            return
        if record.unit:
            self.unit_counts[record.unit] = self.unit_counts.get(record.unit, 0) + 1
        stop = re.match(_STOP_COMMAND, record.text) if "COMMAND=" in record.text else None
        if stop:
            self._stop_user = stop.group("user")
        elif record.ts is not None and attempt not in self._stops:
            self._last_app_ts[attempt] = record.ts
        if _NEVER_LISTENED in record.text and attempt in self.incident.ready_seq:
            self._retract_ready(attempt)
        if phase == "ready":
            self.incident.ready_seq.setdefault(attempt, record.seq)
            if record.ts is not None:
                self._ready_ts.setdefault(attempt, record.ts)
        if record.rank and record.ts is not None:
            spoke = self._rank_last.setdefault(attempt, {})
            if record.rank in spoke or len(spoke) < MAX_RANKS:
                spoke[record.rank] = record.ts
        if phase is not None and record.ts is not None:
            self._phase_ts.setdefault((attempt, phase), record.ts)
        if phase is not None:
            for rank in {record.rank, None}:
                history = self._phases.setdefault(rank, [])
                current = self._phase_in(history, record.seq)
                if current is None or PHASE_ORDER[phase] > PHASE_ORDER[current]:
                    bisect.insort(history, (record.seq, phase))
                    if rank is None and phase == "ready":
                        bisect.insort(self._ready_seqs, record.seq)

    def _retract_ready(self, attempt: int) -> None:
        """Forget that start attempt ``attempt`` said it was ready."""
        start = self._attempt_starts[attempt - 1] if attempt else -1
        del self.incident.ready_seq[attempt]
        self._ready_ts.pop(attempt, None)
        self._phase_ts.pop((attempt, "ready"), None)
        self._ready_seqs[:] = [seq for seq in self._ready_seqs if seq < start]
        for history in self._phases.values():
            history[:] = [(seq, p) for seq, p in history if p != "ready" or seq < start]
        self.attempt_history.retract(attempt, "ready")

    def _attempt_of(self, seq: int) -> int:
        return bisect.bisect_right(self._attempt_starts, seq)

    def _phase_in(self, history: list[tuple[int, str]], seq: int) -> str | None:
        """The phase ``history`` says was reached at ``seq``, within that seq's attempt."""
        index = bisect.bisect_right(history, (seq, "~")) - 1
        if index < 0:
            return None
        begun, phase = history[index]
        attempt = self._attempt_of(seq)
        return phase if begun >= (self._attempt_starts[attempt - 1] if attempt else -1) else None

    def _phase_at(self, rank: str | None, seq: int) -> str | None:
        """The phase ``rank`` was in at ``seq``, within that seq's start attempt: ``serving``
        once the server said it was ready."""
        attempt = self._attempt_of(seq)
        if self._ready_between(self._attempt_starts[attempt - 1] if attempt else -1, seq):
            return SERVING  # the server said it was ready: what follows is run time
        return self._phase_in(self._phases.get(rank) or self._phases.get(None) or [], seq)

    def _ready_between(self, start: int, seq: int) -> bool:
        """Whether any line of the start attempt that began at ``start`` said the server was
        ready before ``seq``."""
        index = bisect.bisect_left(self._ready_seqs, start)
        return index < len(self._ready_seqs) and self._ready_seqs[index] < seq

    def _new_attempt(self, ts: datetime | None, seq: int) -> None:
        for state in self._states:
            if state.window is not None:
                self._close_window(state, ts)
        self._attempt_starts.append(seq)

    def _match(
        self, state: _State, pattern: Pattern, event: Event, role: str, index: int
    ) -> Hit | None:
        try:
            found = pattern.compiled.search(event.text, timeout=REGEX_TIMEOUT_S)
        except TimeoutError:
            if state.signature is None:
                return None
            self.skipped[state.signature.id] = (
                f"regex took over {REGEX_TIMEOUT_S:g}s on one line; signature skipped for this run"
            )
            return None
        if found is None:
            return None
        captures = _normalise_units({k: v for k, v in found.groupdict().items() if v is not None})
        record = event.record_at(found.start())
        if record.rank and PRINTED_BY in pattern.compiled.groupindex:
            captures.setdefault(PRINTED_BY, record.rank)  # the prefix the line parser took off
        phase = self._phase_at(record.rank or event.first.rank, record.seq)
        hit = Hit(
            event,
            record,
            captures,
            event.seq,
            record.ts or event.ts or self._last_ts,
            self._attempt_of(record.seq),
            phase,
        )
        if pattern.conditions:
            attempt = self._attempt_of(record.seq)
            # what came before in this start attempt: an error, the engine's word that a
            # process died, a stop request (a kill after any of them is explained)
            error_before = (
                bool(self.incident.first_errors.get(attempt))
                or attempt in self._deaths
                or (
                    record is not event.first  # a traceback's line, or an exception's next line
                    and (starts_traceback(event.first.text) or _RAISED.match(event.first.text))
                )
                or _RAISED.match(record.text) is not None  # the exception's own words
            )
            values = {
                **self.facts,
                **state.context,
                "phase": phase,
                "error_before": error_before,
                # or the line is an error itself, by its level or words (not a warning's advice)
                "error_here_or_before": error_before or is_error_line(record),
                # an error of an earlier event only: not the traceback a message comes in (a
                # Ray actor's death is reported inside the exception that it raises)
                "error_earlier": bool(self.incident.first_errors.get(attempt)),
                "stop_requested": self._stop_requested(attempt),
                "stop_job": attempt in self._stops,  # systemd's own `Stopping ...`
                **captures,
            }
            if state.signature is not None and state.signature.derived:
                derive(state.signature, values)  # conditions may test derived values
            if not expr.all_hold(pattern.conditions, values):
                awaits = role == "match" and self._awaits_context(state, pattern, values)
                if awaits and len(self._awaiting) < MAX_HITS:
                    self._awaiting.append((state, index, hit, values))
                return None
        return hit

    def _record_hit(self, state: _State, role: str, index: int, hit: Hit) -> None:
        if role == "fact":
            self.facts.update(hit.captures)
            if "engine_env" in hit.captures and len(self.env_given) < MAX_ENGINE_VARIABLES:
                self.env_given.update(env_assignments(hit.record.text))
        elif role == "context":
            state.context.update(hit.captures)
        elif role == "support":
            if len(state.support) < MAX_EVIDENCE:
                state.support.append(hit)
        elif role == "match":
            self._keep(state.hits, hit, state)
        elif role == "step":
            if len(state.steps[index]) < MAX_HITS:
                state.steps[index].append(hit)
        elif role == "after":
            if state.window is None:
                state.window = _AbsenceWindow(hit.ts, [hit])
            else:  # the quiet span runs from the latest sign of progress
                state.window.start = hit.ts or state.window.start
                if len(state.window.hits) < MAX_HITS:
                    state.window.hits.append(hit)
        elif role == "expect":
            state.window = None
        elif role == "until":
            self._close_window(state, hit.ts)

    @staticmethod
    def _awaits_context(state: _State, pattern: Pattern, values: dict[str, Any]) -> bool:
        """Whether the conditions that fail on a signature's line only lack a value its context
        patterns may still capture later in the input (the platform a traceback below the
        message shows): the line is judged again when the input has ended."""
        signature = state.signature
        if signature is None or not signature.context or pattern is not signature.match:
            return False
        if not isinstance(pattern, LineMatch):
            return False
        later = {name for context in signature.context for name in context.compiled.groupindex}
        failing = [c for c in pattern.conditions if not c.holds(values)]
        return all(not c.negated and c.names <= later - values.keys() for c in failing)

    def _judge_awaiting(self) -> None:
        """Judge again the lines whose conditions waited for context: with what the whole
        input captured, a line whose conditions now hold is a match."""
        for state, index, hit, values in self._awaiting:
            match = state.signature.match
            assert isinstance(match, LineMatch)
            if expr.all_hold(match.conditions, {**values, **state.context}):
                self._record_hit(state, "match", index, hit)
        self._awaiting.clear()

    @staticmethod
    def _keep(hits: list[Hit], hit: Hit, state: _State) -> None:
        if len(hits) < MAX_HITS:
            hits.append(hit)
        else:
            hits[-1] = hit  # keep the newest as the last one
            state.extra_hits += 1

    def _within(self, state: _State) -> float:
        match = state.signature.match
        assert isinstance(match, (AbsenceMatch, CountMatch, SequenceMatch))
        if isinstance(match, AbsenceMatch) and self.hang_after is not None:
            return self.hang_after
        return match.within

    def _close_window(self, state: _State, end: datetime | None) -> None:
        window = state.window
        state.window = None
        if window is None or window.start is None or end is None:
            return
        quiet = (end - window.start).total_seconds()
        if quiet >= self._within(state):
            state.fired.append(window.hits)
            state.quiet_s = max(state.quiet_s, quiet)

    # -- finishing -------------------------------------------------------------------------

    def snapshot(self, now: datetime, inputs: list[InputSummary] | None = None) -> Diagnosis:
        """What the engine would report if the input ended at ``now``, without ending it:
        a live follower calls this on every tick, so a hang is reported when it is one."""
        saved = [(state, state.window, list(state.fired), state.quiet_s) for state in self._states]
        self._live = True  # the input goes on: an error at its end may not be the last word
        try:
            return self.finish(observed_until=now, inputs=inputs)
        finally:
            self._live = False
            for state, window, fired, quiet in saved:
                state.window, state.fired, state.quiet_s = window, fired, quiet
            self.values = {}

    @property
    def phase(self) -> str | None:
        """The furthest startup phase of the current attempt."""
        return self._phase_reached()

    def finish(
        self,
        observed_until: datetime | None = None,
        inputs: list[InputSummary] | None = None,
    ) -> Diagnosis:
        """Rank what was found. The quiet span of a pending absence ends at ``observed_until``
        (a live caller's clock), else at the last timestamp of the inputs."""
        inputs = inputs or []
        self._judge_awaiting()
        ends = [i.last_ts for i in inputs if i.last_ts] + ([self._last_ts] if self._last_ts else [])
        end = observed_until or (max(ends) if ends else None)
        cut_short: tuple[_State, Hit] | None = None
        for state in self._states:
            window = state.window
            if window is not None:
                self._close_window(state, end)
                untimed = window.start is None or end is None or end <= window.start
                silent = self.incident.last_error_seq < window.hits[-1].seq  # no error after
                if untimed and silent and not state.fired and not self._live:
                    last = window.hits[-1]
                    if cut_short is None or last.seq > cut_short[1].seq:
                        cut_short = (state, last)
        unit = max(self.unit_counts, key=self.unit_counts.__getitem__) if self.unit_counts else None
        engine = self._engine()
        drafts = []
        for state in self._states:
            if state.signature is None:
                continue
            for hits in self._occurrences(state):
                drafts.append(self._draft(state, hits, unit, engine))
                self.values.setdefault(state.signature.id, drafts[-1].values)
        failure = None
        catch_all = catch_all_failures(drafts)
        last_attempt, ready, ended = (
            len(self._attempt_starts),
            self._phase_reached() == "ready",
            not self._live,
        )
        drafts = self._without_healthy_noise(drafts, last_attempt, ready, ended)
        drafts = self._without_starts_that_went_on(drafts, last_attempt, ready, ended)
        undecided = no_signature_decided(drafts) or self._only_wrappers_after_an_error(drafts)
        if undecided:  # does the input show a failure nobody explains?
            failure = self.incident.failure(last_attempt, ready, ended)
        templates = [
            ErrorTemplate(
                template=t.template, count=t.count, first_line=t.first_line, first_ts=t.first_ts
            )
            for t in self.incident.top_templates()
        ]
        findings = rank(drafts)
        explained = (
            self._explained(unit, engine)
            if failure is not None
            or (undecided and self.incident.may_have_failed(last_attempt, ready, ended))
            else None
        )
        if explained is None and not findings and failure is None:
            explained = self._explained_excerpt(unit, engine)
        if explained is not None and explained.tier == "generic" and failure is None:
            explained = None  # a message's words alone never make a failure of a log
        if explained is not None and failure is not None and _only_a_lead(explained):
            unknown = self._unknown(failure, templates, unit, catch_all[:1])
            if unknown.signature == OPTION_PATH_SIGNATURE:  # the option the error names decides
                explained = unknown.model_copy(
                    update={"alternatives": [*unknown.alternatives, explained.explanation]}
                )
        if explained is not None:
            kept = [f for f in findings if f.signature not in {d.signature.id for d in catch_all}]
            findings = with_primary(kept, explained)
        elif findings and self._broad(findings[0]):
            findings[0] = self._refined(findings[0], unit, engine)
        elif findings:
            findings[0] = self._with_derived_fix(findings[0], unit, engine)
        if failure is not None and explained is None:
            unknown = self._unknown(failure, templates, unit, catch_all[:1])
            if catch_all and findings and findings[0].signature == catch_all[0].signature.id:
                # the catch-all named the exception: it keeps its id and takes in the rest
                findings[0] = _enriched(findings[0], unknown)
            else:
                findings = with_primary(findings, unknown)
        elif templates and findings and findings[0].category == "unknown":
            # the catch-all names the exception; the templates tell what else went wrong
            findings[0] = findings[0].model_copy(update={"templates": templates})
        findings = self._peer_failed_first(findings, drafts, templates, unit, engine)
        wrappers = {d.signature.id for d in drafts if d.signature.wrapper}
        if wrappers:  # a wrapper of an error that is reported says nothing more
            lead = primary_of(findings)
            findings = [f for f in findings if f.id == lead or f.signature not in wrappers]
        if self.facts.get("gaudi_build"):
            findings = [_on_the_gaudi_build(f) for f in findings]
        printed = launch_options(None, self.facts.get("launch_settings"))
        if printed:  # the engine printed the settings it was given: a flag it lacks is no fix
            findings = [_without_flags_not_given(f, printed, unit) for f in findings]
        if self.pins is not None:
            version = self._engine_version(engine)
            checked = [self.pins(finding, engine, version) for finding in findings]
            findings = [_redrawn(*pair, unit) for pair in zip(findings, checked, strict=True)]
        primary = primary_of(findings)
        timeline = self._timeline(end, findings, primary)
        diagnosis = Diagnosis(
            inputs=inputs,
            primary=primary,
            findings=findings,
            unit=unit,
            engine=engine,
            phase_reached=self._phase_reached(),
            attempts=len(self._attempt_starts) + 1 if self._records_seen else 0,
            timeline=timeline,
            notes=_ended_before_ready(*cut_short) if cut_short and primary is None else [],
        )
        return with_plan(diagnosis)  # the one drop-in: every finding's change merged

    def _without_healthy_noise(
        self, drafts: list[Draft], last_attempt: int, ready: bool, ended: bool
    ) -> list[Draft]:
        """Lines that healthy starts print too (``healthy_too``) count only in a start that
        failed, and only when no other specific failure (other than one they cause) fired."""
        noise = {d.signature.id for d in drafts if d.signature.healthy_too}
        if not noise:
            return drafts
        others = [
            d
            for d in drafts
            if d.signature.id not in noise
            and is_failure(d.signature)
            and not d.signature.generic
            and not noise & set(d.signature.consequence_of)
        ]
        failed = self.incident.failure(last_attempt, ready, ended) is not None
        if failed and not others:
            return drafts
        return [d for d in drafts if d.signature.id not in noise]

    def _without_starts_that_went_on(
        self, drafts: list[Draft], last_attempt: int, ready: bool, ended: bool
    ) -> list[Draft]:
        """A warning whose trouble hangs a start (``hangs_before``) counts only where the
        input ends in the last start attempt before the start reached that phase (never ready,
        not stopped), with no error after the warning and no other specific failure than one
        it causes: a start that went on, or failed of something else, leaves it out."""
        stalls = [d for d in drafts if d.signature.hangs_before is not None]
        if not stalls:
            return drafts
        reached = self._phase_reached()
        stopped = self._stop_requested(last_attempt)
        gone: set[int] = set()
        for draft in stalls:
            bound = PHASE_ORDER[str(draft.signature.hangs_before)]
            others = [
                d
                for d in drafts
                if d is not draft
                and is_failure(d.signature)
                and not d.signature.generic
                and draft.signature.id not in d.signature.consequence_of
            ]
            stalled = (
                ended
                and not ready
                and not stopped
                and self._attempt_of(draft.seq) == last_attempt
                and (reached is None or PHASE_ORDER[reached] < bound)
                and self.incident.last_error_seq <= draft.seq  # no error after the warning
            )
            if not stalled or others:
                gone.add(id(draft))
        return [d for d in drafts if id(d) not in gone]

    def _peer_failed_first(
        self,
        findings: list[Finding],
        drafts: list[Draft],
        templates: list[ErrorTemplate],
        unit: str | None,
        engine: str | None,
    ) -> list[Finding]:
        """When the primary only says a rank waited for the others (``waits_for_peers``) and
        an exception came earlier in the same start attempt, that exception is the cause."""
        first = findings[0] if findings and findings[0].role is Role.ROOT_CAUSE else None
        waiting = next((d for d in drafts if first and d.signature.id == first.signature), None)
        if first is None or waiting is None or not waiting.signature.waits_for_peers:
            return findings
        attempt = self._attempt_of(waiting.seq)
        error = self.incident.first_errors.get(attempt, [])
        thrown = (
            error
            if error and starts_traceback(error[0].text)
            else self.incident.first_tracebacks.get(attempt, [])
        )
        if not thrown or thrown[0].seq >= waiting.seq:
            return findings
        explained = self._explained(unit, engine, before=waiting.seq)
        if explained is None:
            exit_ = next((e for e in self.incident.exits if e.attempt == attempt), None)
            failure = Failure(
                first_error=error if error and error[0].seq < waiting.seq else thrown,
                traceback=thrown if thrown is not error else [],
                last_lines=[],
                exit=exit_,
                attempts=1,
                status=exit_.status if exit_ else None,
            )
            explained = self._unknown(failure, templates, unit, [])
        said = (
            f"{explained.explanation} It came first: the later finding ({first.title.lower()}) "
            "only shows other ranks or processes waiting for the one that had already failed."
        )
        return with_primary(findings, explained.model_copy(update={"explanation": said}))

    def _timeline(
        self, end: datetime | None, findings: list[Finding], primary: str | None
    ) -> Timeline | None:
        """The last start attempt's times; who stopped it; how long a silence lasted."""
        if not self._records_seen:
            return None
        attempt = len(self._attempt_starts)
        stop_ts, _ = self._stops.get(attempt, (None, 0))
        asked = attempt in self._stops and attempt not in self.incident.failed_attempts
        stalled = None
        first = next((f for f in findings if f.id == primary), None)
        state = next(
            (
                s
                for s in self._states
                if first and s.signature and s.signature.id == first.signature
            ),
            None,
        )
        if state is not None and isinstance(state.signature.match, AbsenceMatch) and state.quiet_s:
            stalled = round(state.quiet_s, 1)
        return Timeline(
            observed_until=end,
            last_engine_line_at=self._last_app_ts.get(attempt),
            ready_at=self._ready_ts.get(attempt),
            stop_requested_at=stop_ts,
            stopped_by="operator" if asked else None,
            stopped_by_user=self._stop_user if asked else None,
            phases=[
                PhaseTime(phase=phase, at=self._phase_ts.get((attempt, phase)))
                for phase in PHASE_ORDER
                if (attempt, phase) in self._phase_ts
            ],
            ranks=[
                RankTime(rank=rank, phase=self._rank_phase(rank, attempt), last_line_at=at)
                for rank, at in sorted(self._rank_last.get(attempt, {}).items())
            ],
            stalled_for_s=stalled,
            attempts=self.attempt_history.attempts(),
        )

    def _rank_phase(self, rank: str, attempt: int) -> str | None:
        """The furthest phase ``rank`` announced in ``attempt``."""
        start = self._attempt_starts[attempt - 1] if attempt else -1
        reached = [p for seq, p in self._phases.get(rank, []) if seq >= start]
        return max(reached, key=PHASE_ORDER.__getitem__) if reached else None

    def _explained(
        self, unit: str | None, engine: str | None, before: int | None = None
    ) -> Finding | None:
        """The first explainer's finding for the error lines no signature explained (those
        before seq ``before`` only, when given)."""
        records = sorted(
            (r for r in self.incident.unexplained if before is None or r.seq < before),
            key=lambda r: r.seq,  # a traceback completes after lines written below it
        )
        return self._explain_records(records, unit, engine)

    def _explained_excerpt(self, unit: str | None, engine: str | None) -> Finding | None:
        """A short input in which nothing reads as an error (a message pasted from a thread,
        a few lines cut from a log): every line that may state a cause is asked of the tiers,
        which answer only for messages they know as causes."""
        if self._record_count > EXCERPT_LINES:
            return None
        healthy_lines = {
            hit.seq
            for state in self._states
            if state.signature is not None and state.signature.healthy_too
            for hit in state.hits
        }
        records = [r for r in self._excerpt if r.seq not in healthy_lines]
        return self._explain_records(records, unit, engine)

    def _only_wrappers_after_an_error(self, drafts: list[Draft]) -> bool:
        """Only wrappers (and the catch-all) name a failure, and an error no signature knows
        came before the first of them: that error, not the wrapper, is what to explain."""
        failures = [d for d in drafts if is_failure(d.signature) and not is_catch_all(d.signature)]
        if not failures or not all(d.signature.wrapper for d in failures):
            return False
        first = min(d.seq for d in failures)
        return any(record.seq < first for record in self.incident.unexplained)

    def _message_of(self, record: Record) -> str:
        """The message a record says: a page-wrapped message whole; for a traceback cut short at
        a ``raise`` that writes its message in place, the exception line it would have printed."""
        text = self.incident.wrapped.get(record.seq, record.text)
        if stops_in_frame(text, self.incident.frames.get(record.seq)):
            return raised_message(text) or text
        return text

    def _traced_at(self, record: Record) -> int:
        """Where the record's traceback frames are kept: its own line, or for an exception
        line that came without frames the first traceback that ends in the same words."""
        if record.seq in self.incident.frames:
            return record.seq
        return self.incident.traced.get(record.text.strip(), record.seq)

    def _explain_records(
        self, records: Sequence[Record], unit: str | None, engine: str | None
    ) -> Finding | None:
        if not self.explainers or not records:
            return None
        # only here and below: a run that no tier is asked about never loads their seam
        from diagnose.core.explain import Candidate, IncidentView

        traced = [(record, self._traced_at(record)) for record in records]
        candidates = tuple(
            Candidate(
                text=self._message_of(record),
                evidence=_wrapped_evidence(
                    _record_evidence(record, record.ts, unit), self.incident.wrapped.get(record.seq)
                ),
                phase=self._phase_at(record.rank, record.seq),
                frame=self.incident.frames.get(at),
                engine_frame=self.incident.engine_frames.get(at),
                stack=self.incident.stacks.get(at, ()),
            )
            for record, at in traced
        )
        view = IncidentView(candidates, engine, self._engine_version(engine), unit)
        # the first tier's answer; one of low confidence (a known issue for any unrecognized
        # flag) gives way to a later tier's surer one (the release's reading of each flag)
        weak: Finding | None = None
        for explainer in self.explainers:
            found = explainer(view)
            if found and found[0].confidence is not Confidence.LOW:
                return found[0]
            weak = weak or (found[0] if found else None)
        return weak

    def _signature_of(self, finding: Finding) -> Signature | None:
        return next(
            (
                s.signature
                for s in self._states
                if s.signature and s.signature.id == finding.signature
            ),
            None,
        )

    def _broad(self, finding: Finding) -> bool:
        signature = self._signature_of(finding)
        return bool(signature and signature.broad and finding.role is Role.ROOT_CAUSE)

    def _read_support(self, finding: Finding) -> bool:
        """The finding's signature read values from a corroborating line (the GPU torch's
        warning names): it says more of this log than a known issue of the same message."""
        signature = self._signature_of(finding)
        values = self.values.get(finding.signature or "", {})
        return signature is not None and any(
            name in values
            for pattern in signature.supporting
            for name in pattern.compiled.groupindex
        )

    def _says_no_setting_helps(self, finding: Finding) -> bool:
        """The signature chose its empty patch: no configuration change helps here."""
        signature = self._signature_of(finding)
        values = self.values.get(finding.signature or "", {})
        return signature is not None and choose_patch(signature, values) is not None

    def _refined(self, broad: Finding, unit: str | None, engine: str | None) -> Finding:
        """A broad signature's finding, or the tier finding that names the specific cause on
        one of its evidence lines, or a known issue of the same category on an earlier line
        (it keeps the broad finding's place, count and attempts); a
        template from the engine's source replaces it only with a checked fix. Kept, the
        broad finding takes the fix the release tables derive for its lines."""
        explained = self._explained(unit, engine)
        if (
            explained is None
            or not _replaces(explained, broad)
            or (explained.tier == "known_issue" and self._read_support(broad))
        ):
            return self._with_derived_fix(broad, unit, engine)
        return explained.model_copy(
            update={
                "id": broad.id,
                "count": broad.count,
                "attempts": broad.attempts,
                "evidence": broad.evidence,
                "severity": max(broad.severity, explained.severity, key=lambda s: s.rank),
            }
        )

    def _with_derived_fix(self, finding: Finding, unit: str | None, engine: str | None) -> Finding:
        """A signature's root cause that names no fix (no setting, package or host action)
        takes the one the engine's own tables derive from the same evidence lines (a release
        that accepts the refused value, its valid spelling, the release that registers the
        model), with what they say of it; one whose signature says no setting helps takes only
        their package change. A known issue's fix is not taken: a signature without a patch
        says why none applies."""
        has_fix = (
            finding.package is not None
            or bool(finding.system_actions)  # the host action it names is the fix
            or (finding.patch is not None and not finding.patch.is_empty())
        )
        if finding.role is not Role.ROOT_CAUSE or finding.tier != "signature" or has_fix:
            return finding
        no_setting_helps = self._says_no_setting_helps(finding)
        from diagnose.core.explain import Candidate, IncidentView

        candidates = []
        frame = None  # the last traceback frame among the lines before: where a message was raised
        for line in finding.evidence[:MAX_EVIDENCE]:
            text = line.message or line.text
            candidates.append(Candidate(text=text, evidence=line, phase=finding.phase, frame=frame))
            frame = text.strip() if names_frame(text) else frame
        view = IncidentView(tuple(candidates), engine, self._engine_version(engine), unit)
        for explainer in self.explainers:
            derived = next(iter(explainer(view)), None)
            if derived is None or derived.tier != "engine_source":
                continue
            update: dict[str, object] = {"package": derived.package}
            tables_name_a_setting = derived.signature.endswith(_RELEASE_TABLES_SUFFIX) and (
                derived.patch is not None and not derived.patch.is_empty()
            )
            if not no_setting_helps or tables_name_a_setting:  # its setting, with its words
                update |= {"patch": derived.patch, "patch_note": derived.patch_note}
            if no_setting_helps and tables_name_a_setting:  # the release tables know better
                update |= {
                    "title": derived.title,
                    "explanation": derived.explanation,
                    "confidence": derived.confidence,
                }
                return finding.model_copy(update=update)
            if update["package"] is not None or update.get("patch") is not None:
                update["explanation"] = f"{finding.explanation} {derived.explanation}"
                return finding.model_copy(update=update)
        return finding

    def _engine(self) -> str | None:
        """The one the user gave a version of; else the engine whose lines the log holds
        most, or failing that the one its code lines name (an SGLang release that runs vLLM's
        kernels prints vLLM's lines)."""
        if self._given_version is not None:
            return self._given_version[0]
        for counts in (self.engines, self._engine_code_hints):
            if counts:
                return max(counts, key=counts.__getitem__)
        return None

    def _engine_version(self, engine: str | None) -> str | None:
        """The engine's version: given by the user, else shown by the log."""
        if self._given_version is not None and self._given_version[0] in (engine, None):
            return self._given_version[1]
        shown = {
            p.name: self.facts[f"{p.name}_version"]
            for p in profiles()
            if self.facts.get(f"{p.name}_version")
        }
        if engine in shown:
            return str(shown[str(engine)])
        return str(next(iter(shown.values()))) if len(shown) == 1 else None

    def _stop_requested(self, attempt: int) -> bool:
        """The start attempt was asked to stop (systemd's stop job, or the server's own words)."""
        return attempt in self._stops or attempt in self.incident.stopping

    def _phase_reached(self) -> str | None:
        """The furthest startup phase of the last attempt."""
        last_start = self._attempt_starts[-1] if self._attempt_starts else -1
        phases = [p for seq, p in self._phases.get(None, []) if seq >= last_start]
        return max(phases, key=PHASE_ORDER.__getitem__) if phases else None

    def _occurrences(self, state: _State) -> list[list[Hit]]:
        match = state.signature.match
        if isinstance(match, LineMatch):
            return [state.hits] if state.hits else []
        if isinstance(match, AbsenceMatch):
            merged = [hit for hits in state.fired for hit in hits]
            return [merged] if merged else []
        if isinstance(match, CountMatch):
            best = _densest(state.hits, match.within)
            return [best] if len(best) >= match.min_count else []
        assert isinstance(match, SequenceMatch)
        chain = _sequence(state.steps, match.within)
        return [chain] if chain else []

    def _draft(self, state: _State, hits: list[Hit], unit: str | None, engine: str | None) -> Draft:
        signature = state.signature
        first = min(hits, key=lambda h: h.seq)
        # a silence belongs to the phase of the last progress before it
        phase = (
            max(hits, key=lambda h: h.seq) if isinstance(signature.match, AbsenceMatch) else first
        ).phase
        count = len(hits) + (state.extra_hits if isinstance(signature.match, LineMatch) else 0)
        attempts = len({h.attempt for h in hits})
        values: dict[str, Any] = {**self.facts, **state.context}
        # The first failure's values win; a count (a restart counter) reads the latest.
        latest_wins = isinstance(signature.match, CountMatch)
        for hit in sorted(hits, key=lambda h: h.seq, reverse=not latest_wins):
            values.update(hit.captures)
        for hit in state.support:
            for name, value in hit.captures.items():
                values.setdefault(name, value)
        values.update(
            engine=engine,
            unit=unit,
            phase=phase,
            count=count,
            attempts=attempts,
            ranks=len({h.record.rank for h in hits if h.record.rank}) or 1,
        )
        if isinstance(signature.match, AbsenceMatch):
            values["quiet_minutes"] = round(state.quiet_s / 60, 1)
            values["quiet_for"] = _spoken_duration(state.quiet_s)
            values["threshold"] = _spoken_duration(self._within(state))
        shown = {
            p.name: values[f"{p.name}_version"]
            for p in profiles()
            if values.get(f"{p.name}_version")
        }
        if engine in shown or len(shown) == 1:
            values.setdefault(
                "engine_version", shown.get(str(engine)) or next(iter(shown.values()))
            )
        derive(signature, values)
        confidence = signature.confidence
        if state.support and confidence is not Confidence.HIGH:
            confidence = Confidence.HIGH if confidence is Confidence.MEDIUM else Confidence.MEDIUM
        versions = version_check(signature, values)
        if versions.outside:
            confidence = Confidence.LOW
        return Draft(
            signature=signature,
            seq=first.seq,
            values=values,
            evidence=_evidence(hits, state.support, unit),
            count=count,
            attempts=attempts,
            phase=phase,
            confidence=confidence,
            unit=unit,
            versions=versions,
        )

    def _in_graph_capture(self, failure: Failure) -> list[Hypothesis]:
        """Where the failing traceback runs through the engine's CUDA graph capture, that
        path as the first suspect, with the start that tells: one without the graphs."""
        lines = [r.text for r in [*failure.first_error, *failure.traceback, *failure.last_lines]]
        found = next((m for line in lines if (m := _GRAPH_CAPTURE.search(line))), None)
        if found is None:
            return []
        own = profile(self._engine()).graphs_off_flag
        flags = [own] if own else [f for p in profiles() if (f := p.graphs_off_flag)]
        return [
            Hypothesis(
                cause=(
                    f"The failing code runs while the engine captures CUDA graphs "
                    f"(`{found.group('function')}`): a bug of the capture path for this model "
                    "and these options, which a later release may fix."
                ),
                check=(
                    "Start once without CUDA graphs ("
                    + " or ".join(f"`{flag}`" for flag in flags)
                    + "): a start that then gets past warm-up confirms it; keep that until an "
                    "upgrade fixes the capture path."
                ),
            )
        ]

    def _unknown(
        self,
        failure: Failure,
        templates: list[ErrorTemplate],
        unit: str | None,
        catch_all: list[Draft],
    ) -> Finding:
        """The finding for a failure no signature explains: its first error, the last lines
        before the exit, the exit itself, and the unexplained error lines as templates."""
        records = [*failure.first_error, *failure.traceback, *failure.last_lines]
        records += [failure.notice] if failure.notice else []
        records += failure.exit.records if failure.exit else []
        evidence: list[Evidence] = []
        seen: set[tuple[str, int | None, str | None, str]] = set()
        stamp = None
        for record in records:
            key = (record.source, record.line, record.cursor, record.raw)
            if key in seen:
                continue
            seen.add(key)
            stamp = record.ts or stamp
            evidence.append(_record_evidence(record, stamp, unit))
        evidence.sort(key=lambda e: next(r.seq for r in records if r.raw == e.text))
        first = failure.first_error[-1] if failure.first_error else None
        if failure.exit is not None:
            said = f"systemd reports that the main process failed ({failure.status})"
            if failure.attempts > 1:
                said += f", in {failure.attempts} start attempts"
            explanation = [said + "."]
        elif failure.serving:
            explanation = [
                "The server was ready and serving, then a process of it died (a run-time "
                "failure, as serious as one at start), and nobody asked it to stop."
            ]
        else:
            explanation = [
                "The log ends with an error before the server was ready, and nobody asked it "
                "to stop."
            ]
        said_by_catch_all: list[str] = []
        checks: list[str] = []
        for draft in catch_all:  # what the catch-all says of the exception
            said_by_catch_all = fill_texts(
                draft.signature, draft.signature.explanation, draft.values
            )
            checks = fill_texts(draft.signature, draft.signature.next_checks, draft.values)
        died_silently = first is not None and re.search(_DEATH_NOTICE, first.text) is not None
        frame = self.incident.frames.get(first.seq) if first is not None else None
        cut_at = frame if first is not None and stops_in_frame(first.text, frame) else None
        if said_by_catch_all:
            explanation += said_by_catch_all
        elif cut_at is not None and first is not None:
            shown = " ".join(cut_at.split("\n"))
            explanation.append(
                "The log stops inside a traceback, before the exception line that names the "
                f"error; the last frame it shows: `{clipped(shown, 300)}`."
            )
            own = self.incident.engine_frames.get(first.seq)
            if own is not None:
                called = " ".join(own.split("\n"))
                explanation.append(
                    f"The engine's own code called into it from `{clipped(called, 300)}`."
                )
        elif first is not None:
            where = f"line {first.line}" if first.line is not None else "the evidence"
            explanation.append(f"The first error ({where}): {clipped(first.text.strip(), 300)}")
        if died_silently:
            explanation.append(
                "That is the engine noticing that a process of it died, with no error of that "
                "process before it: a process that dies without a word was most likely killed "
                "by a signal (the likely causes below)."
            )
        elif failure.notice is not None:
            notice = failure.notice
            where = f"line {notice.line}" if notice.line is not None else "the evidence"
            explanation.append(
                f"The engine says that a process of it failed ({where}: "
                f"{clipped(notice.text.strip(), 200)}), but the error that made it fail is not in "
                "this input: it was logged before the excerpt begins, or by another process or "
                "node whose lines were left out. Diagnose the whole log of this start."
            )
        elif cut_at is not None:
            explanation.append(
                "The exception line, and with it the cause, comes after what this input holds: "
                "diagnose the whole output of this start (`journalctl -u UNIT --no-pager`, the "
                "container's whole log, or the paste uncut)."
            )
        else:
            explanation.append(
                "No error line came before it: the cause may be outside this log (the kernel, "
                "a GPU fault, an OOM kill, or output that was cut off)."
            )
        explanation.append(
            (
                ""
                if said_by_catch_all
                else "No signature in the library matches, so this report "
                "cannot name a cause or a fix. "
            )
            + "The evidence shows the first error and the last lines before the exit"
            + (
                ", and the unexplained error lines are grouped into templates."
                if templates
                else "."
            )
        )
        seq = (
            first.seq if first is not None else (failure.exit.records[0].seq if failure.exit else 0)
        )
        unknown = Finding(
            id="f0",
            signature=UNKNOWN_SIGNATURE,
            category="unknown",
            severity=Severity.ERROR,
            role=Role.ROOT_CAUSE,
            title="The server failed, and no known signature explains it",
            explanation=" ".join(explanation),
            confidence=Confidence.LOW,
            evidence=evidence,
            patch=None,
            patch_note=(
                "No configuration change can be derived from a failure the library does not "
                "know. `diagnose signatures new --from FILE` drafts a signature from this log."
            ),
            next_checks=(
                checks
                or [
                    "Read the first error and the lines just before the exit: the innermost "
                    '`File "..."` frames name the package that raised it; search the project\'s '
                    "issues for its text.",
                    "`journalctl -k --since -1h | grep -E 'NVRM: Xid|Out of memory'` for GPU "
                    "faults or OOM kills at the same time.",
                ]
            )
            + [
                "`diagnose signatures new --from FILE` drafts a signature and its fixture from "
                "this log, for the next time."
            ],
            references=[p.issue_tracker for p in profiles() if p.issue_tracker],
            count=max(1, failure.attempts),
            attempts=max(1, failure.attempts),
            phase=(
                SERVING
                if failure.serving
                else self._phase_at(None, seq)
                if first is not None
                else self._phase_reached()
            ),
            templates=templates,
            hypotheses=(
                [Hypothesis(cause=cause, check=check) for cause, check in _SILENT_DEATHS]
                if died_silently
                else self._in_graph_capture(failure)
            ),
        )
        error = " ".join(r.text for r in [*failure.first_error, *failure.traceback])
        options = launch_options(
            self.facts.get("launch_command"), self.facts.get("launch_settings")
        ) + list(self.env_given.items())
        link = (
            (linked_option(error, options) or forced_test_switch(self.env_given))
            if first is not None and options
            else None
        )
        if link is None or first is None:
            return unknown
        return _option_path(unknown, link, clipped(first.text.strip(), 300), self._engine())


def _wrapped_evidence(evidence: Evidence, whole: str | None) -> Evidence:
    """A message a page wrapped over several lines is evidence by its first line and, as its
    message, the whole of it: what a finding's fix reads (the model type on its third line)."""
    return evidence if whole is None else evidence.model_copy(update={"message": whole})


def _only_a_lead(finding: Finding) -> bool:
    """A tier's reading at low confidence that changes no setting: a launch option the error
    names is the better lead (its test is to start without it)."""
    return finding.confidence is Confidence.LOW and (
        finding.patch is None or finding.patch.is_empty()
    )


OPTION_PATH_SIGNATURE = "launch-option-code-path"
"""The name of a failure read as the code path one launch option turns on."""


def _option_path(unknown: Finding, link: OptionLink, first: str, engine: str | None) -> Finding:
    """The unknown failure read as the code path one launch option or engine variable turns
    on: a lead, at low confidence, whose fix is the test of it (start without it, or upgrade)."""
    name = next((p.display_name for p in profiles() if p.name == engine), "the engine")
    if link.is_variable:
        setting = f"{link.flag}={link.value}"
        what, without = f"the environment variable `{setting}`", f"with `{link.flag}` unset"
        patch = Patch(env_unset=[link.flag])
    else:
        setting = f"{link.flag} {link.value}" if link.value else link.flag
        what, without = f"the launch option `{setting}`", f"without `{link.flag}`"
        patch = Patch(args_remove=[link.flag])
    if link.word == "test switch":
        lead = (
            f"{what[0].upper()}{what[1:]} is a test switch: it forces a code path no "
            f"production start takes, and the failure is most likely in that path"
        )
    else:
        lead = (
            f"The error names `{link.word}`, which {what} selects and no other setting does: "
            f"the failure is most likely in the optional code path it turns on"
        )
    said = (
        f"{lead}, a path {name} does not handle in this release (a bug or a combination it "
        f"does not support yet). Start once {without} (the default path): if the server "
        f"then starts, that is the cause; a newer {name} release may have fixed the path."
    )
    return unknown.model_copy(
        update={
            "signature": OPTION_PATH_SIGNATURE,
            "category": "launch_args",
            "title": f"The failure is in the code path `{setting}` turns on",
            "explanation": f"{said} The first error: {first}",
            "patch": patch,
            "patch_note": f"{without[0].upper()}{without[1:]}, the engine takes its default path.",
            "package": (PackageAction(name=engine, spec="", action="upgrade") if engine else None),
            "alternatives": [
                f"Keep `{setting}` and upgrade {name}: the release notes or issues of "
                "the path name the fix."
            ],
        }
    )


_GRAPH_CAPTURE = re.compile(
    r"(?:\bin |\.)(?P<function>\w*(?:cudagraph|cuda_graph)\w*|capture\w*)\b"
)
"""A frame, or the code under one, in the engines' CUDA graph capture (vLLM's
``capture_model``, ``build_for_cudagraph_capture``; SGLang's ``CudaGraphRunner.capture``)."""

_SILENT_DEATHS = (
    (
        "The kernel's OOM killer ended it: the host (or the container's memory limit) ran out "
        "of memory.",
        "`journalctl -k --since -1h | grep -iE 'killed process|out of memory'` (or "
        "`dmesg -T`); `systemctl show UNIT -p MemoryMax`.",
    ),
    (
        "Shared memory ran out (SIGBUS): in a container /dev/shm is 64 MB unless raised, and "
        "the engine's processes exchange tensors through it.",
        "`df -h /dev/shm` where the server runs; docker: `--shm-size=16g` or `--ipc=host`; "
        "Kubernetes: an `emptyDir` with `medium: Memory` mounted at /dev/shm.",
    ),
    (
        "A crash in native code (SIGSEGV in a kernel or library), which Python cannot report.",
        "`journalctl -k | grep -i segfault`; `coredumpctl list`; rerun with "
        "`PYTHONFAULTHANDLER=1` to get the Python stack of the crash.",
    ),
)
"""Why a process of the server dies without an error of its own, most likely first, each with
its check: plain text, made a model only for a finding that needs it (not at every import)."""


def _ended_before_ready(state: _State, last: Hit) -> list[str]:
    """A log that stops in a normal start step, with no error and no later time, shows no
    hang: it was cut there, or it hung, and only a clock can tell. Said as a note with what a
    hang at that step would be and how to check, never as a failure."""
    where = f"line {last.record.line}: " if last.record.line is not None else ""
    note = (
        "The log ends before the server said it was ready, in a normal start step "
        f"({where}`{last.record.text.strip()[:160]}`), with no error and no later time: "
        "nothing in it shows a failure or a hang. If the start stayed there, the likely cause "
        f"is: {state.signature.title[:1].lower()}{state.signature.title[1:]}"
    )
    checks = [h.check for h in state.signature.hypotheses[:2]]
    if checks:
        note += f" (checks: {' '.join(checks)})"
    return [
        note + ". `diagnose journal -u UNIT` times the silence with the journal's clock; a "
        "log that goes on, or `nvidia-smi` while it waits (memory and utilisation), does too."
    ]


_GAUDI_UPGRADE = (
    "Upgrade the Gaudi build of vLLM, not the package index's CUDA release: HabanaAI's "
    "vllm-fork at the newer release made for the installed Gaudi software (its tags read "
    "`v<vLLM>+Gaudi-<SynapseAI>`), or upstream vLLM with the vllm-gaudi plugin."
)
"""The upgrade of vLLM on Gaudi: a ``pip install -U vllm`` there replaces the fork with the
CUDA build."""


def _on_the_gaudi_build(finding: Finding) -> Finding:
    """``finding`` with an upgrade of vLLM turned into the upgrade of its Gaudi build, where the
    log shows that build (HabanaAI's fork: its HPU worker, the Gaudi bridge)."""
    package = finding.package
    if package is None or package.name != "vllm" or package.action != "upgrade":
        return finding
    actions = [_GAUDI_UPGRADE, *(a for a in finding.system_actions if a != _GAUDI_UPGRADE)]
    return finding.model_copy(update={"package": None, "system_actions": actions})


def _without_flags_not_given(
    finding: Finding, printed: list[tuple[str, str | None]], unit: str | None
) -> Finding:
    """``finding`` without the flags its fix removes that the settings the engine printed as
    given (vLLM's ``non-default args``) do not hold: the engine chose that value itself, so
    removing the flag changes nothing. Its confidence drops to low, and with nothing left of
    the fix, it has none."""
    patch = finding.patch
    if patch is None or not patch.args_remove:
        return finding

    def key(flag: str) -> str:  # `--kv-cache-dtype` and `kv_cache_dtype` alike
        return flag.lstrip("-").replace("-", "_")

    named = {key(flag) for flag, _ in printed} | {
        key(word) for word in patch.args_add if word[:2] == "--"
    }  # given at the start, or set again by the fix itself
    absent = [flag for flag in patch.args_remove if flag[:2] == "--" and key(flag) not in named]
    if not absent:
        return finding
    kept = patch.model_copy(
        update={"args_remove": [f for f in patch.args_remove if f not in absent], "dropin": None}
    )
    said = (
        f"The settings the engine printed as given hold none of {', '.join(absent)}: the "
        "engine chose that value itself, so removing the flag changes nothing."
    )
    if kept.is_empty():
        return finding.model_copy(
            update={
                "patch": None,
                "patch_note": said,
                "confidence": Confidence.LOW,
                "explanation": f"{finding.explanation} {said}",
            }
        )
    if patch.dropin is not None:
        kept = kept.model_copy(update={"dropin": render_dropin(kept, unit)})
    return finding.model_copy(
        update={
            "patch": kept,
            "confidence": Confidence.LOW,  # half of what it read as given was not
            "explanation": f"{finding.explanation} {said}",
        }
    )


def _redrawn(before: Finding, after: Finding, unit: str | None) -> Finding:
    """``after``, with its drop-in written again where the release check changed its flags."""
    if before.patch is None or after.patch is None or before.patch.dropin is None:
        return after
    if after.patch.args_add == before.patch.args_add:
        return after
    dropin = render_dropin(after.patch, unit)
    return after.model_copy(update={"patch": after.patch.model_copy(update={"dropin": dropin})})


def _enriched(catch_all: Finding, unknown: Finding) -> Finding:
    """The catch-all's finding with what the unknown failure adds: how the process ended, the
    last lines before it, the unexplained error lines as templates, and its suspects."""
    have = {(e.source, e.line, e.cursor, e.text) for e in catch_all.evidence}
    extra = [e for e in unknown.evidence if (e.source, e.line, e.cursor, e.text) not in have]
    return catch_all.model_copy(
        update={
            "explanation": unknown.explanation,
            "evidence": [*catch_all.evidence, *extra],
            "next_checks": unknown.next_checks,
            "templates": unknown.templates,
            "hypotheses": [*catch_all.hypotheses, *unknown.hypotheses],
        }
    )


def _only_placeholders(finding: Finding) -> bool:
    """A fix whose every value is for the user to fill in (``<a value other than X>``)."""
    patch = finding.patch
    if patch is None or finding.package is not None or not patch.placeholders():
        return False
    values = [*(a for a in patch.args_add if not a.startswith("-")), *patch.env_set.values()]
    return all(value.startswith("<") for value in values)


def _earlier(first: Finding, second: Finding) -> bool:
    """Whether ``first``'s evidence comes before ``second``'s: by line in a file, by time in a
    journal (False when the two cannot be compared)."""
    lines = [
        min((e.line for e in f.evidence if e.line is not None), default=None)
        for f in (first, second)
    ]
    if lines[0] is not None and lines[1] is not None:
        return lines[0] < lines[1]
    times = [
        min((e.timestamp for e in f.evidence if e.timestamp), default=None) for f in (first, second)
    ]
    return times[0] is not None and times[1] is not None and times[0] < times[1]


def _continues(later: Finding, first: Finding) -> bool:
    """Whether ``later``'s evidence is among the few lines right after ``first``'s, in the same
    input: the rest of one multi-line error message."""
    starts = [min(((e.source, e.line) for e in f.evidence if e.line is not None), default=None)
              for f in (later, first)]  # fmt: skip
    if starts[0] is None or starts[1] is None or starts[0][0] != starts[1][0]:
        return False
    return 0 < starts[0][1] - starts[1][1] <= MESSAGE_CONTINUATION_LINES


def _specific(signature: Signature | None) -> bool:
    """A signature that explains what it matches (not the catch-all for exceptions, not a
    broad one that a tier below may name more precisely)."""
    return signature is not None and not is_catch_all(signature) and not signature.broad


def _record_evidence(record: Record, stamp: datetime | None, unit: str | None) -> Evidence:
    """``record`` as evidence; ``stamp`` is its time when it has none of its own."""
    return Evidence(
        source=record.source,
        line=record.line,
        cursor=record.cursor,
        timestamp=record.ts or stamp,
        host=record.host,
        unit=record.unit or (unit if record.origin == "app" and record.host else None),
        rank=record.rank,
        text=record.raw,
        message=record.text if record.text != record.raw else None,
    )


_QUANTITY = r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?i?B|bytes)\s*$"
_BYTES = {
    "B": 1,
    "bytes": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_TARGET_UNIT = {"_gib": "GiB", "_mib": "MiB", "_gb": "GB", "_mb": "MB"}


def _normalise_units(captures: dict[str, str]) -> dict[str, str]:
    """Captures named ``*_gib``, ``*_mib``, ``*_gb`` or ``*_mb`` that hold a quantity with
    its unit (``512.00 MiB``) become plain numbers in the unit their name says."""
    for name, value in captures.items():
        target = next((u for suffix, u in _TARGET_UNIT.items() if name.endswith(suffix)), None)
        quantity = re.match(_QUANTITY, value) if target else None
        if quantity and target:
            size = float(quantity.group("number")) * _BYTES[quantity.group("unit")] / _BYTES[target]
            captures[name] = f"{size:.4f}".rstrip("0").rstrip(".")
    return captures


def _spoken_duration(seconds: float) -> str:
    """``45 seconds``, ``10.5 minutes``, ``2.3 hours``."""
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 5400:
        return f"{seconds / 60:.1f} minutes".replace(".0 ", " ")
    return f"{seconds / 3600:.1f} hours".replace(".0 ", " ")


def _densest(hits: list[Hit], within: float) -> list[Hit]:
    """The largest run of hits that fits in one window of ``within`` seconds."""
    timed = sorted((h for h in hits if h.ts is not None), key=lambda h: h.ts)  # type: ignore[arg-type,return-value]
    if len(timed) < len(hits):
        return list(hits)
    best: list[Hit] = []
    start = 0
    for end, hit in enumerate(timed):
        while hit.ts - timed[start].ts > timedelta(seconds=within):  # type: ignore[operator]
            start += 1
        if end - start + 1 > len(best):
            best = timed[start : end + 1]
    return best


def _sequence(steps: list[list[Hit]], within: float) -> list[Hit]:
    """The first chain of hits, one per step, in order, inside one window."""
    for head in steps[0]:
        chain = [head]
        for later in steps[1:]:
            nxt = next(
                (h for h in later if h.seq > chain[-1].seq and _close(head, h, within)), None
            )
            if nxt is None:
                break
            chain.append(nxt)
        if len(chain) == len(steps):
            return chain
    return []


def _close(head: Hit, hit: Hit, within: float) -> bool:
    if head.ts is None or hit.ts is None:
        return True
    return (hit.ts - head.ts).total_seconds() <= within


def _evidence(hits: list[Hit], support: list[Hit], unit: str | None) -> list[Evidence]:
    ordered = sorted(hits, key=lambda h: h.seq)
    chosen = ordered[: MAX_EVIDENCE - 1] + ([ordered[-1]] if len(ordered) >= MAX_EVIDENCE else [])
    first = ordered[0]
    header = first.event.first
    # A bare traceback line has no time of its own: it has its traceback's.
    records: list[tuple[Record, datetime | None]] = []
    if header is not first.record and len(first.event.records) > 1:
        records.append((header, header.ts))
    records += [(h.record, h.event.ts) for h in (*chosen, *support)]
    rest = _message_rest(first.event, first.record)
    at = next(i for i, (record, _) in enumerate(records) if record is first.record) + 1
    records[at:at] = [(record, first.event.ts) for record in rest]
    thrown = raised_line(first.event)
    if thrown is not None and thrown is not first.record:  # a match inside a traceback: the
        records.insert(2, (thrown, first.event.ts))  # exception it ends in is the decisive line
    seen: set[tuple[str, int | None, str | None, str]] = set()
    evidence = []
    for record, stamp in records:
        key = (record.source, record.line, record.cursor, record.raw)
        if key in seen:
            continue
        seen.add(key)
        evidence.append(_record_evidence(record, stamp, unit))
    return evidence


_SAME_MESSAGE_CHARS = 24
"""The least of a line that, held whole by another, makes the two one message."""


def _same_message(one: str, other: str) -> bool:
    """The same line, or one message twice: vLLM logs an engine's exception without its class
    (``'X' object has no attribute 'y'``), then the traceback ends on it with its class."""
    if one == other:
        return True
    shared = next((n for n, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), 0)
    shorter, longer = sorted((one[shared:].strip(), other[shared:].strip()), key=len)
    return len(shorter) >= _SAME_MESSAGE_CHARS and shorter in longer  # past a shared prefix


_RELEASE_TABLES_SUFFIX = "-release-tables"
"""The signature name of findings the engines' mined release tables settle."""


def _replaces(explained: Finding, broad: Finding) -> bool:
    """Whether a tier's finding names the specific cause of a broad signature's finding: on
    one of its evidence lines, or (a known issue of the same category) just before or after
    it, with more than the signature says."""
    if explained.tier == "generic":  # words say less than a signature
        return False
    same_line = any(
        _same_message(mine.text, theirs.text)
        for mine in explained.evidence
        for theirs in broad.evidence
    )
    same_class_around = (  # an NCCL WARN naming the cause before the bare NCCL error,
        # or the error's own "Last error:" lines after it
        explained.tier == "known_issue"
        and explained.category == broad.category
        and (_earlier(explained, broad) or _continues(explained, broad))
    )
    if not same_line and not same_class_around:
        return False
    if (
        explained.tier == "engine_source"
        and not explained.signature.endswith(_RELEASE_TABLES_SUFFIX)  # those are checked
        and explained.patch is None
        and explained.package is None
        and (
            explained.confidence is Confidence.LOW
            or broad.patch is not None
            or broad.package is not None
        )
    ):  # a message matched in the engine's source, with no checked fix, adds nothing to a
        # finding that has one
        return False
    if (
        explained.tier == "engine_source"
        and explained.confidence is Confidence.LOW
        and explained.package is not None
        and broad.package is not None
        and explained.package.name == broad.package.name
        and explained.package.name not in {p.name for p in profiles()}
    ):  # a lead that changes the library the signature already changes says no more (a lead
        # on the engine's own code reads which way its release is off better than an import)
        return False
    if explained.tier == "known_issue" and explained.confidence is Confidence.LOW:
        return False  # a known issue of releases other than the one the log shows
    # the engine's message that says which setting, not its value: the signature says more
    return not (explained.tier == "engine_source" and _only_placeholders(explained))


def _message_rest(event: Event, record: Record) -> list[Record]:
    """The lines of ``event`` that carry on ``record``'s message where the log wrapped it
    mid-sentence (``...max seq len (1048576),`` then ``22.5 GiB KV cache is needed, ...``):
    each follows a line that ends no sentence and goes on in lower case or with a number, up
    to MESSAGE_CONTINUATION_LINES."""
    position = next((i for i, r in enumerate(event.records) if r is record), None)
    if position is None:
        return []
    rest: list[Record] = []
    before = record.text
    for later in event.records[position + 1 : position + 1 + MESSAGE_CONTINUATION_LINES]:
        if _ENDS_SENTENCE.search(before) or not _GOES_ON.match(later.text):
            break
        rest.append(later)
        before = later.text
    return rest


def diagnose(
    events: Iterable[Event],
    signatures: Iterable[Signature],
    facts: Iterable[Pattern] = (),
    observed_until: datetime | None = None,
    hang_after: float | None = None,
    inputs: list[InputSummary] | None = None,
) -> Diagnosis:
    """Run ``signatures`` over ``events`` and rank what they find."""
    engine = Engine(signatures, facts=facts, hang_after=hang_after)
    for event in events:
        engine.feed(event)
    return engine.finish(observed_until=observed_until, inputs=inputs)
