"""How long a small diagnosis takes end to end, against a bare Python start.

    .venv/bin/python benchmarks/startup.py [--rounds N]

Runs each command N times as a new process (as a hook, a CI step or a user does) and prints
the best and the median wall time: `python -c pass`, the floor that the required schema
library sets (import pydantic, define one model, validate and dump it to JSON; every
diagnosis does at least that), `diagnose --version`, `diagnose --help`,
`diagnose file` on the bundled incident (153-line journal export) as JSON and as text, and
`diagnose journal` on a real journal file of that incident (291 entries with a healthy run
before it, made with `systemd-journal-remote`; left out where it is not installed), with the
library cache warm and the package's bytecode written (the first run does both, as
an install does, and is not counted). The last column is the best time as a multiple of the
bare Python start. `benchmarks/run.py` prints the same table after its large inputs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks  # noqa: F401  (stops with one line outside the project's environment)
from tests.journalgen import UNIT, crashloop_entries, journal_remote, write_journal

REPO = Path(__file__).resolve().parent.parent
INCIDENT = REPO / "fixtures" / "incidents" / "qwen-122b-crashloop.journal.txt"
DIAGNOSE = [sys.executable, "-m", "diagnose"]
PYDANTIC_FLOOR = (
    "from pydantic import BaseModel\n"
    "class Finding(BaseModel):\n"
    "    signature: str\n"
    "print(Finding(signature='cuda-out-of-memory').model_dump_json())"
)


def _times(command: list[str], rounds: int, environment: dict[str, str]) -> list[float]:
    subprocess.run(command, capture_output=True, env=environment, check=False)  # warm-up
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, env=environment, check=False)
        times.append(time.perf_counter() - started)
    return times


def startup_table(rounds: int) -> list[str]:
    """The table's lines: each command's best and median seconds, and best / bare Python."""
    with tempfile.TemporaryDirectory() as cache:
        environment = {**os.environ, "DIAGNOSE_CACHE_DIR": cache, "PYTHONPATH": str(REPO)}
        environment.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "pydantic, one model": [sys.executable, "-c", PYDANTIC_FLOOR],
            "diagnose --version": [*DIAGNOSE, "--version"],
            "diagnose --help": [*DIAGNOSE, "--help"],
            "file (json)": [*DIAGNOSE, "file", str(INCIDENT), "--format", "json"],
            "file (text)": [*DIAGNOSE, "file", str(INCIDENT)],
        }
        if journal_remote() is not None:
            journal = write_journal(crashloop_entries(), Path(cache) / "crashloop.journal")
            journal_args = ["-u", UNIT, "--file", str(journal), "--no-gpu", "--format", "json"]
            cases["journal (json)"] = [*DIAGNOSE, "journal", *journal_args]
        results = {name: _times(command, rounds, environment) for name, command in cases.items()}
    bare = min(results["python -c pass"])
    lines = [f"{'command':<22}{'best s':>9}{'median s':>10}{'x python':>10}"]
    for name, times in results.items():
        best, median = min(times), statistics.median(times)
        lines.append(f"{name:<22}{best:>9.3f}{median:>10.3f}{best / bare:>10.1f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    print("\n".join(startup_table(parser.parse_args().rounds)))


if __name__ == "__main__":
    main()
