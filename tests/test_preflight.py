"""``diagnose preflight``: the seed's 122B unit is refused before the start with the patch the
postmortem gives; the corrected unit passes; TP, other-engine flags, parser names, the port,
GPU memory held by another process and a model too large for its TP are caught; every real
unit runs through without a crash."""

from __future__ import annotations

import doctest
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.commands.preflight import PreflightOptions, run_preflight
from diagnose.core import expr
from diagnose.core.dropin import DROPIN_NAME
from diagnose.preflight import checks as preflight
from diagnose.runs.journal import JournalOptions, diagnose_journal
from diagnose.systemd.patching import patched_against_unit
from diagnose.systemd.unit import load_unit_file, parse_rendered_exec_start
from tests import journalgen
from tests.conftest import FIXTURES, IDLE_ROWS, fake_nvidia_smi, run_engine

PREFLIGHT = FIXTURES / "preflight"
SEED_UNIT = PREFLIGHT / "sglang-qwen.service"
MODEL = "/models/Qwen3.5-122B-A10B"  # under --root fixtures/preflight


def _run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def _finding(report: dict, signature: str) -> dict:
    found = [f for f in report["findings"] if f["signature"] == signature]
    assert found, [f["signature"] for f in report["findings"]]
    return found[0]


def _seed(*extra: str | Path, env: dict[str, str] | None = None) -> dict:
    return _json(
        _run(
            "preflight",
            "--unit-file",
            SEED_UNIT,
            "--root",
            PREFLIGHT,
            "-f",
            "json",
            *extra,
            env=env,
        )
    )


def _primary(report: dict) -> dict:
    return next(f for f in report["findings"] if f["id"] == report["primary"])


# -- the seed unit ------------------------------------------------------------------------


def test_the_seed_unit_is_refused_before_start() -> None:
    report = _seed("--no-gpu", "--no-port")
    primary = _primary(report)
    assert primary["signature"] == "sglang-spec-v2-required"
    assert primary["role"] == "root_cause" and primary["severity"] == "critical"
    assert "Qwen3_5MoeForConditionalGeneration" in primary["explanation"]
    first = primary["evidence"][0]
    assert first["source"] == str(SEED_UNIT) and first["line"] == 11
    assert first["text"].startswith("ExecStart=/opt/sglang/.venv/bin/python3 -m sglang")
    assert "--speculative-algorithm NEXTN" in first["message"]
    assert any(e["source"].endswith("config.json") for e in primary["evidence"])
    patch = primary["patch"]
    assert patch["env_set"] == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert patch["args_add"] == ["--mamba-scheduler-strategy", "extra_buffer"]
    argv = parse_rendered_exec_start(patch["dropin"])
    assert argv is not None and argv[-2:] == ["--mamba-scheduler-strategy", "extra_buffer"]
    assert report["unit"] == "sglang-qwen.service" and report["engine"] == "sglang"


def _same_patch(preflight_finding: dict, postmortem_finding: dict) -> None:
    for key in ("env_set", "env_unset", "args_add", "args_remove", "unit_set", "dropin"):
        assert preflight_finding["patch"][key] == postmortem_finding["patch"][key], key


def test_the_patch_is_the_postmortems_patch() -> None:
    """The saved crash-loop log, diagnosed and rendered against the same unit as ``diagnose
    journal`` renders it, gives the very patch preflight gives before the start."""
    postmortem = run_engine("fixtures/incidents/qwen-122b-crashloop.journal.txt")
    notes: list[str] = []
    rendered = patched_against_unit(postmortem, load_unit_file(SEED_UNIT), notes)
    after = rendered.finding(rendered.primary)
    assert after is not None and after.signature == "sglang-spec-v2-required"
    report = _seed("--no-gpu", "--no-port")
    _same_patch(_primary(report), after.model_dump(mode="json"))


@pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl",
)
def test_the_patch_is_diagnose_journals_patch(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "loop.journal")
    options = JournalOptions(unit="sglang-qwen", files=[journal], unit_file=SEED_UNIT)
    result = diagnose_journal(options, [], None, lambda _: None)
    postmortem = result.diagnosis.model_dump(mode="json")
    _same_patch(_primary(_seed("--no-gpu", "--no-port")), _primary(postmortem))


