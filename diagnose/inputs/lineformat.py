"""Recognise, per line, the formats these servers and journald write.

Outer layer: journalctl text exports (``short``, ``short-precise``, ``short-iso``) and
``journalctl -o json``. Inner layer: SGLang's ``[time RANKS]`` prefix, vLLM's
``(Proc pid=N) LEVEL MM-DD time [file:line]`` prefix and its older forms, or bare text.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timezone

from diagnose.core.records import Record
from diagnose.core.units import NAME_CHARS, UNIT_PREFIX, escape_unit

_ANSI = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
"""Compiled when a line first holds an escape (``re`` caches it)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNPRINTABLE = re.compile(r"[\x00-\x20\x7f-\x9f]")


def identifier(value: str | None) -> str | None:
    """A host name or other identifier taken from input, shown on one line: control
    characters and blanks as ``\\xNN`` (``gpu\\x0anode``), so none reaches a heading whole."""
    if value is None or not _UNPRINTABLE.search(value):
        return value
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


_MONTHS = {
    month: number
    for number, month in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_JOURNAL_SHORT = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<time>\d\d:\d\d:\d\d(?:\.\d{1,6})?) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)$"
)
_JOURNAL_ISO = re.compile(
    r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?:Z|[+-]\d\d:?\d\d)?) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)$"
)
_JOURNAL_MARKER = re.compile(
    r"^-- (?:Boot [0-9a-f]+|No entries|Logs begin at|Journal begins at|Reboot)"
)

_SGLANG = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,](?P<ms>\d{3}))?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?(?P<msg>.*)$"
)
_VLLM = re.compile(
    r"^(?P<procs>(?:\((?P<proc>[^()\s]+)(?: rank=\d+)? pid=(?P<pid>\d+)\) )*)"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<md>\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[^\]\s:]+):(?P<lineno>\d+)\] ?(?P<msg>.*)$"
)
_VIEWER_LEVEL = re.compile(r"\[(?P<level>info|warn|warning|debug|error|critical)\](?=\S)", re.I)
"""A log viewer's level tag glued to the line (RunPod's ``[info]``, ``[error]``); such viewers
also show a message's newline as a literal ``\\n`` at its end."""
_PIPED_LOGGER = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?) \| "
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|SUCCESS|TRACE) *\| [^|\n]{1,80}?(?: \| | - )"
)
"""A Python logger's columns split by bars: FastChat's ``2025-03-24 22:04:27 | ERROR | stderr | ``
(which routes a worker's stdout and stderr through it, a traceback's lines each so prefixed)
and loguru's ``2025-03-24 22:04:27.123 | ERROR    | module:function:12 - ``: the line is what
comes after."""
_PYTEST_ERROR = re.compile(r"E {3,}(?=\S)")
"""pytest's mark before each line of the exception it reports."""
_PYTEST_LOCATION = re.compile(
    r"(?P<path>[\w.+/-]*\w\.py):(?P<line>\d+): (?:in (?P<function>[\w<>.]+)|[A-Z]\w*)\s*$"
)
"""pytest's line naming a frame (``vllm/models/x.py:125: in get_quant_method``, its short
format) or where the exception was raised (``vllm/models/x.py:125: AttributeError``)."""
_ACTOR_TAG = re.compile(r"\[address=[^\]\s,]+, pid=\d+\] ")
"""The actor framework under xinference (xoscar) writes ``[address=HOST:PORT, pid=N] `` into
an exception's message, between its class and its words: left out of the message."""
_CLASS_REPR = re.compile(
    r"<class '(?P<name>(?:\w+\.)*\w*(?:Error|Exception|Exit|Interrupt|Warning))'>; "
)
"""An exception written as its class's repr and its message, ``; ``-joined (RunPod's worker:
``Uncaught exception | <class 'TypeError'>; X.plan() got ...; <traceback object at 0x...>;``):
rewritten as Python writes the exception line, ``TypeError: X.plan() got ...``."""


@functools.cache
def _note_before_error() -> re.Pattern[str]:
    """A person's words in Chinese, Japanese or Korean glued before the exception they pasted
    (``报错AttributeError: ...``, "it reported"): the exception is the line. Words with Latin
    letters or digits in them (``使用vllm serve部署...``, a command, a stamp) may name the
    engine, and a line that opens with a stamp or a process tag is a program's: both are left
    whole. Compiled when a line that is not ASCII first comes (its wide ranges cost a small run
    1% of its time)."""
    return re.compile(
        r"^(?![\[(])[^\nA-Za-z0-9]{0,80}?[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef]"
        r"(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S)"
    )


