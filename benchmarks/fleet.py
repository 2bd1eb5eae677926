"""Fleet benchmark: N hosts x M lines of saved journal exports through ``diagnose file``, or
with ``--journal`` a journal-remote directory of N hosts through ``diagnose journal -D``.

Each host's log is the head of the generator's realistic SGLang export (benchmarks/generate_log.py:
startup, then mostly batch and access lines) cut to M lines, with the host field
renamed; every host is one file (with ``--journal``, one real journal file made by
systemd-journal-remote from it, as journal-upload fills a directory). One fresh ``diagnose``
process per size; prints wall time and its peak memory (the largest process's maximum RSS).

    python benchmarks/fleet.py --hosts 10 --lines 20000 --hosts 50 --lines 20000
    python benchmarks/fleet.py --journal --hosts 100 --lines 10000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from generate_log import HOST, generate

UNIT = "sglang-qwen.service"
BYTES_PER_LINE = 180
"""A little under the generator's mean line, so M lines are always there to cut."""


def write_fleet(hosts: int, lines: int, directory: Path) -> list[Path]:
    """``hosts`` files of ``lines`` lines each, one host name per file."""
    template = directory / "template.log"
    generate(lines * BYTES_PER_LINE, template)
    with template.open() as handle:
        head = list(islice(handle, lines))
    paths = []
    for index in range(hosts):
        name = f" gpu-node-{index:03d} "
        path = directory / f"host-{index:03d}.log"
        path.write_text("".join(line.replace(f" {HOST} ", name, 1) for line in head))
        paths.append(path)
    template.unlink()
    return paths


def write_journals(paths: list[Path], directory: Path) -> Path:
    """One journal file per host log, as systemd-journal-remote writes them."""
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from tests import journalgen  # the test suite's writer of real journal files

    remote = directory / "remote"
    remote.mkdir()
    for index, path in enumerate(paths):
        entries = journalgen.entries_from_short(path.read_text(), UNIT, seed=str(index))
        for entry in entries:
            entry["_MACHINE_ID"] = f"{index:032x}"
        journalgen.write_journal(entries, remote / f"remote-{path.stem}.journal")
        path.unlink()
    return remote


def measure(command_args: list[str]) -> tuple[float, float, int]:
    """Seconds, peak RSS in MiB (the largest process) and exit code of one ``diagnose`` run."""
    command = [sys.executable, "-m", "diagnose", *command_args, "-f", "json"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, action="append", help="hosts (repeat for sizes)")
    parser.add_argument("--lines", type=int, action="append", help="lines per host (one each)")
    parser.add_argument("--journal", action="store_true", help="a journal-remote directory")
    args = parser.parse_args()
    hosts = args.hosts or [100]
    lines = args.lines or [100_000] * len(hosts)
    if len(lines) != len(hosts):
        parser.error("give one --lines per --hosts")
    print(f"{'hosts':>6} {'lines/host':>11} {'total MB':>9} {'seconds':>8} {'peak MiB':>9}  exit")
    for n, m in zip(hosts, lines, strict=True):
        with tempfile.TemporaryDirectory() as tmp:
            paths = write_fleet(n, m, Path(tmp))
            size = sum(p.stat().st_size for p in paths) / 1e6
            if args.journal:
                remote = write_journals(paths, Path(tmp))
                command = ["journal", "-u", UNIT, "-D", str(remote), "--no-gpu"]
            else:
                command = ["file", *map(str, paths)]
            seconds, peak, code = measure(command)
        print(f"{n:>6} {m:>11} {size:>9.1f} {seconds:>8.2f} {peak:>9.0f}  {code}")


if __name__ == "__main__":
    main()
