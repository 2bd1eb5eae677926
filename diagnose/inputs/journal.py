"""The systemd journal, read for one unit and scoped to its failed start.

Two readers give the same entries: systemd-python (``pip install 'diagnose[journald]'``,
imported here and nowhere else, only when used) and ``journalctl -o json`` in a subprocess
when systemd-python is not installed. Both push the same matches down to the journal:

* the unit: ``_SYSTEMD_UNIT=UNIT`` (its own output) or ``_PID=1 UNIT=UNIT`` (what systemd
  says about it; ``journalctl -u`` in systemd 252 expands to the same two groups);
* in the time window of the chosen start attempts: ``_TRANSPORT=kernel`` (OOM killer,
  ``NVRM: Xid``) and journald's ``Suppressed N messages`` (MESSAGE_ID ``a596d6fe...``).

Scoping (systemd before 257 has no ``journalctl --invocation``): entries are grouped by
``_SYSTEMD_INVOCATION_ID`` (service output) or ``INVOCATION_ID`` (systemd's messages about
that run; "Scheduled restart job" and "Stopped" belong to the old run, "Starting"/"Started"
to the new one). By default the last start attempt is chosen, and with it every earlier
attempt that failed and was restarted automatically (a restart loop). The unit's entries
are read newest first, so the reading stops one attempt before the loop began.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

from diagnose.core.errors import UserError
from diagnose.core.records import Event, Record
from diagnose.core.tracebacks import TracebackGrouper
from diagnose.inputs.lineformat import (
    LineParser,
    entry_message,
    journal_entry_record,
    out_of_range_note,
)

JOURNAL_DROPPED_ID = "a596d6fe7bfa4994828e72309e95d61e"
"""MESSAGE_ID of journald's ``Suppressed N messages from /system.slice/UNIT``."""
KERNEL_SLACK = timedelta(seconds=30)
"""Kernel lines this long after an attempt's last entry still belong to it."""

RECORD_FIELDS = (
    "MESSAGE",
    "_HOSTNAME",
    "_SYSTEMD_INVOCATION_ID",
    "INVOCATION_ID",
    "SYSLOG_IDENTIFIER",
    "_PID",
    "_TRANSPORT",
    "_SYSTEMD_UNIT",
    "UNIT",
    "_SYSTEMD_USER_UNIT",
    "USER_UNIT",
    "USER_INVOCATION_ID",
    "MESSAGE_ID",
    "_BOOT_ID",
)
"""The fields a record is made of (the cursor and the time come with every entry)."""
SCAN_FIELDS = (
    "MESSAGE",
    "_SYSTEMD_INVOCATION_ID",
    "INVOCATION_ID",
    "USER_INVOCATION_ID",
    "UNIT",
    "USER_UNIT",
    "_PID",
    "_BOOT_ID",
)

_JOB_START = re.compile(r"^(?:Starting|Started) (?P<unit>\S+?)(?: - .*|\.{3}|\.)?$")
_EXITED = re.compile(
    r"^\S+: (?:Main|Control) process exited, code=(?P<code>\w+), status=(?P<status>\S+)"
)
_SUPPRESSED = re.compile(r"^Suppressed (?P<count>\d+) messages from (?P<path>\S+)")
BOOT_ID_FORM = re.compile(r"^[0-9a-f]{32}$")
_RELATIVE = re.compile(r"^(?P<sign>[+-])\s*(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>[a-z]*)$")
_SPANS = {
    "": 1,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}