_RAY_REPEATED = re.compile(
    r"\s*\[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\.[^)]*\))?\s*$"
)
"""Ray's log deduplication appends this to a line that more workers printed (the first time with
its own note on how to turn it off): the count is Ray's, not part of the message."""
_VLLM_PROC_ONLY = re.compile(
    r"^(?P<procs>(?:\((?P<proc>[^()\s]+)(?: rank=\d+)? pid=(?P<pid>\d+)\) )+)(?P<msg>.*)$"
    r"|^(?P<procs_level>\((?P<proc_level>[A-Za-z_][\w.-]*)\)) "
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<msg_level>.*)$"
)
"""vLLM's process tag before a line whose own prefix was left out (``(EngineCore_DP0 pid=812) ``),
or kept with its level but without its time (``(StageEngineCoreProc_stage0_replica0) ERROR ``,
as a paste that trimmed the clock shows it)."""
_UNIT_JOB = re.compile(
    rf"^(?:Starting|Started|Stopping|Stopped|Failed to start) (?P<unit>{NAME_CHARS}\.service)\b"
)
_CLOCK_LINE = re.compile(
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) "
    r"(?P<time>\d\d:\d\d:\d\d) (?P<year>\d{4})\s*$"
)
"""A line that is only a clock reading: the first line of an ``nvidia-smi`` table, or
``date``'s output. It tells when the capture was taken (the latest evidence of a stall)."""
_FULL_DATE = re.compile(r"(?:^|\[)(\d{4})-\d\d-\d\d[ T]\d\d:\d\d")
_QUOTE_MARKS = ">\u258e\u258d\u258c\u2503"
_PASTE_STARTS = _QUOTE_MARKS + "["
_PASTED = re.compile(
    f"^(?:[{_QUOTE_MARKS}][ \t]?)*"
    + r"(?:\[(?P<ci>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\] ?)?"
)
"""What a paste wraps a log line in: a quote's mark (Markdown's ``> ``, as issue threads quote a
log, or the bar ``▎ `` that chat and forum pages put before a quoted line) and a CI runner's
UTC stamp (``[2025-11-06T02:10:00.702Z] ``, Jenkins' and Buildkite's)."""
_RUNTIME_STAMP = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
    r"(?:(?:stdout|stderr) [FP] )?"
)
"""What a container runtime puts before each line: ``docker logs -t`` and ``kubectl logs
--timestamps`` an RFC 3339 stamp with nanoseconds, a CRI log file also the stream and a
full-or-partial tag (``2026-06-08T18:01:24.332338885Z stdout F ``)."""

_RELAYED_LINE = re.compile(
    r'\bstd(?:err|out)\b(?:[^"\n]*?"(?:[^"\\\n]|\\.)*")*?[^"\n]*?'  # fields before it
    r'\sline="(?P<line>(?:[^"\\\n]|\\.)*)"'
)
"""A Go supervisor's logfmt line that carries a line its child wrote (LocalAI's ``DEBUG GRPC
stderr id="MODEL-127.0.0.1:41633" line="  File \\"/backends/...\\", line 1505, in ..."
caller={...}``): the child's line, its quotes escaped, is the ``line`` field."""
_GO_ESCAPE = re.compile(r"\\([\\\"tn])")
_GO_ESCAPED = {"\\": "\\", '"': '"', "t": "\t", "n": " "}

_TORCH_RANK = re.compile(r"\[rank(?P<rank>\d+)\]: ?")
"""torch.distributed's prefix on every line a rank writes to stderr (``[rank0]: Traceback ...``,
``[rank1]:[W ...] ...``): the line after it is the rank's, on the rank's own stream."""
_COMPOSE_PREFIX = re.compile(r"^(?P<service>[A-Za-z][\w.-]{0,62}) +\| ")
"""Docker Compose's column before each line of a service's output (``vllm-server  | ``, the
name padded to the longest service's), with ``docker compose logs -t``'s stamp after it."""


def clean(text: str) -> str:
    """Terminal control sequences removed, carriage-return overprints resolved."""
    if "\x1b" in text or "\x9b" in text:
        text = re.sub(_ANSI, "", text)
    if "\r" in text:
        parts = [part for part in text.split("\r") if part]
        text = parts[-1] if parts else ""
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return text


