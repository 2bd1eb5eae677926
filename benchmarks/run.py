"""Benchmark `diagnose file` against `grep -c -E -f` over the library's own patterns.

    .venv/bin/python benchmarks/run.py                  # 100M and 1G logs, then start-up
    .venv/bin/python benchmarks/run.py --sizes 100M     # quicker

For each size it writes (once, cached) a deterministic realistic SGLang journal export with
`generate_log.py`, then times, on the same file in the same run:
  * `LC_ALL=C grep -c -E -f patterns` where the patterns are the library's regexes turned into
    POSIX extended regexes (those that cannot be are left out and counted);
  * `diagnose file LOG -f json --jobs 1` (one core) and `diagnose file LOG -f json` (one
    process per usable CPU, the default),
and prints MB/s, the ratio of each to grep, and the peak RSS of the largest process; then
`diagnose file LOG --show-digest`, what `--ask` would send (its time and size). Then
the small-log start-up table of `startup.py`. The machine's load average is printed before
and after: on a shared machine the second core may not be free.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate_log import generate, parse_size
from benchmarks.startup import startup_table
from diagnose.library import load_facts, load_library

_ERE_REWRITES = [
    (re.compile(r"\(\?P<\w+>"), "("),
    (re.compile(r"\(\?:"), "("),
    (re.compile(r"\\d"), "[0-9]"),
    (re.compile(r"\\s"), "[[:space:]]"),
    (re.compile(r"\\S"), "[^[:space:]]"),
    (re.compile(r"\\w"), "[[:alnum:]_]"),
    (re.compile(r"([*+?}])\?"), r"\1"),
]


def to_ere(pattern: str) -> str | None:
    """The regex as a POSIX ERE, or None where Python-only syntax has no equivalent."""
    if re.search(r"\(\?[=!<]|\(\?[aiLmsux]", pattern):
        return None
    for rewrite, replacement in _ERE_REWRITES:
        pattern = rewrite.sub(replacement, pattern)
    check = subprocess.run(["grep", "-E", "-e", pattern, os.devnull], capture_output=True)
    return pattern if check.returncode != 2 else None


def library_patterns() -> tuple[list[str], int]:
    regexes = [p.regex for s in load_library(include_user_dirs=False) for p in s.patterns()]
    regexes += [p.regex for p in load_facts()]
    converted = [to_ere(r) for r in regexes]
    kept = sorted({c for c in converted if c})
    return kept, sum(1 for c in converted if c is None)


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS in KiB (of the largest process: the command or a worker it
    waited for), and stdout of one run of ``command``."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            raise SystemExit(f"{command[0]} exited with {code}")
        return elapsed, usage.ru_maxrss, out.read()


def _load() -> str:
    return "load average " + " ".join(f"{n:.2f}" for n in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100M,1G")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of the start-up table")
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "diagnose-bench"
    )
    arguments = parser.parse_args()
    arguments.data_dir.mkdir(parents=True, exist_ok=True)
    patterns, dropped = library_patterns()
    pattern_file = arguments.data_dir / "patterns.ere"
    pattern_file.write_text("\n".join(patterns) + "\n")
    from diagnose.core.scan import NeedleScanner
    from diagnose.inputs.files import default_jobs, usable_cpus

    backend = NeedleScanner(["x"]).backend
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores ({usable_cpus()} usable), "
        f"Python {platform.python_version()}; {_load()}"
    )
    print(f"scanner: {backend}; grep patterns: {len(patterns)} ({dropped} Python-only left out)")
    header = (
        f"{'size':>6} {'lines':>10} | {'grep s':>7} {'MB/s':>5} | {'-j 1 s':>7} {'x grep':>6} | "
        f"{'-j ' + str(default_jobs()) + ' s':>7} {'MB/s':>5} {'x grep':>6} {'peak RSS':>9}"
    )
    print(header)
    print("-" * len(header))
    diagnose = [sys.executable, "-m", "diagnose", "file"]
    for size_text in arguments.sizes.split(","):
        size = parse_size(size_text)
        log = arguments.data_dir / f"sglang-{size_text}.log"
        if not log.exists() or abs(log.stat().st_size - size) > size // 100:
            generate(size, log)
        megabytes = log.stat().st_size / 1e6
        env = {**os.environ, "LC_ALL": "C"}
        grep_s, _, grep_out = measure(["grep", "-c", "-E", "-f", str(pattern_file), str(log)], env)
        one_s, _, one_out = measure([*diagnose, str(log), "-f", "json", "--jobs", "1"])
        all_s, all_rss, all_out = measure([*diagnose, str(log), "-f", "json"])
        if all_out != one_out:
            raise SystemExit(f"{log}: the reports of --jobs 1 and the default differ")
        lines = int(re.search(rb'"records": (\d+)', all_out).group(1))  # type: ignore[union-attr]
        print(
            f"{size_text:>6} {lines:>10} | {grep_s:>7.2f} {megabytes / grep_s:>5.0f} | "
            f"{one_s:>7.2f} {one_s / grep_s:>6.2f} | {all_s:>7.2f} {megabytes / all_s:>5.0f} "
            f"{all_s / grep_s:>6.2f} {all_rss / 1024:>7.0f}MB"
        )
        found = sorted(set(re.findall(rb'"signature": "([^"]+)"', all_out)))
        print(f"{'':>6} found: {', '.join(name.decode() for name in found)}")
        digest_s, _, digest_out = measure([*diagnose, str(log), "--show-digest"])
        print(
            f"{'':>6} --show-digest (what --ask would send): {digest_s:.2f} s, "
            f"about {len(digest_out.decode('utf-8', 'replace')) // 4} tokens"
        )
        del grep_out
    print()
    print("\n".join(startup_table(arguments.rounds)))
    print(_load())


if __name__ == "__main__":
    main()
