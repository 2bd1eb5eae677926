"""`diagnose watch`: a growing file or a pipe, judged against a clock the test drives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from itertools import takewhile
from pathlib import Path

import pytest

from diagnose.commands.watch import ArrivalClock, GpuPoller, Watcher, watch
from diagnose.core.engine import Engine
from diagnose.inputs.follow import follow
from diagnose.library import load_facts, load_library
from diagnose.render.live import clock_time
from tests.conftest import fake_nvidia_smi

START = datetime(2026, 3, 5, 9, 0, 0, tzinfo=timezone.utc)
POLL = 10.0
HANG_AFTER = 300.0


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text timestamps are read as the machine's local time; make that UTC here."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def _line(at: datetime, rank: str, message: str) -> str:
    return f"[{at.strftime('%Y-%m-%d %H:%M:%S')} {rank}] {message}\n"


class GrowingLog:
    """A real file that gains lines at given clock times, and the clock that drives it."""

    def __init__(self, path: Path, script: list[tuple[float, str]]) -> None:
        self.path = path
        self.now = START
        self.script = sorted(script)
        path.write_text("")
        self._write_due()

    def _write_due(self) -> None:
        due = [
            text for offset, text in self.script if START + timedelta(seconds=offset) <= self.now
        ]
        self.script = [(o, t) for o, t in self.script if START + timedelta(seconds=o) > self.now]
        with self.path.open("a") as handle:
            handle.writelines(due)

    def clock(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self._write_due()


def _run(log: GrowingLog, until: timedelta) -> tuple[list[tuple[str, datetime]], object]:
    engine = Engine(
        load_library(include_user_dirs=False), facts=load_facts(), hang_after=HANG_AFTER
    )
    watcher = Watcher(engine, str(log.path), clock=log.clock)
    reported: list[tuple[str, datetime]] = []
    with log.path.open("rb") as stream:
        batches = takewhile(
            lambda _: log.now <= START + until,
            follow(stream, POLL, sleep=log.sleep, is_pipe=False),
        )
        diagnosis = watch(
            watcher,
            batches,
            on_phase=lambda change: None,
            on_finding=lambda finding, _: reported.append((finding.signature, log.now)),
        )
    return reported, diagnosis


def _init_lines(at: datetime) -> list[tuple[float, str]]:
    return [(0, _line(at, f"TP{rank}", "Init torch distributed begin.")) for rank in range(4)]


def test_a_stall_is_reported_within_one_poll_of_the_threshold(tmp_path: Path) -> None:
    log = GrowingLog(tmp_path / "sglang.log", _init_lines(START))
    reported, diagnosis = _run(log, until=timedelta(minutes=15))
    assert [name for name, _ in reported] == ["sglang-dist-init-stall"]
    _, at = reported[0]
    threshold = START + timedelta(seconds=HANG_AFTER)
    assert threshold <= at <= threshold + timedelta(seconds=POLL)
    assert diagnosis.findings[0].category == "dist_init_hang"


def test_progress_before_the_threshold_is_no_stall(tmp_path: Path) -> None:
    later = START + timedelta(seconds=90)
    script = [
        *_init_lines(START),
        (
            90,
            _line(later, "TP0", "Init torch distributed ends. elapsed=90.12 s, mem usage=0.61 GB"),
        ),
        (90, _line(later, "TP0", "Load weight begin. avail mem=139.20 GB")),
    ]
    log = GrowingLog(tmp_path / "sglang.log", script)
    reported, diagnosis = _run(log, until=timedelta(minutes=4))
    assert reported == []
    assert diagnosis.primary is None


def test_a_pipe_ends_the_watch_and_a_failure_is_reported(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    fixture = Path(__file__).parent.parent / "fixtures" / "incidents" / "oom-cuda-graph.log"
    os.write(write_end, fixture.read_bytes())
    os.close(write_end)
    engine = Engine(load_library(include_user_dirs=False), facts=load_facts())
    watcher = Watcher(engine, "<stdin>")
    found: list[str] = []
    with os.fdopen(read_end, "rb") as stream:
        diagnosis = watch(
            watcher,
            follow(stream, 0.05, is_pipe=True),
            on_phase=lambda change: None,
            on_finding=lambda finding, _: found.append(finding.signature),
        )
    assert found[0] == "sglang-cuda-graph-oom"
    assert diagnosis.finding(diagnosis.primary).signature == "sglang-cuda-graph-oom"


def test_watch_command_exits_on_the_first_finding() -> None:
    now = datetime.now()
    lines = "".join(
        f"[{now.strftime('%Y-%m-%d %H:%M:%S')} TP{rank}] Init torch distributed begin.\n"
        for rank in range(2)
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnose", "watch", "-", "--hang-after", "2s", "--poll", "0.2",
         "--exit-on-finding", "-f", "json"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(lines.encode())
    process.stdin.flush()
    started = time.monotonic()
    process.wait(timeout=30)  # stdin stays open: only the finding can end the watch
    assert process.stdout is not None and process.stderr is not None
    out, err = process.stdout.read(), process.stderr.read()
    process.stdin.close()
    assert process.returncode == 1, err
    assert time.monotonic() - started < 15
    assert b'"category": "dist_init_hang"' in out
    assert b"phase: distributed" in err


def test_gpu_snapshots_join_a_live_stall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nvidia-smi on PATH (a stand-in printing the real ~1 GB rows), the polled
    snapshots become evidence of the hang, and confidence rises."""
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path, [])["PATH"])
    log = GrowingLog(tmp_path / "sglang.log", _init_lines(START))
    engine = Engine(
        load_library(include_user_dirs=False), facts=load_facts(), hang_after=HANG_AFTER
    )
    watcher = Watcher(engine, str(log.path), clock=log.clock)
    gpus = GpuPoller(every=60)
    with log.path.open("rb") as stream:
        batches = takewhile(
            lambda _: log.now <= START + timedelta(minutes=7),
            follow(stream, POLL, sleep=log.sleep, is_pipe=False),
        )
        diagnosis = watch(watcher, batches, lambda _: None, lambda *_: None, on_tick=gpus)
    assert gpus.summary.startswith("0: 1.1/140 GiB")
    stall = diagnosis.findings[0]
    assert stall.signature == "sglang-dist-init-stall"
    assert stall.confidence.value == "high"
    assert any(
        e.source == "nvidia-smi" and "1143 MiB" in e.message for e in stall.evidence if e.message
    )


