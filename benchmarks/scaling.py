"""Does the cost grow with the input, not faster? Restart attempts and tracebacks at 10x sizes.

    python benchmarks/scaling.py                 # attempts 400 -> 4000, tracebacks 200 -> 2000
    python benchmarks/scaling.py --quick         # attempts 100 -> 1000, tracebacks 50 -> 500
    python benchmarks/scaling.py --journal       # also attempts read from a real journal file

Each input is generated in memory in the real journalctl ``short-precise`` format (the
attempt is the one of ``fixtures/incidents/qwen-122b-crashloop.journal.txt``: a start, a
traceback, the exit and systemd's restart), diagnosed in-process as ``diagnose file`` does,
and timed; peak memory is Python's own (tracemalloc) during a second run of the diagnosis.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diagnose.core.engine import Engine
from diagnose.core.models import Diagnosis
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import load_facts, load_library

UNIT = "sglang-qwen.service"
HOST = "gpu-node-07"
START = datetime(2026, 3, 3, 11, 53, 10, tzinfo=timezone.utc)


def _stamp(at: datetime) -> str:
    return at.strftime("%b %d %H:%M:%S.%f")


def attempts_log(attempts: int) -> bytes:
    """A crash loop of ``attempts`` start attempts, each failing with the same traceback."""
    out: list[str] = []
    at = START
    for n in range(attempts):
        pid = 40000 + n
        app = f"{HOST} python3[{pid}]: "
        lines = [
            f"{HOST} systemd[1]: Started {UNIT} - SGLang server.",
            app + f"[{at:%Y-%m-%d %H:%M:%S}] server_args=ServerArgs(model_path='/models/q', "
            "tp_size=4, port=30000)",
            app + "Traceback (most recent call last):",
            app
            + '  File "/opt/sglang/srt/server_args.py", line 1884, in _handle_mamba_radix_cache',
            app + "    raise ValueError(",
            app + "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not "
            "compatible with radix cache when using --mamba-scheduler-strategy no_buffer. To use "
            "radix cache with speculative decoding, please use --mamba-scheduler-strategy "
            "extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.",
            f"{HOST} systemd[1]: {UNIT}: Main process exited, code=exited, status=1/FAILURE",
            f"{HOST} systemd[1]: {UNIT}: Failed with result 'exit-code'.",
            f"{HOST} systemd[1]: {UNIT}: Scheduled restart job, restart counter is at {n + 1}.",
            f"{HOST} systemd[1]: Stopped {UNIT} - SGLang server.",
        ]
        for line in lines:
            out.append(f"{_stamp(at)} {line}")
            at += timedelta(milliseconds=250)
    return ("\n".join(out) + "\n").encode()


def tracebacks_log(tracebacks: int) -> bytes:
    """One run that logs ``tracebacks`` different tracebacks (different frames and messages)."""
    out: list[str] = []
    at = START
    for n in range(tracebacks):
        lines = [
            f"[{at:%Y-%m-%d %H:%M:%S}] Exception in request handler {n}:",
            "Traceback (most recent call last):",
            f'  File "/opt/app/handlers/h{n % 97}.py", line {100 + n}, in handle_{n % 13}',
            f"    result = step_{n % 7}(request)",
            f'  File "/opt/app/steps.py", line {n % 500}, in step_{n % 7}',
            f"    raise RuntimeError('step {n % 7} failed for request {n}')",
            f"RuntimeError: step {n % 7} failed for request {n} on worker {n % 17}",
        ]
        out += lines
        at += timedelta(seconds=1)
    return ("\n".join(out) + "\n").encode()


_LIBRARY: tuple | None = None


def diagnose_bytes(data: bytes, name: str = "generated.log") -> Diagnosis:
    """``diagnose file`` on ``data``, in-process, with the built-in library."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = (load_library(include_user_dirs=False), load_facts())
    signatures, facts = _LIBRARY
    engine = Engine(signatures, facts=facts)
    log = LogInput(path=None, name=name, data=data)
    run_logs(engine, [log])
    return engine.finish(inputs=[log.summary()])


def measure(data: bytes) -> tuple[float, float, Diagnosis]:
    """Seconds of one diagnosis, and its peak MiB (tracemalloc, in a second run: tracing
    slows Python down two- to threefold)."""
    began = time.perf_counter()
    diagnosis = diagnose_bytes(data)
    seconds = time.perf_counter() - began
    tracemalloc.start()
    diagnose_bytes(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / (1 << 20), diagnosis


def journal_seconds(attempts: int, directory: Path) -> tuple[float, float]:
    """Seconds and peak MiB of ``diagnose journal --file`` on a real journal file of
    ``attempts`` attempts (written with systemd-journal-remote, not timed)."""
    from diagnose.runs.journal import JournalOptions, diagnose_journal
    from tests.journalgen import entries_from_short, write_journal

    path = directory / f"attempts-{attempts}.journal"
    write_journal(entries_from_short(attempts_log(attempts).decode(), UNIT), path)
    options = JournalOptions(unit=UNIT, files=[path], gpu=False)
    began = time.perf_counter()
    diagnose_journal(options, [], None, lambda _: None)
    seconds = time.perf_counter() - began
    tracemalloc.start()
    diagnose_journal(options, [], None, lambda _: None)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the default sizes")
    parser.add_argument("--journal", action="store_true", help="also through a journal file")
    args = parser.parse_args()
    scale = 4 if args.quick else 1
    diagnose_bytes(attempts_log(2))  # load the library outside the timings
    print(f"{'input':<12} {'n':>6} {'lines':>7} {'seconds':>8} {'peak MiB':>9}  primary")
    for label, make, sizes in (
        ("attempts", attempts_log, (400 // scale, 4000 // scale)),
        ("tracebacks", tracebacks_log, (200 // scale, 2000 // scale)),
    ):
        results = []
        for n in sizes:
            data = make(n)
            seconds, peak, diagnosis = measure(data)
            primary = diagnosis.finding(diagnosis.primary).signature if diagnosis.primary else "-"
            results.append(seconds)
            lines = data.count(b"\n")
            print(f"{label:<12} {n:>6} {lines:>7} {seconds:>8.2f} {peak:>9.1f}  {primary}")
        print(f"{label:<12} 10x the input: {results[1] / results[0]:.1f}x the time")
    if args.journal:
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            timed = []
            for n in (400 // scale, 4000 // scale):
                seconds, peak = journal_seconds(n, Path(directory))
                timed.append(seconds)
                print(f"{'journal':<12} {n:>6} {n * 10:>7} {seconds:>8.2f} {peak:>9.1f}")
            print(f"{'journal':<12} 10x the input: {timed[1] / timed[0]:.1f}x the time")


if __name__ == "__main__":
    main()
