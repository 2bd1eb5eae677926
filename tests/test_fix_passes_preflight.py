"""Every fix passes preflight before it is printed (issue 32, items 2 and 3): the merged
change is applied to the unit in memory and checked by the same preflight a user runs. The
issue's case: a 70B model on one GPU (``CUDA_VISIBLE_DEVICES=0``) runs out of memory loading
weights; the log's rule of thumb doubles the tensor-parallel size to 2, which preflight
rejects (two GPUs needed, one visible; and no room for the KV cache on 80 GB at TP 2). The fix
offered is TP 4 with four GPUs listed, computed from the weights and the GPUs, or, where the
GPUs cannot be read, no fix but what else is needed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.systemd.unit import find_unit, parse_rendered_exec_start
from tests import journalgen
from tests.conftest import FIXTURES, fake_nvidia_smi
from tests.test_preflight_model import A100_80

UNIT = "vllm-llama.service"
LOG = """\
Mar 02 09:00:00.100000 gpu-node-07 systemd[1]: Started vllm-llama.service - vLLM Llama 3.3 70B.
Mar 02 09:00:01.100000 gpu-node-07 vllm[501]: (APIServer pid=501) INFO 03-02 09:00:01 [utils.py:253] non-default args: {'model': '/models/Llama-3.3-70B-Instruct'ARGS}
Mar 02 09:00:40.100000 gpu-node-07 vllm[501]: (EngineCore_DP0 pid=620) INFO 03-02 09:00:40 [gpu_model_runner.py:2602] Starting to load model /models/Llama-3.3-70B-Instruct...
Mar 02 09:03:12.100000 gpu-node-07 vllm[501]: (EngineCore_DP0 pid=620) ERROR 03-02 09:03:12 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.
Mar 02 09:03:13.100000 gpu-node-07 systemd[1]: vllm-llama.service: Main process exited, code=exited, status=1/FAILURE
"""

pytestmark = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl",
)


def _root(tmp_path: Path, tp: int = 1, gpus: str = "0") -> tuple[Path, Path]:
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "preflight/models/Llama-3.3-70B-Instruct",
                    root / "models/Llama-3.3-70B-Instruct")  # fmt: skip
    system = root / "etc/systemd/system"
    system.mkdir(parents=True)
    (system / UNIT).write_text(
        f"[Service]\nEnvironment=CUDA_VISIBLE_DEVICES={gpus}\n"
        "ExecStart=/usr/bin/vllm serve /models/Llama-3.3-70B-Instruct "
        f"--tensor-parallel-size {tp}\n"
    )
    args = f", 'tensor_parallel_size': {tp}" if tp > 1 else ""  # vLLM logs non-defaults only
    entries = journalgen.entries_from_short(LOG.replace("ARGS", args), UNIT)
    return root, journalgen.write_journal(entries, tmp_path / "oom.journal")


def _journal(root: Path, journal: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    import os

    return subprocess.run(
        [sys.executable, "-m", "diagnose", "journal", "-u", UNIT, "--file", str(journal),
         "--root", str(root), *args],
        capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _preflight(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "diagnose", "preflight", "-u", UNIT, "--root", str(root),
         "--no-port"], capture_output=True, text=True, check=False, env={**os.environ, **env},
    )  # fmt: skip


def test_the_issue_case_gets_a_computed_tp_and_the_gpus_listed(tmp_path: Path) -> None:
    """One visible GPU, TP 1: the log alone names no size (vLLM logs only non-defaults), and
    preflight computes it: TP 4, with CUDA_VISIBLE_DEVICES widened to four GPUs."""
    root, journal = _root(tmp_path)
    env = fake_nvidia_smi(tmp_path, [], A100_80)
    result = _journal(root, journal, "--patch-only", env=env)
    assert result.returncode == 1, result.stderr
    dropin = result.stdout
    assert "Environment=CUDA_VISIBLE_DEVICES=0,1,2,3" in dropin
    argv = parse_rendered_exec_start(dropin)
    assert argv is not None and argv[argv.index("--tensor-parallel-size") + 1] == "4"
    flat = " ".join(_journal(root, journal, env=env).stdout.split())
    assert "checked: preflight passes the unit with this drop-in applied" in flat
    assert "from preflight" in flat
    # applied for real, the unit passes preflight as the user runs it
    applied = _journal(root, journal, "--apply", env=env)
    assert applied.returncode == 1, applied.stderr
    config = find_unit(UNIT, root)
    assert config is not None
    assert config.effective_environment["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    check = _preflight(root, env)
    assert check.returncode == 0, check.stdout


def test_a_doubled_tp_is_checked_and_its_gpus_listed(tmp_path: Path) -> None:
    """TP 2 on GPUs 0,1: the log's fix (TP 4) fits the memory, but needs four GPUs listed:
    CUDA_VISIBLE_DEVICES is widened with it."""
    root, journal = _root(tmp_path, tp=2, gpus="0,1")
    env = fake_nvidia_smi(tmp_path, [], A100_80)
    result = _journal(root, journal, "--patch-only", env=env)
    assert result.returncode == 1, result.stderr
    assert "Environment=CUDA_VISIBLE_DEVICES=0,1,2,3" in result.stdout
    argv = parse_rendered_exec_start(result.stdout)
    assert argv is not None and argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert _journal(root, journal, "--apply", env=env).returncode == 1
    assert _preflight(root, env).returncode == 0


def test_without_the_gpus_no_failing_fix_is_printed(tmp_path: Path) -> None:
    """Without nvidia-smi the host's other GPUs are unknown: TP 4 with two GPUs listed would
    fail, so no drop-in is offered; the report says what else it needs."""
    root, journal = _root(tmp_path, tp=2, gpus="0,1")
    result = _journal(root, journal, "--no-gpu", "--patch-only")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "still fails" in result.stderr and "tp-size-exceeds-visible-gpus" in result.stderr
    report = " ".join(_journal(root, journal, "--no-gpu").stdout.split())
    assert "systemctl restart" not in report
    assert "needs 4 GPUs; CUDA_VISIBLE_DEVICES gives 2" in report
    refused = _journal(root, journal, "--no-gpu", "--apply")
    assert refused.returncode == 2 and "still fails" in refused.stderr