def test_the_corrected_unit_passes(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-qwen.service"
    shutil.copy(SEED_UNIT, unit)
    dropin = _primary(_seed("--no-gpu", "--no-port"))["patch"]["dropin"]
    (tmp_path / "sglang-qwen.service.d").mkdir()
    (tmp_path / "sglang-qwen.service.d" / DROPIN_NAME).write_text(dropin)
    args = ("preflight", "--unit-file", unit, "--root", PREFLIGHT, "--no-gpu", "--no-port")
    result = _run(*args, "-f", "json")
    assert result.returncode == 0, result.stdout
    assert _json(result)["findings"] == []
    # written by hand, without the drop-in, the same
    text = SEED_UNIT.read_text().replace(
        '"NCCL_DEBUG=WARN"', '"NCCL_DEBUG=WARN" "SGLANG_ENABLE_SPEC_V2=1"'
    )
    text = text.replace("--port 30000", "--port 30000 --mamba-scheduler-strategy extra_buffer")
    fixed = tmp_path / "fixed" / "sglang-qwen.service"
    fixed.parent.mkdir()
    fixed.write_text(text)
    result = _run("preflight", "--unit-file", fixed, "--root", PREFLIGHT, "--no-gpu", "--no-port")
    assert result.returncode == 0, result.stdout
    assert "sglang-qwen.service" in result.stdout


def test_spec_v2_without_extra_buffer_or_with_radix_cache_off() -> None:
    values = {"--disable-radix-cache": 0, "--mamba-radix-cache-strategy extra_buffer": 0}
    for flag, code in values.items():
        command = [
            *("python", "-m", "sglang.launch_server", "--model-path", MODEL),
            *("--speculative-algorithm", "NEXTN", *flag.split()),
        ]
        result = _run("preflight", "--root", PREFLIGHT, "--no-gpu", "--no-port", "--", *command)
        assert result.returncode == code, (flag, result.stdout)


# -- the other checks, on command lines ---------------------------------------------------


def _command(*args: str, env: dict[str, str] | None = None, gpu: bool = False) -> dict:
    options = () if gpu else ("--no-gpu",)
    result = _run(
        "preflight", "--root", PREFLIGHT, "--no-port", *options, "-f", "json", "--", *args, env=env
    )
    return _json(result)


SGLANG = ("python3", "-m", "sglang.launch_server", "--model-path", "/models/none")


def test_tp_larger_than_the_visible_gpus() -> None:
    report = _command(*SGLANG, "--tp-size", "8", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    finding = _finding(report, "tp-size-exceeds-visible-gpus")
    assert finding["role"] == "root_cause"
    assert "needs 8 GPUs" in finding["explanation"] and "see only 4" in finding["explanation"]
    assert finding["evidence"][0]["source"] == preflight.COMMAND_LINE
    assert finding["patch"]["args_add"] == ["--tp-size", "4"]
    fine = _command(*SGLANG, "--tp", "4", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert fine["findings"] == []


def test_tp_in_a_unit_points_at_its_lines(tmp_path: Path) -> None:
    unit = tmp_path / "vllm.service"
    unit.write_text(
        "[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0,1\n"
        "ExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B --tensor-parallel-size 4\n"
    )
    result = _run("preflight", "--unit-file", unit, "--no-gpu", "--no-port", "-f", "json")
    assert result.returncode == 1
    finding = _finding(_json(result), "tp-size-exceeds-visible-gpus")
    lines = {(e["source"], e["line"]) for e in finding["evidence"]}
    assert (str(unit), 3) in lines and (str(unit), 2) in lines
    assert "--tensor-parallel-size 2" in finding["patch"]["dropin"]


def test_a_vllm_flag_in_an_sglang_command() -> None:
    report = _command(*SGLANG, "--gpu-memory-utilization", "0.9")
    finding = _primary(report)
    assert finding["signature"] == "launch-unrecognized-arguments"
    assert "`--gpu-memory-utilization`" in finding["explanation"]
    assert "--mem-fraction-static" in finding["explanation"]


def test_vllm_speculative_config_in_sglang_becomes_sglang_flags() -> None:
    report = _command(
        *SGLANG, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}'
    )
    finding = _primary(report)
    assert finding["signature"] == "other-engine-speculative-flags"
    assert finding["patch"]["args_remove"] == ["--speculative-config"]
    assert finding["patch"]["args_add"][:2] == ["--speculative-algorithm", "NEXTN"]
    sgl_in_vllm = _command(
        "vllm", "serve", "m", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"
    )
    patch = _primary(sgl_in_vllm)["patch"]
    assert patch["args_add"] == [
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 3}',
    ]


def test_enable_reasoning_in_sglang() -> None:
    finding = _primary(_command(*SGLANG, "--enable-reasoning", "--reasoning-parser", "qwen3"))
    assert finding["signature"] == "enable-reasoning-flag"
    assert finding["patch"]["args_remove"] == ["--enable-reasoning"]


def test_invalid_parser_names_are_flagged_with_the_valid_list() -> None:
    finding = _primary(_command(*SGLANG, "--tool-call-parser", "qwen3"))
    assert finding["signature"] == "invalid-tool-call-parser"
    assert "qwen25" in finding["explanation"] and "qwen3_coder" in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--tool-call-parser", "qwen25"]
    reasoning = _primary(_command("vllm", "serve", "m", "--reasoning-parser", "deepseek-r1"))
    assert reasoning["signature"] == "invalid-reasoning-parser"
    assert reasoning["patch"]["args_add"] == ["--reasoning-parser", "deepseek_r1"]
    assert _command(*SGLANG, "--tool-call-parser", "qwen3_coder")["findings"] == []
    plugin = ("vllm", "serve", "m", "--tool-call-parser", "mine", "--tool-parser-plugin", "p.py")
    assert _command(*plugin)["findings"] == []


def test_the_port_already_bound() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run(
            "preflight", "--no-gpu", "-f", "json", "--",
            *SGLANG, "--host", "127.0.0.1", "--port", str(port),
        )  # fmt: skip
    report = _json(result)
    finding = _primary(report)
    assert finding["signature"] == "http-port-in-use"
    assert f"127.0.0.1:{port} is already in use" in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--port", str(port + 1)]
    assert finding["phase"] == "http_server"
    free = _run("preflight", "--no-gpu", "--", *SGLANG, "--host", "127.0.0.1", "--port", str(port))
    assert free.returncode == 0, free.stdout


# -- a fake nvidia-smi --------------------------------------------------------------------


def test_another_process_holds_memory_on_the_target_gpus(tmp_path: Path) -> None:
    leftover = "51933, sglang::scheduler_TP2, GPU-00000002-aaaa-bbbb-cccc-dddddddddddd, 1140\\n"
    env = fake_nvidia_smi(tmp_path, [leftover])
    report = _seed("--no-port", env=env)
    finding = _finding(report, "gpu-memory-held-by-other-process")
    assert "process 51933 (sglang::scheduler_TP2)" in finding["explanation"]
    assert finding["patch"] is None and "stop process 51933" in finding["patch_note"]
    assert any(e["source"] == "nvidia-smi" and "51933" in e["text"] for e in finding["evidence"])
    assert _primary(report)["signature"] == "sglang-spec-v2-required"  # the first to fail
    # the same process on a GPU the server does not use is no one's business
    command = ("python3", "-m", "sglang.launch_server", "--model-path", MODEL, "--tp", "2")
    elsewhere = _command(*command, env={**env, "CUDA_VISIBLE_DEVICES": "0,1"}, gpu=True)
    assert elsewhere["findings"] == []
    there = _command(*command, env={**env, "CUDA_VISIBLE_DEVICES": "2,3"}, gpu=True)
    assert _primary(there)["signature"] == "gpu-memory-held-by-other-process"


def test_a_model_too_large_for_tp_1(tmp_path: Path) -> None:
    env = fake_nvidia_smi(tmp_path, [], IDLE_ROWS)
    command = ("python3", "-m", "sglang.launch_server", "--model-path", MODEL, "--tp-size", "1")
    report = _command(*command, env=env, gpu=True)
    finding = _primary(report)
    assert finding["signature"] == "model-too-large-for-tp"
    assert "234 GB" in finding["explanation"] and "150.8 GB" in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--tp-size", "2"]
    fits = _command(*command[:-1], "4", env=env, gpu=True)
    assert "model-too-large-for-tp" not in {f["signature"] for f in fits["findings"]}


# -- every real unit ----------------------------------------------------------------------

REAL_UNITS = sorted((FIXTURES / "units").glob("*.service"))


@pytest.mark.parametrize("unit", REAL_UNITS, ids=[u.name for u in REAL_UNITS])
def test_every_real_unit_runs_through(unit: Path, tmp_path: Path) -> None:
    result = _run(
        "preflight", "--unit-file", unit, "--root", tmp_path, "--no-gpu", "--no-port", "-f", "json"
    )
    assert result.returncode in (0, 1), result.stderr
    json.loads(result.stdout)


def test_real_unit_findings() -> None:
    options = PreflightOptions(unit_file=FIXTURES / "units/002-vibe-stack-vllm-docker.service")
    options.gpu = options.port = False
    result = run_preflight(options, [], lambda _: None)
    assert result.diagnosis.engine == "vllm" and result.diagnosis.findings == []
    options.unit_file = FIXTURES / "units/019-aur-sglang-template@.service"
    notes = run_preflight(options, [], lambda _: None).diagnosis.notes
    assert any("$SGLANG_OPTS" in n for n in notes)


# -- the pure core ------------------------------------------------------------------------


def test_doctests() -> None:
    assert doctest.testmod(preflight).failed == 0


def test_parse_command_forms() -> None:
    docker = preflight.parse_command(
        ["/usr/bin/docker", "run", "--name", "v", "--gpus", "all", "-e", "A=1",
         "-p", "8001:8000", "vllm/vllm-openai:latest", "Qwen/Qwen3.5-9B",
         "--port", "8000", "--tool-call-parser", "hermes"]
    )  # fmt: skip
    assert docker.engine == "vllm" and docker.args["model_path"] == "Qwen/Qwen3.5-9B"
    assert docker.environment == {"A": "1"} and docker.published == {8000: 8001}
    underscores = preflight.parse_command(["vllm", "serve", "m", "--load_format", "mistral"])
    assert underscores.args["load_format"] == "mistral"
    api = preflight.parse_command(
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "2"]
    )
    assert (api.engine, api.args["model_path"], api.args["tp_size"]) == ("vllm", "m", "2")
    assert preflight.parse_command(["/usr/bin/llama-server", "-m", "x.gguf"]).engine is None


