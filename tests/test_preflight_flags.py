"""Preflight reads a command line as the engine release's own parser does (issue 13 item 3,
issue 16 item 5): abbreviations, SGLang's underscore rule, removed and renamed flags with
their successors, ambiguous prefixes, choices and engine environment variables, one finding
per problem with its own fix, against the version installed beside the unit's interpreter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diagnose.commands.preflight import PreflightOptions, installed_version, run_preflight
from diagnose.core.models import Diagnosis, Finding, Severity
from diagnose.knowledge.mined import flag_table
from diagnose.preflight.flags import EngineVersion, parse_words, problems
from diagnose.systemd.unit import parse_rendered_exec_start
from tests.conftest import FIXTURES, run_cli

PREFLIGHT = FIXTURES / "preflight"
SEED_UNIT = PREFLIGHT / "sglang-qwen.service"
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/none"]
VLLM = ["vllm", "serve", "Qwen/Qwen3-8B"]


def _check(argv: list[str], version: str | None = None, **options: object) -> Diagnosis:
    preflight = PreflightOptions(command=argv, gpu=False, port=False, root=PREFLIGHT)
    if version:
        engine, _, number = version.partition("==")
        preflight.engine_version = (engine, number)
    for key, value in options.items():
        setattr(preflight, key, value)
    return run_preflight(preflight, [], lambda _: None).diagnosis


def _by(diagnosis: Diagnosis, signature: str) -> list[Finding]:
    return [f for f in diagnosis.findings if f.signature == signature]


def test_an_abbreviated_flag_on_the_seed_unit_still_gives_the_spec_v2_fix(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-qwen.service"
    unit.write_text(
        SEED_UNIT.read_text().replace("--speculative-algorithm NEXTN", "--speculative-algo NEXTN")
    )
    result = run_cli("preflight", "--unit-file", unit, "--root", PREFLIGHT, "--no-gpu",
                     "--no-port", "-f", "json")  # fmt: skip
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    primary = next(f for f in report["findings"] if f["id"] == report["primary"])
    assert primary["signature"] == "sglang-spec-v2-required"
    assert "--speculative-algorithm NEXTN" in primary["evidence"][0]["message"]
    assert primary["patch"]["env_set"] == {"SGLANG_ENABLE_SPEC_V2": "1"}
    argv = parse_rendered_exec_start(primary["patch"]["dropin"])
    assert argv is not None and "--speculative-algo" in argv
    assert argv[-2:] == ["--mamba-scheduler-strategy", "extra_buffer"]
    assert [f["signature"] for f in report["findings"]] == ["sglang-spec-v2-required"]
    assert any("0.5.10" in note and "dist-info" in note for note in report["notes"])


def test_the_version_is_read_from_the_units_interpreter() -> None:
    found = installed_version(["/opt/sglang/.venv/bin/python3"], "sglang", PREFLIGHT)
    assert found is not None and (found.version, found.source) == ("0.5.10", "installed")
    assert found.where == "/opt/sglang/.venv/lib/python3.12/site-packages/sglang-0.5.10.dist-info"
    assert found.table_version == "0.5.10.post1" and not found.exact  # its nearest mined one
    assert installed_version(["/usr/bin/python3"], "sglang", PREFLIGHT) is None
    assert installed_version(["python3"], "sglang", PREFLIGHT) is None


def test_the_report_says_which_version_it_used() -> None:
    given = _check([*SGLANG, "--tp", "2"], "sglang==0.5.23")
    assert any("SGLang 0.5.23's parser (given with --engine-version)" in n for n in given.notes)
    newest = _check([*SGLANG, "--tp", "2"])
    assert any("the newest release known" in n for n in newest.notes)
    assert given.findings == [] and newest.findings == []


def test_two_problems_give_two_findings_with_two_fixes() -> None:
    argv = [*SGLANG, "--tp_size", "2", "--mamba-scheduler-strategy", "extra_buffer"]
    diagnosis = _check(argv, "sglang==0.5.23")
    findings = _by(diagnosis, "launch-unrecognized-arguments")
    assert len(findings) == 2
    patches = {f.evidence[0].message: f.patch for f in findings}
    assert all(p is not None for p in patches.values())
    by_flag = {p.args_remove[0]: p for p in patches.values() if p is not None}
    assert by_flag["--tp_size"].args_add == ["--tp-size", "2"]
    renamed = by_flag["--mamba-scheduler-strategy"]
    assert renamed.args_add == ["--mamba-radix-cache-strategy", "extra_buffer"]
    assert all(f.severity.value == "critical" for f in findings)


def test_a_removed_flag_names_its_successor() -> None:
    diagnosis = _check([*SGLANG, "--mamba-scheduler-strategy", "no_buffer"], "sglang==0.5.23")
    (finding,) = _by(diagnosis, "launch-unrecognized-arguments")
    assert "not an option of SGLang 0.5.23" in finding.explanation
    assert "renamed: the option is now `--mamba-radix-cache-strategy`" in finding.explanation
    # an earlier release accepts it (a deprecated alias): only an advisory there
    earlier = _check([*SGLANG, "--mamba-scheduler-strategy", "no_buffer"], "sglang==0.5.16")
    assert [(f.signature, f.role.value) for f in earlier.findings] == [
        ("launch-flag-deprecated", "advisory")
    ]


def test_an_ambiguous_prefix_lists_its_candidates() -> None:
    diagnosis = _check([*SGLANG, "--cuda-graph-max-bs", "32"], "sglang==0.5.23")
    (finding,) = _by(diagnosis, "launch-ambiguous-option")
    assert "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" in finding.explanation
    assert "split into" in finding.explanation
    assert "read it as `--cuda-graph-max-bs-decode`" in finding.explanation
    assert finding.severity.value == "critical" and finding.patch is not None
    assert finding.patch.args_add == ["--cuda-graph-max-bs-decode", "32"]
    vllm = _check([*VLLM, "--max-num", "8"], "vllm==0.34.0")
    (ambiguous,) = _by(vllm, "launch-ambiguous-option")
    assert ambiguous.patch is None  # nothing says which one was meant
    assert "--max-num-seqs" in ambiguous.explanation
    assert "--max-num-batched-tokens" in ambiguous.explanation


def test_underscores_are_an_error_for_sglang_and_fine_for_vllm() -> None:
    sglang = _check([*SGLANG, "--mem_fraction_static", "0.8"], "sglang==0.5.23")
    (finding,) = _by(sglang, "launch-unrecognized-arguments")
    assert "does not read `_` as `-`" in finding.explanation
    assert finding.patch is not None
    assert finding.patch.args_add == ["--mem-fraction-static", "0.8"]
    vllm = _check([*VLLM, "--max_model_len", "8192", "--gpu_memory_utilization", "0.8"],
                  "vllm==0.34.0")  # fmt: skip
    assert vllm.findings == []


def test_a_value_outside_the_choices_gets_the_nearest_choice() -> None:
    diagnosis = _check([*VLLM, "--dtype", "bfloat"], "vllm==0.34.0")
    (finding,) = _by(diagnosis, "launch-invalid-argument-value")
    assert "auto, bfloat16, float, float16, float32, half" in finding.explanation
    assert finding.patch is not None and finding.patch.args_add == ["--dtype", "bfloat16"]


def test_engine_variables_are_checked_with_did_you_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_LOGING_LEVEL", "DEBUG")
    monkeypatch.setenv("NCCL_DEBG", "INFO")  # not the engine's prefix: not judged
    diagnosis = _check(VLLM, "vllm==0.34.0")
    (finding,) = _by(diagnosis, "engine-env-var-unknown")
    assert "Did you mean `VLLM_LOGGING_LEVEL`?" in finding.explanation
    assert finding.patch is not None
    assert finding.patch.env_set == {"VLLM_LOGGING_LEVEL": "DEBUG"}
    assert finding.patch.env_unset == ["VLLM_LOGING_LEVEL"]
    assert finding.severity.value == "warning"
    assert len(diagnosis.findings) == 1


def test_an_unknown_version_makes_release_dependent_problems_warnings() -> None:
    diagnosis = _check([*SGLANG, "--mamba-scheduler-strategy", "no_buffer"])
    (finding,) = _by(diagnosis, "launch-unrecognized-arguments")
    assert finding.severity.value == "warning"
    assert "installed version is not known exactly" in finding.explanation
    wrong_everywhere = _check([*SGLANG, "--tp_size", "2"])
    assert [f.severity.value for f in wrong_everywhere.findings] == ["critical"]


def test_a_flag_another_finding_rewrites_is_not_reported_twice() -> None:
    diagnosis = _check([*SGLANG, "--enable-reasoning", "--max-num-seqs", "8"], "sglang==0.5.23")
    signatures = sorted(f.signature for f in diagnosis.findings)
    assert signatures == ["enable-reasoning-flag", "launch-unrecognized-arguments"]
    (unknown,) = _by(diagnosis, "launch-unrecognized-arguments")
    assert "--max-running-requests" in unknown.explanation  # the other engine's spelling


def test_switches_take_no_value_and_abbreviations_resolve() -> None:
    table = flag_table("sglang", "0.5.23")
    words = parse_words(["--trust-remote-code", "--tp", "4", "--disable-radix"], table)
    assert [(w.flag, w.value) for w in words] == [
        ("--trust-remote-code", None),
        ("--tp-size", "4"),
        ("--disable-radix-cache", None),
    ]
    found = problems("sglang", ["--tp", "4"], {}, EngineVersion("sglang", "0.5.23", "given"),
                     {}, ("SGLANG_",))  # fmt: skip
    assert all(not items for items in found.values())


def test_a_copied_venv_fixture_is_read_under_root(tmp_path: Path) -> None:
    venv = tmp_path / "srv/venv/lib/python3.11/site-packages/vllm-0.33.0.dist-info"
    venv.mkdir(parents=True)
    (venv / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    unit = tmp_path / "v.service"
    unit.write_text("[Service]\nExecStart=/srv/venv/bin/vllm serve m --dtype fp9\n")
    options = PreflightOptions(unit_file=unit, root=tmp_path, gpu=False, port=False)
    diagnosis = run_preflight(options, [], lambda _: None).diagnosis
    assert any("vLLM 0.33.0's parser (installed" in note for note in diagnosis.notes)
    (finding,) = _by(diagnosis, "launch-invalid-argument-value")
    assert "vLLM 0.33.0" in finding.explanation
    shutil.rmtree(tmp_path / "srv")


def test_vllm_nested_json_keys_are_options_of_their_own() -> None:
    argv = [
        *VLLM,
        "--speculative-config.method",
        "mtp",
        "--speculative_config.num_speculative_tokens",
        "2",
    ]
    assert _check(argv, "vllm==0.34.0").findings == []


# -- what systemd itself refuses ----------------------------------------------------------


def test_a_unit_without_execstart_is_refused() -> None:
    unit = FIXTURES / "units/014-linux-vllm-infra-lab-no-execstart.service"
    result = run_cli("preflight", "--unit-file", unit, "--no-gpu", "--no-port", "-f", "json")
    assert result.returncode == 1, result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["signature"] == "systemd-exec-failed" and finding["severity"] == "critical"
    assert "has no ExecStart=" in finding["explanation"]
    assert finding["evidence"][0]["source"] == str(unit)


def test_what_systemd_refuses_is_one_finding_each_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "srv/ok").mkdir(parents=True)
    unit = tmp_path / "v.service"
    unit.write_text(
        "[Service]\nUser=vllm\nWorkingDirectory=/srv/missing\nEnvironmentFile=/etc/v.env\n"
        "EnvironmentFile=-/etc/optional.env\nExecStart=/usr/bin/vllm serve m\n"
    )
    options = PreflightOptions(unit_file=unit, root=tmp_path, gpu=False, port=False)
    diagnosis = run_preflight(options, [], lambda _: None).diagnosis
    findings = _by(diagnosis, "systemd-exec-failed")
    lines = sorted((f.evidence[0].line, f.role.value) for f in findings)
    assert lines == [(2, "root_cause"), (3, "root_cause"), (4, "root_cause")]
    texts = " ".join(f.explanation for f in findings)
    assert "User=vllm does not exist" in texts and "/srv/missing does not exist" in texts
    assert "EnvironmentFile=/etc/v.env does not exist" in texts and "optional.env" not in texts
    unit.write_text(
        unit.read_text().replace("vllm\nWorking", "root\nWorking").replace("missing", "ok")
    )
    (tmp_path / "etc/v.env").write_text("A=1\n")
    assert run_preflight(options, [], lambda _: None).diagnosis.findings == []


def test_a_failure_known_only_in_other_releases_is_a_warning_that_says_so() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Qwen3.5-122B-A10B",
            "--speculative-algo", "NEXTN"]  # fmt: skip
    in_range = _check(argv, "sglang==0.5.10")
    (finding,) = _by(in_range, "sglang-spec-v2-required")
    assert finding.severity.value == "critical"
    assert "Fixed in SGLang 0.5.23: upgrading also fixes it." in finding.explanation
    newer = _check(argv, "sglang==0.5.23")
    (finding,) = _by(newer, "sglang-spec-v2-required")
    assert (finding.severity.value, finding.confidence.value) == ("warning", "low")
    assert "This applies to SGLang 0.5.10; the version in use is SGLang 0.5.23." in (
        finding.explanation
    )


def test_a_deprecated_flag_is_an_advisory_with_its_rename_and_removal() -> None:
    diagnosis = _check([*SGLANG, "--cuda-graph-max-bs", "32"], "sglang==0.5.16")
    (finding,) = diagnosis.findings
    assert finding.signature == "launch-flag-deprecated" and finding.role.value == "advisory"
    assert "SGLang 0.5.20 no longer has it" in finding.explanation
    assert finding.patch is not None
    assert finding.patch.args_add == ["--cuda-graph-max-bs-decode", "32"]
    assert _check([*SGLANG, "--cuda-graph-max-bs", "32"]).findings[0].signature != (
        "launch-flag-deprecated"
    )  # the newest release: the flag is gone, not deprecated (an ambiguous prefix there)


def test_a_patch_also_removes_the_abbreviation_the_unit_writes(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-qwen.service"
    unit.write_text(
        SEED_UNIT.read_text().replace("--port 30000", "--port 30000 --mamba-sched no_buffer")
    )
    options = PreflightOptions(unit_file=unit, root=PREFLIGHT, gpu=False, port=False)
    diagnosis = run_preflight(options, [], lambda _: None).diagnosis
    (finding,) = _by(diagnosis, "sglang-spec-v2-required")
    assert finding.patch is not None and "--mamba-sched" in finding.patch.args_remove
    argv = parse_rendered_exec_start(finding.patch.dropin or "")
    assert argv is not None and "--mamba-sched" not in argv and "no_buffer" not in argv
    assert argv[-2:] == ["--mamba-scheduler-strategy", "extra_buffer"]


REAL_UNITS = sorted((FIXTURES / "units").glob("*.service"))


@pytest.mark.parametrize("unit", REAL_UNITS, ids=[u.name for u in REAL_UNITS])
def test_real_units_have_no_flag_wrong_in_every_release(unit: Path, tmp_path: Path) -> None:
    """Units people run: the flag tables find nothing that every release rejects (a flag one
    release dropped, or an unknown engine variable, is at most a warning)."""
    options = PreflightOptions(unit_file=unit, root=tmp_path, gpu=False, port=False)
    diagnosis = run_preflight(options, [], lambda _: None).diagnosis
    launch = [f for f in diagnosis.findings if f.category == "launch_args"]
    assert [f.signature for f in launch if f.severity.rank >= Severity.ERROR.rank] == []
