"""An engine built by a program's Python code: the fix's flags said as the keyword arguments
of the program's call, and a class of the program that refused one named; a server started
from its command line (a console script, ``python -m``, a script's ``main()``) keeps its
flags as they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.core.models import Confidence, Finding, Patch, Role, Severity
from diagnose.core.pythonlaunch import PythonLaunch, in_python, python_launch

REPO = Path(__file__).resolve().parent.parent

KV_ERROR = (
    "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens "
    "that can be stored in KV cache (62896). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine."
)
# The shape of canopyai/Orpheus-TTS's start (a wrapper class that builds vLLM's engine), the
# engine's frames as vLLM 0.7 prints them.
WRAPPED = f"""\
Traceback (most recent call last):
  File "/home/<user>/code/tts/./a.py", line 5, in <module>
    model = OrpheusModel(model_name="canopylabs/orpheus-tts-0.1-finetune-prod", max_model_len=2048)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
TypeError: OrpheusModel.__init__() got an unexpected keyword argument 'max_model_len'
[rank0]: Traceback (most recent call last):
[rank0]:   File "/home/<user>/code/tts/./a.py", line 5, in <module>
[rank0]:     model = OrpheusModel(model_name="canopylabs/orpheus-tts-0.1-finetune-prod")
[rank0]:   File "/opt/venv/lib/python3.12/site-packages/orpheus_tts/engine_class.py", line 24, in __init__
[rank0]:     self.engine = self._setup_engine()
[rank0]:   File "/opt/venv/lib/python3.12/site-packages/vllm/engine/async_llm_engine.py", line 639, in from_engine_args
[rank0]:     return async_engine_cls.from_vllm_config(
[rank0]:   File "/opt/venv/lib/python3.12/site-packages/vllm/worker/worker.py", line 263, in determine_num_available_blocks
[rank0]:     raise_if_cache_size_invalid(num_gpu_blocks,
[rank0]: {KV_ERROR}
"""
SERVED = f"""\
Traceback (most recent call last):
  File "/opt/venv/bin/vllm", line 8, in <module>
    sys.exit(main())
  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/cli/main.py", line 54, in main
    args.dispatch_function(args)
  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 83, in __init__
    self._initialize_kv_caches(vllm_config)
{KV_ERROR}
"""
SCRIPT_MAIN = SERVED.replace(
    '"/opt/venv/bin/vllm", line 8, in <module>\n    sys.exit(main())',
    '"/srv/launch_server.py", line 40, in <module>\n    main()',
)
OFFLINE = f"""\
Traceback (most recent call last):
  File "/home/<user>/eval/run.py", line 12, in <module>
    llm = LLM(model="Qwen/Qwen2.5-7B-Instruct", enforce_eager=False)
  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 243, in __init__
    self.llm_engine = LLMEngine.from_engine_args(
{KV_ERROR}
"""


def _finding(args_add: list[str], args_remove: tuple[str, ...] = ()) -> Finding:
    return Finding(
        id="f1",
        signature="vllm-kv-cache-below-max-model-len",
        title="The KV cache cannot hold one request",
        severity=Severity.CRITICAL,
        category="context_length",
        role=Role.ROOT_CAUSE,
        confidence=Confidence.HIGH,
        evidence=[],
        explanation="...",
        patch=Patch(args_add=args_add, args_remove=list(args_remove)),
    )


def test_a_wrapper_class_that_built_the_engine_is_the_call_and_its_refusal_is_named() -> None:
    launch = python_launch(WRAPPED.splitlines(), [KV_ERROR])
    assert launch is not None
    assert (launch.file, launch.line) == ("/home/<user>/code/tts/./a.py", 5)
    assert launch.code.startswith("model = OrpheusModel(")
    assert launch.refused == (("OrpheusModel", "max_model_len"),)


def test_a_paste_that_cut_the_engines_frames_is_read_by_its_evidence() -> None:
    lines = [line for line in WRAPPED.splitlines() if "site-packages" not in line]
    lines = [line for line in lines if "self.engine" not in line and "return " not in line]
    assert python_launch(lines) is None  # no engine frame, no evidence: nothing to go on
    assert python_launch(lines, [f"[rank0]: {KV_ERROR}"]) is not None


@pytest.mark.parametrize("log", [SERVED, SCRIPT_MAIN], ids=["console-script", "script-main"])
def test_a_server_started_from_its_command_line_is_no_python_launch(log: str) -> None:
    assert python_launch(log.splitlines(), [KV_ERROR]) is None


def test_flags_become_keyword_arguments_and_a_dropped_flag_leaves_the_call() -> None:
    launch = python_launch(OFFLINE.splitlines())
    assert launch is not None and launch.refused == ()
    fixed = in_python(
        _finding(
            ["--max-model-len", "62896", "--enforce-eager", "--kv-cache-dtype", "fp8"],
            ("--max-model-len", "--speculative-config"),
        ),
        launch,
    )
    note = fixed.patch_note or ""
    assert "`/home/<user>/code/tts" not in note and "`/home/<user>/eval/run.py`, line 12" in note
    assert "max_model_len=62896, enforce_eager=True, kv_cache_dtype='fp8'" in note
    assert "leave `speculative_config` out of that call" in note
    assert "refused" not in note


def test_a_finding_without_flags_is_left_as_it_is() -> None:
    finding = _finding([])
    assert in_python(finding, PythonLaunch("/a.py", 1, "llm = LLM()")) is finding


def _report(path: Path, text: str) -> dict[str, object]:
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_the_report_says_the_fix_for_the_programs_call(tmp_path: Path) -> None:
    report = _report(tmp_path / "tts.log", WRAPPED)
    findings: list[dict[str, str]] = report["findings"]  # type: ignore[assignment]
    primary = next(f for f in findings if f["id"] == report["primary"])
    assert primary["category"] == "context_length"
    assert "line 5" in primary["patch_note"] and "max_model_len=" in primary["patch_note"]
    assert "`OrpheusModel` refused `max_model_len`" in primary["patch_note"]
    served: list[dict[str, str]] = _report(tmp_path / "served.log", SERVED)["findings"]  # type: ignore[assignment]
    assert served and all("built by Python code" not in (f["patch_note"] or "") for f in served)
