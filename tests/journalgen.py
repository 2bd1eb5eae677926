"""Make real journal files in a test: Journal Export Format in, ``systemd-journal-remote`` out.

``entries_from_short`` turns a ``journalctl -o short-precise`` fixture into journal entries
with the fields journald would have given them (``_SYSTEMD_UNIT`` and
``_SYSTEMD_INVOCATION_ID`` on service output; ``_PID=1``, ``UNIT`` and ``INVOCATION_ID`` on
systemd's messages; ``_TRANSPORT=kernel`` on kernel lines). A new invocation ID starts at
systemd's ``Starting``/``Started`` job message, as in systemd: "Scheduled restart job" and
"Stopped" still belong to the old run. ``write_journal`` writes the export format (binary-safe
form for values with newlines or control characters) and runs ``systemd-journal-remote``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

JOURNAL_REMOTE_PATHS = (
    "/lib/systemd/systemd-journal-remote",
    "/usr/lib/systemd/systemd-journal-remote",
)
BOOT_ID = "0f3c8b61d2a44e5f9a1b7c3e5d2f4a68"
MACHINE_ID = "6a1e0c5b9f8d4e27b3c1a9d8e7f60b25"
BOOT_REALTIME = datetime(2026, 3, 1, tzinfo=timezone.utc)

_SHORT = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<time>\d\d:\d\d:\d\d\.\d{6}) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)$"
)
_MONTHS = {
    month: number
    for number, month in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_UNIT_IN_TEXT = re.compile(r"^(?P<unit>[\w@.:-]+\.service): ")
_JOB = re.compile(
    r"^(?P<verb>Starting|Started|Stopping|Stopped|Failed to start) (?P<unit>[\w@.:-]+\.service)"
)


def journal_remote() -> str | None:
    for path in JOURNAL_REMOTE_PATHS:
        if Path(path).exists():
            return path
    return shutil.which("systemd-journal-remote")


def _id(*parts: object) -> str:
    return hashlib.md5("|".join(map(str, parts)).encode()).hexdigest()


def entries_from_short(
    text: str,
    unit: str,
    year: int = 2026,
    shift: timedelta = timedelta(0),
    boot_id: str = BOOT_ID,
    seed: str = "",
    user: bool = False,
) -> list[dict[str, str]]:
    """Journal entries for the lines of a short-precise export (all lines must parse).

    With ``user``, the unit is a user's (``systemctl --user``): its manager is not PID 1 and
    says ``USER_UNIT=``/``USER_INVOCATION_ID=``; the output carries ``_SYSTEMD_USER_UNIT=``
    and no invocation ID of its own."""
    entries = []
    invocation = _id(seed, unit, "before-first-start")
    runs = 0
    for number, line in enumerate(text.splitlines(), 1):
        match = _SHORT.match(line)
        assert match, f"line {number} is not short-precise: {line!r}"
        stamp = (
            datetime.strptime(
                f"{year}-{_MONTHS[match['mon']]:02d}-{int(match['day']):02d} {match['time']}",
                "%Y-%m-%d %H:%M:%S.%f",
            ).replace(tzinfo=timezone.utc)
            + shift
        )
        ident, pid, message = match["ident"], match["pid"], match["msg"]
        entry = {"_HOSTNAME": match["host"], "MESSAGE": message}
        if ident == "kernel":
            entry |= {"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "PRIORITY": "4"}
        elif ident == "systemd" and pid == "1":
            job = _JOB.match(message)
            if job and job["verb"] in ("Starting", "Started") and job["unit"] == unit:
                if (
                    job["verb"] == "Started"
                    and entries
                    and entries[-1]["MESSAGE"].startswith(f"Starting {unit}")
                ):
                    pass  # Starting and Started of one job: same invocation
                else:
                    runs += 1
                    invocation = _id(seed, unit, runs)
            about = (job["unit"] if job else None) or (
                m["unit"] if (m := _UNIT_IN_TEXT.match(message)) else unit
            )
            entry |= {
                "_TRANSPORT": "journal",
                "SYSLOG_IDENTIFIER": "systemd",
                "_PID": "1",
                "_COMM": "systemd",
                "_SYSTEMD_UNIT": "init.scope",
                "_SYSTEMD_CGROUP": "/init.scope",
                "UNIT": about,
                "INVOCATION_ID": invocation,
                "PRIORITY": "6",
            }
        elif ident == "systemd-journald":
            entry |= {
                "_TRANSPORT": "driver",
                "SYSLOG_IDENTIFIER": "systemd-journald",
                "_PID": pid or "412",
                "MESSAGE_ID": "a596d6fe7bfa4994828e72309e95d61e",
                "PRIORITY": "6",
            }
        else:
            entry |= {
                "_TRANSPORT": "stdout",
                "SYSLOG_IDENTIFIER": ident,
                "_PID": pid or "1000",
                "_SYSTEMD_UNIT": unit,
                "_SYSTEMD_CGROUP": f"/system.slice/{unit}",
                "_SYSTEMD_INVOCATION_ID": invocation,
                "_STREAM_ID": _id(seed, invocation, "stream"),
                "PRIORITY": "6",
            }
        entry |= {
            "__REALTIME_TIMESTAMP": str(_usec(stamp)),
            "__MONOTONIC_TIMESTAMP": str(_usec(stamp) - _usec(BOOT_REALTIME)),
            "_BOOT_ID": boot_id,
            "_MACHINE_ID": MACHINE_ID,
            "_UID": "0",
        }
        entries.append(_as_user_unit(entry) if user else entry)
    return entries


USER_MANAGER = {"_SYSTEMD_UNIT": "user@1000.service", "_UID": "1000"}


def _as_user_unit(entry: dict[str, str]) -> dict[str, str]:
    """The same entry as a user's service manager and a user unit give it."""
    if entry.get("_PID") == "1" and "UNIT" in entry:
        entry = dict(entry)
        entry["USER_UNIT"] = entry.pop("UNIT")
        entry["USER_INVOCATION_ID"] = entry.pop("INVOCATION_ID")
        entry.pop("_SYSTEMD_CGROUP", None)
        return {**entry, **USER_MANAGER, "_PID": "1500"}
    if entry.get("_TRANSPORT") == "stdout":
        entry = dict(entry)
        entry["_SYSTEMD_USER_UNIT"] = entry.pop("_SYSTEMD_UNIT")
        entry.pop("_SYSTEMD_INVOCATION_ID")
        entry.pop("_SYSTEMD_CGROUP", None)
        return {**entry, **USER_MANAGER}
    return entry


