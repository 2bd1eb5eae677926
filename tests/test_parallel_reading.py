"""Several processes reading one large file give exactly what one process gives: the same
events (line numbers, positions, tracebacks whole) and the same report, wherever the file is
cut, including a traceback cut in two and the crash at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.generate_log import generate
from diagnose.core.engine import Engine
from diagnose.core.scan import NeedleScanner
from diagnose.inputs import files
from diagnose.inputs.files import LogInput, events
from diagnose.library import load_facts, load_library
from diagnose.render import render

from .conftest import run_cli

CHUNK_SIZES = (1024, 1536, 2048, 3000, 4096)


@pytest.fixture(scope="module")
def large_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A realistic server log (about 200 KB) that ends in a CUDA OOM traceback, an NCCL
    timeout and systemd's restarts: with chunks of a few KB, it is cut some hundred times."""
    path = tmp_path_factory.mktemp("parallel") / "sglang.log"
    generate(200_000, path)
    return path


def _read(path: Path, jobs: int) -> tuple[list[tuple[int, int | None, str]], str, LogInput]:
    engine = Engine(load_library(include_user_dirs=False), facts=load_facts())
    needles = engine.needles()
    assert needles is not None
    scanner = NeedleScanner(needles)
    log = LogInput.from_argument(str(path))
    seen = []
    for event in events(log, scanner, first_seq=10, jobs=jobs):
        seen.append((event.seq, event.first.line, event.text))
        engine.feed(event)
    return seen, render(engine.finish(inputs=[log.summary()]), "json"), log


@pytest.mark.parametrize("chunk", CHUNK_SIZES)
def test_parallel_reading_gives_exactly_what_one_process_gives(
    large_log: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    one, one_report, one_log = _read(large_log, jobs=1)
    assert any("Traceback (most recent call last)" in text for _, _, text in one)
    assert "CUDA out of memory" in one_report
    for jobs in (2, 3):
        many, many_report, many_log = _read(large_log, jobs=jobs)
        assert many == one
        assert many_report == one_report
        assert (many_log.lines, many_log.first_ts, many_log.last_ts) == (
            one_log.lines,
            one_log.first_ts,
            one_log.last_ts,
        )


def test_a_chunk_after_one_that_owes_traceback_lines_is_chosen_again(
    large_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever reads a chunk does not know what the chunk before owes it: where that chunk
    ends inside a traceback, this process chooses the next chunk again, with the lines owed
    (a first reading assumes none, or the input's head)."""
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    parent = os.getpid()
    again: list[int] = []
    choose = files._choose

    def spy(chunk: bytes, scanner: NeedleScanner, owed: int, first: bool, last: bool):
        if os.getpid() == parent and owed not in (0, files.HEAD_LINES):
            again.append(owed)
        return choose(chunk, scanner, owed, first, last)

    monkeypatch.setattr(files, "_choose", spy)
    for chunk in CHUNK_SIZES:
        monkeypatch.setattr(files, "CHUNK_BYTES", chunk)
        _read(large_log, jobs=2)
    assert again


def test_a_small_file_is_read_by_one_process(
    large_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_workers(*args: object) -> None:
        raise AssertionError("workers started for a file under PARALLEL_MIN_BYTES")

    monkeypatch.setattr(files, "_chosen_in_parallel", no_workers)
    seen, _, _ = _read(large_log, jobs=4)
    assert seen


def test_jobs_on_the_command_line(large_log: Path) -> None:
    one = run_cli("file", large_log, "--format", "json", "--jobs", "1")
    assert one.returncode == 1, one.stderr
    assert run_cli("file", large_log, "--format", "json", "-j", "2").stdout == one.stdout
    wrong = run_cli("file", large_log, "--jobs", "-1")
    assert wrong.returncode == 2
    assert wrong.stderr.count("\n") == 1 and "--jobs" in wrong.stderr


def test_a_line_longer_than_a_chunk_and_no_newline_at_the_end(
    large_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line longer than a chunk is a chunk of its own, cut to ``MAX_LINE_BYTES``, and a
    last line without a newline is still a line, however many processes read."""
    lines = large_log.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    endless = b"Mar 02 09:14:07 gpu-node-07 python3[48211]: " + b"x" * 9000 + b"\n"
    path = tmp_path / "odd.log"
    path.write_bytes(b"".join([*lines[:middle], endless, *lines[middle:]]).rstrip(b"\n"))
    monkeypatch.setattr(files, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 512)
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    one, one_report, one_log = _read(path, jobs=1)
    many, many_report, many_log = _read(path, jobs=2)
    assert one_log.lines == len(lines) + 1
    assert (many, many_report, many_log.lines) == (one, one_report, one_log.lines)


@pytest.mark.parametrize(
    ("trouble", "said"),
    [("raise", "failed: OSError: disk went away"), ("exit", "stopped before sending")],
)
def test_a_worker_that_fails_or_dies_stops_the_reading_with_an_error(
    large_log: Path, trouble: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a hang and never a report with chunks missing."""
    monkeypatch.setattr(files, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    parent = os.getpid()
    choose = files._choose_chunk

    def troubled(*args):  # type: ignore[no-untyped-def]
        if os.getpid() == parent:
            time.sleep(0.002)  # the worker takes chunks too
        elif trouble == "raise":
            raise OSError("disk went away")
        else:
            os._exit(1)
        return choose(*args)

    monkeypatch.setattr(files, "_choose_chunk", troubled)
    with pytest.raises(RuntimeError, match=said):
        _read(large_log, jobs=2)


def test_the_default_follows_the_cpus_this_process_may_use() -> None:
    """``taskset`` or a container's CPU set, not the machine's count, and at most the cap."""
    probe = (
        "import os; from diagnose.inputs import files; "
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); print(files.default_jobs())"
    )
    one = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert one.stdout.strip() == "1", one.stderr
    assert files.default_jobs() == min(len(os.sched_getaffinity(0)), files.DEFAULT_MAX_JOBS)