def year_hint(text: str) -> int | None:
    """The year of a full date in a line, for lines that carry none of their own."""
    match = _FULL_DATE.search(text)
    return int(match.group(1)) if match else None


def out_of_range_note(parser: LineParser | None) -> list[str]:
    """The note for lines whose time no calendar holds, if the parser met any."""
    if parser is None or not parser.out_of_range:
        return []
    count = parser.out_of_range
    lines = "1 line" if count == 1 else f"{count} lines"
    return [f"timestamp out of range on {lines} (no calendar holds it): ordered by arrival"]


class LineParser:
    """Turns the lines of one input into records. Keeps the year for year-less stamps.

    >>> parser = LineParser("x.log", 2026)
    >>> r = parser.parse(1, "Mar 01 11:53:10.123456 gpu-node-07 python3[48211]: "
    ...                     "[2026-03-01 11:53:10 DP0 TP3] Init torch distributed begin.")
    >>> r.host, r.rank, r.engine, r.text
    ('gpu-node-07', 'DP0 TP3', 'sglang', 'Init torch distributed begin.')
    >>> r.ts.isoformat()
    '2026-03-01T11:53:10.123456+00:00'
    >>> r = parser.parse(2, "(EngineCore_DP0 pid=4242) ERROR 03-01 11:54:07 [core.py:1100] "
    ...                     "EngineCore failed to start.")
    >>> r.engine, r.rank, r.text
    ('vllm', 'EngineCore_DP0', 'EngineCore failed to start.')
    >>> r = parser.parse(3, "Mar 01 11:55:00 gpu-node-07 systemd[1]: "
    ...                     "sglang-qwen.service: Main process exited, code=killed, status=9/KILL")
    >>> r.origin, r.unit
    ('systemd', 'sglang-qwen.service')
    """

    def __init__(self, source: str, default_year: int) -> None:
        self.source = source
        self.year = default_year
        self._last_month = 0
        self.out_of_range = 0
        """Lines whose own time no calendar holds (9999-12-31 at -23:59): ordered by arrival."""
        self._after_pytest_error = False

    def parse(self, line_no: int | None, raw_line: str) -> Record | None:
        """A record, or None for journalctl's own marker lines."""
        raw = clean(raw_line)
        if raw.startswith("{") and '"MESSAGE"' in raw:
            record = self._parse_json(line_no, raw)
            if record is not None:
                return record
        if raw.startswith("-- ") and _JOURNAL_MARKER.match(raw):
            return None
        pasted = _PASTED.match(raw) if raw[:1] and raw[:1] in _PASTE_STARTS else None
        line = raw[pasted.end() :] if pasted else raw
        record = Record(source=self.source, line=line_no, text=line, raw=raw, stream=self.source)
        clock = _CLOCK_LINE.match(line)
        if clock and clock.group("mon") in _MONTHS:
            self.year = int(clock.group("year"))
            record.ts = self._month_day(
                _MONTHS[clock.group("mon")], int(clock.group("day")), clock.group("time")
            )
            record.origin = "gpu"
            return record
        outer = _JOURNAL_SHORT.match(line) or _JOURNAL_ISO.match(line)
        if outer:
            self._apply_journal_prefix(record, outer)
        else:
            if " | " in line[:80] and (service := _COMPOSE_PREFIX.match(line)):
                record.text = line[service.end() :]
                record.stream = f"{record.stream}:{service.group('service')}"
            if record.text[:1].isdigit() and (stamp := _RUNTIME_STAMP.match(record.text)):
                record.text = record.text[stamp.end() :]
                record.ts = self._timed(_parse_iso(stamp.group("ts")))
        self._apply_app_prefix(record)
        if pasted and pasted.group("ci") and record.ts is None:
            record.ts = self._timed(_parse_iso(pasted.group("ci")))
        return record

    def _timed(self, stamp: datetime | None) -> datetime | None:
        """``stamp``, counting a time the line gave that no calendar holds."""
        if stamp is None:
            self.out_of_range += 1
        return stamp

    def _apply_journal_prefix(self, record: Record, outer: re.Match[str]) -> None:
        groups = outer.groupdict()
        record.text = groups["msg"]
        record.host = identifier(groups["host"])
        if groups.get("iso"):
            record.ts = self._timed(_parse_iso(groups["iso"]))
        else:
            inner_year = year_hint(record.text)
            if inner_year:
                self.year = inner_year
            record.ts = self._timed(
                self._month_day(_MONTHS.get(groups["mon"], 1), int(groups["day"]), groups["time"])
            )
        self._set_origin(record, groups["ident"], groups["pid"])

    def _set_origin(self, record: Record, ident: str | None, pid: str | None) -> None:
        record.stream = f"{record.source}:{record.host}:{ident}:{pid}"
        if ident == "kernel":
            record.origin = "kernel"
        elif ident == "systemd":  # PID 1, or a user's service manager
            record.origin = "systemd"
            unit = UNIT_PREFIX.match(record.text) or _UNIT_JOB.match(record.text)
            if unit:
                record.unit = unit.group("unit")
        elif ident == "systemd-journald":
            record.origin = "journald"

    def _apply_app_prefix(self, record: Record) -> None:
        if record.origin != "app":
            return
        self._read_pytest_lines(record)
        if ' line="' in record.text and (relayed := _RELAYED_LINE.search(record.text)):
            record.text = _GO_ESCAPE.sub(lambda m: _GO_ESCAPED[m.group(1)], relayed.group("line"))
        if "across cluster]" in record.text:
            record.text = _RAY_REPEATED.sub("", record.text)
        if "[address=" in record.text:
            record.text = _ACTOR_TAG.sub("", record.text)
        if "<class '" in record.text:
            record.text = _CLASS_REPR.sub(r"\g<name>: ", record.text)
        if not record.text.isascii() and (note := _note_before_error().match(record.text)):
            record.text = record.text[note.end() :]
        viewer = _VIEWER_LEVEL.match(record.text)
        if viewer is not None:  # the line under the tag is what the server wrote
            record.text = record.text[viewer.end() :].removesuffix("\\n")
        self._strip_piped_logger(record)
        if record.text.startswith("[rank") and (torch_rank := _TORCH_RANK.match(record.text)):
            record.text = record.text[torch_rank.end() :]
            record.stream += f":rank{torch_rank.group('rank')}"
        text = record.text
        sglang = _SGLANG.match(text)
        if sglang:
            record.engine = "sglang"
            record.prefixed = True
            record.rank = sglang.group("ranks").strip() or None
            record.text = sglang.group("msg")
            own = _sglang_time(sglang.group("ts"), sglang.group("ms"))
            if own is None and record.ts is None:
                self.out_of_range += 1
            if own is not None:
                self.year = own.year
                record.ts = record.ts or own
            record.stream += "|" + (record.rank or "main")
            return
        vllm = _VLLM.match(text)
        if vllm:
            record.engine = "vllm"
            record.prefixed = True
            record.text = vllm.group("msg")
            record.rank = vllm.group("proc")
            if record.ts is None:
                month, day = (int(part) for part in vllm.group("md").split("-"))
                record.ts = self._timed(self._month_day(month, day, vllm.group("time")))
            record.stream += "|" + (vllm.group("procs").strip() or "vllm")
            return
        proc_only = _VLLM_PROC_ONLY.match(text)
        if proc_only:
            record.engine = "vllm"
            record.prefixed = True
            leveled = proc_only.group("procs") is None
            record.text = proc_only.group("msg_level" if leveled else "msg")
            record.rank = proc_only.group("proc_level" if leveled else "proc")
            record.stream += "|" + proc_only.group("procs_level" if leveled else "procs").strip()
            self._strip_piped_logger(record)  # a launcher's tag on a worker's logger line
            return
        if viewer is not None and viewer.group("level").lower() in ("error", "critical"):
            record.text = f"[{viewer.group('level')}]{text}"  # its level, where no prefix says it

    def _read_pytest_lines(self, record: Record) -> None:
        """pytest's report of an exception, as Python writes it: its ``E   `` mark taken off the
        exception's lines, and a location line (``path.py:125: in f``, or ``path.py:125:
        AttributeError`` where no exception line came just before it, blank lines aside) written
        as the frame it names."""
        if not record.text or record.text.isspace():  # pytest's blank line before the location
            return
        after_error, self._after_pytest_error = self._after_pytest_error, False
        if record.text.startswith("E ") and (mark := _PYTEST_ERROR.match(record.text)):
            record.text = record.text[mark.end() :]
            self._after_pytest_error = True
            return
        place = _PYTEST_LOCATION.match(record.text) if ".py:" in record.text else None
        if place is not None and (place.group("function") or not after_error):
            function = place.group("function") or "<unknown>"
            record.text = (
                f'  File "{place.group("path")}", line {place.group("line")}, in {function}'
            )

    def _strip_piped_logger(self, record: Record) -> None:
        piped = _PIPED_LOGGER.match(record.text) if record.text[:1].isdigit() else None
        if piped is not None:
            record.text = record.text[piped.end() :]
            record.ts = record.ts or self._timed(_parse_iso(piped.group("ts")))

    def _month_day(self, month: int, day: int, clock: str) -> datetime | None:
        if self._last_month == 12 and month == 1:
            self.year += 1
        self._last_month = month
        return _utc(self.year, month, day, clock)

    def _parse_json(self, line_no: int | None, raw: str) -> Record | None:
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            return None
        if not isinstance(entry, dict) or "MESSAGE" not in entry:
            return None
        record = journal_entry_record(self.source, line_no, entry, self)
        record.raw = raw  # a line of a `journalctl -o json` export: the evidence is that line
        return record


