"""Fixes that take effect (issue 16): real unit files in a temporary root, the effective
configuration read back as systemd reads it, and ``systemd-analyze verify`` on every drop-in
written (where the tool is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from diagnose.commands.preflight import PreflightOptions, run_preflight
from diagnose.core.dropin import Fix, fix_id, split_fixes
from diagnose.core.errors import UserError
from diagnose.core.models import Patch
from diagnose.systemd.apply import apply_fix, remove_fix
from diagnose.systemd.unit import dropin_paths, find_unit
from tests.conftest import run_cli, systemd_verify

UNIT = "sglang-qwen.service"
COMMAND = (
    "/bin/sleep 1 -m sglang.launch_server --model-path /models/Q --tp-size 4 "
    "--speculative-algorithm NEXTN --mem-fraction-static 0.85 --port 30000"
)
SPEC_V2 = Fix(
    id=fix_id("sglang-spec-v2-required", "2026-03-03T11:53:31Z"),
    signature="sglang-spec-v2-required",
    incident="2026-03-03T11:53:31Z",
    patch=Patch(
        env_set={"SGLANG_ENABLE_SPEC_V2": "1"},
        args_add=["--mamba-scheduler-strategy", "extra_buffer"],
        args_remove=["--mamba-scheduler-strategy"],
    ),
)
OOM = Fix(
    id=fix_id("cuda-out-of-memory", "2026-03-04T08:12:09Z"),
    signature="cuda-out-of-memory",
    incident="2026-03-04T08:12:09Z",
    patch=Patch(
        args_add=["--mem-fraction-static", "0.80"],
        unit_set={"Service.RestartSec": "30s"},
    ),
)


def _root(tmp_path: Path, unit_text: str | bytes | None = None) -> Path:
    system = tmp_path / "etc/systemd/system"
    system.mkdir(parents=True)
    text = unit_text if unit_text is not None else f"[Service]\nExecStart={COMMAND}\n"
    path = system / UNIT
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return tmp_path


def _dropin(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _effective(root: Path):
    config = find_unit(UNIT, root)
    assert config is not None
    return config


def _verify(root: Path) -> None:
    """``systemd-analyze verify`` of the unit with the drop-ins beside it."""
    if shutil.which("systemd-analyze") is None:
        return
    stderr = systemd_verify(root / "etc/systemd/system" / UNIT)
    assert "diagnose.conf" not in stderr, stderr


def _systemd_order(root: Path) -> list[str] | None:
    """The drop-ins of ``UNIT.d`` in the order systemd applies them
    (``systemd-analyze cat-config``), or None where the tool is missing."""
    if shutil.which("systemd-analyze") is None:
        return None
    result = subprocess.run(
        ["systemd-analyze", f"--root={root}", "cat-config", f"systemd/system/{UNIT}.d"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"systemd-analyze cat-config cannot run here: {result.stderr.strip()}")
    return [line[2:] for line in result.stdout.splitlines() if line.startswith(f"# {root}/")]


def test_dropins_are_ordered_and_masked_as_systemd_does(tmp_path: Path) -> None:
    root = _root(tmp_path)
    for relative in (
        f"usr/lib/systemd/system/{UNIT}.d/override.conf",
        f"usr/lib/systemd/system/{UNIT}.d/10-vendor.conf",  # masked by /etc's 10-vendor.conf
        f"etc/systemd/system/{UNIT}.d/10-vendor.conf",
        f"run/systemd/system/{UNIT}.d/zz-late.conf",
        f"usr/local/lib/systemd/system/{UNIT}.d/50-local.conf",
    ):
        _dropin(root, relative, "[Service]\nNice=1\n")
    apply_fix(SPEC_V2, UNIT, root)
    ours = [str(p) for p in dropin_paths(UNIT, root)]
    assert [Path(p).name for p in ours] == [
        "10-vendor.conf", "50-local.conf", "override.conf", "zz-late.conf", "zzz-diagnose.conf",
    ]  # fmt: skip
    assert ours[0].startswith(f"{root}/etc/")
    systemd = _systemd_order(root)
    if systemd is not None:
        assert systemd == ours


def test_override_conf_does_not_override_our_fix(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _dropin(
        root,
        f"etc/systemd/system/{UNIT}.d/override.conf",
        f"[Service]\nEnvironment=SGLANG_ENABLE_SPEC_V2=0\nExecStart=\nExecStart={COMMAND}\n",
    )
    applied = apply_fix(SPEC_V2, UNIT, root)
    assert applied.path.name == "zz-diagnose.conf" and applied.changed
    effective = _effective(root)
    assert effective.effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert effective.command is not None
    assert effective.command.argv[-2:] == ["--mamba-scheduler-strategy", "extra_buffer"]
    assert [Path(p).name for p in effective.dropins] == ["override.conf", "zz-diagnose.conf"]
    systemd = _systemd_order(root)
    assert systemd is None or systemd == effective.dropins  # systemd applies ours last too
    _verify(root)


def test_a_later_dropin_anywhere_pushes_our_name_further(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _dropin(root, f"run/systemd/system/{UNIT}.d/zz-late.conf", "[Service]\nEnvironment=X=1\n")
    _dropin(root, "usr/lib/systemd/system/service.d/zzz-vendor.conf", "[Service]\nNice=1\n")
    applied = apply_fix(SPEC_V2, UNIT, root)
    assert applied.path.name == "zzzz-diagnose.conf"
    names = [p.name for p in dropin_paths(UNIT, root)]
    assert names[-1] == "zzzz-diagnose.conf"
    assert _effective(root).effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    _verify(root)


def test_our_dropin_moves_when_a_later_one_appears(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = apply_fix(SPEC_V2, UNIT, root)
    _dropin(root, f"etc/systemd/system/{UNIT}.d/zzz-admin.conf", "[Service]\nEnvironment=B=2\n")
    second = apply_fix(OOM, UNIT, root)
    assert second.moved_from == first.path and not first.path.exists()
    assert second.path.name == "zzz-diagnose.conf"  # sorts after zzz-admin.conf
    assert second.fixes == (SPEC_V2.id, OOM.id)
    effective = _effective(root)
    assert effective.effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert effective.command is not None and effective.command.argv[-1] == "0.80"
    _verify(root)


def test_two_incidents_both_take_effect_and_one_can_be_taken_back(tmp_path: Path) -> None:
    root = _root(tmp_path)
    apply_fix(SPEC_V2, UNIT, root)
    second = apply_fix(OOM, UNIT, root)
    assert second.fixes == (SPEC_V2.id, OOM.id) and second.backup is not None
    effective = _effective(root)
    assert effective.command is not None
    argv = effective.command.argv
    assert argv[-4:] == [
        "--mamba-scheduler-strategy",
        "extra_buffer",
        "--mem-fraction-static",
        "0.80",
    ]
    assert "0.85" not in argv
    assert effective.effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert effective.get("Service", "RestartSec") == "30s"
    _verify(root)
    text = second.path.read_text()
    assert text.count("# >>> diagnose fix ") == 2
    assert "incident: 2026-03-04T08:12:09Z  signature: cuda-out-of-memory" in text
    removed, after = remove_fix(UNIT, "sglang-spec-v2-required", root)
    assert removed.id == SPEC_V2.id and after.fixes == (OOM.id,)
    effective = _effective(root)
    assert effective.command is not None
    assert "--mamba-scheduler-strategy" not in effective.command.argv
    assert effective.command.argv[-2:] == ["--mem-fraction-static", "0.80"]
    assert "SGLANG_ENABLE_SPEC_V2" not in effective.effective_environment
    _, last = remove_fix(UNIT, None, root)  # undo
    assert last.removed and not last.path.exists() and last.backup is not None
    assert _effective(root).command.argv == COMMAND.split()  # type: ignore[union-attr]


def test_the_same_fix_twice_writes_nothing_and_conflicts_are_reported(tmp_path: Path) -> None:
    root = _root(tmp_path)
    apply_fix(SPEC_V2, UNIT, root)
    again = apply_fix(SPEC_V2.model_copy(update={"id": "other@1", "incident": "x"}), UNIT, root)
    assert not again.changed
    other = Fix(
        id="sglang-radix@20260305T000000Z",
        signature="sglang-radix",
        incident="2026-03-05T00:00:00Z",
        patch=Patch(args_add=["--mamba-scheduler-strategy", "no_buffer"], env_set={"A": "1"}),
    )
    applied = apply_fix(other, UNIT, root)
    assert any("--mamba-scheduler-strategy no_buffer" in c for c in applied.conflicts)
    assert _effective(root).command.argv[-1] == "no_buffer"  # type: ignore[union-attr]
    _verify(root)


def test_a_later_fix_wins_a_conflict_and_taking_it_back_restores_the_earlier(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    unset = Fix(id="a@1", signature="a", incident="1", patch=Patch(env_unset=["NCCL_P2P_DISABLE"]))
    setting = Fix(
        id="b@2",
        signature="b",
        incident="2",
        patch=Patch(env_set={"NCCL_P2P_DISABLE": "1"}, unit_set={"Service.RestartSec": "5s"}),
    )
    later = Fix(
        id="c@3", signature="c", incident="3", patch=Patch(unit_set={"Service.RestartSec": "30s"})
    )
    apply_fix(unset, UNIT, root)
    applied = apply_fix(setting, UNIT, root)
    applied = apply_fix(later, UNIT, root)
    assert applied.conflicts == (
        "b@2 sets NCCL_P2P_DISABLE, which a@1 unsets",
        "c@3 sets Service.RestartSec=30s; b@2 set 5s",
    )
    effective = _effective(root)
    assert effective.effective_environment["NCCL_P2P_DISABLE"] == "1"  # b came after a
    assert effective.get("Service", "RestartSec") == "30s"
    _verify(root)
    remove_fix(UNIT, "c@3", root)
    assert _effective(root).get("Service", "RestartSec") == "5s"
    remove_fix(UNIT, "b@2", root)
    assert "NCCL_P2P_DISABLE" not in _effective(root).effective_environment


def test_an_environment_file_that_sets_the_variable_makes_the_fix_refused(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        f"[Service]\nEnvironmentFile=/etc/sglang.env\nExecStart={COMMAND}\n",
    )
    (root / "etc/sglang.env").write_text("SGLANG_ENABLE_SPEC_V2=0\n")
    with pytest.raises(UserError, match=r"EnvironmentFile=/etc/sglang\.env sets it"):
        apply_fix(SPEC_V2, UNIT, root)
    assert not (root / f"etc/systemd/system/{UNIT}.d/zz-diagnose.conf").exists()


def test_into_override_merges_and_a_later_dropin_is_a_refusal(tmp_path: Path) -> None:
    root = _root(tmp_path)
    override = _dropin(root, f"etc/systemd/system/{UNIT}.d/override.conf", "[Service]\nNice=5\n")
    applied = apply_fix(SPEC_V2, UNIT, root, into_override=True)
    assert applied.path == override
    head, fixes = split_fixes(override.read_text())
    assert head.startswith("[Service]\nNice=5") and [f.id for f in fixes] == [SPEC_V2.id]
    assert _effective(root).get("Service", "Nice") == "5"
    _verify(root)
    _dropin(
        root,
        f"etc/systemd/system/{UNIT}.d/zz-mine.conf",
        f"[Service]\nExecStart=\nExecStart={COMMAND}\n",
    )
    before = override.read_text()
    with pytest.raises(UserError, match=r"zz-mine\.conf"):
        apply_fix(OOM, UNIT, root)
    assert override.read_text() == before  # taken back


# -- refusing partial fixes ----------------------------------------------------------------


def test_a_variable_holding_a_flag_we_change_is_refused(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        '[Service]\nEnvironment="OPTS=--mamba-scheduler-strategy no_buffer --tp-size 4"\n'
        "ExecStart=/bin/sleep 1 -m sglang.launch_server $OPTS\n",
    )
    with pytest.raises(UserError, match=r"set inside \$OPTS"):
        apply_fix(SPEC_V2, UNIT, root)
    assert not (root / f"etc/systemd/system/{UNIT}.d").exists()


def test_a_variable_that_does_not_hold_the_flag_is_kept_as_written(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        '[Service]\nEnvironment="OPTS=--tp-size 4" MODEL=/models/Q\n'
        "ExecStart=/bin/sleep 1 -m sglang.launch_server --model-path ${MODEL} $OPTS\n",
    )
    apply_fix(SPEC_V2, UNIT, root)
    command = _effective(root).command
    assert command is not None
    assert command.argv == [
        "/bin/sleep", "1", "-m", "sglang.launch_server", "--model-path", "${MODEL}", "$OPTS",
        "--mamba-scheduler-strategy", "extra_buffer",
    ]  # fmt: skip
    _verify(root)


def test_an_undefined_variable_or_unreadable_environment_file_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path / "a", "[Service]\nExecStart=/bin/sleep 1 $OPTS\n")
    with pytest.raises(UserError, match=r"\$OPTS, which no Environment="):
        apply_fix(SPEC_V2, UNIT, root)
    root = _root(
        tmp_path / "b",
        "[Service]\nEnvironmentFile=/etc/opts.env\nExecStart=/bin/sleep 1 $OPTS\n",
    )
    (root / "etc/opts.env").mkdir()  # a directory: it cannot be read as a file
    with pytest.raises(UserError, match=r"EnvironmentFile=/etc/opts\.env"):
        apply_fix(SPEC_V2, UNIT, root)
    assert list((root / "etc/systemd/system").iterdir()) == [root / "etc/systemd/system" / UNIT]


def test_an_unknown_unit_or_a_shell_script_is_refused(tmp_path: Path) -> None:
    root = _root(
        tmp_path, "[Service]\nExecStart=/bin/bash -c 'exec python -m sglang.launch_server'\n"
    )
    with pytest.raises(UserError, match="shell script"):
        apply_fix(SPEC_V2, UNIT, root)
    with pytest.raises(UserError, match="no unit file"):
        apply_fix(SPEC_V2, "other.service", root)
    assert not (root / "etc/systemd/system/other.service.d").exists()


@pytest.mark.parametrize(
    "unit",
    ["../../etc/passwd", "a/b.service", "x.service\n", "$(reboot).service", "-x.service", ""],
)
def test_hostile_unit_names_are_refused_before_any_path(tmp_path: Path, unit: str) -> None:
    root = _root(tmp_path)
    with pytest.raises(UserError):
        apply_fix(SPEC_V2, unit, root)
    assert sorted(p.name for p in (root / "etc/systemd/system").iterdir()) == [UNIT]


def test_hostile_unit_names_on_the_command_line_exit_2(tmp_path: Path) -> None:
    for unit in ("../../etc/passwd", "a;reboot"):
        result = run_cli("fixes", "list", "-u", unit, "--root", tmp_path)
        assert result.returncode == 2, result.stderr
        assert "not a unit name" in result.stderr


# -- bytes ------------------------------------------------------------------------------------


def test_latin1_and_nul_bytes_outside_our_blocks_survive_the_round_trip(tmp_path: Path) -> None:
    root = _root(tmp_path)
    original = b"# r\xe9glage de l'\xe9quipe\n# a NUL \x00 in a comment\n[Service]\nNice=5\n"
    override = root / f"etc/systemd/system/{UNIT}.d/override.conf"
    override.parent.mkdir()
    override.write_bytes(original)
    applied = apply_fix(SPEC_V2, UNIT, root, into_override=True)
    written = override.read_bytes()
    assert written.startswith(original)
    assert "\ufffd".encode() not in written and b"\\x00" not in written
    assert applied.backup is not None and applied.backup.read_bytes() == original
    assert _effective(root).effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    remove_fix(UNIT, None, root)
    assert override.read_bytes() == original  # the user's bytes, exactly


def test_bytes_systemd_rejects_are_read_as_systemd_reads_them(tmp_path: Path) -> None:
    latin1 = _root(tmp_path / "a", b"[Service]\nExecStart=/bin/sleep 1 --model-path /m/caf\xe9\n")
    config = _effective(latin1)
    assert config.exec_start == [] and [s.key for s in config.ignored] == ["ExecStart"]
    with pytest.raises(UserError, match="no ExecStart="):  # systemd ignores that line
        apply_fix(SPEC_V2, UNIT, latin1)
    options = PreflightOptions(unit=UNIT, root=latin1, gpu=False, port=False)
    findings = run_preflight(options, [], lambda _: None).diagnosis.findings
    texts = " ".join(f.explanation for f in findings)
    assert "ExecStart= holds bytes that are not UTF-8" in texts and "fails to load" in texts
    # a NUL ends a line for systemd: the rest is a line of its own (ignored)
    nul = _root(tmp_path / "b", b"[Service]\nExecStart=/bin/sleep 1 --tag a\x00b --port 1\n")
    apply_fix(SPEC_V2, UNIT, nul)
    command = _effective(nul).command
    assert command is not None
    assert command.argv == [
        "/bin/sleep",
        "1",
        "--tag",
        "a",
        "--mamba-scheduler-strategy",
        "extra_buffer",
    ]
    _verify(nul)


# -- the command line -----------------------------------------------------------------------


def test_fixes_list_remove_undo_on_the_command_line(tmp_path: Path) -> None:
    root = _root(tmp_path)
    apply_fix(SPEC_V2, UNIT, root)
    apply_fix(OOM, UNIT, root)
    listed = run_cli("fixes", "list", "-u", "sglang-qwen", "--root", root)
    assert listed.returncode == 0, listed.stderr
    assert SPEC_V2.id in listed.stdout and OOM.id in listed.stdout
    assert "SGLANG_ENABLE_SPEC_V2=1" in listed.stdout
    removed = run_cli("fixes", "remove", "-u", "sglang-qwen", OOM.id, "--root", root)
    assert removed.returncode == 0, removed.stderr
    assert f"took back {OOM.id}" in removed.stderr and "systemctl daemon-reload" in removed.stderr
    unknown = run_cli("fixes", "remove", "-u", "sglang-qwen", "nope", "--root", root)
    assert unknown.returncode == 2 and "no fix named 'nope'" in unknown.stderr
    undone = run_cli("fixes", "undo", "-u", "sglang-qwen", "--root", root)
    assert undone.returncode == 0 and "removed" in undone.stderr
    nothing = run_cli("fixes", "undo", "-u", "sglang-qwen", "--root", root)
    assert nothing.returncode == 2
