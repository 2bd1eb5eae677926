"""Benchmark `diagnose journal --file` against `journalctl --file ... -u UNIT -o cat`.

    .venv/bin/python benchmarks/journal.py                    # a 1-million-entry journal
    .venv/bin/python benchmarks/journal.py --entries 200000   # quicker

Writes (once, cached) a real journal file: the realistic SGLang log of `generate_log.py`
(a long-running TP4 unit, mostly periodic lines, a failure and a restart loop at the end),
turned into Journal Export Format with the fields journald gives service output and PID 1's
messages, and handed to `systemd-journal-remote`. Then times, in the same run, journalctl
printing the unit's messages and `diagnose journal` diagnosing the unit from that file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate_log import UNIT, generate
from benchmarks.run import measure
from tests.journalgen import journal_remote

BYTES_PER_LINE = 216  # what generate_log writes on average, journal prefix included
BOOT_ID = "4e1f0c5b9f8d4e27b3c1a9d8e7f60b25"
MACHINE_ID = "9a1e0c5b9f8d4e27b3c1a9d8e7f60b26"
_SHORT = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<time>\d\d:\d\d:\d\d\.\d{6}) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)$"
)
_MONTHS = {
    m: n
    for n, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


def _journal_remote() -> str:
    found = journal_remote()
    if not found:
        raise SystemExit(
            "systemd-journal-remote is needed (Debian: apt-get install systemd-journal-remote)"
        )
    return found


def _field(key: str, value: str) -> bytes:
    data = value.encode()
    if any(b < 0x20 and b != 0x09 for b in data):
        return key.encode() + b"\n" + len(data).to_bytes(8, "little") + data + b"\n"
    return key.encode() + b"=" + data + b"\n"


def export_entries(log: Path, out, year: int = 2026) -> int:
    """Journal Export Format for each line of a short-precise log, streamed to ``out``."""
    runs = 0
    invocation = hashlib.md5(b"run-0").hexdigest()
    written = 0
    with log.open(encoding="utf-8") as lines:
        for line in lines:
            match = _SHORT.match(line.rstrip("\n"))
            if not match:
                continue
            stamp = datetime.strptime(
                f"{year}-{_MONTHS[match['mon']]:02d}-{int(match['day']):02d} {match['time']}",
                "%Y-%m-%d %H:%M:%S.%f",
            ).replace(tzinfo=timezone.utc)
            usec = round(stamp.timestamp() * 1_000_000)
            message = match["msg"]
            fields = {"__REALTIME_TIMESTAMP": str(usec), "__MONOTONIC_TIMESTAMP": str(written + 1),
                      "_BOOT_ID": BOOT_ID, "_MACHINE_ID": MACHINE_ID, "_HOSTNAME": match["host"],
                      "_UID": "0", "MESSAGE": message}  # fmt: skip
            if match["ident"] == "systemd":
                if message.startswith(f"Started {UNIT}") and written:
                    runs += 1
                    invocation = hashlib.md5(f"run-{runs}".encode()).hexdigest()
                fields |= {"_TRANSPORT": "journal", "SYSLOG_IDENTIFIER": "systemd", "_PID": "1",
                           "_SYSTEMD_UNIT": "init.scope", "UNIT": UNIT, "INVOCATION_ID": invocation,
                           "PRIORITY": "6"}  # fmt: skip
            else:
                fields |= {"_TRANSPORT": "stdout", "SYSLOG_IDENTIFIER": match["ident"],
                           "_PID": match["pid"] or "1000", "_SYSTEMD_UNIT": UNIT,
                           "_SYSTEMD_INVOCATION_ID": invocation, "PRIORITY": "6"}  # fmt: skip
            out.write(b"".join(_field(k, v) for k, v in fields.items()) + b"\n")
            written += 1
    return written


def make_journal(entries: int, directory: Path) -> Path:
    """A directory of journal files (journal-remote rotates a large journal into several)."""
    journal = directory / f"journal-{entries}"
    if journal.is_dir():
        return journal
    log = directory / f"sglang-{entries}.log"
    generate(entries * BYTES_PER_LINE, log)
    partial = Path(tempfile.mkdtemp(dir=directory, prefix=".journal-"))
    remote = subprocess.Popen(
        [_journal_remote(), f"--output={partial}/bench.journal", "-"],
        stdin=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert remote.stdin is not None
    count = export_entries(log, remote.stdin)
    remote.stdin.close()
    if remote.wait() != 0:
        raise SystemExit("systemd-journal-remote failed")
    partial.rename(journal)
    log.unlink()
    size = sum(f.stat().st_size for f in journal.iterdir())
    print(f"wrote {journal}: {count} entries, {size / 1e6:.0f} MB")
    return journal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "diagnose-bench"
    )
    arguments = parser.parse_args()
    arguments.data_dir.mkdir(parents=True, exist_ok=True)
    journal = make_journal(arguments.entries, arguments.data_dir)
    reader = "systemd-python" if _has_systemd_python() else "journalctl"
    print(f"{os.cpu_count()} cores, reader: {reader}")
    cat_s, cat_rss, _ = measure(["journalctl", "-D", str(journal), "-u", UNIT, "-o", "cat"])
    diag_s, diag_rss, out = measure(
        [sys.executable, "-m", "diagnose", "journal", "-u", UNIT, "-D", str(journal), "-f", "json"]
    )
    primary = re.search(rb'"signature": "([^"]+)"', out)
    print(f"journalctl -o cat : {cat_s:6.2f} s  peak RSS {cat_rss / 1024:5.0f} MB")
    print(f"diagnose journal  : {diag_s:6.2f} s  peak RSS {diag_rss / 1024:5.0f} MB"
          f"  ({diag_s / cat_s:.2f} x journalctl; primary: {primary.group(1).decode() if primary else None})")  # fmt: skip


def _has_systemd_python() -> bool:
    try:
        import systemd.journal  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