def test_model_values_find_hybrid_models() -> None:
    config = json.loads((PREFLIGHT / "models/Qwen3.5-122B-A10B/config.json").read_text())
    values = preflight.model_values(preflight.ModelFacts("m", config, 234_000_000_000))
    assert values["model_is_hybrid"] is True and values["model_weights_gb"] == 234
    assert values["model_max_context"] == 262144
    dense = preflight.model_values(
        preflight.ModelFacts("m", {"architectures": ["LlamaForCausalLM"]})
    )
    assert dense["model_is_hybrid"] is False


def test_membership_conditions() -> None:
    values = {"p": "qwen3", "valid": ["qwen25", "qwen3_coder"], "n": 3}
    assert expr.Condition("p not in valid").holds(values)
    assert not expr.Condition("p in valid").holds(values)
    assert expr.Condition("p in 'qwen25, qwen3'").holds(values)
    assert not expr.Condition("missing not in valid").holds(values)  # a missing name: False
    assert expr.Condition("p not in valid").names == {"p", "valid"}
    assert expr.format_number(["a", 1.0]) == "a, 1"


# -- the unit's sandbox -----------------------------------------------------------------------

HARDENED = """\
[Service]
User=root
ExecStart=/usr/bin/vllm serve /home/ml/models/Qwen3-8B --tensor-parallel-size 1
{settings}
"""


