"""The corpus (issue 32, "what it must show"): the 25 real units of fixtures/units and written
units for each problem preflight fixes, both engines, several releases. For each, preflight's
``--patch-only`` either prints nothing and exits 2, or prints a drop-in that systemd accepts
(``systemd-analyze verify``) and that, installed beside the unit, leaves preflight nothing to
say of what it fixed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

ROOT = FIXTURES / "preflight"  # models, SGLang 0.5.10 and vLLM 0.12.0 installed, passwd
SGLANG = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server"  # 0.5.10, installed
VLLM = "/opt/vllm/.venv/bin/vllm serve"  # 0.12.0, installed
LLAMA = "/models/Llama-3.3-70B-Instruct"
QWEN = "/models/Qwen2.5-7B-Instruct"
HYBRID = "/models/Qwen3.5-122B-A10B"

WRITTEN: dict[str, str] = {
    "vllm-tp6-heads": f"{VLLM} {LLAMA} --tensor-parallel-size 6",
    "vllm-kv-heads-tp7": f"{VLLM} {QWEN} -tp 7",
    "vllm-context-long": f"{VLLM} {QWEN} --max-model-len 131072",
    "vllm-context-128k": f"{VLLM} {QWEN} --max-model-len 128k",
    "vllm-context-yarn": f"{VLLM} {QWEN} --max-model-len 131072 --hf-overrides "
    '\'{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
    '"original_max_position_embeddings": 32768}}\'',
    "sglang-context-long": f"{SGLANG} --model-path {QWEN} --context-length 65536",
    "vllm-auto-tool": f"{VLLM} {QWEN} --enable-auto-tool-choice",
    "vllm-auto-tool-llama": f"{VLLM} {LLAMA} -tp 8 --enable-auto-tool-choice",
    "vllm-spec-model": f"{VLLM} {QWEN} --speculative-model /models/draft "
    "--num-speculative-tokens 5",
    "vllm-spec-ngram": f"{VLLM} {QWEN} --speculative-model '[ngram]' "
    "--ngram-prompt-lookup-max 4 --num-speculative-tokens 3",
    "vllm-rope-scaling": f"{VLLM} {QWEN} --rope-scaling "
    '\'{"rope_type": "dynamic", "factor": 2.0}\'',
    "vllm-enable-reasoning": f"{VLLM} {QWEN} --enable-reasoning --reasoning-parser deepseek_r1",
    "sglang-seed-spec-v2": f"{SGLANG} --model-path {HYBRID} --tp-size 4 "
    "--speculative-algorithm NEXTN --speculative-num-steps 3",
    "sglang-vllm-flag": f"{SGLANG} --model-path {QWEN} --gpu-memory-utilization 0.9",
    "sglang-bad-tool-parser": f"{SGLANG} --model-path {QWEN} --tool-call-parser qwen3",
    "sglang-two-problems": f"{SGLANG} --model-path {HYBRID} --tp-size 4 "
    "--speculative-algorithm NEXTN --tool-call-parser qwen3",
    "sglang-enable-reasoning": f"{SGLANG} --model-path {QWEN} --enable-reasoning "
    "--reasoning-parser qwen3",
    "vllm-spec-in-sglang": f"{SGLANG} --model-path {QWEN} --speculative-config "
    '\'{"method": "mtp", "num_speculative_tokens": 2}\'',
    "vllm-fine": f"{VLLM} {QWEN} -tp 4 --max-model-len 32768",
}


def _written(tmp_path: Path) -> list[tuple[str, Path]]:
    out = []
    for name, command in WRITTEN.items():
        unit = tmp_path / f"{name}.service"
        unit.write_text(f"[Service]\nUser=sglang\nExecStart={command}\n")
        out.append((name, unit))
    return out


REAL = sorted((FIXTURES / "units").glob("*.service"))
CASES = [*(u.name for u in REAL), *WRITTEN]


def _preflight(unit: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", "preflight", "--unit-file", str(unit),
         "--root", str(ROOT), "--no-gpu", "--no-port", *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def _failures(unit: Path) -> set[tuple[str, str]]:
    report = json.loads(_preflight(unit, "-f", "json").stdout)
    return {
        (f["signature"], f["evidence"][0].get("message") or "" if f["evidence"] else "")
        for f in report["findings"]
        if f["role"] == "root_cause" and f["severity"] in ("critical", "error")
    }


def _accepted_by_systemd(dropin: str, tmp_path: Path) -> None:
    """The drop-in beside a stand-in unit: systemd-analyze reports nothing of its lines but
    a command that is not installed here."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze")
    stub = tmp_path / "verify" / "stub.service"
    (stub.parent / "stub.service.d").mkdir(parents=True)
    stub.write_text("[Service]\nExecStart=/bin/true\n")
    (stub.parent / "stub.service.d/zz-diagnose.conf").write_text(dropin)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(stub)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if "Failed to" in result.stderr and "bus" in result.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {result.stderr.strip()}")
    complaints = [
        line
        for line in result.stderr.splitlines()
        if "zz-diagnose.conf" in line and "is not executable" not in line
    ]
    assert not complaints, complaints


@pytest.mark.parametrize("case", CASES)
def test_every_printed_fix_is_accepted_and_passes_preflight(case: str, tmp_path: Path) -> None:
    if case in WRITTEN:
        unit = dict(_written(tmp_path))[case]
    else:
        unit = tmp_path / case
        shutil.copy(FIXTURES / "units" / case, unit)
    printed = _preflight(unit, "--patch-only")
    if printed.returncode == 2 or not printed.stdout:
        assert printed.stdout == ""
        assert "no drop-in to print: " in printed.stderr
        return
    assert printed.returncode in (0, 1), printed.stderr
    _accepted_by_systemd(printed.stdout, tmp_path)
    report = json.loads(_preflight(unit, "-f", "json").stdout)
    fixed = {change["signature"] for change in report["fix"]["changes"]}
    before = _failures(unit)
    (tmp_path / f"{unit.name}.d").mkdir()
    (tmp_path / f"{unit.name}.d/zz-diagnose.conf").write_text(printed.stdout)
    after = _failures(unit)
    assert not {f for f in after if f[0] in fixed}, after  # what it fixed is fixed
    assert after <= before, after - before  # and nothing new fails


def test_the_corpus_has_forty_units() -> None:
    assert len(CASES) >= 40
    engines = {"vllm" if "vllm" in c else "sglang" for c in WRITTEN}
    assert engines == {"vllm", "sglang"}
