"""``diagnose hook install|remove`` under ``--root``, checked by ``systemd-analyze verify``, and
``diagnose postmortem write`` / ``postmortems list`` on a real journal file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import journalgen
from tests.conftest import run_cli

SYSTEM = Path("etc/systemd/system")
HOOK_DROPIN = "40-diagnose-hook.conf"
TEMPLATE = "diagnose-postmortem@.service"


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): (p.read_text() if p.is_file() else "<dir>")
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with the unit itself, runnable here (systemd-analyze verify checks ExecStart=)."""
    system = tmp_path / "root" / SYSTEM
    system.mkdir(parents=True)
    (system / "sglang-qwen.service").write_text(
        f"[Unit]\nDescription=SGLang\n\n[Service]\nExecStart={sys.executable} -c pass\n"
        "Restart=on-failure\n"
    )
    return tmp_path / "root"


def _diagnose_executable() -> str:
    """An absolute, executable diagnose for ExecStart= (the venv's script)."""
    script = Path(sys.executable).parent / "diagnose"
    return str(script) if os.access(script, os.X_OK) else sys.executable


def test_install_twice_writes_once(root: Path) -> None:
    before = _tree(root)
    exe = _diagnose_executable()
    first = run_cli("hook", "install", "-u", "sglang-qwen", "--root", root, "--diagnose-path", exe)
    assert first.returncode == 0, first.stderr
    dropin = root / SYSTEM / "sglang-qwen.service.d" / HOOK_DROPIN
    template = root / SYSTEM / TEMPLATE
    assert f"wrote {dropin}" in first.stderr and f"wrote {template}" in first.stderr
    assert "systemctl daemon-reload" in first.stderr
    stamps = {p: p.stat().st_mtime_ns for p in (dropin, template)}
    second = run_cli("hook", "install", "-u", "sglang-qwen", "--root", root, "--diagnose-path", exe)
    assert second.returncode == 0
    assert "already installed; nothing written" in second.stderr
    assert "wrote" not in second.stderr and "daemon-reload" not in second.stderr
    assert {p: p.stat().st_mtime_ns for p in (dropin, template)} == stamps
    assert sorted(p.name for p in dropin.parent.iterdir()) == [HOOK_DROPIN]

    assert "[Unit]\nOnFailure=diagnose-postmortem@%n.service\n" in dropin.read_text()
    text = template.read_text()
    assert "\n[Service]\nType=oneshot\n" in text
    assert "StateDirectory=diagnose\nStateDirectoryMode=0750\n" in text
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.MULTILINE)
    assert exec_start is not None
    assert exec_start.group(1) == (
        f"{exe} postmortem write -u %i --dir /var/lib/diagnose/postmortems"
    )
    assert "%I" not in exec_start.group(1)  # %I would unescape sglang-qwen to sglang/qwen

    removed = run_cli("hook", "remove", "-u", "sglang-qwen.service", "--root", root)
    assert removed.returncode == 0, removed.stderr
    assert f"removed {dropin}" in removed.stderr and f"removed {template}" in removed.stderr
    assert "systemctl daemon-reload" in removed.stderr
    assert _tree(root) == before
    again = run_cli("hook", "remove", "-u", "sglang-qwen", "--root", root)
    assert again.returncode == 0 and "nothing removed" in again.stderr


def test_the_template_stays_while_another_unit_uses_it(root: Path) -> None:
    exe = _diagnose_executable()
    for unit in ("sglang-qwen", "vllm@a-b.service"):
        result = run_cli("hook", "install", "-u", unit, "--root", root, "--diagnose-path", exe)
        assert result.returncode == 0, result.stderr
    assert (root / SYSTEM / "vllm@a-b.service.d" / HOOK_DROPIN).is_file()
    removed = run_cli("hook", "remove", "-u", "sglang-qwen", "--root", root)
    assert (root / SYSTEM / TEMPLATE).is_file()
    assert "kept, still used by vllm@a-b.service" in removed.stderr
    run_cli("hook", "remove", "-u", "vllm@a-b.service", "--root", root)
    assert not (root / SYSTEM / TEMPLATE).exists()


def test_a_changed_diagnose_path_rewrites_the_template_with_a_backup(root: Path) -> None:
    run_cli("hook", "install", "-u", "sglang-qwen", "--root", root, "--diagnose-path", "/bin/sh")
    changed = run_cli(
        "hook", "install", "-u", "sglang-qwen", "--root", root, "--diagnose-path", "/bin/true"
    )
    assert changed.returncode == 0, changed.stderr
    template = root / SYSTEM / TEMPLATE
    assert "ExecStart=/bin/true postmortem write" in template.read_text()
    assert "ExecStart=/bin/sh postmortem write" in (root / SYSTEM / (TEMPLATE + ".bak")).read_text()
    assert "sglang-qwen.service.d" not in changed.stderr  # the drop-in did not change
    run_cli("hook", "remove", "-u", "sglang-qwen", "--root", root)
    assert sorted(p.name for p in (root / SYSTEM).iterdir()) == ["sglang-qwen.service"]


