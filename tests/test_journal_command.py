"""``diagnose journal -u UNIT``, end to end on a real journal file: only the failed attempts,
the spec-v2 cause primary and the loop as its symptom, a drop-in against the real unit,
``--apply --root``, exit codes, and the GPU snapshot."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from diagnose.inputs import gpu
from diagnose.runs.journal import JournalOptions, diagnose_journal
from diagnose.systemd.unit import find_unit, parse_rendered_exec_start
from tests import journalgen
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl (apt-get install systemd-journal-remote)",
)
UNIT_FILE = journalgen.FIXTURES / "journal" / "sglang-qwen.service"


@pytest.fixture(scope="module")
def loop_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("journal") / "loop.journal"
    return journalgen.write_journal(journalgen.crashloop_entries(), path)


def test_crash_loop_after_a_healthy_run(loop_journal: Path) -> None:
    result = run_cli("journal", "-u", "sglang-qwen", "--file", loop_journal, "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["attempts"] == 5
    assert report["unit"] == "sglang-qwen.service"
    (journal_input,) = [i for i in report["inputs"] if i["kind"] == "journal"]
    assert journal_input["first_ts"].startswith("2026-03-03T11:53:10")  # not the healthy run
    findings = {f["signature"]: f for f in report["findings"]}
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    assert primary["signature"] == "sglang-spec-v2-required"
    assert primary["role"] == "root_cause" and primary["attempts"] == 5
    loop = findings["systemd-restart-loop"]
    assert loop["role"] == "symptom" and loop["caused_by"] == primary["id"]
    for finding in report["findings"]:
        for evidence in finding["evidence"]:
            assert evidence["line"] is None and evidence["cursor"], evidence
            assert evidence["timestamp"] >= "2026-03-03T11:53"
    assert "5 start attempts (a restart loop)" in result.stderr
    assert any("suppressed 1234 messages" in note for note in report["notes"])
    # no unit file for a journal from files: the drop-in can only name the flags
    assert "# Launch flags need the whole command line" in primary["patch"]["dropin"]


def test_text_report_is_the_same_format_as_diagnose_file(loop_journal: Path) -> None:
    result = run_cli("journal", "-u", "sglang-qwen.service", "--file", loop_journal)
    assert result.returncode == 1
    assert result.stdout.startswith("sglang-qwen.service: ")
    assert "ROOT CAUSE MTP on a hybrid" in result.stdout
    assert "SYMPTOM The unit is in a crash-restart loop" in result.stdout


def test_the_patch_is_rendered_against_the_unit_file(loop_journal: Path) -> None:
    result = run_cli(
        "journal",
        "-u",
        "sglang-qwen",
        "--file",
        loop_journal,
        "--unit-file",
        UNIT_FILE,
        "-f",
        "json",
    )
    report = json.loads(result.stdout)
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    dropin = primary["patch"]["dropin"]
    assert "Environment=SGLANG_ENABLE_SPEC_V2=1" in dropin
    assert "\nExecStart=\nExecStart=/opt/sglang/.venv/bin/python3" in dropin
    argv = parse_rendered_exec_start(dropin)
    assert argv is not None
    assert argv[-2:] == ["--mamba-scheduler-strategy", "extra_buffer"]
    assert not any("no_buffer" in word for word in argv)
    assert "--model-path" in argv and argv[argv.index("--tp-size") + 1] == "4"
    assert "#   -argv: --mamba-scheduler-strategy=no_buffer" in dropin
    assert "#   +argv: --mamba-scheduler-strategy extra_buffer" in dropin  # a flag with its value
    assert "#   +env: SGLANG_ENABLE_SPEC_V2=1" in dropin


def test_apply_twice_under_a_root(loop_journal: Path, tmp_path: Path) -> None:
    system = tmp_path / "etc/systemd/system"
    system.mkdir(parents=True)
    shutil.copy(UNIT_FILE, system / "sglang-qwen.service")
    args = ("journal", "-u", "sglang-qwen", "--file", loop_journal, "--root", tmp_path)
    dry = run_cli(*args)
    assert dry.returncode == 1
    assert not (system / "sglang-qwen.service.d").exists()  # nothing written without --apply
    first = run_cli(*args, "--apply")
    second = run_cli(*args, "--apply")
    assert first.returncode == second.returncode == 1
    written = system / "sglang-qwen.service.d" / "zz-diagnose.conf"
    assert f"wrote {written}" in first.stderr
    assert "systemctl daemon-reload" in first.stderr
    assert "systemctl restart sglang-qwen.service" in first.stderr
    assert "already holds this fix; nothing written" in second.stderr
    assert sorted(p.name for p in written.parent.iterdir()) == ["zz-diagnose.conf"]
    assert "ExecStart=\nExecStart=/opt/sglang" in written.read_text()
    # the report is rendered against the unit without our fixes: the same command line
    json_report = json.loads(run_cli(*args, "-f", "json").stdout)
    primary = next(f for f in json_report["findings"] if f["id"] == json_report["primary"])
    assert parse_rendered_exec_start(primary["patch"]["dropin"]) == parse_rendered_exec_start(
        written.read_text()
    )


def test_apply_wins_over_override_conf_and_refuses_what_it_cannot_prove(
    loop_journal: Path, tmp_path: Path
) -> None:
    system = tmp_path / "etc/systemd/system"
    (system / "sglang-qwen.service.d").mkdir(parents=True)
    shutil.copy(UNIT_FILE, system / "sglang-qwen.service")
    override = system / "sglang-qwen.service.d/override.conf"
    override.write_text("[Service]\nEnvironment=SGLANG_ENABLE_SPEC_V2=0\n")  # systemctl edit
    args = ("journal", "-u", "sglang-qwen", "--file", loop_journal, "--root", tmp_path)
    applied = run_cli(*args, "--apply")
    assert applied.returncode == 1, applied.stderr
    assert "checked: the effective configuration" in applied.stderr
    config = find_unit("sglang-qwen.service", tmp_path)
    assert config is not None and config.effective_environment["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert config.command is not None and config.command.argv[-1] == "extra_buffer"
    # an EnvironmentFile= that sets the variable overrides any Environment=: refused, exit 2
    (tmp_path / "etc/sglang.env").write_text("SGLANG_ENABLE_SPEC_V2=0\n")
    override.write_text("[Service]\nEnvironmentFile=/etc/sglang.env\n")
    before = (system / "sglang-qwen.service.d/zz-diagnose.conf").read_text()
    refused = run_cli(*args, "--apply")
    assert refused.returncode == 2, refused.stderr
    assert "would not take effect" in refused.stderr and "/etc/sglang.env" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (system / "sglang-qwen.service.d/zz-diagnose.conf").read_text() == before


def test_apply_with_nothing_to_write_is_a_user_error(tmp_path: Path) -> None:
    text = (journalgen.FIXTURES / "incidents/healthy-sglang.journal.txt").read_text()
    path = journalgen.write_journal(
        journalgen.entries_from_short(text, journalgen.UNIT), tmp_path / "healthy.journal"
    )
    healthy = run_cli("journal", "-u", "sglang-qwen", "--file", path, "--root", tmp_path)
    assert healthy.returncode == 0, healthy.stderr
    refused = run_cli("journal", "-u", "sglang-qwen", "--file", path, "--root", tmp_path, "--apply")
    assert refused.returncode == 2
    assert "nothing to write" in refused.stderr


def test_a_unit_with_no_entries_exits_2_with_a_hint(loop_journal: Path) -> None:
    result = run_cli("journal", "-u", "vllm-typo", "--file", loop_journal)
    assert result.returncode == 2
    assert "vllm-typo.service: no journal entries" in result.stderr
    assert "systemd-journal" in result.stderr and "adm" in result.stderr


def test_bad_arguments_exit_2(loop_journal: Path, tmp_path: Path) -> None:
    assert run_cli("journal", "-u", "x", "--file", tmp_path / "missing.journal").returncode == 2
    assert (
        run_cli("journal", "-u", "x", "--file", loop_journal, "--since", "whenever").returncode == 2
    )
    assert (
        run_cli("journal", "-u", "x", "--file", loop_journal, "--invocations", "0").returncode == 2
    )


def test_both_readers_give_the_same_diagnosis(loop_journal: Path) -> None:
    pytest.importorskip("systemd.journal")
    reports = []
    for reader in ("systemd-python", "journalctl"):
        options = JournalOptions(
            unit="sglang-qwen", files=[loop_journal], unit_file=UNIT_FILE, reader=reader
        )
        result = diagnose_journal(options, [], None, lambda _: None)
        reports.append(result.diagnosis.model_dump(mode="json"))
    assert reports[0] == reports[1]


def _fake_nvidia_smi(directory: Path) -> None:
    script = directory / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=*) printf '0, NVIDIA H200, 1143, 143771\\n"
        "1, NVIDIA H200, 1143, 143771\\n' ;;\n"
        "  --query-compute-apps=*) printf '48211, sglang::scheduler_TP0, GPU-0000, 1134\\n' ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_gpu_snapshot_lines_are_records_signatures_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_nvidia_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the nvidia-smi path, even if installed
    shot = gpu.snapshot()
    assert shot.missing is None
    assert [g.used_mib for g in shot.gpus] == [1143, 1143]
    texts = [r.text for r in shot.records()]
    assert texts[:2] == ["0, 1143 MiB, 143771 MiB", "1, 1143 MiB, 143771 MiB"]
    assert texts[2] == "48211, sglang::scheduler_TP0, GPU-0000, 1134"
    assert {r.origin for r in shot.records()} == {"gpu"}


def test_the_two_gpu_queries_run_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each nvidia-smi query takes about 25 ms on an H200 host: the snapshot starts both
    before it waits for either. This fake answers the GPU query with a used figure only once
    the process query has started too (a sequential snapshot would read 9999 MiB)."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"cd {tmp_path}\n"
        'case "$1" in\n'
        "  --query-gpu=*) for _ in $(seq 100); do [ -e apps ] && break; sleep 0.02; done\n"
        "    [ -e apps ] && used=1143 || used=9999\n"
        '    echo "0, NVIDIA H200, $used, 143771" ;;\n'
        "  --query-compute-apps=*) touch apps ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    shot = gpu.snapshot()
    assert [g.used_mib for g in shot.gpus] == [1143]


def test_missing_nvidia_smi_is_missing_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    shot = gpu.snapshot()
    assert shot.records() == []
    assert shot.missing and "not on PATH" in shot.missing


def test_gpu_snapshot_supports_the_dist_init_stall(tmp_path: Path) -> None:
    """A bare ~1 GB CUDA context per GPU joins the evidence of a distributed-init hang."""
    from diagnose.core.engine import Engine
    from diagnose.core.records import Event
    from diagnose.inputs import journal as source
    from diagnose.library import load_facts, load_library

    text = (journalgen.FIXTURES / "incidents/dist-init-stall.journal.txt").read_text()
    path = journalgen.write_journal(
        journalgen.entries_from_short(text, journalgen.UNIT), tmp_path / "stall.journal"
    )
    location = source.JournalLocation(files=[path])
    scope = source.select(source.JournalQuery(journalgen.UNIT, location))
    engine = Engine(load_library([]), facts=load_facts())
    seq = 0
    for event in source.events_from_records(scope.records):
        seq = event.seq
        engine.feed(event)
    shot = gpu.GpuSnapshot(gpu.parse_query_gpu("0, NVIDIA H200, 1143, 143771\n"))
    for record in shot.records():
        seq += 1
        record.seq = seq
        engine.feed(Event([record], seq))
    diagnosis = engine.finish()
    primary = diagnosis.finding(diagnosis.primary)
    assert primary is not None and primary.signature == "sglang-dist-init-stall"
    assert "about 1143 MiB in use per GPU" in primary.explanation
    assert any(e.source == gpu.SOURCE for e in primary.evidence)


@pytest.mark.parametrize("reader", ["systemd-python", "journalctl"])
def test_the_prefiltered_read_gives_the_same_diagnosis(
    loop_journal: Path, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries the needle pre-filter skips are never turned into records; the diagnosis
    must not change. Small batches and no head make the pre-filter and the reader's seeking
    back and forth do real work on this small journal."""
    from diagnose.inputs import journal as source
    from diagnose.inputs import pipeline
    from diagnose.render import render
    from diagnose.runs import journal as command

    if reader == "systemd-python":
        pytest.importorskip("systemd.journal")
    options = command.JournalOptions(
        unit="sglang-qwen", files=[loop_journal], gpu=False, reader=reader
    )
    query = command.journal_query(options)

    def diagnose(prefilter: bool) -> tuple[str, int]:
        backend = source.open_backend(query.location, reader)
        scope = source.choose(query, backend) if prefilter else source.select(query, backend)
        result = command.diagnose_scope(scope, query, options, [], None, lambda _: None)
        return render(result.diagnosis, "json"), backend.skipped

    every_entry, _ = diagnose(prefilter=False)
    monkeypatch.setattr(pipeline, "HEAD_ENTRIES", 8)  # the first lines name the engine
    monkeypatch.setattr(source, "BATCH", 7)
    monkeypatch.setattr(pipeline, "MAX_TRACEBACK_LINES", 25)  # the fixture's are shorter
    prefiltered, skipped = diagnose(prefilter=True)
    assert skipped > 20, "the pre-filter skipped entries"
    assert prefiltered == every_entry


