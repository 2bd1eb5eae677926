"""Reasoning about the whole incident (issue 14): each fixture of ``fixtures/reasoning`` run as a
user runs it (``diagnose file X --format json``) against what ``expected.yaml`` says it shows.

The fields are documented at the top of ``expected.yaml``; each is one check below. A case that
the tool cannot yet reason about is marked xfail with what is missing (``PENDING``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnose.core.models import Confidence
from diagnose.knowledge import mined
from tests.conftest import REPO, by_signature, invoke, primary, run_text

HERE = REPO / "fixtures" / "reasoning"
EXPECTED: list[dict[str, Any]] = yaml.safe_load((HERE / "expected.yaml").read_text())["fixtures"]

PENDING: dict[str, str] = {}
"""Fixture -> what the tool still lacks to reason about it (the case runs as xfail)."""


def _cases() -> list[Any]:
    cases = []
    for entry in EXPECTED:
        marks = []
        if entry["file"] in PENDING:
            marks.append(pytest.mark.xfail(reason=PENDING[entry["file"]], strict=True))
        cases.append(pytest.param(entry, id=entry["file"], marks=marks))
    return cases


def _report(path: Path) -> tuple[int, dict[str, Any]]:
    result = invoke(["file", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def _primary(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in report["findings"] if f["id"] == report["primary"]), None)


def _check_unit(report: dict[str, Any], expect: dict[str, Any], where: str) -> None:
    """The primary finding of ``report`` against one ``expect`` mapping."""
    primary = _primary(report)
    category = expect.get("category")
    if category is None:
        assert primary is None, (
            f"{where}: expected no finding, got {primary and primary['signature']}"
        )
        return
    assert primary is not None, f"{where}: expected {category}, got no finding"
    allowed = {category, *expect.get("accept", [])}
    assert primary["category"] in allowed, (
        f"{where}: primary {primary['category']} ({primary['signature']}), expected {allowed}"
    )
    if "evidence" in expect:
        texts = [e["text"] for e in primary["evidence"]]
        assert any(expect["evidence"] in t for t in texts), (
            f"{where}: no evidence line holds {expect['evidence']!r}: {texts}"
        )
    if "phase" in expect:
        assert primary["phase"] == expect["phase"], f"{where}: phase {primary['phase']}"
    for text in expect.get("mentions", []):
        assert text in primary["explanation"], f"{where}: explanation lacks {text!r}"
    patch = primary["patch"] or {}
    forbid = expect.get("forbid", {})
    assert primary["category"] not in forbid.get("categories", [])
    for key in forbid.get("unit_set", []):
        assert key not in patch.get("unit_set", {}), f"{where}: patch sets {key}"
    for flag in forbid.get("args_add", []):
        assert flag not in patch.get("args_add", []), f"{where}: patch adds {flag}"
    wanted = expect.get("patch", {})
    for name, part in wanted.get("env_contains", {}).items():
        env = patch.get("env_set", {})
        value = env.get(name, env.get(name.upper()))
        assert value is not None and part in value, f"{where}: {name}={value!r} lacks {part!r}"
    for key in wanted.get("unit_set_keys", []):
        assert key in patch.get("unit_set", {}), f"{where}: patch does not set {key}"
    for flag in wanted.get("args_add", []):
        assert flag in patch.get("args_add", []), f"{where}: patch does not add {flag}"
    for consequence in expect.get("consequences", []):
        found = [f for f in report["findings"] if f["category"] == consequence]
        assert found, f"{where}: no {consequence} finding"
        assert all(f["caused_by"] == primary["id"] for f in found), f"{where}: {consequence}"


@pytest.mark.parametrize("entry", _cases())
def test_reasoning_fixture(entry: dict[str, Any], in_repo: Path) -> None:
    expect = entry.get("expect", {})
    code, report = _report(Path("fixtures/reasoning") / entry["file"])
    assert code == expect["exit_code"], (
        f"exit {code}: {[f['signature'] for f in report['findings']]}"
    )
    if "split" in entry:
        units = {u["unit"]: u for u in report["units"]}
        assert sorted(units) == sorted(entry["split"])
        for name, unit_expect in entry["units"].items():
            _check_unit(units[name], unit_expect or {}, name)
        return
    _check_unit(report, expect, entry["file"])
    timeline = report.get("timeline") or {}
    if "stalled_for_min" in expect:
        stalled = timeline.get("stalled_for_s")
        assert stalled is not None, "no stall measured"
        assert abs(stalled / 60 - expect["stalled_for_min"]) <= 1, stalled / 60
    if "stopped_by" in expect:
        assert timeline.get("stopped_by") == expect["stopped_by"]


HEALTHY = sorted(
    [
        *(REPO / "fixtures/samples/healthy").iterdir(),
        *(REPO / "benchmarks/accuracy/healthy").iterdir(),
        *HERE.glob("healthy-*"),
    ]
)


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_healthy_logs_stay_without_finding(path: Path, tmp_path: Path) -> None:
    """Clean starts, traffic and operator stops after ready: nothing to report."""
    if path.suffix == ".yaml":  # the benchmark keeps each healthy log in a case file
        log = tmp_path / f"{path.stem}.log"
        log.write_text(yaml.safe_load(path.read_text())["log"])
        path = log
    result = invoke(["file", str(path), "--format", "json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0, [f["signature"] for f in report["findings"]]


def test_single_unit_report_keeps_its_shape(in_repo: Path) -> None:
    """A log of one unit: no ``units`` split, the report reads as before."""
    _, report = _report(Path("fixtures/reasoning/after-ready-sglang-oom.journal.txt"))
    assert report["units"] == []
    assert report["unit"] == "sglang-qwen.service" or report["unit"]


SERVED = """\
[2026-03-04 09:41:15] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=1, port=30000)
[2026-03-04 09:41:40] Load weight begin. avail mem=78.81 GB
[2026-03-04 09:41:50] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=63.37 GB, mem usage=15.44 GB.
[2026-03-04 09:42:20] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-03-04 09:42:25] The server is fired up and ready to roll!
[2026-03-04 09:50:01] INFO:     10.0.7.40:52210 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def test_an_unknown_crash_after_ready_is_a_run_time_failure() -> None:
    """No signature knows the exception; the process died after ready: a finding, exit 1."""
    log = SERVED + (
        "[2026-03-04 09:56:48] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/opt/sglang/srt/managers/scheduler.py", line 2569, in run_scheduler_process\n'
        "KeyError: 'frobnicate_cache'\n"
        "[2026-03-04 09:56:48] Received sigquit from a child process. It usually means the child "
        "failed.\n"
        "Killed\n"
    )
    diagnosis = run_text(log)
    cause = primary(diagnosis)
    assert cause is not None and cause.phase == "serving"
    assert any("frobnicate_cache" in e.text for e in cause.evidence)
    assert "ready and serving" in cause.explanation


