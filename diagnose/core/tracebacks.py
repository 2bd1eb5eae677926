"""Group the physical lines of a Python traceback into one event.

SGLang prefixes only the first line of a traceback; the rest arrive bare, possibly with
other ranks' prefixed lines in between. vLLM repeats its prefix on every line, though a
frame's code line, written with the frame line in one go, may come bare. So a bare line
continues the newest open traceback of its stream (journal writer or file), or stays with the
prefixed frame line just above it, and a prefixed line continues the traceback of its own
process.
"""

from __future__ import annotations

import re

from diagnose.core.records import Event, Record

TRACEBACK_START = "Traceback (most recent call last):"
_HEADLESS_FRAME = re.compile(r'\s*File "[^"\n]+", line \d+, in \S')
"""A traceback's frame line (``  File "x.py", line 12, in f``; faulthandler's dumps have no
comma before ``in``): in an excerpt pasted from a thread the header above it is often cut off,
and a page the excerpt was copied from may have dropped its indentation too."""
_CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_OTHER_WRITER = re.compile(r"^\[rank\d+\]:|^\[?[EWIF]\d{4} \d\d:\d\d:\d\d")
"""A line another writer started (torch's c10d ``[rank0]:[E321 ...]``, glog's ``E0321 ...``):
it ends an exception message, it does not continue it."""
_HEADLESS_EXCEPTION = re.compile(
    r"(?:[A-Za-z_][\w.]*(?:Error|Exception)|(?:[a-z_]\w*\.)+(?:errors?|exceptions?)\.[A-Z]\w*): \S"
)
"""An exception's own line with no traceback above it (a paste that kept only the error): its
message may go on over the next lines, as Python prints a message with newlines. A class whose
name says neither is named by its module (``triton.runtime.errors.OutOfResources: ...``)."""
_WARNING_GOES_ON = re.compile(r"\.py:\d+: [A-Z]\w*Warning: [^\n]*:\s*$")
"""A Python warning whose message ends in a colon (``x.py:8: RuntimeWarning: Failed to read
commit hash:``): the reason is the next line, which is part of the warning, not an error."""
_FENCE = re.compile(r"\s*(?:```|~~~)")
"""A Markdown code fence: a thread's paste opens and closes its log with one, sometimes around
the frames alone, with the exception after it."""
WARNING_MESSAGE_LINES = 2
MAX_TRACEBACK_LINES = 400
MAX_MESSAGE_LINES = 30
_ENDS_SENTENCE = re.compile(r"[.!?]\s*$")
MAX_HEADLESS_MESSAGE_LINES = 5
"""Lines a message with no traceback may take after its first: only a wrapped sentence or
two, so that the output after an error is not read as part of it."""
_MESSAGE_GOES_ON = re.compile(
    r"GPU \d+ has a total capac|Process \d+ has [\d.]+ \S+ memory in use"
    r"|Including non-PyTorch memory|Of the allocated memory|If reserved but unallocated"
)
"""A sentence that only ever continues an exception's message: torch's out-of-memory message,
which a paste often breaks into lines at its sentences (the numbers a memory setting is
computed from are in them)."""
_VALIDATION_ERRORS = re.compile(r"ValidationError: \d+ validation errors? for \w")
"""pydantic's header: every line of its errors below it is indented, a message's own line
breaks included (``  Value error, ... (128000).`` then ``  This effectively limits ...``)."""


class _Open:
    def __init__(
        self,
        records: list[Record],
        seq: int,
        key: str,
        bare: bool,
        state: str = "frames",
        max_message_lines: int = MAX_MESSAGE_LINES,
        headless: bool = False,
    ) -> None:
        self.records = records
        self.seq = seq
        self.key = key
        self.bare = bare
        """Continuation lines come without a prefix (SGLang, plain Python)."""
        self.state = state  # frames -> message -> blank -> chained -> frames ...
        self.message_lines = 0
        self.max_message_lines = max_message_lines
        self.headless = headless
        """An exception line with no traceback: its message goes on only where a line breaks
        a sentence off."""


def starts_traceback(text: str) -> bool:
    """Whether a line begins a traceback: Python's header, or a frame with no header above."""
    return TRACEBACK_START in text or _HEADLESS_FRAME.match(text) is not None


def is_fence(text: str) -> bool:
    """Whether a line is a Markdown code fence (```` ``` ````, ``~~~``, with a language or not)."""
    return _FENCE.match(text) is not None


