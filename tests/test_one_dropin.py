"""One drop-in per unit per run (issue 32, item 1): every finding's change (and preflight's)
merged into one change set, each block with its reason, conflicts resolved by rank and
named; ``--patch-only`` prints exactly that file, or nothing and exit 2 when installing it
would change nothing; it accumulates with what earlier ``--apply`` runs wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

from diagnose.core import changes
from diagnose.core.models import (
    Confidence,
    Diagnosis,
    Finding,
    Patch,
    Role,
    Severity,
)
from diagnose.systemd.unit import find_unit, parse_rendered_exec_start, parse_unit_text
from tests.conftest import FIXTURES, run_cli

SEED = FIXTURES / "preflight/sglang-qwen.service"
PORT_LOG = """\
Mar 04 10:00:00.100000 gpu-node-07 systemd[1]: Started sglang-qwen.service - SGLang Qwen3.5-122B-A10B server.
Mar 04 10:00:09.100000 gpu-node-07 python3[4101]: [2026-03-04 10:00:09] INFO:     Waiting for application startup.
Mar 04 10:00:09.200000 gpu-node-07 python3[4101]: [2026-03-04 10:00:09] ERROR:    [Errno 98] error while attempting to bind on address ('::', 30000, 0, 0): address already in use
Mar 04 10:00:10.100000 gpu-node-07 systemd[1]: sglang-qwen.service: Main process exited, code=exited, status=1/FAILURE
"""


def _finding(ident: str, signature: str, patch: Patch | None, severity: Severity,
             role: Role = Role.ROOT_CAUSE, **extra: object) -> Finding:  # fmt: skip
    return Finding(id=ident, signature=signature, title=f"title of {signature}",
                   category="launch_args", severity=severity, role=role,
                   confidence=Confidence.HIGH, explanation="x", patch=patch, evidence=[],
                   **extra)  # type: ignore[arg-type]  # fmt: skip


def test_conflicts_are_resolved_by_rank_and_named() -> None:
    first = _finding("f1", "a-first", Patch(env_set={"X": "1"},
                     args_add=["--tp-size", "4"], args_remove=["--tp-size", "--tp"]),
                     Severity.CRITICAL)  # fmt: skip
    second = _finding("f2", "b-second", Patch(env_set={"X": "2", "Y": "y"},
                      args_add=["--tp-size", "8"], args_remove=["--tp-size"]),
                      Severity.ERROR)  # fmt: skip
    advisory = _finding("f3", "c-warning", Patch(args_remove=["--old"]), Severity.WARNING,
                        Role.ADVISORY, system_actions=["stop process 51933"])  # fmt: skip
    diagnosis = Diagnosis(primary="f1", findings=[second, first, advisory], unit="u.service")
    plan = changes.plan(diagnosis)
    assert [c.signature for c in plan.changes] == ["a-first", "b-second"]  # by rank
    assert plan.changes[1].patch == Patch(env_set={"Y": "y"})
    assert plan.conflicts == [
        "b-second wanted X=2; a-first (ranked higher) sets X=1",
        "b-second wanted --tp-size 8; a-first (ranked higher) sets --tp-size 4",
    ]
    assert plan.left_out and plan.left_out[0].startswith("c-warning: a warning")
    assert plan.host_actions == ["stop process 51933"]
    text = changes.rendered(plan, "u.service", "preflight").dropin
    assert text is not None
    assert "# why: title of a-first" in text and "# why: title of b-second" in text
    assert "--old" not in text


def _seed_root(tmp_path: Path) -> Path:
    """fixtures/preflight (the model, the installed SGLang, passwd) with the seed unit
    installed in it."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "preflight", root)
    system = root / "etc/systemd/system"
    system.mkdir(parents=True)
    shutil.copy(SEED, system / "sglang-qwen.service")
    return root


def test_two_bad_flags_give_one_command_line(tmp_path: Path) -> None:
    """Preflight on a unit with two problems that change flags: one drop-in, one
    ``ExecStart=`` with both changes (before: two drop-ins, each with one)."""
    root = _seed_root(tmp_path)
    unit = root / "etc/systemd/system/sglang-qwen.service"
    text = unit.read_text().replace("--tool-call-parser qwen3_coder", "--tool-call-parser qwen3")
    unit.write_text(text)
    args = ("preflight", "-u", "sglang-qwen", "--root", root, "--no-gpu", "--no-port")
    printed = run_cli(*args, "--patch-only")
    assert printed.returncode == 1, printed.stderr
    dropin = printed.stdout
    assert dropin.count("ExecStart=\n") == 1
    argv = parse_rendered_exec_start(dropin)
    assert argv is not None
    assert argv[argv.index("--tool-call-parser") + 1] == "qwen25"
    assert argv[argv.index("--mamba-scheduler-strategy") + 1] == "extra_buffer"
    assert argv.count("--tool-call-parser") == argv.count("--mamba-scheduler-strategy") == 1
    assert "# why: " in dropin and dropin.startswith(
        "# /etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf\n"
    )
    keys = [setting.key for setting in parse_unit_text(dropin).settings]
    assert keys == ["Environment", "ExecStart", "ExecStart"]