def test_a_user_unit_crash_loop(tmp_path: Path) -> None:
    """`diagnose journal --user -u UNIT`: the user's manager is not PID 1 and its unit's
    output has no invocation ID; the loop is still found, scoped and explained."""
    loop = (REPO / "fixtures/incidents/qwen-122b-crashloop.journal.txt").read_text()
    entries = journalgen.entries_from_short(loop, journalgen.UNIT, seed="user", user=True)
    journal = journalgen.write_journal(entries, tmp_path / "user.journal")
    system = run_cli("journal", "-u", "sglang-qwen", "--file", journal, "-f", "json")
    assert system.returncode == 2  # not a system unit: no entries
    result = run_cli("journal", "--user", "-u", "sglang-qwen", "--file", journal, "-f", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    assert primary["signature"] == "sglang-spec-v2-required"
    assert report["attempts"] == 5 and primary["attempts"] == 5
    loop_finding = next(f for f in report["findings"] if f["signature"] == "systemd-restart-loop")
    assert loop_finding["caused_by"] == primary["id"]
    refused = run_cli("journal", "--user", "-u", "sglang-qwen", "--file", journal, "--apply")
    assert refused.returncode == 2 and "--user unit" in refused.stderr


GATED = """\
Mar 04 10:00:00.100001 gpu-node-07 systemd[1]: Started sglang-qwen.service - SGLang Qwen server.
Mar 04 10:00:09.100002 gpu-node-07 python3[4101]: huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-65f1) Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.
Mar 04 10:00:09.100003 gpu-node-07 python3[4101]: Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be authenticated to access it. Please log in.
Mar 04 10:00:10.100004 gpu-node-07 systemd[1]: sglang-qwen.service: Main process exited, code=exited, status=1/FAILURE
"""


def test_a_fix_with_a_value_only_the_user_knows_is_shown_and_never_applied(
    tmp_path: Path,
) -> None:
    system = tmp_path / "etc/systemd/system"
    system.mkdir(parents=True)
    shutil.copy(UNIT_FILE, system / "sglang-qwen.service")
    path = journalgen.write_journal(
        journalgen.entries_from_short(GATED, journalgen.UNIT), tmp_path / "gated.journal"
    )
    args = ("journal", "-u", "sglang-qwen", "--file", path, "--root", tmp_path)
    report = json.loads(run_cli(*args, "-f", "json").stdout)
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    assert primary["category"] == "model_access"
    token = primary["patch"]["env_set"]["HF_TOKEN"]
    assert token.startswith("<") and token.endswith(">")
    dropin = primary["patch"]["dropin"]  # a secret goes by a 0600 file, never Environment=
    assert "HF_TOKEN" not in "".join(line for line in dropin.splitlines() if line[:1] != "#")
    secrets = "/etc/systemd/system/sglang-qwen.service.d/secrets.env"
    assert f"EnvironmentFile={secrets}\n" in dropin
    assert f"install -m 0600 -o root -g root /dev/null {secrets}" in dropin
    assert "<redacted" not in dropin  # its words do not read as a secret to the redaction
    refused = run_cli(*args, "--apply")
    assert refused.returncode == 2, refused.stderr
    assert "needs values only you can give" in refused.stderr and token in refused.stderr
    assert f"put HF_TOKEN in {secrets}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (system / "sglang-qwen.service.d").exists()  # nothing written