_POSITION_MARKERS = re.compile(r"\s*[\^~]+\s*$")


def marks_position(text: str) -> bool:
    """Whether a line is Python's markers under a traceback's code (``^^^^`` and ``~~~^^``):
    they point at the code above, and say nothing of their own."""
    return _POSITION_MARKERS.match(text) is not None


_RAISE_WITH_MESSAGE = re.compile(
    r"^\s*raise\s+(?:\w+\.)*(?P<exception>[A-Z]\w*)\(\s*[rbf]?(?P<quote>[\"'])"
    r"(?P<message>[^\"'\n]{12,})(?P=quote)?\)?\s*$"
)
"""A ``raise`` that writes its message in place: ``raise TimeoutError("Timed out waiting ...``
(its literal may go on, in the source, on the next line)."""


def raised_message(code: str) -> str | None:
    """The exception line a ``raise`` with its message in place would print (``TimeoutError:
    Timed out waiting for engines to send``), for a traceback cut short at that line: the
    message its exception line would have shown begins with that literal."""
    found = _RAISE_WITH_MESSAGE.match(code)
    if found is None:
        return None
    return f"{found.group('exception')}: {found.group('message').strip()}"


def names_frame(text: str) -> bool:
    """Whether ``text`` holds a traceback's frame line (``File "x.py", line 12, in f``), after
    any prefix a log gave it."""
    return _HEADLESS_FRAME.search(text) is not None


def stops_in_frame(text: str, frame: str | None) -> bool:
    """Whether ``text`` is a line of ``frame`` (an innermost frame and its code line, as
    ``innermost_frame`` gives them): the traceback was cut there, before its exception, and the
    line is code, not a message."""
    return frame is not None and text.strip() in frame.split("\n")


def _traceback_lines(event: Event) -> list[str]:
    """An event's lines as a traceback reader wants them: stripped, without blank lines,
    position markers and code fences."""
    return [
        text
        for r in event.records
        if (text := r.text.strip()) and not marks_position(text) and not is_fence(text)
    ]


def frame_stack(event: Event) -> tuple[str, ...]:
    """Every frame of the event's last traceback (after its last chaining line), outermost
    first, each with the code line under it where the traceback shows one: the calls that led
    to the exception, for a tier to find whose code called whose."""
    lines = _traceback_lines(event)
    start = max((n for n, line in enumerate(lines) if line in _CHAIN_MARKERS), default=-1) + 1
    stack = []
    for n in range(start, len(lines)):
        if not _HEADLESS_FRAME.match(lines[n]):
            continue
        code = lines[n + 1] if n + 1 < len(lines) else None
        plain = code is None or _HEADLESS_FRAME.match(code) or _HEADLESS_EXCEPTION.match(code)
        stack.append(lines[n] if plain else f"{lines[n]}\n{code}")
    return tuple(stack)


def innermost_frame(event: Event, within: re.Pattern[str] | None = None) -> str | None:
    """A traceback's innermost frame line, with the code line under it when the traceback
    shows one (one per line): where the exception was raised, or, in a traceback cut short
    before its exception, the line it stopped at; with ``within``, the innermost frame whose
    line it matches (a file of the engine's package). None when no frame shows."""
    lines = _traceback_lines(event)
    frames = [
        n
        for n, line in enumerate(lines)
        if _HEADLESS_FRAME.match(line) and (within is None or within.search(line))
    ]
    if not frames:
        return None
    at = frames[-1]
    code = lines[at + 1] if at + 1 < len(lines) else None
    if code is None or _HEADLESS_EXCEPTION.match(code):
        return lines[at]
    return f"{lines[at]}\n{code}"


def _indented_continuation(target: _Open, text: str) -> bool:
    """A line indented as the message's own lines are: pydantic's errors under their header,
    or a message whose first line went on in an indented block (AITER's ``RuntimeError: [AITER]
    file.cu:540`` then ``  splitk workspace ...`` and ``  Call ...``)."""
    if not text.startswith("  "):
        return False
    if _VALIDATION_ERRORS.search(target.records[0].text) is not None:
        return True
    return len(target.records) > 1 and all(r.text.startswith("  ") for r in target.records[1:])


def _is_frame_line(text: str) -> bool:
    return text.startswith((" ", "\t", "^")) or _HEADLESS_FRAME.match(text) is not None


