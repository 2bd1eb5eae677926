"""``diagnose verify -u UNIT`` on real journal files: after a fix the old root cause is gone and
the server is up (exit 0); the same failure again (exit 1); another failure (named, exit 1);
and ``--compare`` against a postmortem's JSON."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from tests import journalgen
from tests.conftest import run_cli

pytestmark = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl (apt-get install systemd-journal-remote)",
)
FIXTURES = journalgen.FIXTURES
UNIT = journalgen.UNIT


def _entries(name: str, seed: str, shift: timedelta = timedelta(0)) -> list[dict[str, str]]:
    text = (FIXTURES / "incidents" / name).read_text()
    return journalgen.entries_from_short(text, UNIT, shift=shift, seed=seed)


def _journal(tmp_path: Path, *parts: list[dict[str, str]]) -> Path:
    return journalgen.write_journal(
        [entry for part in parts for entry in part], tmp_path / "unit.journal"
    )


def _verify(journal: Path, *extra: str | Path) -> tuple[int, dict[str, object]]:
    result = run_cli("verify", "-u", "sglang-qwen", "--file", journal, "-f", "json", *extra)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


LOOP = "qwen-122b-crashloop.journal.txt"  # 5 failed attempts, March 3
HEALTHY = "healthy-sglang.journal.txt"  # ready to roll, March 11
HOST_OOM = "host-oom.journal.txt"  # killed by the OOM killer, March 9


def test_fixed_and_ready_exits_0(tmp_path: Path) -> None:
    journal = _journal(tmp_path, _entries(LOOP, "loop"), _entries(HEALTHY, "healthy"))
    code, report = _verify(journal)
    assert code == 0
    assert report["fixed"] is True and report["reached_ready"] is True
    assert report["new_failure"] is None
    previous, newest = report["previous"], report["newest"]
    assert previous["signature"] == "sglang-spec-v2-required"
    assert previous["result"] == "exit-code"
    assert previous["started_at"].startswith("2026-03-03T11:55:24")  # the last failed attempt
    assert newest["signature"] is None and newest["phase_reached"] == "ready"
    assert newest["started_at"].startswith("2026-03-11T08:30:04")
    assert previous["invocation"] != newest["invocation"]
    assert report["verdict"] == (
        "fixed: sglang-spec-v2-required is gone and the server reached ready"
    )
    text = run_cli("verify", "-u", "sglang-qwen", "--file", journal)
    assert text.returncode == 0
    assert text.stdout.startswith("sglang-qwen.service: fixed: sglang-spec-v2-required is gone")


def test_the_same_failure_again_exits_1(tmp_path: Path) -> None:
    journal = _journal(
        tmp_path, _entries(LOOP, "first"), _entries(LOOP, "again", shift=timedelta(hours=2))
    )
    code, report = _verify(journal)
    assert code == 1
    assert report["fixed"] is False and report["reached_ready"] is False
    assert report["newest"]["signature"] == report["previous"]["signature"]
    assert report["verdict"].startswith("not fixed: sglang-spec-v2-required (MTP on a hybrid")
    assert report["newest"]["started_at"].startswith("2026-03-03T13:55:24")
    assert report["previous"]["started_at"].startswith("2026-03-03T13:54:50")


def test_a_different_failure_is_named(tmp_path: Path) -> None:
    journal = _journal(tmp_path, _entries(LOOP, "loop"), _entries(HOST_OOM, "oom"))
    code, report = _verify(journal)
    assert code == 1
    assert report["fixed"] is True and report["reached_ready"] is False
    assert report["new_failure"] == "host-oom-kill"
    assert report["newest"]["category"] == "host_oom"
    assert report["verdict"].startswith(
        "sglang-spec-v2-required is gone, but the newest attempt failed with host-oom-kill ("
    )


def test_compare_with_a_postmortem(tmp_path: Path) -> None:
    failed = journalgen.write_journal(_entries(LOOP, "loop"), tmp_path / "failed.journal")
    written = run_cli(
        "postmortem", "write", "-u", "sglang-qwen", "--file", failed, "--dir", tmp_path / "pm"
    )
    assert written.returncode == 0, written.stderr
    (report_path,) = (tmp_path / "pm").glob("*.json")
    # the same journal: no attempt since the postmortem
    code, report = _verify(failed, "--compare", report_path)
    assert code == 1 and report["verdict"].startswith("not verified: no start attempt since")
    # after the fix
    journal = _journal(tmp_path, _entries(LOOP, "loop"), _entries(HEALTHY, "healthy"))
    code, report = _verify(journal, "--compare", report_path)
    assert code == 0, report
    assert report["previous"]["report"] == str(report_path)
    assert report["previous"]["signature"] == "sglang-spec-v2-required"


def test_user_errors_exit_2(tmp_path: Path) -> None:
    healthy = journalgen.write_journal(_entries(HEALTHY, "h"), tmp_path / "healthy.journal")
    alone = run_cli("verify", "-u", "sglang-qwen", "--file", healthy)
    assert alone.returncode == 2
    assert "no failed start attempt before the newest one" in alone.stderr
    assert "--compare" in alone.stderr
    assert run_cli("verify", "-u", "no such unit", "--file", healthy).returncode == 2
    assert run_cli("verify", "-u", "vllm-typo", "--file", healthy).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = run_cli("verify", "-u", "sglang-qwen", "--file", healthy, "--compare", bad)
    assert refused.returncode == 2 and "not a diagnose JSON report" in refused.stderr
