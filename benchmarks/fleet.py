"""Fleet benchmark: N hosts x M lines of saved journal exports through ``diagnose file``, or
with ``--journal`` a journal-remote directory of N hosts through ``diagnose journal -D``.

Each host's log is the generator's realistic SGLang export (benchmarks/generate_log.py:
startup, mostly batch and access lines, failures near the end) cut to M lines (its head and
its tail), with the host field renamed; every host is one file (with ``--journal``, one real journal file made by
systemd-journal-remote from it, as journal-upload fills a directory, written once and kept
under ``--data-dir``). One fresh ``diagnose`` process per size; prints wall time and peak
memory: the largest process's maximum RSS, and the whole process tree's (``diagnose``, its
workers and any journalctl it runs), summed and sampled every 20 ms, as RSS and as PSS (pages
shared between forked workers counted once).

    python benchmarks/fleet.py --hosts 10 --lines 20000 --hosts 50 --lines 20000
    python benchmarks/fleet.py --journal --hosts 100 --lines 10000 --jobs 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import contextlib

from generate_log import HOST, generate

UNIT = "sglang-qwen.service"
BYTES_PER_LINE = 240
"""A little over the generator's mean line (about 220 bytes), so M lines are there to cut."""
SAMPLE_S = 0.02


def host_lines(lines: int, directory: Path) -> list[str]:
    """``lines`` lines of a generated log (host field ``HOST``): its head and its tail, so
    every host starts, serves and fails (the generator plants failures near the end)."""
    template = directory / f"template-{lines}.log"
    generate(lines * BYTES_PER_LINE, template)
    written = template.read_text().splitlines(keepends=True)
    template.unlink()
    if len(written) < lines:
        raise SystemExit(f"the generator wrote {len(written)} lines, not {lines}")
    return written[: lines // 2] + written[len(written) - (lines - lines // 2) :]


def renamed(head: list[str], index: int) -> str:
    name = f" gpu-node-{index:03d} "
    return "".join(line.replace(f" {HOST} ", name, 1) for line in head)


def write_fleet(hosts: int, lines: int, directory: Path) -> list[Path]:
    """``hosts`` files of ``lines`` lines each, one host name per file."""
    head = host_lines(lines, directory)
    paths = []
    for index in range(hosts):
        path = directory / f"host-{index:03d}.log"
        path.write_text(renamed(head, index))
        paths.append(path)
    return paths


def _write_host_journal(head: list[str], index: int, remote: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from tests import journalgen  # the test suite's writer of real journal files

    entries = journalgen.entries_from_short(renamed(head, index), UNIT, seed=str(index))
    for entry in entries:
        entry["_MACHINE_ID"] = f"{index:032x}"
    journalgen.write_journal(entries, remote / f"remote-host-{index:03d}.journal")


def journal_dir(hosts: int, lines: int, data_dir: Path, jobs: int) -> Path:
    """A journal-remote directory of ``hosts`` hosts, written once (``jobs`` processes)."""
    remote = data_dir / f"fleet-journal-{hosts}x{lines}-ends"
    if remote.is_dir():
        return remote
    data_dir.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=data_dir, prefix=".fleet-"))
    head = host_lines(lines, partial)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = pool.map(_write_host_journal, [head] * hosts, range(hosts), [partial] * hosts)
        for _ in done:
            pass
    partial.rename(remote)
    size = sum(f.stat().st_size for f in remote.iterdir()) / 1e6
    print(f"wrote {remote}: {size:.0f} MB in {time.perf_counter() - started:.0f} s")
    return remote


def _tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    pids, index = [root], 0
    while index < len(pids):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            for task in Path(f"/proc/{pids[index]}/task").iterdir():
                pids += [int(p) for p in (task / "children").read_text().split()]
        index += 1
    return pids


def _tree_memory(root: int) -> tuple[int, int]:
    """RSS and PSS of the tree under ``root``, in KiB."""
    rss = pss = 0
    for pid in _tree(root):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss += int(line.split()[1])
    return rss, pss


def measure(command_args: list[str]) -> tuple[float, float, float, float, int]:
    """Seconds, peak RSS in MiB of the largest process, the tree's peak RSS and PSS in MiB,
    and exit code of one ``diagnose`` run."""
    command = [sys.executable, "-m", "diagnose", *command_args, "-f", "json"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks = [0, 0]
    finished = threading.Event()

    def sample() -> None:
        while not finished.wait(SAMPLE_S):
            rss, pss = _tree_memory(process.pid)
            peaks[0], peaks[1] = max(peaks[0], rss), max(peaks[1], pss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)  # a zombie until reaped: sampled to the end
    elapsed = time.perf_counter() - started
    finished.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, peaks[0] / 1024, peaks[1] / 1024, code


def _hide_systemd_python(directory: Path) -> None:
    """Make ``diagnose`` fall back to journalctl: an empty ``systemd`` package first on its
    path has no ``_reader``."""
    (directory / "systemd").mkdir()
    (directory / "systemd" / "__init__.py").write_text("")
    os.environ["PYTHONPATH"] = str(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, action="append", help="hosts (repeat for sizes)")
    parser.add_argument("--lines", type=int, action="append", help="lines per host (one each)")
    parser.add_argument("--journal", action="store_true", help="a journal-remote directory")
    parser.add_argument("--jobs", type=int, help="diagnose's --jobs (default: its own)")
    parser.add_argument(
        "--reader", choices=["systemd-python", "journalctl"], help="the journal reader"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "diagnose-bench"
    )
    args = parser.parse_args()
    hosts = args.hosts or [100]
    lines = args.lines or [100_000] * len(hosts)
    if len(lines) != len(hosts):
        parser.error("give one --lines per --hosts")
    jobs = ["--jobs", str(args.jobs)] if args.jobs is not None else []
    print(
        f"{'hosts':>6} {'lines/host':>11} {'total MB':>9} {'seconds':>8} "
        f"{'largest MiB':>11} {'tree RSS':>9} {'tree PSS':>9}  exit"
    )
    for n, m in zip(hosts, lines, strict=True):
        with tempfile.TemporaryDirectory() as tmp:
            if args.journal:
                remote = journal_dir(n, m, args.data_dir, os.cpu_count() or 1)
                size = sum(f.stat().st_size for f in remote.iterdir()) / 1e6
                command = ["journal", "-u", UNIT, "-D", str(remote), "--no-gpu", *jobs]
                if args.reader == "journalctl":
                    _hide_systemd_python(Path(tmp))
            else:
                paths = write_fleet(n, m, Path(tmp))
                size = sum(p.stat().st_size for p in paths) / 1e6
                command = ["file", *map(str, paths), *jobs]
            seconds, largest, tree_rss, tree_pss, code = measure(command)
        print(
            f"{n:>6} {m:>11} {size:>9.1f} {seconds:>8.2f} "
            f"{largest:>11.0f} {tree_rss:>9.0f} {tree_pss:>9.0f}  {code}"
        )


if __name__ == "__main__":
    main()
