"""Hostile and broken input: each protection is tested by what happens without it."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.core import engine as engine_module
from diagnose.core.engine import Engine
from diagnose.core.errors import UserError
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import load_facts, load_file, load_library
from diagnose.runs import journal as journal_command
from tests import journalgen

REPO = Path(__file__).resolve().parent.parent
CRASHLOOP = REPO / "fixtures/incidents/qwen-122b-crashloop.journal.txt"

SLOW_SIGNATURE = """\
title: A regex that backtracks without end
category: unknown
severity: error
match:
  type: line
  needles: ["aaaa"]
  regex: '^(a|aa)+$'
explanation: "Never mind."
patch_note: "None."
examples:
  positive: [{name: hit, log: "aaaa\\n"}]
  negative: [{name: miss, log: "b\\n"}]
"""


def _diagnose(data: bytes, extra_dirs: list[Path] = ()):  # type: ignore[assignment]
    engine = Engine(load_library(extra_dirs, include_user_dirs=False), facts=load_facts())
    log = LogInput(path=None, name="input.log", data=data)
    run_logs(engine, [log])
    return engine, engine.finish(inputs=[log.summary()])


def test_a_catastrophic_regex_is_stopped_and_the_others_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slow-backtracking.yaml").write_text(SLOW_SIGNATURE)
    monkeypatch.setattr(engine_module, "REGEX_TIMEOUT_S", 0.05)
    data = ("a" * 40 + "!\n").encode() + CRASHLOOP.read_bytes()
    engine, diagnosis = _diagnose(data, [tmp_path])
    assert "slow-backtracking" in engine.skipped
    assert diagnosis.finding(diagnosis.primary).signature == "sglang-spec-v2-required"


def test_yaml_object_tags_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"title: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_file(path)
    assert not marker.exists()


def test_a_key_written_twice_is_refused_not_silently_overwritten(tmp_path: Path) -> None:
    """YAML lets the later of two equal keys win: an example's second `log:` would hide its
    first. The loader names the key and its line instead."""
    path = tmp_path / "twice.yaml"
    path.write_text("title: one\ntitle: two\n")
    with pytest.raises(UserError, match=r"key 'title' appears twice in one mapping \(line 2\)"):
        load_file(path)


def _cli(*args: str | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *map(str, args)],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )


def test_a_failed_run_leaves_the_old_report_whole(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("the previous report\n")
    result = _cli("file", tmp_path / "missing.log", "-o", report)
    assert result.returncode == 2
    assert report.read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 1000 + b"\n" + bytes(range(256)) * 40,
        b"\xff\xfe\xfd invalid utf-8 \xc3\x28\n" * 100,
        b"x" * (3 << 20),  # a 3 MiB line without a newline
        b"[2026-03-01 10:00:00 TP0] Init torch distributed begin.\r\n" * 10,
    ],
    ids=["binary", "invalid-utf8", "endless-line", "crlf"],
)
def test_garbage_in_gives_a_report_not_a_traceback(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.log"
    path.write_bytes(content)
    result = _cli("file", path, "-f", "json")
    assert result.returncode in (0, 1), result.stderr
    assert b"Traceback" not in result.stderr
    assert result.stdout.startswith(b"{")


def test_a_truncated_gzip_is_read_up_to_the_cut(tmp_path: Path) -> None:
    whole = gzip.compress(CRASHLOOP.read_bytes())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    result = _cli("file", path, "-f", "json")
    assert result.returncode == 1
    assert b"compressed data ends early" in result.stderr
    assert b'"sglang-spec-v2-required"' in result.stdout


@pytest.mark.skipif(
    not journalgen.journal_remote(), reason="systemd-journal-remote is not installed"
)
def test_apply_refuses_a_unit_changed_since_the_diagnosis(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "loop.journal")
    system = tmp_path / "root/etc/systemd/system"
    system.mkdir(parents=True)
    unit = system / "sglang-qwen.service"
    shutil.copy(REPO / "fixtures/journal/sglang-qwen.service", unit)
    options = journal_command.JournalOptions(
        unit="sglang-qwen", files=[journal], root=tmp_path / "root", gpu=False
    )
    result = journal_command.diagnose_journal(options, [], None, lambda _: None)
    assert result.config is not None
    unit.write_text(unit.read_text().replace("--tp-size 4", "--tp-size 8"))
    with pytest.raises(UserError, match="changed since it was read"):
        journal_command.apply(result, tmp_path / "root")
    assert not (system / "sglang-qwen.service.d").exists()