def _sandbox_findings(tmp_path: Path, settings: str) -> list[dict]:
    unit = tmp_path / "vllm.service"
    unit.write_text(HARDENED.format(settings=settings), encoding="utf-8")
    result = _run("preflight", "--unit-file", unit, "--no-gpu", "--no-port", "-f", "json")
    report = _json(result)
    return [f for f in report["findings"] if f["signature"] == "systemd-sandbox-blocks-engine"]


@pytest.mark.parametrize(
    ("settings", "setting", "patch"),
    [
        ("PrivateDevices=yes", "PrivateDevices=yes", {"Service.PrivateDevices": "no"}),
        (
            "DevicePolicy=closed",
            "DevicePolicy=closed",
            {"Service.DeviceAllow": "char-nvidia-frontend rw"},
        ),
        (
            "ProtectClock=yes",
            "ProtectClock=yes",
            {"Service.DeviceAllow": "char-nvidia-frontend rw"},
        ),
        (
            "RestrictAddressFamilies=AF_INET AF_INET6",
            "RestrictAddressFamilies=AF_INET AF_INET6",
            {"Service.RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK"},
        ),
        (
            "RestrictAddressFamilies=~AF_UNIX",
            "RestrictAddressFamilies=~AF_UNIX",
            {"Service.RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK"},
        ),
        ("IPAddressDeny=any", "IPAddressDeny=any", {"Service.IPAddressAllow": "localhost"}),
        ("ProtectSystem=strict", "ProtectSystem=strict", {"Service.CacheDirectory": "llm"}),
    ],
)
def test_a_sandbox_setting_that_takes_away_what_the_server_needs(
    tmp_path: Path, settings: str, setting: str, patch: dict[str, str]
) -> None:
    """Each setting is reported where it is written, with the unit change that gives back
    what it takes (GPU devices, sockets, a writable cache under /root)."""
    found = _sandbox_findings(tmp_path, settings)
    assert len(found) == 1, [f["explanation"] for f in found]
    assert found[0]["evidence"][0]["text"] == setting
    assert found[0]["evidence"][0]["line"] == 4
    assert found[0]["patch"]["unit_set"] == patch