@pytest.mark.parametrize(
    "unit", ["bad name", "../../etc/passwd", "x;rm -rf", "", "diagnose-postmortem@x.service"]
)
def test_bad_unit_names_exit_2_on_one_line(root: Path, unit: str) -> None:
    result = run_cli("hook", "install", "-u", unit, "--root", root, "--diagnose-path", "/bin/true")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("diagnose: error: ")
    assert not (root / SYSTEM / TEMPLATE).exists()


def test_a_relative_diagnose_path_is_refused(root: Path) -> None:
    result = run_cli(
        "hook", "install", "-u", "x", "--root", root, "--diagnose-path", "bin/diagnose"
    )
    assert result.returncode == 2 and "not an absolute path" in result.stderr


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None
    return subprocess.run(
        [analyze, "verify", "--man=no", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the debug dump of the units goes to stdout
        text=True,
        check=False,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "debug"},
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_units(root: Path) -> None:
    exe = _diagnose_executable()
    for unit in ("sglang-qwen", "vllm@a-b.service"):
        result = run_cli("hook", "install", "-u", unit, "--root", root, "--diagnose-path", exe)
        assert result.returncode == 0, result.stderr
    (root / SYSTEM / "vllm@.service").write_text(f"[Service]\nExecStart={sys.executable} -c pass\n")
    system = root / SYSTEM
    checks = {
        # the unit with the drop-in: OnFailure= names the instance of the template
        "sglang-qwen.service": "OnFailure: diagnose-postmortem@sglang-qwen.service.service",
        "vllm@a-b.service": "OnFailure: diagnose-postmortem@vllm@a-b.service.service",
        # the template's instances: %i hands the failed unit's name over unchanged
        "diagnose-postmortem@sglang-qwen.service.service": (
            f"Command Line: {exe} postmortem write -u sglang-qwen.service "
            "--dir /var/lib/diagnose/postmortems"
        ),
        "diagnose-postmortem@vllm@a-b.service.service": "write -u vllm@a-b.service --dir",
    }
    for name, expected in checks.items():
        result = _analyze(str(system / name))
        assert result.returncode == 0, result.stdout
        assert expected in result.stdout, result.stdout[-3000:]
        problems = [
            line
            for line in result.stdout.splitlines()
            if re.search(r"(Unknown|Invalid|Failed|not executable|ignoring)", line)
            and ("40-diagnose-hook" in line or "diagnose-postmortem" in line)
        ]
        assert problems == [], problems


@pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl (apt-get install systemd-journal-remote)",
)
def test_postmortem_write_and_list_on_a_real_journal(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "loop.journal")
    out = tmp_path / "var/lib/diagnose/postmortems"
    result = run_cli("postmortem", "write", "-u", "sglang-qwen", "--file", journal, "--dir", out)
    assert result.returncode == 0, result.stderr  # findings do not fail the postmortem unit
    stem = "sglang-qwen.service-20260303T115547Z"  # the unit, and the failed attempt's end
    assert sorted(p.name for p in out.iterdir()) == [f"{stem}.json", f"{stem}.md"]
    assert out.stat().st_mode & 0o777 == 0o750
    assert f"wrote {out / stem}.md" in result.stderr
    report = json.loads((out / f"{stem}.json").read_text())
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    assert primary["signature"] == "sglang-spec-v2-required"
    assert report["unit"] == "sglang-qwen.service" and report["attempts"] == 5
    markdown = (out / f"{stem}.md").read_text()
    assert markdown.startswith("# Postmortem: MTP on a hybrid (Mamba/GDN) model needs spec v2")
    assert "```mermaid\ngantt\n" in markdown and "section Attempt 5" in markdown

    # a second, older report of another unit: newest first
    older = out / "vllm@a-b.service-20260101T000000Z.json"
    older.write_text(json.dumps({"unit": "vllm@a-b.service", "primary": None, "findings": []}))
    listed = run_cli("postmortems", "list", "--dir", out, "-f", "json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["unit"], r["time"]) for r in rows] == [
        ("sglang-qwen.service", "2026-03-03T11:55:47+00:00"),
        ("vllm@a-b.service", "2026-01-01T00:00:00+00:00"),
    ]
    assert rows[0]["signature"] == "sglang-spec-v2-required"
    assert rows[0]["category"] == "spec_decode_config"
    assert rows[0]["markdown"] == str(out / f"{stem}.md")
    text = run_cli("postmortems", "list", "--dir", out)
    first = text.stdout.splitlines()[0]
    assert first.startswith("2026-03-03 11:55:47Z  sglang-qwen.service")
    assert "sglang-spec-v2-required (spec_decode_config)" in first
    empty = run_cli("postmortems", "list", "--dir", tmp_path / "none")
    assert empty.returncode == 0 and empty.stdout == "" and "no postmortems" in empty.stderr