Entry = dict[str, Any]


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """A journalctl-style time: ``@EPOCH``, ``-2h``, ``now``, ``today``, ``yesterday``,
    ``YYYY-MM-DD[ HH:MM[:SS]]`` (local time unless it carries an offset)."""
    now = now or datetime.now(timezone.utc)
    value = text.strip()
    lowered = value.lower()
    if lowered.startswith("@"):
        try:
            return datetime.fromtimestamp(float(lowered[1:]), tz=timezone.utc)
        except (ValueError, OverflowError, OSError):  # not a number, or past any calendar
            pass
    elif lowered == "now":
        return now
    elif lowered in ("today", "yesterday", "tomorrow"):
        midnight = now.astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight + timedelta(days={"today": 0, "yesterday": -1, "tomorrow": 1}[lowered])
    elif (relative := _RELATIVE.match(lowered)) and relative.group("unit") in _SPANS:
        seconds = float(relative.group("amount")) * _SPANS[relative.group("unit")]
        try:
            return now + timedelta(seconds=seconds if relative.group("sign") == "+" else -seconds)
        except OverflowError:
            pass
    else:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            try:
                return stamp.astimezone(timezone.utc) if stamp.tzinfo else stamp.astimezone()
            except (ValueError, OverflowError):  # 9999-12-31T23:59-23:59 is past year 9999
                raise UserError(
                    f"{text!r}: out of range: in UTC it is before year 1 or after 9999",
                    help="give a time within the journal's years",
                ) from None
    raise UserError(
        f"{text!r}: not a time I can read",
        help="use '2026-03-03 11:50', '@1772538790', '-2h', 'today' or 'yesterday'",
    )


def _usec(stamp: datetime) -> int:
    return round(stamp.timestamp() * 1_000_000)


def from_usec(usec: int) -> datetime:
    """A journal time (microseconds since the epoch) as an aware UTC datetime."""
    return datetime.fromtimestamp(usec / 1_000_000, tz=timezone.utc)


# -- the two readers ----------------------------------------------------------------------


class Keep(Protocol):
    """Says, from the raw bytes of entries (a batch in journal order), which of them the
    engine could care about: their indices, in increasing order."""

    def __call__(self, raws: list[bytes]) -> list[int]: ...


BATCH = 512
"""Entries judged at once: one scan per batch instead of one per entry."""


class Backend(Protocol):
    name: str

    def entries(
        self,
        groups: list[list[str]],
        since: int | None,
        until: int | None,
        reverse: bool,
        fields: Iterable[str],
        keep: Keep | None = None,
    ) -> Iterator[Entry]:
        """Entries matching any of ``groups`` (each a list of ANDed ``FIELD=value``),
        in time order (newest first when ``reverse``), bounds in microseconds inclusive.

        With ``keep``, an entry whose raw message (or raw JSON line) it rejects is only
        counted in ``skipped``, its time in ``last_skipped_us``: its other fields are never
        read. That is what makes a million entries cheap."""
        ...

    skipped: int
    last_skipped_us: int | None

    def boots(self) -> list[str]:
        """Boot IDs, oldest first."""
        ...

    def machines(self) -> tuple[list[tuple[str, str]], list[str]]:
        """Each machine's ``(hostname, machine ID)`` (the name one of its entries gives), and
        every host name the journal holds: what ``distinct_hosts`` makes hosts of."""
        ...


@dataclass(frozen=True, order=True)
class HostId:
    """One machine of a journal: its host name, and its machine ID when another machine of
    the same journal has that name too (cloned images keep one hostname)."""

    name: str
    machine_id: str | None = None

    @property
    def label(self) -> str:
        """``gpu-node-07``, or ``gpu-node (machine 3f2a1b9c)`` when the name is shared."""
        return (
            self.name if self.machine_id is None else f"{self.name} (machine {self.machine_id[:8]})"
        )


def distinct_hosts(machines: Iterable[tuple[str, str]], names: Iterable[str]) -> list[HostId]:
    """The journal's hosts, from each machine's ``(hostname, machine ID)`` and every host name
    it holds: a name held by several machines is one host per machine; any other name is one
    host (a machine renamed in the window, or names that share one machine ID, stay apart by
    name as before)."""
    ids: dict[str, set[str]] = {name: set() for name in names}
    for name, machine in machines:
        ids.setdefault(name, set()).add(machine)
    return sorted(
        HostId(name, machine) if len(machines_of) > 1 else HostId(name)
        for name, machines_of in ids.items()
        for machine in (sorted(machines_of) if len(machines_of) > 1 else [None])
    )


