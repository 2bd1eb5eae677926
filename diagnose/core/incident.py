"""When no signature explains a failure: what the log still tells.

The engine hands every event to an :class:`IncidentTracker`. It keeps, in bounded memory, the
first error of each start attempt, a ring buffer of the last application lines, the process
exits systemd reported as failures, and a table of the error lines no signature matched,
grouped into templates the way Drain does (numbers, ids, paths and addresses masked).
At the end, :meth:`IncidentTracker.failure` says whether the input shows a failure at all;
the engine turns that into the ``unknown-failure`` finding when nothing more specific fired.
"""

from __future__ import annotations

import re
from collections import deque
from datetime import datetime
from typing import NamedTuple

from diagnose.core.records import Event, Record
from diagnose.core.tracebacks import (
    TRACEBACK_START,
    frame_stack,
    innermost_frame,
    is_fence,
    marks_position,
    names_frame,
    starts_traceback,
)
from diagnose.engines import benign_lines, profiles

LAST_LINES = 5
"""Application lines kept from just before the process exited."""
MAX_TEMPLATES = 256
"""Distinct templates kept; later new ones are only counted (``overflow``)."""
TOP_TEMPLATES = 10
MAX_UNEXPLAINED = 64
"""Unexplained error lines kept in full for the tiers below the signatures."""
MAX_TEMPLATE_CHARS = 300

ERROR_NEEDLES = (
    "Error",
    "ERROR",
    "error:",
    "Exception",
    "FAILED",
    "FATAL",
    "fatal",
    "Fatal",
    "Killed",
    "Segmentation fault",
    "core dumped",
    "SIGTERM",
    "Stopping ",
    "Failed with result",
    "exited, code=",
    "() got an unexpected keyword argument",
    "() got multiple values for ",
    "() missing ",
    "() takes ",
    " vs. ",
)
"""Literals that make a line matter to the tracker: error words, stops and exits."""