class TracebackGrouper:
    """Feed records in order; get events back as they complete."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._order: list[str] = []

    def feed(self, record: Record, seq: int) -> list[Event]:
        key = record.stream
        if record.origin != "app":  # systemd or the kernel speak once the output is over
            finished = [k for k in self._order if self._open[k].state != "frames"]
            return [*(e for k in finished for e in self._close(k)), Event([record], seq)]
        current = self._open.get(key) if record.prefixed else self._target(record)
        if TRACEBACK_START in record.text or (
            current is None and _HEADLESS_FRAME.match(record.text)
        ):
            if current and current.state in ("chained", "blank"):
                current.records.append(record)
                current.state = "frames"
                return []
            done = self._close(key)
            bare = not record.prefixed or record.engine == "sglang"
            self._open[key] = _Open([record], seq, key, bare)
            self._order.append(key)
            return done
        if record.prefixed and record.engine == "sglang":
            return [*self._close(key), Event([record], seq)]
        target = self._target(record)
        if target is not None:
            return self._continue(target, record, seq)
        text = record.text
        if record.prefixed:
            return [Event([record], seq)]
        warning = "Warning: " in text and _WARNING_GOES_ON.search(text) is not None
        if not warning and not _HEADLESS_EXCEPTION.match(text.lstrip()):
            return [Event([record], seq)]  # (a paste may indent it, as a quoted block)
        self._open[key] = _Open(
            [record],
            seq,
            key,
            True,
            "message",
            # a warning's reason, then the source line Python prints under it
            max_message_lines=WARNING_MESSAGE_LINES if warning else MAX_HEADLESS_MESSAGE_LINES,
            headless=True,
        )
        self._order.append(key)
        return []

    def _target(self, record: Record) -> _Open | None:
        if record.prefixed:  # vLLM: every line carries its own process prefix
            return self._open.get(record.stream)
        base = record.stream
        for key in reversed(self._order):
            candidate = self._open[key]
            if candidate.bare and key.split("|")[0] == base:
                return candidate
        newest = self._open[self._order[-1]] if self._order else None
        if (
            newest is not None
            and newest.state == "frames"
            and _HEADLESS_FRAME.match(newest.records[-1].text)
            and record.text.startswith((" ", "\t"))
            and not _HEADLESS_FRAME.match(record.text)
        ):  # the code line under a prefixed frame, written with it in one go: one prefix
            return newest
        return None

    def _continue(self, target: _Open, record: Record, seq: int) -> list[Event]:
        """Add the record to ``target``, or close ``target`` and treat the record anew."""
        text = record.text
        stripped = text.strip()
        if len(target.records) >= MAX_TRACEBACK_LINES:
            return self._close_and_refeed(target, record, seq)
        if is_fence(text) and target.headless and target.state == "message":
            return self._close_and_refeed(target, record, seq)  # the paste's block ends the
            # message that had no traceback; what follows is another block
        if is_fence(text):  # the page's formatting: the traceback goes on after it
            target.records.append(record)
            return []
        if target.state == "frames":
            target.records.append(record)
            if stripped and not _is_frame_line(text):
                target.state = "message"
            return []
        if stripped in _CHAIN_MARKERS:
            target.records.append(record)
            target.state = "chained"
            return []
        if target.state == "chained" and not stripped:
            target.records.append(record)
            return []
        if target.state == "message" and not stripped:
            target.state = "blank"  # a chained traceback may follow
            target.records.append(record)
            return []
        ends_message = (
            target.state != "message"
            or target.message_lines >= target.max_message_lines
            or (
                target.headless
                and _ENDS_SENTENCE.search(target.records[-1].text) is not None
                and _MESSAGE_GOES_ON.match(stripped) is None
                and not _indented_continuation(target, text)
            )
            or (record.prefixed and not _is_frame_line(text))
            or _OTHER_WRITER.match(text) is not None
        )
        if ends_message:
            return self._close_and_refeed(target, record, seq)
        target.records.append(record)
        target.message_lines += 1
        return []

    def _close_and_refeed(self, target: _Open, record: Record, seq: int) -> list[Event]:
        return [*self._close(target.key), *self.feed(record, seq)]

    def _close(self, key: str) -> list[Event]:
        current = self._open.pop(key, None)
        if current is None:
            return []
        self._order.remove(key)
        return [Event(current.records, current.seq)]

    def flush(self) -> list[Event]:
        events: list[Event] = []
        for key in list(self._order):
            events.extend(self._close(key))
        return events
