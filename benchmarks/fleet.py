"""Fleet benchmark: N hosts x M lines of saved journal exports through ``diagnose file``.

Each host's log is the head of the generator's realistic SGLang export (benchmarks/generate_log.py:
startup, then mostly batch and access lines) cut to M lines, with the host field
renamed; every host is one file. One fresh ``diagnose`` process per size; prints wall time
and its peak memory (the child's maximum RSS).

    python benchmarks/fleet.py --hosts 10 --lines 20000 --hosts 50 --lines 20000
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


def measure(paths: list[Path]) -> tuple[float, float, int]:
    """Seconds, peak RSS in MiB and exit code of one ``diagnose file`` run over ``paths``."""
    command = [sys.executable, "-m", "diagnose", "file", *map(str, paths), "-f", "json"]
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
            seconds, peak, code = measure(paths)
        print(f"{n:>6} {m:>11} {size:>9.1f} {seconds:>8.2f} {peak:>9.0f}  {code}")


if __name__ == "__main__":
    main()