@pytest.mark.parametrize(
    "settings",
    [
        "DeviceAllow=char-nvidia-frontend rw\nDeviceAllow=char-nvidia-uvm rw\nProtectClock=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        "IPAddressDeny=any\nIPAddressAllow=localhost",
        "ProtectSystem=strict\nReadWritePaths=/root/.cache",
        "ProtectSystem=strict\nEnvironment=XDG_CACHE_HOME=/var/cache/llm\nCacheDirectory=llm",
        "ProtectSystem=full\nProtectHome=read-only\nEnvironment=HOME=/opt/llm",
        "DeviceAllow=char-rtc r\nDeviceAllow=\nPrivateDevices=no",  # reset: no allow-list
    ],
)
def test_a_sandbox_that_leaves_the_server_what_it_needs_says_nothing(
    tmp_path: Path, settings: str
) -> None:
    assert _sandbox_findings(tmp_path, settings) == []


def test_protect_home_hides_a_model_under_home(tmp_path: Path) -> None:
    found = _sandbox_findings(tmp_path, "ProtectHome=yes")
    kinds = sorted(f["explanation"].split(": ")[1].split("=")[0] for f in found)
    assert kinds == ["ProtectHome", "ProtectHome"]  # the model, and the cache under /root
    model = next(f for f in found if "/home/ml/models/Qwen3-8B" in f["explanation"])
    assert model["patch"]["unit_set"] == {"Service.ProtectHome": "read-only"}
    cache = next(f for f in found if f is not model)
    assert cache["patch"]["env_set"]["HF_HOME"] == "/var/cache/llm/hf"


def test_the_real_unit_with_strict_protection_and_no_cache_path() -> None:
    """016 of the collected units: ProtectSystem=strict and ProtectHome=true with no cache
    variable, so downloads and compiled kernels have nowhere to go."""
    report = _json(
        _run(
            "preflight",
            "--unit-file",
            FIXTURES / "units/016-vllm-infra-config@.service",
            "--no-gpu",
            "--no-port",
            "-f",
            "json",
        )
    )
    found = _finding(report, "systemd-sandbox-blocks-engine")
    assert "ProtectSystem=strict makes ~/.cache read-only" in found["explanation"]
    assert found["evidence"][0]["text"] == "ProtectSystem=strict"