def journal_entry_record(
    source: str, line_no: int | None, entry: dict, parser: LineParser
) -> Record:
    """A record from one journal entry (``journalctl -o json`` or systemd-python)."""
    text = clean(entry_message(entry))
    record = Record(source=source, line=line_no, text=text, raw=text)
    record.cursor = _field(entry, "__CURSOR")
    record.host = identifier(_field(entry, "_HOSTNAME"))
    record.invocation = _field(entry, "_SYSTEMD_INVOCATION_ID") or _field(entry, "INVOCATION_ID")
    stamp = _field(entry, "__REALTIME_TIMESTAMP")
    if stamp and stamp.isdigit():
        record.ts = parser._timed(time_from_usec(stamp))
    ident = _field(entry, "SYSLOG_IDENTIFIER")
    pid = _field(entry, "_PID")
    transport = _field(entry, "_TRANSPORT")
    if transport == "kernel":
        ident = "kernel"
    parser._set_origin(record, ident, pid)
    unit = (
        _field(entry, "_SYSTEMD_USER_UNIT") or _field(entry, "_SYSTEMD_UNIT")
        if record.origin == "app"
        else (_field(entry, "UNIT") or _field(entry, "USER_UNIT") or record.unit)
    )
    # any process may log with any UNIT=: a name that is not a unit name is only shown, escaped
    record.unit = escape_unit(unit) if unit else unit
    parser._apply_app_prefix(record)
    return record