def _usec(stamp: datetime) -> int:
    return round(stamp.timestamp() * 1_000_000)


def _export_field(key: str, value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    if b"\n" in data or any(b < 0x20 and b != 0x09 for b in data):
        return key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
    return key.encode() + b"=" + data + b"\n"


def export_format(entries: Iterable[dict[str, str | bytes]]) -> bytes:
    """Journal Export Format (https://systemd.io/JOURNAL_EXPORT_FORMATS/)."""
    out = bytearray()
    for entry in entries:
        for key, value in entry.items():
            out += _export_field(key, value)
        out += b"\n"
    return bytes(out)


def write_journal(entries: Iterable[dict[str, str | bytes]], path: Path) -> Path:
    """A real ``.journal`` file at ``path`` (its name must end in ``.journal``)."""
    binary = journal_remote()
    assert binary, "systemd-journal-remote is not installed"
    assert path.name.endswith(".journal")
    ordered = sorted(entries, key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    result = subprocess.run(
        [binary, f"--output={path}", "-"],
        input=export_format(ordered),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    return path


FIXTURES = Path(__file__).parent.parent / "fixtures"
UNIT = "sglang-qwen.service"


def crashloop_entries() -> list[dict[str, str]]:
    """A healthy run (fixtures/incidents/healthy-sglang, moved to 8 days earlier and stopped
    cleanly), then the five failed attempts of qwen-122b-crashloop, with kernel and journald
    lines and another unit's output around them."""
    healthy = (FIXTURES / "incidents/healthy-sglang.journal.txt").read_text()
    healthy += (FIXTURES / "journal/healthy-stop.journal.txt").read_text()
    noise = (FIXTURES / "journal/window-noise.journal.txt").read_text()
    other = (FIXTURES / "journal/other-unit.journal.txt").read_text()
    loop = (FIXTURES / "incidents/qwen-122b-crashloop.journal.txt").read_text()
    entries = entries_from_short(healthy, UNIT, shift=-timedelta(days=8), seed="healthy")
    entries += entries_from_short(loop, UNIT, seed="loop")
    entries += entries_from_short(noise, UNIT, seed="noise")
    entries += entries_from_short(other, "other.service", seed="other")
    # a binary-safe value: a tqdm bar with carriage returns, in the last attempt
    last = max(int(e["__REALTIME_TIMESTAMP"]) for e in entries if e.get("_SYSTEMD_UNIT") == UNIT)
    bar = dict(next(e for e in reversed(entries) if e.get("_SYSTEMD_UNIT") == UNIT))
    bar["MESSAGE"] = "Loading shards:   0%|          | 0/4\rLoading shards:  25%|##5       | 1/4\r"
    bar["__REALTIME_TIMESTAMP"] = str(last - 5_000_000)
    bar["__MONOTONIC_TIMESTAMP"] = str(int(bar["__MONOTONIC_TIMESTAMP"]) - 5_000_000)
    entries.append(bar)
    return entries