_ERROR = re.compile(
    r"\b[A-Za-z_.]*(?:Error|Exception)\b|\bERROR\b|\bFATAL\b|\b[Ff]atal\b|\bFAILED\b"
    r"|\bKilled\b|[Ss]egmentation fault|core dumped|(?:^|: )[a-z_]*error: "
    r"|^\s*(?:[a-z_]\w*\.){2,}[A-Z]\w+: \S"  # an exception class by its module path
    r"|\bE[A-Z0-9]\d{4}: "  # an Ascend CANN error code (EJ0003: ..., EE9999: ...)
    r"|^[EF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] "  # glog's error and fatal levels
    # a TypeError's message quoted without its class (by a wrapper, pasted alone, or as the
    # body of an HTTP error response after its status code)
    r"|^\s*(?:[45]\d\d )?(?:[\w.]+\.)?\w+\(\) "
    r"(?:got an unexpected keyword argument '|missing \d+ required "
    r"|got multiple values for (?:keyword )?argument '"
    r"|takes (?:from )?\d+ (?:to \d+ )?positional arguments? but )"
    r"| (?:==|!=|<=|>=|<|>) \S+ \(\S+ vs\. \S+\)(?: : |$)"  # a C++ CHECK_EQ-style failure
)
_CHAINED_EXCEPTION = re.compile(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt): \S")
_LEVEL_ERROR = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
_LEVEL_NOT_ERROR = re.compile(r"\b(?:WARNING|WARN|INFO|DEBUG)\b")
_INFO_LEVEL = re.compile(r"\b(?:INFO|DEBUG)\b|^[ID]\d{4} \d\d:\d\d:\d\d")
_LEADING_LEVEL = re.compile(r"^(?:WARNING|WARN|INFO|DEBUG)\b|^[WI]\d{4} \d\d:\d\d:\d\d|\[W\d{4} ")
_BENIGN = re.compile("|".join(benign_lines()))
"""Known noise, from the engine profiles."""
_TRACEBACK_CODE = re.compile(r'^\s*(?:File "[^"\n]*", line \d+|raise\b|assert\b)')
"""A frame or source line of a traceback (``raise RuntimeError(``): it names an exception
class without being the error."""
_ENGINE_FILE = re.compile(
    r'File "(?:[^"\n]*?/(?:site|dist)-packages/|(?![^"\n]*-packages/)(?:[^"\n]*/)?)'
    rf'(?:{"|".join(p.name for p in profiles())})(?:_[a-z]\w*)?/[^"\n]*\.py"'
)
"""A frame in a file of an engine's own package (a release, a source tree or a fork of it) or
of a package named after it (a platform plugin such as ``vllm_ascend``); not another installed
package's module of that name (``site-packages/maxtext/integration/vllm/adapter.py``)."""
_FLATTENED_ERROR = re.compile(r"\s(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
"""An exception line run into a frame line (``File "x.py", line 5, in f raise E(e)
requests.exceptions.ConnectionError: ...``): a traceback pasted with its line breaks lost."""
_NOT_A_FAILURE = re.compile(
    r"^(?:KeyboardInterrupt|SystemExit|(?:asyncio\.(?:exceptions\.)?)?CancelledError)\b"
)
_EXIT = re.compile(
    r"(?:Main|Control) process exited, code=(?P<code>\w+), status=(?P<status>\d+)/(?P<name>[\w/]+)"
    r"|Failed with result '(?P<result>[\w-]+)'"
)
_STOP_SIGNALS = {"TERM", "INT", "HUP", "QUIT"}
_APP_STOP = re.compile(r"SIGTERM received|Received SIGTERM|received signal SIGTERM", re.IGNORECASE)

_MASKS = (
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<ID>"),
    (r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\[[0-9a-fA-F:]+\]:\d+", "<ADDR>"),
    (r"(?<![\w.<>])(?:~|\.{1,2})?(?:/[\w.@+%=,-]+)+/?", "<PATH>"),
    (r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b", "<ID>"),
    (r"(?<![\w<])[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?", "<NUM>"),
)
"""Regexes of a line's variable parts and their masks, compiled when a line first needs a
template (``re`` caches them): a run a signature decides may never need one."""


def is_noise(text: str) -> bool:
    """A line the engine profiles know as noise (with their reasons): never a failure."""
    return _BENIGN.search(text) is not None


def clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last of them an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def template_of(text: str) -> str:
    """The line with its variable parts masked: ``Rank 3 died (exit code: -9)`` and
    ``Rank 1 died (exit code: -9)`` both become ``Rank <NUM> died (exit code: <NUM>)``."""
    for regex, mask in _MASKS:
        text = re.sub(regex, mask, text)
    return clipped(" ".join(text.split()), MAX_TEMPLATE_CHARS)


def is_error_line(record: Record) -> bool:
    """An application line that reports an error (not a warning, not a client's 404, not the
    known noise that says it can be ignored)."""
    text = record.text
    if not text.strip() or marks_position(text):
        return False
    if _TRACEBACK_CODE.match(text) and not _FLATTENED_ERROR.search(text):
        return False
    prefix = record.raw[: max(0, len(record.raw) - len(text))]  # vLLM's level is in it
    if _LEVEL_ERROR.search(prefix):
        # vLLM repeats its ERROR prefix on every line of a traceback: an indented line with no
        # error word is the traceback's source code (an excerpt cut off above it)
        if text[:2].isspace() and not _ERROR.search(text):
            return False
        return not _BENIGN.search(text)
    if not _ERROR.search(text) or _LEVEL_NOT_ERROR.search(prefix) or _LEADING_LEVEL.search(text):
        return False
    return not _BENIGN.search(text)


def may_state_a_cause(record: Record) -> bool:
    """An application line that is not marked as information or debugging output (nor known
    noise): in an excerpt with no error word, the line that may hold the cause."""
    text = record.text
    if record.origin != "app" or not text.strip():
        return False
    prefix = record.raw[: max(0, len(record.raw) - len(text))]
    informational = _INFO_LEVEL.search(prefix) or _INFO_LEVEL.search(text[:60])
    return not informational and not _BENIGN.search(text)


_HYDRA_JOB_FAILED = re.compile(r"\s*Error executing job with overrides: \[")
"""Hydra's line before the traceback of a job that failed (verl, NeMo and others start their
jobs through it): it lists the job's settings, the error is what follows."""


def announces_next(text: str) -> bool:
    """An error line that ends with a colon (``BackendCompilerFailed: backend='inductor'
    raised:``), or Hydra's ``Error executing job with overrides: [...]``: a wrapper whose error
    comes next. Python's suggestion cut off after its colon (``... has no attribute 'x'. Did
    you mean:``) is the error itself."""
    text = text.rstrip()
    wrapper = text.endswith(":") and not text.endswith("Did you mean:")
    return wrapper or _HYDRA_JOB_FAILED.match(text) is not None


def exception_line(event: Event) -> Record | None:
    """The exception line of a traceback event (its last line with text, not a fence or the
    position markers under a code line), if it is one; a frame line alone, with no header and
    nothing after it, is none."""
    if not starts_traceback(event.first.text) or (
        len(event.records) == 1 and TRACEBACK_START not in event.first.text
    ):
        return None
    for record in reversed(event.records):
        if record.text.strip() and not is_fence(record.text) and not marks_position(record.text):
            return record
    return None


def raised_line(event: Event) -> Record | None:
    """The line of a traceback event that names the exception raised last
    (``OSError: [Errno 98] ...``), if it has one."""
    if not starts_traceback(event.first.text):
        return None
    for record in reversed(event.records[1:]):
        if _CHAINED_EXCEPTION.match(record.text):
            return record
    return None


def _exception_lines_after_frames(event: Event) -> list[Record]:
    """The lines after a traceback's last frame that name an exception: the one raised, and a
    wrapper's own (``RuntimeError: Engine core initialization failed``) printed after it."""
    if not starts_traceback(event.first.text):
        return []
    last_frame = max(
        (n for n, record in enumerate(event.records) if names_frame(record.text)), default=0
    )
    return [r for r in event.records[last_frame + 1 :] if _CHAINED_EXCEPTION.match(r.text)]


class _Template:
    def __init__(
        self, template: str, count: int, first_line: int | None, first_ts: datetime | None, seq: int
    ) -> None:
        self.template = template
        self.count = count
        self.first_line = first_line
        self.first_ts = first_ts
        self.seq = seq


class Exit(NamedTuple):
    """A process exit systemd reported as a failure, with what came just before it."""

    records: list[Record]
    attempt: int
    before: list[Record]
    first_error: list[Record]
    traceback: list[Record]
    status: str


class Failure(NamedTuple):
    """What the input shows of a failure no signature explains."""

    first_error: list[Record]
    traceback: list[Record]
    """The attempt's first traceback (header and exception line), when not the first error."""
    last_lines: list[Record]
    exit: Exit | None
    attempts: int
    status: str | None
    serving: bool = False
    """It came after the server said it was ready: a run-time failure."""
    notice: Record | None = None
    """The engine's word that it failed (a wrapper, a death notice) with no error before it:
    the cause is outside the input."""


class IncidentTracker:
    def __init__(self) -> None:
        self.recent: deque[Record] = deque(maxlen=LAST_LINES)
        self.first_errors: dict[int, list[Record]] = {}
        """Per start attempt, its first error: the line, or a traceback's header and last
        line."""
        self.first_tracebacks: dict[int, list[Record]] = {}
        self.exits: list[Exit] = []
        self.failed_attempts: set[int] = set()
        self.stopping: set[int] = set()
        """Attempts asked to stop (systemd ``Stopping``, SIGTERM): their exits are no
        failure."""
        self.templates: dict[str, _Template] = {}
        self.overflow = 0
        self.anchored: dict[int, Record] = {}
        """Per start attempt, its first line that holds a literal a later tier knows."""
        self.died_serving: set[int] = set()
        """Attempts in which a process died after the server said it was ready (the
        engine's death notices, a bare ``Killed``): a run-time failure, even with no exit
        seen."""
        self.ready_seq: dict[int, int] = {}
        """Per start attempt, the position of its ready line."""
        self.serving_errors: dict[int, list[Record]] = {}
        """Per start attempt, its first error after the ready line."""
        self.failure_notices: dict[int, Record] = {}
        """Per start attempt, its first line that says a process failed without saying
        why."""
        self.unexplained: list[Record] = []
        """The first line of each error template no signature matched, in the order they
        came, with the exceptions a traceback chains before its last: what a later tier may
        explain."""
        self.last_error_seq = -1
        """The position of the latest error line (or traceback) of the input."""
        self.wrapped: dict[int, str] = {}
        """By its first line's position, an error message that went on over the lines after
        it (a pasted exception a page wrapped): the whole message, for the tiers to read."""
        self.frames: dict[int, str] = {}
        """By its last line's position, a traceback's innermost frame and the code line under
        it (where it was raised, or where a paste cut it short), for the tiers to read."""
        self.engine_frames: dict[int, str] = {}
        """Likewise, the innermost frame in an engine's own files, where it is not the
        innermost frame (the engine's call into torch that raised)."""
        self.stacks: dict[int, tuple[str, ...]] = {}
        """Likewise, every frame of the traceback, outermost first (whose code called the
        code that raised)."""
        self.traced: dict[str, int] = {}
        """By its exception line's words, the first traceback that kept its frames: where
        several ranks print one error at once, one rank's exception line may come alone
        between another's frames, and its frames are those of the same words."""

    def _forget_old_attempts(self, attempt: int) -> None:
        """Only the current and the previous attempt's lines are read again (the first two
        failed attempts keep theirs in ``exits``): memory stays flat over a long restart loop."""
        for table in (
            self.first_errors,
            self.first_tracebacks,
            self.anchored,
            self.failure_notices,
        ):
            if len(table) > 2:
                for old in [a for a in table if a < attempt - 1]:
                    del table[old]

    def feed(self, event: Event, attempt: int, matched: bool) -> None:
        self._forget_old_attempts(attempt)
        first = event.first
        if first.origin == "systemd":
            self._systemd(first, attempt)
            return
        if first.origin != "app":
            return
        error = self._error_of(event)
        for record in event.records:
            if record.text.strip():
                self.recent.append(record)
            if _APP_STOP.search(record.text):
                self.stopping.add(attempt)
        if error is None:
            return
        if error == [first] and len(event.records) > 1 and len(self.wrapped) < MAX_UNEXPLAINED:
            self.wrapped[first.seq] = " ".join(r.text.strip() for r in event.records)
        if starts_traceback(first.text) and len(self.frames) < MAX_UNEXPLAINED:
            frame = innermost_frame(event)
            if frame is not None:  # by the exception's last line, its first where it went
                # on over more, and the line that names the exception where a line of another
                # kind came after it (the lines a tier may read it from)
                own = innermost_frame(event, _ENGINE_FILE)
                stack = frame_stack(event)
                raised = raised_line(event)
                named = _exception_lines_after_frames(event)
                lines = {error[0].seq, error[-1].seq} | {record.seq for record in named}
                for line in lines:
                    self.frames[line] = frame
                    self.stacks[line] = stack
                    if own is not None and own != frame:
                        self.engine_frames[line] = own
                self.traced.setdefault((raised or error[-1]).text.strip(), error[-1].seq)
                for record in named:  # a wrapper's exception printed after the one raised
                    self.traced.setdefault(record.text.strip(), record.seq)
        self.last_error_seq = event.seq
        if attempt in self.ready_seq and error[0].seq > self.ready_seq[attempt]:
            self.serving_errors.setdefault(attempt, error)
        earlier = self.first_errors.get(attempt)
        if earlier is not None and len(earlier) == 1 and announces_next(earlier[0].text):
            self.first_errors[attempt] = error  # the wrapper's own error came on the next line
        self.first_errors.setdefault(attempt, error)
        if starts_traceback(first.text) and self.first_errors[attempt] is not error:
            self.first_tracebacks.setdefault(attempt, error)
        if not matched:
            if len(error) > 1:
                for record in event.records[1:-1]:
                    if _CHAINED_EXCEPTION.match(record.text):
                        self._count(record)
            self._count(error[-1])

    @staticmethod
    def _error_of(event: Event) -> list[Record] | None:
        last = exception_line(event)
        if last is not None:
            if _NOT_A_FAILURE.match(last.text.strip()):
                return None
            return [event.first, last] if last is not event.first else [event.first]
        for record in event.records:
            if is_error_line(record):
                return [record]
        return None

    def _systemd(self, record: Record, attempt: int) -> None:
        text = record.text
        if text.startswith("Stopping "):
            self.stopping.add(attempt)
            return
        found = _EXIT.search(text)
        if found is None or attempt in self.stopping:
            return
        if found.group("result"):
            status = f"result '{found.group('result')}'"
        else:
            code, number, name = found.group("code"), found.group("status"), found.group("name")
            if code == "exited" and number == "0":
                return
            if code == "killed" and name in _STOP_SIGNALS:
                return  # a stop (systemd would say "Failed with result" if it were one)
            status = f"code={code}, status={number}/{name}"
        if attempt in self.failed_attempts:
            same = next((e for e in self.exits if e.attempt == attempt), None)
            if same is not None and len(same.records) < 2:
                same.records.append(record)
            return
        self.failed_attempts.add(attempt)
        if len(self.exits) < 2:  # the first failed attempt tells the story; a second counts
            self.exits.append(
                Exit(
                    [record],
                    attempt,
                    list(self.recent),
                    self.first_errors.get(attempt, []),
                    self.first_tracebacks.get(attempt, []),
                    status,
                )
            )

    def keep_unexplained(self, record: Record, attempt: int) -> None:
        """Keep a line that holds a later tier's literal, even if it reads like no error (the
        tier decides whether it is one)."""
        self.anchored.setdefault(attempt, record)
        if len(self.unexplained) < MAX_UNEXPLAINED and all(
            r.seq != record.seq or r.text != record.text for r in self.unexplained
        ):
            self.unexplained.append(record)
            self.unexplained.sort(key=lambda r: r.seq)

    def note_failure_notice(self, record: Record, attempt: int) -> None:
        """``record`` says a process of the server failed without saying why."""
        self.failure_notices.setdefault(attempt, record)

    def _count(self, record: Record) -> None:
        template = template_of(record.text)
        entry = self.templates.get(template)
        if entry is not None:
            entry.count += 1
        elif len(self.templates) < MAX_TEMPLATES:
            self.templates[template] = _Template(template, 1, record.line, record.ts, record.seq)
            if len(self.unexplained) < MAX_UNEXPLAINED:
                self.unexplained.append(record)
        else:
            self.overflow += 1

    def top_templates(self) -> list[_Template]:
        ranked = sorted(self.templates.values(), key=lambda t: (-t.count, t.seq))
        return ranked[:TOP_TEMPLATES]

    def may_have_failed(self, last_attempt: int, reached_ready: bool, ended: bool) -> bool:
        """The last attempt holds a line a later tier may know as a failure, and the input
        ended before it was ready, without a stop."""
        return (
            ended
            and not reached_ready
            and last_attempt in self.anchored
            and last_attempt not in self.stopping
        )

    def failure(self, last_attempt: int, reached_ready: bool, ended: bool) -> Failure | None:
        """The failure the input shows: a process exit systemd calls failed, or (when the
        input has ended) an error in the last start attempt, which never became ready and
        was not asked to stop. None on a healthy log."""
        if self.exits:
            exit_ = self.exits[0]
            return Failure(
                first_error=exit_.first_error,
                traceback=exit_.traceback,
                last_lines=exit_.before,
                exit=exit_,
                attempts=len(self.failed_attempts),
                status=exit_.status,
                notice=None if exit_.first_error else self.failure_notices.get(exit_.attempt),
            )
        if reached_ready and last_attempt in self.died_serving and ended:
            if last_attempt in self.stopping:
                return None
            return Failure(
                first_error=self.serving_errors.get(last_attempt, []),
                traceback=[],
                last_lines=list(self.recent),
                exit=None,
                attempts=1,
                status=None,
                serving=True,
            )
        errors = self.first_errors.get(last_attempt)
        # with no error, the engine's word that it failed: the cause was left out of the input
        notice = None if errors else self.failure_notices.get(last_attempt)
        if not ended or reached_ready or last_attempt in self.stopping or not (errors or notice):
            return None
        return Failure(
            first_error=errors or [],
            traceback=self.first_tracebacks.get(last_attempt, []),
            last_lines=list(self.recent),
            exit=None,
            attempts=1,
            status=None,
            notice=notice,
        )