def entry_message(entry: dict) -> str:
    """A journal entry's ``MESSAGE`` as text (a string, bytes, or the byte array journalctl
    writes for a message that is not UTF-8)."""
    message = entry.get("MESSAGE")
    if isinstance(message, list):
        message = bytes(b & 0xFF for b in message if isinstance(b, int))
    if isinstance(message, bytes):
        return message.decode("utf-8", "replace")
    return str(message or "")


def _field(entry: dict, name: str) -> str | None:
    value = entry.get(name)
    if value is None:
        return None
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value) if value is not None else None


def time_from_usec(stamp: str) -> datetime | None:
    """A journal time in microseconds since the epoch; None when no calendar holds it."""
    try:
        return datetime.fromtimestamp(int(stamp) / 1_000_000, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def _sglang_time(stamp: str, millis: str | None) -> datetime | None:
    date, _, clock = stamp.partition(" ")
    year, month, day = (int(part) for part in date.split("-"))
    return _utc(year, month, day, f"{clock}.{millis or 0:0>3}")


def _utc(year: int, month: int, day: int, clock: str) -> datetime | None:
    """A UTC time from ``HH:MM:SS`` with up to six digits of fraction, as the patterns take
    it; None when no calendar holds it (2026-02-30, 25:61:00) or it has digits other than
    ASCII. Built directly: the first ``strptime`` of a process costs more than a small log's
    parse."""
    if year < 1000 or not clock.isascii():  # a year of four digits, as %Y takes it
        return None
    whole, _, fraction = clock.partition(".")
    hour, minute, second = (int(part) for part in whole.split(":"))
    try:
        return datetime(
            year, month, day, hour, minute, second, int(fraction.ljust(6, "0")), timezone.utc
        )
    except ValueError:
        return None


def _parse_iso(text: str) -> datetime | None:
    text = text.replace(",", ".")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    elif re.search(r"[+-]\d{4}$", text):
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        stamp = datetime.fromisoformat(text)
        if stamp.tzinfo is None:
            return stamp.replace(tzinfo=timezone.utc)
        return stamp.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # 9999-12-31T23:59-23:59 is past year 9999 in UTC
        return None