@dataclass
class JournalLocation:
    files: list[Path] = field(default_factory=list)
    directory: Path | None = None
    host: str | None = None
    """Only this host's entries (``_HOSTNAME``): one host of a journal-remote directory."""
    machine_id: str | None = None
    """Only this machine's entries (``_MACHINE_ID``), when hosts share a name."""

    def matches(self, group: list[str]) -> list[str]:
        """A match group limited to the location's host (and machine), if it has one."""
        limits = [f"_HOSTNAME={self.host}"] if self.host else []
        limits += [f"_MACHINE_ID={self.machine_id}"] if self.machine_id else []
        return [*group, *limits]

    def describe(self) -> str:
        if self.files:
            return ", ".join(str(f) for f in self.files)
        if self.directory is not None:
            return str(self.directory)
        return "the system journal"


class PythonBackend:
    """systemd-python's low-level reader (``_next``/``_get``): no per-entry conversion."""

    name = "systemd-python"

    def __init__(self, location: JournalLocation) -> None:
        from systemd import _reader  # the optional extra: imported only here

        self._reader_type = _reader._Reader
        self.location = location
        self.skipped = 0
        self.last_skipped_us: int | None = None

    def _open(self) -> Any:
        try:
            if self.location.files:
                return self._reader_type(0, files=[str(f) for f in self.location.files])
            if self.location.directory is not None:
                return self._reader_type(0, path=str(self.location.directory))
            return self._reader_type(0)
        except OSError as error:
            raise UserError(
                f"{self.location.describe()}: cannot open the journal: {error}",
                help="check the path, and that you may read it (sudo, systemd-journal group)",
            ) from None

    def entries(
        self,
        groups: list[list[str]],
        since: int | None,
        until: int | None,
        reverse: bool,
        fields: Iterable[str],
        keep: Keep | None = None,
    ) -> Iterator[Entry]:
        reader = self._open()
        wanted = tuple(name for name in fields if name != "MESSAGE")
        self.skipped, self.last_skipped_us = 0, None
        try:
            for i, group in enumerate(groups):
                if i:
                    reader.add_disjunction()
                for match in self.location.matches(group):
                    reader.add_match(match)
            if reverse:
                if until is not None:
                    reader.seek_realtime(until + 1)
                else:
                    reader.seek_tail()
                step = reader._previous
            else:
                if since is not None:
                    reader.seek_realtime(since)
                else:
                    reader.seek_head()
                step = reader._next
            get, realtime = reader._get, reader._get_realtime  # the hot loop: locals
            low = since if since is not None else -1
            high = until if until is not None else 1 << 63
            if keep is not None:
                assert not reverse, "the pre-filter reads forward"
                yield from self._kept(reader, keep, wanted, high)
                return
            while step():
                stamp = realtime()
                if stamp < low:
                    if reverse:
                        return
                    continue
                if stamp > high:
                    if reverse:
                        continue
                    return
                try:
                    message = get("MESSAGE")
                except KeyError:
                    message = b""
                yield self._entry(reader, stamp, message, wanted)
        finally:
            reader.close()

    @staticmethod
    def _entry(reader: Any, stamp: int, message: bytes, wanted: tuple[str, ...]) -> Entry:
        entry: Entry = {
            "__CURSOR": reader._get_cursor(),
            "__REALTIME_TIMESTAMP": str(stamp),
            "MESSAGE": message,
        }
        for name in wanted:
            try:
                entry[name] = reader._get(name).decode("utf-8", "replace")
            except KeyError:
                continue
        return entry

    def _kept(self, reader: Any, keep: Keep, wanted: tuple[str, ...], high: int) -> Iterator[Entry]:
        """Forward from the current position: messages are read in batches and judged by
        ``keep``; the reader goes back (by cursor) only to the entries it keeps."""
        get, realtime, step = reader._get, reader._get_realtime, reader._next
        messages: list[bytes] = []
        stamps: list[int] = []
        start = ""
        more = True
        while more:
            more = bool(step())
            if more:
                stamp = realtime()
                if stamp > high:
                    more = False
                else:
                    if not messages:
                        start = reader._get_cursor()
                    try:
                        messages.append(get("MESSAGE"))
                    except KeyError:
                        messages.append(b"")
                    stamps.append(stamp)
                    if len(messages) < BATCH:
                        continue
            if not messages:
                break
            chosen = keep(messages)
            self.skipped += len(messages) - len(chosen)
            if len(chosen) < len(messages):
                self.last_skipped_us = stamps[-1]
            if chosen:
                resume = reader._get_cursor() if more else ""
                reader.seek_cursor(start)
                step()
                position = 0
                for index in chosen:
                    while position < index:
                        step()
                        position += 1
                    yield self._entry(reader, stamps[index], messages[index], wanted)
                if resume:
                    reader.seek_cursor(resume)
                    step()
            messages, stamps = [], []

    def boots(self) -> list[str]:
        reader = self._open()
        try:
            firsts = []
            for boot_id in _unique(reader, "_BOOT_ID"):
                reader.flush_matches()
                reader.add_match(f"_BOOT_ID={boot_id}")
                reader.seek_head()
                if reader._next():
                    firsts.append((reader._get_realtime(), boot_id))
            return [boot_id for _, boot_id in sorted(firsts)]
        finally:
            reader.close()

    def machines(self) -> tuple[list[tuple[str, str]], list[str]]:
        reader = self._open()
        try:
            names = _unique(reader, "_HOSTNAME")
            ids = _unique(reader, "_MACHINE_ID")
            if len(ids) == 1 and len(names) == 1:  # journal-remote's file of one host
                return [(names[0], ids[0])], names
            machines = []
            for machine in ids:
                reader.flush_matches()
                reader.add_match(f"_MACHINE_ID={machine}")
                reader.seek_head()
                while reader._next():  # the machine's first entry that names its host
                    try:
                        name = reader._get("_HOSTNAME")
                    except KeyError:
                        continue
                    machines.append((name.decode("utf-8", "replace"), machine))
                    break
            return machines, names
        finally:
            reader.close()