def test_patch_only_prints_nothing_and_exits_2_when_only_comments(tmp_path: Path) -> None:
    """A port conflict read from a saved log: the fix is a flag, and the unit's command line
    is not known, so the drop-in could only be comments: no file, exit 2, the reason."""
    log = tmp_path / "port.log"
    log.write_text(PORT_LOG)
    result = run_cli("file", log, "--patch-only")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "the flag changes can only be comments" in result.stderr
    report = run_cli("file", log)
    assert "systemctl restart" not in report.stdout  # no restart advice either
    assert "Installing it changes nothing" in " ".join(report.stdout.split())


def test_the_drop_in_accumulates_with_earlier_apply(tmp_path: Path) -> None:
    root = _seed_root(tmp_path)
    system = root / "etc/systemd/system"
    dropin = system / "sglang-qwen.service.d/zz-diagnose.conf"
    dropin.parent.mkdir()
    earlier = (
        "# >>> diagnose fix sglang-dist-init-stall@20260305T094132Z\n"
        "# incident: 2026-03-05T09:41:32Z  signature: sglang-dist-init-stall\n"
        '# patch: {"args_add": [], "args_remove": [], "env_set": {"NCCL_DEBUG": "INFO"}, '
        '"env_unset": [], "unit_set": {}}\n'
        "[Service]\nEnvironment=NCCL_DEBUG=INFO\n"
        "# <<< diagnose fix sglang-dist-init-stall@20260305T094132Z\n"
    )
    dropin.write_text(earlier)
    args = ("preflight", "-u", "sglang-qwen", "--root", root, "--no-gpu", "--no-port")
    printed = run_cli(*args, "--patch-only").stdout
    assert "Environment=NCCL_DEBUG=INFO" in printed  # the earlier fix is kept
    assert "Environment=SGLANG_ENABLE_SPEC_V2=1" in printed  # and this run's is added
    dropin.write_text(printed)  # as `--patch-only | tee` would
    config = find_unit("sglang-qwen.service", root)
    assert config is not None
    assert config.effective_environment["NCCL_DEBUG"] == "INFO"
    assert config.effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert config.command is not None and config.command.argv[-1] == "extra_buffer"
    # run again over what was installed: nothing new to add, nothing printed
    again = run_cli(*args, "--patch-only")
    assert again.returncode == 0 and again.stdout == ""
    assert "no failure found" in again.stderr


def test_the_text_report_says_which_changes_are_in_the_drop_in() -> None:
    from diagnose.render.text import render_text

    failure = _finding("f1", "a-first", Patch(env_set={"X": "1"}), Severity.CRITICAL)
    warning = _finding("f2", "c-warning", Patch(env_set={"Y": "1"}), Severity.WARNING,
                       Role.ADVISORY)  # fmt: skip
    diagnosis = changes.with_plan(
        Diagnosis(primary="f1", findings=[failure, warning], unit="u.service")
    )
    text = " ".join(render_text(diagnosis).split())
    assert "(in the unit's one drop-in, at the end)" in text
    assert "(not in the unit's drop-in: see why, at the end)" in text
    assert "not in the drop-in: c-warning: a warning, not a failure" in text
    assert text.count("# >>> diagnose fix ") == 1  # the one drop-in, printed once


def test_a_conflict_with_an_earlier_apply_is_named() -> None:
    from diagnose.core.dropin import Fix

    earlier = Fix(id="x@1", signature="x", incident="1", patch=Patch(env_set={"A": "1"}))
    now = _finding("f1", "y", Patch(env_set={"A": "2"}), Severity.CRITICAL)
    plan = changes.plan(Diagnosis(primary="f1", findings=[now], unit="u.service"))
    out = changes.rendered(plan, "u.service", "2", earlier=[earlier])
    assert out.earlier == ["x@1"]
    assert out.conflicts == ["y@2 sets A=2; x@1 set A=1 (this run's fix wins)"]
    assert out.dropin is not None and out.dropin.index("x@1") < out.dropin.index("y@2")