def test_watch_shows_times_in_utc_and_says_so() -> None:
    """One rule for every time diagnose shows or writes: UTC, with the zone shown."""
    berlin = timezone(timedelta(hours=1))
    assert clock_time(datetime(2026, 3, 2, 10, 14, 7, tzinfo=berlin)) == "09:14:07Z"
    assert clock_time(datetime(2026, 3, 2, 9, 14, 7, tzinfo=timezone.utc)) == "09:14:07Z"


@pytest.mark.parametrize("hours", [-10, 9, 5.5])
def test_a_log_stamped_in_another_zone_stalls_after_the_real_silence(
    tmp_path: Path, hours: float
) -> None:
    """The server writes its local time in another zone (ten hours "old" the moment it is
    written, or hours in the future): silence is measured from when the lines arrived, so
    the stall is reported after the real five minutes, not at once or never."""
    written_as = START + timedelta(hours=hours)
    log = GrowingLog(tmp_path / "sglang.log", _init_lines(written_as))
    reported, _ = _run(log, until=timedelta(minutes=15))
    assert [name for name, _ in reported] == ["sglang-dist-init-stall"]
    _, at = reported[0]
    threshold = START + timedelta(seconds=HANG_AFTER)
    assert threshold <= at <= threshold + timedelta(seconds=POLL)


def test_progress_in_another_zone_is_no_stall(tmp_path: Path) -> None:
    zone = timedelta(hours=-10)
    later = START + timedelta(seconds=90)
    script = [
        *_init_lines(START + zone),
        (90, _line(later + zone, "TP0", "Init torch distributed ends. elapsed=90.12 s")),
        (90, _line(later + zone, "TP0", "Load weight begin. avail mem=139.20 GB")),
    ]
    log = GrowingLog(tmp_path / "sglang.log", script)
    reported, diagnosis = _run(log, until=timedelta(minutes=4))
    assert reported == []
    assert diagnosis.primary is None


def test_arrival_clock_is_monotonic_whatever_the_wall_clock_does() -> None:
    """The wall clock is read once; after that only the monotonic clock counts (an NTP step
    back by an hour is no hour of silence, nor negative silence)."""
    walls = iter([START, START - timedelta(hours=1)])
    ticks = iter([100.0, 110.0, 125.0])
    clock = ArrivalClock(wall=lambda: next(walls), monotonic=lambda: next(ticks))
    assert clock() == START + timedelta(seconds=10)
    assert clock() == START + timedelta(seconds=25)