def _unique(reader: Any, name: str) -> list[str]:
    """The values field ``name`` takes in the journal (systemd-python's ``query_unique``)."""
    return [v.decode() if isinstance(v, bytes) else str(v) for v in reader.query_unique(name)]


_MACHINE_DIRECTORY = re.compile(r"^[0-9a-f]{32}(?:\.\S+)?$")


def journal_files(directory: Path) -> list[Path]:
    """The journal files a reader of ``directory`` opens: its own, and those of its
    subdirectories named by a machine ID (``/var/log/journal/MACHINE_ID``, optionally with a
    namespace), archived ones (``.journal~``) included."""

    def journals(folder: Path) -> list[Path]:
        return sorted(
            path
            for path in folder.iterdir()
            if path.name.endswith((".journal", ".journal~")) and path.is_file()
        )

    try:
        found = journals(directory)
        for folder in sorted(directory.iterdir()):
            if _MACHINE_DIRECTORY.match(folder.name) and folder.is_dir():
                found += journals(folder)
    except OSError as error:
        raise UserError(
            f"{directory}: cannot list the journal directory: {error}",
            help="check the path, and that you may read it (sudo, systemd-journal group)",
        ) from None
    return found


def host_locations(
    location: JournalLocation,
    prefer: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[tuple[HostId, JournalLocation]]:
    """The hosts of a journal given as files or a directory, sorted, each with where its
    entries are: only the files that hold them. Files are opened one at a time, and a host's
    reader opens its own files (one, as journal-remote writes them), not every host's: the
    memory and time a host costs do not grow with the number of hosts. A file of a directory
    that cannot be opened (corrupted) is left out, as journalctl does, and ``warn`` told."""
    files = location.files or (journal_files(location.directory) if location.directory else [])
    machines: list[tuple[str, str]] = []
    names: list[str] = []
    held: list[tuple[Path, set[str], set[str]]] = []
    for path in files:
        try:
            pairs, file_names = open_backend(JournalLocation([path]), prefer).machines()
        except UserError as error:
            if location.files:
                raise
            if warn is not None:
                warn(f"{error.message}: left out")
            continue
        machines += pairs
        names += file_names
        held.append((path, set(file_names), {machine for _, machine in pairs}))
    return [
        (
            host,
            replace(
                location,
                files=[
                    path
                    for path, has_names, has_machines in held
                    if host.name in has_names
                    and (host.machine_id is None or host.machine_id in has_machines)
                ],
                directory=None,
                host=host.name,
                machine_id=host.machine_id,
            ),
        )
        for host in distinct_hosts(machines, names)
    ]


def open_backend(location: JournalLocation, prefer: str | None = None) -> Backend:
    """systemd-python when installed (or asked for), else journalctl."""
    if prefer != "journalctl":
        try:
            return PythonBackend(location)
        except ImportError:
            if prefer == "systemd-python":
                raise UserError(
                    "systemd-python is not installed", help="pip install 'diagnose[journald]'"
                ) from None
    from diagnose.inputs.journalctl import JournalctlBackend  # a subprocess: only when used

    return JournalctlBackend(location)


# -- start attempts -----------------------------------------------------------------------


@dataclass
class Attempt:
    """One start attempt of the unit: the entries of one invocation ID."""

    invocation: str | None
    first_us: int
    last_us: int
    entries: int = 0
    started: bool = False
    """systemd's ``Starting``/``Started`` job message for it is in the journal."""
    app_lines: int = 0
    exit_status: str | None = None
    result: str | None = None
    restarted: bool = False
    """systemd scheduled an automatic restart after it."""
    ended: bool = False

    @property
    def failed(self) -> bool:
        if self.result is not None:
            return self.result != "success"
        return self.exit_status is not None and not self.exit_status.startswith("0/")

    def observe(self, text: str, unit: str) -> None:
        """Take note of what systemd (PID 1) says about this attempt."""
        prefix = f"{unit}: "
        if text.startswith(prefix):
            said = text[len(prefix) :]
            if said.startswith("Scheduled restart job"):
                self.restarted = True
            elif said.startswith("Failed with result '"):
                self.result = said[len("Failed with result '") :].split("'", 1)[0]
                self.ended = True
            elif said.startswith("Deactivated successfully"):
                self.result = self.result or "success"
                self.ended = True
            elif exited := _EXITED.match(text):
                self.exit_status = exited.group("status")
                if said.startswith("Main"):
                    self.ended = True
        elif (job := _JOB_START.match(text)) and job.group("unit") == unit:
            self.started = True
        elif text.startswith((f"Stopped {unit}", f"Failed to start {unit}")):
            self.ended = True


@dataclass
class JournalQuery:
    unit: str
    location: JournalLocation = field(default_factory=JournalLocation)
    boot: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    invocations: int | None = None
    """The last N start attempts; None: the last one, with the restart loop that led to it."""
    user: bool = False
    """A unit of the user's service manager (``systemctl --user``), not the system's."""


def read_nothing(keep: Keep | None = None) -> Iterator[Record]:
    """A scope's reader once its records are read (a plain function, so a scope can be
    handed from a worker process back to its parent)."""
    return iter(())


@dataclass
class Scope:
    """What was chosen, and what is known to be missing from it."""

    unit: str
    backend: str
    attempts: list[Attempt]
    """Oldest first."""
    left_out: int = 0
    """Earlier attempts seen and not chosen (a lower bound: reading stops early)."""
    boot: str | None = None
    user: bool = False
    notes: list[str] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    """Filled by ``select``; ``stream`` reads them one by one instead."""
    kernel_lines: int = 0
    suppressed: int = 0
    entries: int = 0
    """Entries the journal gave for the chosen window (the unit's, PID 1's about it, the
    kernel's, journald's), the ones the pre-filter skipped included."""
    first_us: int | None = None
    last_us: int | None = None
    stream: Callable[..., Iterator[Record]] = field(default=read_nothing, repr=False)
    """Reads the records of the chosen attempts; ``keep`` pre-filters raw entries."""

    @property
    def invocations(self) -> set[str]:
        return {a.invocation for a in self.attempts if a.invocation}

    @property
    def loop(self) -> bool:
        return len(self.attempts) > 1 and all(a.restarted for a in self.attempts[:-1])

    def describe(self) -> str:
        count = len(self.attempts)
        what = f"{count} start attempt{'s' if count != 1 else ''}"
        if self.loop:
            what += " (a restart loop)"
        if self.attempts:
            first = _when(self.attempts[0].first_us)
            last = _when(self.attempts[-1].last_us)
            what += f" from {first} to {last}"
        if self.left_out:
            what += (
                f"; earlier attempts left out (--invocations N to include {self.left_out} or more)"
            )
        return f"journal of {self.unit}: {what}"


def _when(usec: int) -> str:
    return from_usec(usec).strftime("%Y-%m-%d %H:%M:%S UTC")


def _unit_groups(unit: str, boot: str | None, user: bool = False) -> list[list[str]]:
    """The unit's own output, and what its service manager says about it."""
    extra = [f"_BOOT_ID={boot}"] if boot else []
    own = "_SYSTEMD_USER_UNIT" if user else "_SYSTEMD_UNIT"
    return [[f"{own}={unit}", *extra], *_manager_groups(unit, boot, user)]


def _manager_groups(unit: str, boot: str | None, user: bool = False) -> list[list[str]]:
    """What the service manager says about the unit: PID 1 (``UNIT=``) or a user's
    manager (``USER_UNIT=``)."""
    extra = [f"_BOOT_ID={boot}"] if boot else []
    return [[f"USER_UNIT={unit}", *extra]] if user else [["_PID=1", f"UNIT={unit}", *extra]]


def _invocation(entry: Entry) -> str | None:
    value = (
        entry.get("_SYSTEMD_INVOCATION_ID")
        or entry.get("INVOCATION_ID")
        or entry.get("USER_INVOCATION_ID")
    )
    return str(value) if value else None


def _from_manager(entry: Entry) -> bool:
    """systemd's own message about a unit (PID 1, or a user's manager), not the unit's output."""
    return bool(entry.get("UNIT") or entry.get("USER_UNIT")) and not entry.get(
        "_SYSTEMD_INVOCATION_ID"
    )


def resolve_boot(backend: Backend, boot: str | None) -> str | None:
    """A boot ID from journalctl's ``-b`` forms: ID, 0 / -N (from the last), N (from the first)."""
    if boot is None:
        return None
    value = boot.strip().lower()
    if BOOT_ID_FORM.match(value.replace("-", "")) and len(value) >= 32:
        return value.replace("-", "")
    try:
        offset = int(value or "0")
    except ValueError:
        raise UserError(
            f"-b {boot}: not a boot ID or offset", help="use -b 0 (this boot), -b -1, or a boot ID"
        ) from None
    boots = backend.boots()
    index = len(boots) - 1 + offset if offset <= 0 else offset - 1
    if not boots or not 0 <= index < len(boots):
        raise UserError(
            f"-b {boot}: no such boot in the journal ({len(boots)} boots)",
            help="journalctl --list-boots lists them",
        )
    return boots[index]


def scan_attempts(backend: Backend, query: JournalQuery, boot: str | None) -> Scope:
    """Pass 1: the unit's start attempts, newest first, until the chosen ones are complete.

    systemd's own messages about the unit (a few per attempt) mark every attempt's start and
    end, so they are read first; the unit's output is read only when they are missing (a
    journal that kept the service lines but not PID 1's)."""
    scope = _scan_attempts(backend, query, boot, _manager_groups(query.unit, boot, query.user))
    if scope.attempts:
        return scope
    return _scan_attempts(backend, query, boot, _unit_groups(query.unit, boot, query.user))


def _scan_attempts(
    backend: Backend, query: JournalQuery, boot: str | None, groups: list[list[str]]
) -> Scope:
    unit = query.unit
    since = _usec(query.since) if query.since else None
    until = _usec(query.until) if query.until else None
    window = since is not None or until is not None
    attempts: list[Attempt] = []  # newest first
    chosen: int | None = None
    settled = 1  # attempts[:settled] have had all their end-of-run messages read

    def settle(index: int) -> bool:
        """attempts[index] is complete: decide whether it joins; True to stop reading."""
        nonlocal chosen, settled
        settled = index + 1
        if query.invocations is not None or window:
            return False
        older = attempts[index]
        if older.restarted and older.failed:
            return False
        chosen = index
        return True

    stopped = False
    for entry in backend.entries(groups, since, until, True, SCAN_FIELDS):
        stamp = int(entry["__REALTIME_TIMESTAMP"])
        invocation = _invocation(entry)
        if not attempts:
            attempts.append(Attempt(invocation, stamp, stamp))
        elif invocation is not None and invocation != attempts[-1].invocation:
            if attempts[-1].invocation is None:
                attempts[-1].invocation = invocation  # the newest entries came without an ID
            else:
                if settled < len(attempts) and settle(len(attempts) - 1):
                    stopped = True
                    break
                attempts.append(Attempt(invocation, stamp, stamp))
                if query.invocations is not None and len(attempts) > query.invocations:
                    chosen = query.invocations
                    stopped = True
                    break
        current = attempts[-1]
        current.first_us = min(current.first_us, stamp)
        current.last_us = max(current.last_us, stamp)
        current.entries += 1
        if _from_manager(entry):
            current.observe(entry_message(entry), unit)
            complete = current.started
        else:
            current.app_lines += 1
            complete = True
        if complete and settled < len(attempts) and settle(len(attempts) - 1):
            stopped = True
            break
    if chosen is None:
        if query.invocations is not None:
            chosen = query.invocations
        elif window:
            chosen = len(attempts)
        else:
            chosen = next(
                (
                    i
                    for i in range(settled, len(attempts))
                    if not (attempts[i].restarted and attempts[i].failed)
                ),
                len(attempts),
            )
    chosen = min(chosen, len(attempts))
    selected = list(reversed(attempts[:chosen]))
    scope = Scope(
        unit=unit,
        backend=backend.name,
        attempts=selected,
        left_out=len(attempts) - chosen,
        boot=boot,
        user=query.user,
    )
    if selected and not selected[0].started and not stopped and since is None:
        scope.notes.append(
            "the beginning of the first start attempt "
            f"(first entry at {_when(selected[0].first_us)}) "
            "is not in the journal: it may have rotated out (journalctl --disk-usage; "
            "SystemMaxUse= in journald.conf), so its first lines are missing"
        )
    return scope


MAX_PUSHED_INVOCATIONS = 16
"""Past this many invocations the journal's match (one OR term per invocation, tested on
every entry) costs more than it saves: the unit's entries are read and filtered here."""


def read_scope(
    backend: Backend, scope: Scope, source: str, year: int, keep: Keep | None = None
) -> Iterator[Record]:
    """Pass 2: the chosen attempts' entries, with kernel and journald lines of their window,
    as records, one at a time; the scope's counts and notes are complete once it is read."""
    if not scope.attempts:
        return
    first = scope.attempts[0].first_us
    last_attempt = scope.attempts[-1]
    until = (
        last_attempt.last_us + int(KERNEL_SLACK.total_seconds() * 1_000_000)
        if last_attempt.ended
        else None
    )
    extra = [f"_BOOT_ID={scope.boot}"] if scope.boot else []
    chosen = scope.invocations
    if (
        all(a.invocation for a in scope.attempts)
        and not scope.user
        and len(chosen) <= MAX_PUSHED_INVOCATIONS
    ):
        # the match pushed down to the journal (a user unit's output may lack the ID)
        service = [[f"_SYSTEMD_INVOCATION_ID={i}", *extra] for i in sorted(chosen)]
        unit_groups = [*service, *_manager_groups(scope.unit, scope.boot)]
    else:
        unit_groups = _unit_groups(scope.unit, scope.boot, scope.user)
    groups = [
        *unit_groups,
        ["_TRANSPORT=kernel", *extra],
        [f"MESSAGE_ID={JOURNAL_DROPPED_ID}", *extra],
    ]
    parser = LineParser(source, year)
    slice_path = f"/{scope.unit}"
    for entry in backend.entries(groups, first, until, False, RECORD_FIELDS, keep):
        stamp = int(entry["__REALTIME_TIMESTAMP"])
        scope.entries += 1
        scope.first_us = stamp if scope.first_us is None else scope.first_us
        scope.last_us = stamp
        transport = entry.get("_TRANSPORT")
        invocation = _invocation(entry)
        if transport == "kernel":
            scope.kernel_lines += 1
        elif entry.get("MESSAGE_ID") == JOURNAL_DROPPED_ID and str(entry.get("_PID")) != "1":
            suppressed = _SUPPRESSED.match(entry_message(entry))
            if not suppressed or not suppressed.group("path").endswith(slice_path):
                continue
            scope.suppressed += int(suppressed.group("count"))
        elif (invocation is not None and invocation not in chosen) or scope.unit not in (
            entry.get("_SYSTEMD_UNIT"),
            entry.get("UNIT"),
            entry.get("_SYSTEMD_USER_UNIT"),
            entry.get("USER_UNIT"),
        ):
            continue
        yield journal_entry_record(source, None, entry, parser)
    scope.notes += out_of_range_note(parser)
    scope.entries += backend.skipped
    if backend.last_skipped_us is not None:
        scope.first_us = scope.first_us or backend.last_skipped_us
        scope.last_us = max(scope.last_us or 0, backend.last_skipped_us)
    if scope.suppressed:
        scope.notes.append(
            f"journald suppressed {scope.suppressed} messages of {scope.unit} in this window "
            "(rate limit): evidence may be missing; raise RateLimitBurst= in journald.conf "
            "or LogRateLimitBurst= in the unit"
        )


def select(query: JournalQuery, backend: Backend | None = None, year: int | None = None) -> Scope:
    """Read the journal for ``query``: the chosen attempts' records, in journal order."""
    scope = choose(query, backend, year)
    scope.records = list(scope.stream())
    return scope


def choose(query: JournalQuery, backend: Backend | None = None, year: int | None = None) -> Scope:
    """The chosen attempts, with ``scope.stream(keep)`` ready to read their records."""
    backend = backend or open_backend(query.location)
    boot = resolve_boot(backend, query.boot)
    scope = scan_attempts(backend, query, boot)
    if scope.attempts:
        last = from_usec(scope.attempts[-1].last_us)
        source = f"journal:{query.unit}"
        scope.stream = lambda keep=None: read_scope(backend, scope, source, year or last.year, keep)
    return scope


def recent_attempts(query: JournalQuery, backend: Backend, count: int) -> Scope:
    """The unit's last ``count`` start attempts (oldest first, each with its end-of-run
    messages read), without their records: ``read_attempts`` reads those of the chosen ones."""
    boot = resolve_boot(backend, query.boot)
    return scan_attempts(backend, replace(query, invocations=max(1, count)), boot)


def read_attempts(
    backend: Backend, scan: Scope, attempts: list[Attempt], year: int | None = None
) -> Scope:
    """A scope of ``attempts`` alone (taken from ``scan``, oldest first), with their records:
    one start attempt diagnosed apart from the ones around it."""
    scope = Scope(
        unit=scan.unit,
        backend=scan.backend,
        attempts=list(attempts),
        boot=scan.boot,
        user=scan.user,
    )
    if not attempts:
        return scope
    stamp = from_usec(attempts[-1].last_us)
    scope.records = list(read_scope(backend, scope, f"journal:{scan.unit}", year or stamp.year))
    return scope


def events_from_records(records: Iterable[Record], first_seq: int = 0) -> Iterator[Event]:
    """Events of journal records: tracebacks grouped, as for files."""
    grouper = TracebackGrouper()
    seq = first_seq
    for record in records:
        seq += 1
        record.seq = seq
        yield from grouper.feed(record, seq)
    yield from grouper.flush()