def test_request_errors_after_ready_without_a_death_are_no_failure() -> None:
    """An error a request caused, logged while the server goes on serving, is no incident."""
    log = SERVED + (
        "[2026-03-04 09:51:02] ERROR:    Exception in ASGI application: ValueError: "
        "invalid literal for int() with base 10: 'abc'\n"
        '[2026-03-04 09:51:02] INFO:     10.0.7.40:52214 - "POST /generate HTTP/1.1" 400 Bad Request\n'
        "[2026-03-04 09:52:11] Decode batch. #running-req: 1, #token: 412, token usage: 0.00\n"
    )
    assert primary(run_text(log)) is None


def test_a_kill_after_an_error_is_not_called_host_memory() -> None:
    """SIGKILL after the engine said a child died is its own doing, not the OOM killer."""
    log = (
        SERVED.splitlines()[0]
        + "\n"
        + (
            "[2026-03-04 09:41:40] Load weight begin. avail mem=78.81 GB\n"
            "[2026-03-04 09:41:45] Received sigquit from a child process. It usually means the child "
            "failed.\n"
            "Killed\n"
        )
    )
    cause = primary(run_text(log))
    assert cause is None or cause.category != "host_oom"


def test_units_of_a_json_export_are_split_by_their_own_field(tmp_path: Path) -> None:
    """``journalctl -o json`` names each line's unit: two services, two diagnoses."""
    entries = [
        ("1000", "systemd", "1", None, "Started a.service - A."),
        (
            "2000",
            "python3",
            "11",
            "a.service",
            "[2026-03-17 10:00:14] The server is fired up and ready to roll!",
        ),
        ("3000", "systemd", "1", None, "Started b.service - B."),
        (
            "4000",
            "vllm",
            "22",
            "b.service",
            "(APIServer pid=22) Traceback (most recent call last):",
        ),
        (
            "4001",
            "vllm",
            "22",
            "b.service",
            '(APIServer pid=22)   File "/opt/vllm/api_server.py", line 1838, in create_server_socket',
        ),
        ("4002", "vllm", "22", "b.service", "(APIServer pid=22)     sock.bind(addr)"),
        (
            "4003",
            "vllm",
            "22",
            "b.service",
            "(APIServer pid=22) OSError: [Errno 98] Address already in use",
        ),
        (
            "5000",
            "systemd",
            "1",
            None,
            "b.service: Main process exited, code=exited, status=1/FAILURE",
        ),
        ("5001", "systemd", "1", None, "b.service: Failed with result 'exit-code'."),
    ]
    lines = []
    for stamp, ident, pid, unit, message in entries:
        entry = {
            "__REALTIME_TIMESTAMP": f"177374{stamp}000000",
            "_HOSTNAME": "gpu-node-04",
            "SYSLOG_IDENTIFIER": ident,
            "_PID": pid,
            "MESSAGE": message,
        }
        if unit:
            entry["_SYSTEMD_UNIT"] = unit
        elif message.startswith(("Started ", "b.service")):
            entry["UNIT"] = "a.service" if "a.service" in message else "b.service"
        lines.append(json.dumps(entry))
    path = tmp_path / "two.json"
    path.write_text("\n".join(lines) + "\n")
    result = invoke(["file", str(path), "--format", "json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    units = {u["unit"]: u for u in report["units"]}
    assert sorted(units) == ["a.service", "b.service"]
    assert units["a.service"]["primary"] is None
    assert _primary(units["b.service"])["category"] == "port_in_use"
    assert report["unit"] == "b.service"


def test_a_watchdog_timeout_after_a_peer_died_names_the_peer() -> None:
    """Rank 1 raised first; rank 0's NCCL watchdog fired ten minutes later waiting for it."""
    log = (
        "[2026-03-21 01:56:01 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/opt/sglang/srt/managers/scheduler.py", line 2569, in run_scheduler_process\n'
        "AttributeError: 'NoneType' object has no attribute 'frobnicate'\n"
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
        "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds "
        "before timing out.\n"
    )
    diagnosis = run_text(log)
    cause = primary(diagnosis)
    assert cause is not None and cause.signature != "nccl-watchdog-timeout"
    assert any("frobnicate" in e.text for e in cause.evidence)
    waited = next(f for f in diagnosis.findings if f.signature == "nccl-watchdog-timeout")
    assert waited.caused_by == cause.id


def test_the_timeline_shows_the_rank_that_fell_behind() -> None:
    log = (
        "[2026-03-12 13:02:26 TP0] Init torch distributed begin.\n"
        "[2026-03-12 13:02:26 TP1] Init torch distributed begin.\n"
        "[2026-03-12 13:02:28 TP0] Load weight begin. avail mem=139.18 GB\n"
        "[2026-03-12 13:02:28 TP1] Load weight begin. avail mem=139.18 GB\n"
        "[2026-03-12 13:04:41 TP0] Load weight end. type=Qwen3MoeForCausalLM, avail mem=77.62 GB, "
        "mem usage=61.56 GB.\n"
        "[2026-03-12 13:04:44 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    )
    timeline = run_text(log).timeline
    assert timeline is not None
    ranks = {r.rank: r for r in timeline.ranks}
    assert ranks["TP0"].phase == "cuda_graph"
    assert ranks["TP1"].phase == "load_weights"
    assert [p.phase for p in timeline.phases] == [
        "dist_init",
        "load_weights",
        "kv_cache",
        "cuda_graph",
    ]


def test_known_noise_is_no_failure_even_where_a_pattern_matches_it() -> None:
    """NCCL's optional-plugin probe says 'cannot open shared object file' at INFO level."""
    log = (
        "INFO 11-11 14:17:08 pynccl.py:69] vLLM is using nccl==2.21.5\n"
        "host:18302:18445 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: "
        "cannot open shared object file: No such file or directory : when loading libnccl-net.so\n"
        "host:18302:18445 [0] NCCL INFO NET/Plugin: Using internal network plugin.\n"
    )
    ready = "INFO 11-11 14:18:40 launcher.py:27] Application startup complete.\n"
    assert primary(run_text(log + ready)) is None  # (without it, the log ends in NCCL set-up)
    missing = (
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n"
    )
    cause = primary(run_text(log + missing))
    assert cause is not None and "libcudart" in cause.evidence[0].text


_NCCL_SET_UP = (
    "INFO 11-11 14:17:08 pynccl.py:69] vLLM is using nccl==2.21.5\n"
    "host:18302:18445 [0] NCCL INFO Bootstrap : Using eth0:192.168.1.19<0>\n"
    "host:18302:18445 [0] NCCL INFO cudaDriverVersion 12060\n"
)


def test_a_log_that_ends_inside_a_quiet_span_it_cannot_time_is_no_failure_but_a_note() -> None:
    """A paste that stops in a normal start step holds no later time: it may have been cut
    there (a healthy start pasted half-way) or have hung, and only a clock tells. No failure
    is reported; a note says where it ends, what a hang there would be and how to check."""
    diagnosis = run_text(_NCCL_SET_UP)
    assert diagnosis.primary is None and diagnosis.findings == []
    [note] = diagnosis.notes
    assert "ends before the server said it was ready" in note
    assert "vLLM is using nccl==2.21.5" in note  # the last start step it shows
    assert "NCCL_P2P_DISABLE=1" in note  # the check for the hang it would be
    sglang = run_text("[2026-03-02 09:14:07 TP0] Init torch distributed begin.\n")
    assert sglang.primary is None
    assert "Init torch distributed begin." in sglang.notes[0]


def test_a_log_that_goes_on_or_ends_in_an_error_is_no_untimed_hang() -> None:
    errored = run_text(_NCCL_SET_UP + "ValueError: Loaded weights leave no GPU memory\n")
    assert by_signature(errored, "startup-silent-after-nccl-init") is None
    timed = run_text(_NCCL_SET_UP + "INFO 11-11 14:17:20 worker.py:10] Loading weights took 9s\n")
    assert by_signature(timed, "startup-silent-after-nccl-init") is None  # 12 s: no hang yet


def test_uvicorn_bare_startup_line_is_vllm_ready() -> None:
    """Older vLLM prints uvicorn's `INFO:     Application startup complete.` bare (newer:
    `(APIServer pid=N) INFO: ...`): either way the server was ready, and a kernel fault after it
    happened while serving."""
    log = (
        "INFO 03-02 10:00:01 [api_server.py:1090] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
        "INFO:     Application startup complete.\n"
        "(EngineCore_DP0 pid=4310) ERROR 03-02 10:05:12 [core.py:710] RuntimeError: CUDA error: "
        "an illegal memory access was encountered\n"
    )
    diagnosis = run_text(log)
    assert diagnosis.phase_reached == "ready"
    cause = primary(diagnosis)
    assert cause is not None and cause.phase == "serving"


def test_a_traceback_pasted_on_one_line_is_still_an_error() -> None:
    """A paste that lost its line breaks runs the exception into the frame line; the exception
    still makes it an error (a frame line alone is not one)."""
    flattened = (
        'File "/opt/app/loader.py", line 12, in load raise StoreError(path) '
        "mystore.errors.StoreError: shard 3 of 8 is unreadable\n"
    )
    assert primary(run_text(flattened)) is not None
    frame = 'File "/opt/app/loader.py", line 12, in load\n'
    assert primary(run_text(frame)) is None


_SKIPPED_MODULE = (
    "[2025-06-01 10:00:05] Ignore import error when loading sglang.srt.models.glm4v: "
    "No module named 'transformers.models.glm4v'\n"
)


def test_a_skipped_model_module_is_no_failure_of_a_start_that_did_not_fail() -> None:
    """Every SGLang start skips the modules of models it does not serve; a log that holds
    only that (here cut while loading weights) has no failure, through every tier."""
    cut = _SKIPPED_MODULE + "[2025-06-01 10:00:09 TP0] Load weight begin. avail mem=21.63 GB\n"
    assert run_text(cut).primary is None


def test_another_failure_of_the_start_outranks_a_skipped_model_module() -> None:
    oom = (
        "[2025-06-01 10:00:21 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "1.02 GiB. GPU 0 has a total capacity of 23.68 GiB of which 512.00 MiB is free.\n"
    )
    cause = primary(run_text(_SKIPPED_MODULE + oom))
    assert cause is not None and cause.category == "gpu_oom"
    assert (
        by_signature(run_text(_SKIPPED_MODULE + oom), "sglang-model-import-missing-module") is None
    )


def test_a_skipped_model_module_is_the_cause_when_its_architecture_is_then_refused() -> None:
    refused = (
        "[2025-06-01 10:00:07] ValueError: Model architectures "
        "['Glm4vForConditionalGeneration'] are not supported for now.\n"
    )
    cause = primary(run_text(_SKIPPED_MODULE + refused))
    assert cause is not None and cause.signature == "sglang-model-import-missing-module"


_EMPTY_FAILED_PROCS = (
    "(APIServer pid=4200) RuntimeError: Engine core initialization failed. See root cause "
    "above. Failed core proc(s): {}\n"
)


def test_the_empty_failed_procs_wrapper_is_left_out_behind_the_error_it_wraps() -> None:
    """vLLM's closing line points at the error before it: with one, the report names that
    error and no start-up-wait symptom (whose patch would raise timeouts for nothing)."""
    error = (
        "(EngineCore_DP0 pid=4310) ERROR 03-02 10:05:12 [core.py:708] EngineCore failed to start.\n"
        "(EngineCore_DP0 pid=4310) ERROR 03-02 10:05:12 [core.py:708] Traceback (most recent call "
        "last):\n"
        "(EngineCore_DP0 pid=4310) ERROR 03-02 10:05:12 [core.py:708] torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of "
        "which 1.10 GiB is free.\n"
    )
    diagnosis = run_text(error + _EMPTY_FAILED_PROCS)
    cause = primary(diagnosis)
    assert cause is not None and cause.category == "gpu_oom"
    signatures = {f.signature for f in diagnosis.findings}
    assert "vllm-engine-core-failed-wrapper" not in signatures
    assert "engine-ready-timeout" not in signatures
    alone = primary(run_text(_EMPTY_FAILED_PROCS))
    assert alone is not None and alone.signature == "vllm-engine-core-failed-wrapper"


def test_the_wrapper_gives_way_to_the_error_a_paste_put_below_it() -> None:
    """A pasted excerpt may put the wrapper first and the error it wraps under it: the wrapper
    still only points at that error."""
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB. GPU 0 has a "
        "total capacity of 22.03 GiB of which 582.00 MiB is free.\n"
    )
    diagnosis = run_text(_EMPTY_FAILED_PROCS + "\n" + oom)
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "cuda-out-of-memory"
    assert "vllm-engine-core-failed-wrapper" not in {f.signature for f in diagnosis.findings}


def test_the_wrapper_gives_way_to_an_error_before_it_that_no_signature_knows() -> None:
    """An unknown error before the wrapper is the one to read: the wrapper's own reading (a
    start that outlived the ready wait) would raise timeouts for an error already printed."""
    error = (
        "(EngineCore_DP0 pid=4310) ERROR 03-02 10:05:12 [core.py:1006] AssertionError: the "
        "plugin registry was initialised twice\n"
    )
    diagnosis = run_text(error + _EMPTY_FAILED_PROCS)
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "unknown-failure"
    assert "initialised twice" in cause.explanation
    assert "vllm-engine-core-failed-wrapper" not in {f.signature for f in diagnosis.findings}


def test_a_pin_with_no_version_says_where_the_version_comes_from() -> None:
    """`pip install 'xformers'` keeps the installed release: a pin the log gives no version
    for (of a library whose releases are not mined) names the check that gives it, not a
    command that changes nothing."""
    from diagnose.core.changes import package_line

    cause = primary(
        run_text(
            '  File "/venv/lib/python3.12/site-packages/vllm/attention/backends/xformers.py", '
            "line 6, in <module>\n"
            "ImportError: cannot import name 'memory_efficient_attention_forward' from "
            "'xformers.ops'\n"
        )
    )
    assert cause is not None and cause.package is not None
    assert (cause.package.name, cause.package.action, cause.package.spec) == ("xformers", "pin", "")
    line = package_line(cause) or ""
    assert "`pip check` names it" in line and "xformers==<that version>" in line


def test_a_programming_error_in_the_engines_own_code_reads_as_a_bug_of_that_build() -> None:
    """An assertion raised in the engine's own frame, pasted without its traceback's header:
    a bug of the build (a newer one is the fix to try); raised in a library's frame, no."""
    from diagnose.core.changes import package_line

    own = (
        '  File "/opt/sglang/python/sglang/srt/speculative/eagle_worker.py", line 301, in draft\n'
        "    assert spec_info.topk_index.shape[0] == bs\n"
        "AssertionError: draft batch 8 does not match 16\n"
    )
    cause = primary(run_text(own))
    assert cause is not None and cause.package is not None
    assert (cause.signature, cause.category) == ("engine-code-fault", "spec_decode_config")
    assert (cause.package.name, cause.package.action) == ("sglang", "upgrade")
    assert "bug of this SGLang release" in cause.explanation
    newest = mined.versions("sglang")[-1]  # no release shown: the newest mined, named
    assert f"pip install -U 'sglang>={newest}'" in (package_line(cause) or "")
    library = (
        '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 9, in f\n'
        "    assert x\n"
        "AssertionError: shapes differ\n"
    )
    other = primary(run_text(library))
    assert other is not None and other.package is None


def test_an_attribute_a_plain_engine_class_lacks_is_a_mismatch_of_the_engines_own_code() -> None:
    """A data class of the engine that raises no message of its own (an attention backend's
    metadata) is still the engine's: the module tables say so, and no library binds it."""
    log = "AttributeError: 'FlashMLASparseMetadata' object has no attribute 'num_decodes'\n"
    cause = primary(run_text(log))
    assert cause is not None and cause.package is not None
    assert (cause.signature, cause.category) == ("vllm-own-code-mismatch", "kernel_build")
    assert (cause.package.name, cause.package.action) == ("vllm", "upgrade")
    imported = "AttributeError: 'PretrainedConfig' object has no attribute 'rope_scaling'\n"
    other = primary(run_text(imported))  # transformers' class, which vLLM's modules import
    assert other is None or not other.signature.endswith("own-code-mismatch")


_OMNI_WARNING = (
    "/opt/venv/lib/python3.12/site-packages/vllm_omni/version.py:55: RuntimeWarning: vLLM and "
    "vLLM-Omni appear to have mismatched major/minor versions:\n"
    " --> vLLM-Omni version 0.24.0\n"
    " --> vLLM version 0.24.1\n"
    "This will likely cause compatibility issues.\n"
)


def test_a_plugin_version_warning_is_no_failure_of_a_start_that_went_on_to_serve() -> None:
    served = (
        "INFO 07-16 23:16:13 [api_server.py:1900] Starting vLLM API server 0 on "
        "http://0.0.0.0:8000\nINFO:     Application startup complete.\n"
    )
    assert run_text(_OMNI_WARNING + served).primary is None
    failed = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/vllm_omni/entrypoints/cli/serve.py", '
        "line 21, in <module>\n"
        "    from vllm_omni.entrypoints.openai.api_server import omni_run_server\n"
    )
    cause = primary(run_text(_OMNI_WARNING + failed))
    assert cause is not None and cause.signature == "vllm-omni-minor-version-mismatch"


def _backend_refused(settings: str) -> str:
    return (
        "(APIServer pid=812) INFO 12-03 10:00:01 [utils.py:233] non-default args: "
        f"{{'model': 'deepseek-ai/DeepSeek-V3.2', 'tensor_parallel_size': 8{settings}}}\n"
        "(EngineCore_DP0 pid=901) ERROR 12-03 10:01:10 [core.py:843] ValueError: Selected "
        "backend AttentionBackendEnum.CUTLASS_MLA is not valid for this configuration. Reason: "
        "['kv_cache_dtype not supported', 'sparse not supported']\n"
    )


def test_a_fix_removing_a_flag_the_engine_printed_as_not_given_drops_that_flag() -> None:
    """vLLM prints the settings it was given: a backend it chose itself is no flag to drop."""
    chosen = primary(run_text(_backend_refused("")))
    assert chosen is not None and chosen.patch is not None
    assert "--attention-backend" not in chosen.patch.args_remove
    assert chosen.confidence is Confidence.LOW
    assert "the engine chose that value itself" in chosen.explanation
    forced = primary(run_text(_backend_refused(", 'attention_backend': 'CUTLASS_MLA'")))
    assert forced is not None and forced.patch is not None
    assert "--attention-backend" in forced.patch.args_remove
    assert "chose that value itself" not in forced.explanation
