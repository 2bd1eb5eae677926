"""What a diagnosis must show, on the incident fixtures and the real samples."""

from __future__ import annotations

import math
import re
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from diagnose.core.engine import MAX_EVIDENCE, MAX_HITS, Engine
from diagnose.core.models import Confidence, Role
from diagnose.inputs.files import LogInput, events_from_lines
from diagnose.library import load_directory
from diagnose.runs.output import exit_code
from tests.conftest import (
    REPO,
    SAMPLES,
    builtin_library,
    by_signature,
    feed,
    fixture,
    primary,
    run_engine,
    run_text,
)

CRASHLOOP = fixture("fixtures/incidents/qwen-122b-crashloop.journal.txt")
STALL = fixture("fixtures/incidents/dist-init-stall.journal.txt")
SMI_4X = fixture("fixtures/gpu/nvidia-smi-4xh200-1gb.txt")


def file_lines(relative: str) -> list[str]:
    return (REPO / relative).read_bytes().decode("utf-8").split("\n")


# -- the crash loop -------------------------------------------------------------------------------


def test_crashloop_primary_cause_and_patch() -> None:
    diagnosis = run_engine(CRASHLOOP)
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.signature == "sglang-spec-v2-required"
    assert cause.category == "spec_decode_config"
    assert cause.role is Role.ROOT_CAUSE
    assert cause.caused_by is None
    assert cause.patch is not None
    assert cause.patch.env_set == {"SGLANG_ENABLE_SPEC_V2": "1"}
    add = cause.patch.args_add
    flag = add.index("--mamba-scheduler-strategy")
    assert add[flag + 1] == "extra_buffer"
    assert cause.patch.dropin is not None
    assert "Environment=SGLANG_ENABLE_SPEC_V2=1" in cause.patch.dropin
    assert cause.patch.dropin.startswith("# /etc/systemd/system/sglang-qwen.service.d/")
    assert "Qwen3_5MoeForConditionalGeneration" in cause.explanation


def test_crashloop_is_folded_into_one_finding_with_counts() -> None:
    diagnosis = run_engine(CRASHLOOP)
    cause = primary(diagnosis)
    assert cause is not None
    assert (cause.count, cause.attempts) == (5, 5)
    assert diagnosis.attempts == 5
    assert diagnosis.unit == "sglang-qwen.service"
    assert diagnosis.engine == "sglang"
    assert [f.signature for f in diagnosis.findings].count("sglang-spec-v2-required") == 1


def test_crashloop_restart_loop_is_a_symptom_of_the_primary() -> None:
    diagnosis = run_engine(CRASHLOOP)
    loop = by_signature(diagnosis, "systemd-restart-loop")
    assert loop is not None
    assert loop.role is Role.SYMPTOM
    assert loop.caused_by == diagnosis.primary
    assert loop.id != diagnosis.primary


def test_crashloop_evidence_points_at_the_valueerror_lines() -> None:
    diagnosis = run_engine(CRASHLOOP)
    cause = primary(diagnosis)
    assert cause is not None
    lines = file_lines(CRASHLOOP)
    error_lines = [e.line for e in cause.evidence if "ValueError: Speculative decoding" in e.text]
    assert error_lines, "no ValueError line in the evidence"
    assert set(error_lines) <= {26, 57, 88, 119, 150}
    assert error_lines[0] == 26, "the first failure comes first"
    assert error_lines == [26, 57, 88, 119, 150]
    for evidence in cause.evidence:
        assert evidence.source == CRASHLOOP
        assert evidence.line is not None
        assert lines[evidence.line - 1] == evidence.text
        assert evidence.unit == "sglang-qwen.service"
    assert len(cause.evidence) <= MAX_EVIDENCE


@pytest.mark.parametrize(
    "other",
    [
        fixture("fixtures/incidents/crashloop-plain.log"),
        fixture("fixtures/incidents/crashloop.journal.json"),
    ],
    ids=["plain-crlf-ansi", "journal-json"],
)
def test_other_formats_of_the_crashloop_give_the_same_primary(other: str) -> None:
    reference = primary(run_engine(CRASHLOOP))
    cause = primary(run_engine(other))
    assert reference is not None and cause is not None
    assert (cause.signature, cause.category) == (reference.signature, reference.category)
    assert cause.patch is not None and reference.patch is not None
    assert cause.patch.env_set == reference.patch.env_set
    assert cause.patch.args_add == reference.patch.args_add
    evidence = next(e for e in cause.evidence if "ValueError" in e.text)
    assert "\x1b" not in evidence.text and "\r" not in evidence.text


def test_crlf_capture_evidence_line_numbers_match_the_file() -> None:
    path = fixture("fixtures/incidents/crashloop-plain.log")
    cause = primary(run_engine(path))
    assert cause is not None
    lines = file_lines(path)
    for evidence in cause.evidence:
        assert evidence.line is not None
        assert lines[evidence.line - 1].rstrip("\r") == evidence.text


def test_journal_json_export_evidence_has_its_line_and_cursor() -> None:
    """A `journalctl -o json` export is a file: its lines count; the cursor finds the entry."""
    path = "fixtures/incidents/crashloop.journal.json"
    cause = primary(run_engine(fixture(path)))
    assert cause is not None
    lines = (REPO / path).read_text().splitlines()
    for evidence in cause.evidence:
        assert evidence.cursor and evidence.cursor.startswith("s=")
        assert evidence.line is not None
        assert evidence.cursor in lines[evidence.line - 1]


# -- distributed-init hang ------------------------------------------------------------------------------


def test_dist_init_stall() -> None:
    diagnosis = run_engine(STALL)
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.signature == "sglang-dist-init-stall"
    assert cause.category == "dist_init_hang"
    assert cause.confidence is Confidence.MEDIUM
    assert cause.phase == "dist_init"
    assert {e.rank for e in cause.evidence} == {"TP0", "TP1", "TP2", "TP3"}
    assert all("Init torch distributed begin." in e.text for e in cause.evidence)
    assert "10.5 minutes" in cause.explanation
    assert "threshold is 5 minutes" in cause.explanation
    assert cause.hypotheses, "a hang lists its likely causes"
    assert cause.patch is not None and cause.patch.env_set.get("NCCL_DEBUG") == "INFO"
    assert exit_code(diagnosis) == 1


def test_dist_init_stall_with_nvidia_smi_rows_as_evidence() -> None:
    diagnosis = run_engine(STALL, SMI_4X)
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.category == "dist_init_hang"
    assert cause.confidence is Confidence.HIGH
    rows = [e for e in cause.evidence if e.source == SMI_4X]
    smi = file_lines(SMI_4X)
    assert [e.line for e in rows] == [10, 14, 18, 22]
    for row in rows:
        assert row.line is not None
        assert smi[row.line - 1] == row.text
        assert re.search(r"11\d\dMiB / 143771MiB", row.text)
    assert "1143 MiB" in cause.explanation


def test_nvidia_smi_alone_is_not_a_failure() -> None:
    diagnosis = run_engine(SMI_4X)
    assert diagnosis.primary is None


def test_slow_dist_init_that_progresses_is_not_a_failure() -> None:
    diagnosis = run_engine(fixture("fixtures/incidents/dist-init-slow-ok.journal.txt"))
    assert diagnosis.primary is None
    assert diagnosis.findings == []
    assert diagnosis.phase_reached == "ready"
    assert exit_code(diagnosis) == 0


def test_hang_after_longer_than_the_quiet_span_gives_no_finding() -> None:
    diagnosis = run_engine(STALL, hang_after=20 * 60)
    assert by_signature(diagnosis, "sglang-dist-init-stall") is None
    assert diagnosis.primary is None


def test_hang_after_shorter_than_the_default_still_fires_and_says_so() -> None:
    cause = primary(run_engine(STALL, hang_after=60))
    assert cause is not None
    assert "nothing for 10.5 minutes (the threshold is 60 seconds)" in cause.explanation


def _stall_prefix() -> list[str]:
    """The stall log cut right after the Init lines: it ends before anyone stopped it."""
    lines = file_lines(STALL)
    last_init = max(i for i, line in enumerate(lines) if "Init torch distributed begin." in line)
    return lines[: last_init + 1]


def _engine_on(lines: list[str]) -> tuple[Engine, LogInput]:
    log = LogInput.from_text("\n".join(lines) + "\n", "stall-cut.log")
    return feed([log]), log


def test_a_log_cut_at_init_holds_no_time_for_its_silence_and_says_so() -> None:
    """Ending at `Init torch distributed begin.`, the log holds no later time: no hang is
    claimed, and the note names the step and what would tell a hang from a cut paste."""
    engine, log = _engine_on(_stall_prefix())
    diagnosis = engine.finish(inputs=[log.summary()])
    assert diagnosis.primary is None
    assert any("Init torch distributed begin." in n and "journal" in n for n in diagnosis.notes)


def test_clock_hook_fires_only_past_the_threshold() -> None:
    lines = _stall_prefix()
    begin = next(
        r.ts
        for e in events_from_lines(lines, LogInput(path=None, name="x"))
        for r in e.records
        if "Init torch distributed begin." in r.text
    )
    assert begin is not None

    early, log = _engine_on(lines)
    assert early.snapshot(begin + timedelta(minutes=4), [log.summary()]).primary is None
    until = begin + timedelta(minutes=4, seconds=50)
    assert early.finish(observed_until=until, inputs=[log.summary()]).primary is None

    late, log = _engine_on(lines)
    live = late.snapshot(begin + timedelta(minutes=6), [log.summary()])
    assert by_signature(live, "sglang-dist-init-stall") is not None
    diagnosis = late.finish(observed_until=begin + timedelta(minutes=6), inputs=[log.summary()])
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.signature == "sglang-dist-init-stall"
    assert re.search(r"nothing for 6(\.0)? minutes", cause.explanation), cause.explanation


# -- killed: by SGLang itself, or by the kernel ----------------------------------------------------------


def test_sglang_self_kill_is_not_host_oom() -> None:
    diagnosis = run_engine(fixture("fixtures/incidents/sglang-selfkill.journal.txt"))
    assert not [f for f in diagnosis.findings if f.category == "host_oom"]
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.category == "gpu_oom"
    assert cause.evidence[0].rank == "TP2"


def test_host_oom() -> None:
    diagnosis = run_engine(fixture("fixtures/incidents/host-oom.journal.txt"))
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.category == "host_oom"
    assert cause.signature == "host-oom-kill"
    assert "sglang::schedul" in cause.explanation
    assert cause.phase == "load_weights"
    assert cause.patch is None and cause.patch_note


# -- GPU memory ---------------------------------------------------------------------------------------


def test_oom_cuda_graph_patch_and_arithmetic() -> None:
    cause = primary(run_engine(fixture("fixtures/incidents/oom-cuda-graph.log")))
    assert cause is not None
    assert cause.signature == "sglang-cuda-graph-oom"
    assert cause.category == "gpu_oom"
    assert cause.patch is not None
    assert cause.patch.args_add == ["--mem-fraction-static", "0.85"]
    numbers = set(re.findall(r"\d+(?:\.\d+)?", cause.explanation))
    assert {"2", "1.12", "139.8", "0.88"} <= numbers, cause.explanation
    assert "0.85" in numbers
    # 0.88 - (2 - 1.12) / 139.8 - 0.02 = 0.8537..., floored to two places.
    assert math.floor((0.88 - (2 - 1.12) / 139.8 - 0.02) * 100) / 100 == 0.85


def test_oom_kv_cache_patch_is_computed_from_the_log() -> None:
    path = fixture("fixtures/incidents/oom-kv-cache.log")
    cause = primary(run_engine(path))
    assert cause is not None
    assert cause.signature == "sglang-kv-cache-no-room"
    assert cause.patch is not None
    assert cause.patch.args_add[0] == "--mem-fraction-static"
    value = float(cause.patch.args_add[1])
    text = (REPO / path).read_text(encoding="utf-8")
    current = float(re.search(r"Current value: mem_fraction_static=([\d.]+)", text).group(1))  # type: ignore[union-attr]
    before = float(re.search(r"Load weight begin\. avail mem=([\d.]+) GB", text).group(1))  # type: ignore[union-attr]
    weights = float(re.search(r"Load weight end\..*?mem usage=([\d.]+) GB", text).group(1))  # type: ignore[union-attr]
    assert value > current
    assert value == math.ceil((weights / before + 0.05) * 100) / 100
    assert value <= 0.95
    assert str(weights) in cause.explanation


def test_oom_load_weights_with_another_process_is_gpu_busy() -> None:
    diagnosis = run_engine(fixture("fixtures/incidents/oom-load-weights.log"))
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.category == "gpu_busy"
    assert cause.signature == "gpu-memory-held-by-other-process"
    assert cause.patch is None
    assert cause.patch_note and "39112" in cause.patch_note
    assert "39112" in cause.explanation
    assert by_signature(diagnosis, "cuda-out-of-memory") is None, "superseded by the precise one"


# -- healthy logs and real samples -----------------------------------------------------------------------

HEALTHY = [
    fixture("fixtures/incidents/healthy-sglang.journal.txt"),
    *sorted(f"fixtures/samples/healthy/{p.name}" for p in (SAMPLES / "healthy").iterdir()),
]


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: Path(p).name)
def test_healthy_logs_have_no_primary(path: str) -> None:
    diagnosis = run_engine(path)
    assert diagnosis.primary is None, [
        (f.signature, f.evidence[0].text) for f in diagnosis.findings
    ]
    assert exit_code(diagnosis) == 0
    assert sum(i.records for i in diagnosis.inputs) > 0


# The categories each real incident may be diagnosed as (its case's `accept` list).
ACCEPT = {
    "001-qwen35-mtp-mamba-no-buffer-radix.log": {"spec_decode_config"},
    "002-gb200-symm-mem-prealloc-oom.log": {"gpu_oom"},
    "006-sglang-specv2-eagle-topk-gt1.log": {"spec_decode_config"},
    "008-vllm-docker-nccl-shm-too-small.log": {"dist_init_hang", "nccl_runtime"},
    "010-sglang-enable-reasoning-vllm-flag.log": {"launch_args"},
    "014-sglang-fp8-model-on-ampere-3090.log": {"gpu_arch_support"},
    "016-gated-hf-repo-no-token.log": {"model_access"},
    "019-vllm-flashinfer-jit-bad-cuda-home.log": {"kernel_build"},
    "021-sglang-watchdog-kill-torch-compile.log": {"start_timeout"},
    "024-sglang-multinode-gloo-connectfullmesh.log": {"dist_init_hang", "network_config"},
    "026-xid79-gpu-fallen-off-bus.log": {"gpu_hardware"},
    "031-vllm-dsv32-missing-chat-template.log": {"chat_template"},
}


def _real_samples() -> list:
    names = sorted(path.name for path in (SAMPLES / "real").iterdir())
    assert names == sorted(ACCEPT), "every real sample needs its accepted categories"
    return [pytest.param(f"fixtures/samples/real/{name}", id=name) for name in names]


@pytest.mark.parametrize("path", _real_samples())
def test_real_failure_samples_get_an_accepted_primary(path: str) -> None:
    diagnosis = run_engine(path)
    primary = diagnosis.finding(diagnosis.primary)
    assert primary is not None
    assert primary.category in ACCEPT[Path(path).name]
    assert exit_code(diagnosis) == 1


# -- ranking ----------------------------------------------------------------------------------------------

_SIGNATURE = """\
title: {title}
category: unknown
severity: {severity}
generic: {generic}
match:
  type: line
  needles: ["{needle}"]
  regex: '{needle}'
explanation: "{title}."
patch_note: "none"
examples:
  positive:
    - name: hit
      log: "{needle}\\n"
  negative:
    - name: miss
      log: "nothing\\n"
"""


def _library(tmp_path: Path, **specs: tuple[str, str, bool]) -> list:
    for signature_id, (needle, severity, generic) in specs.items():
        text = _SIGNATURE.format(
            title=signature_id, severity=severity, generic=str(generic).lower(), needle=needle
        )
        (tmp_path / f"{signature_id}.yaml").write_text(text, encoding="utf-8")
    return load_directory(tmp_path)


def _diagnose(signatures: list, log: str):
    return run_text(textwrap.dedent(log), "rank.log", signatures=signatures)


def test_a_generic_signature_never_outranks_a_specific_one(tmp_path: Path) -> None:
    signatures = _library(
        tmp_path,
        **{"catch-all": ("SOMETHING FAILED", "critical", True)},
        precise=("disk quota exceeded", "error", False),
    )
    diagnosis = _diagnose(
        signatures,
        """\
        [2026-03-01 10:00:00] SOMETHING FAILED
        [2026-03-01 10:00:05] disk quota exceeded
    """,
    )
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.signature == "precise"
    assert by_signature(diagnosis, "catch-all") is None, "a catch-all stays out of the way"


def test_a_generic_signature_is_primary_when_nothing_specific_fired(tmp_path: Path) -> None:
    signatures = _library(
        tmp_path,
        **{"catch-all": ("SOMETHING FAILED", "critical", True)},
        precise=("disk quota exceeded", "error", False),
    )
    cause = primary(_diagnose(signatures, "[2026-03-01 10:00:00] SOMETHING FAILED\n"))
    assert cause is not None and cause.signature == "catch-all"


def test_the_first_failure_outranks_a_later_one(tmp_path: Path) -> None:
    signatures = _library(
        tmp_path,
        later=("second failure", "critical", False),
        first=("first failure", "error", False),
    )
    diagnosis = _diagnose(
        signatures,
        """\
        [2026-03-01 10:00:00] first failure
        [2026-03-01 10:00:05] second failure
    """,
    )
    cause = primary(diagnosis)
    assert cause is not None
    assert cause.signature == "first"
    later = by_signature(diagnosis, "later")
    assert later is not None and later.role is Role.SYMPTOM and later.caused_by == cause.id
    assert [f.id for f in diagnosis.findings] == ["f1", "f2"]
    assert diagnosis.findings[0] is cause


def test_warnings_are_advisories_and_never_primary(tmp_path: Path) -> None:
    signatures = _library(tmp_path, slow=("slow tokenizer", "warning", False))
    diagnosis = _diagnose(signatures, "[2026-03-01 10:00:00] slow tokenizer\n")
    assert diagnosis.primary is None
    assert diagnosis.findings[0].role is Role.ADVISORY
    assert exit_code(diagnosis) == 0
    assert exit_code(diagnosis, "warning") == 1


# -- bounded memory --------------------------------------------------------------------------------------


def test_engine_memory_stays_bounded_on_a_long_log(tmp_path: Path) -> None:
    (signature,) = _library(tmp_path, boom=("boom", "error", False))
    total = 200_000
    every = 4

    def lines():
        for i in range(total):
            stamp = f"2026-03-01 {10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
            yield f"[{stamp} TP0] boom {i}" if i % every == 0 else f"[{stamp} TP0] quiet {i}"

    log = LogInput(path=None, name="big.log")
    engine = Engine([signature])
    for event in events_from_lines(lines(), log):  # a generator: the log is never held whole
        engine.feed(event)
    # The engine's own per-signature state: a few hits, not the log.
    (state,) = engine._states
    assert len(state.hits) == MAX_HITS
    diagnosis = engine.finish(inputs=[log.summary()])
    (finding,) = diagnosis.findings
    assert finding.count == total // every
    assert diagnosis.inputs[0].records == total
    assert len(finding.evidence) <= MAX_EVIDENCE
    lines_seen = [e.line for e in finding.evidence]
    assert lines_seen[0] == 1, "the first hit is kept"
    assert lines_seen[-1] == total - every + 1, "and the newest one"


# -- nothing beside the story ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CRASHLOOP, {"sglang-spec-v2-required", "systemd-restart-loop"}),
        ("fixtures/incidents/oom-kv-cache.log", {"sglang-kv-cache-no-room"}),
        ("fixtures/incidents/oom-cuda-graph.log", {"sglang-cuda-graph-oom"}),
    ],
    ids=["crashloop", "oom-kv-cache", "oom-cuda-graph"],
)
def test_an_explained_failure_is_not_reported_again_as_unexplained(
    path: str, expected: set[str]
) -> None:
    """A catch-all for exceptions no signature knows must stay silent when one does."""
    diagnosis = run_engine(fixture(path))
    assert {f.signature for f in diagnosis.findings} == expected


def test_a_vllm_start_with_both_banners_is_one_attempt() -> None:
    """vLLM prints its version banner and then its arguments: one start, not two."""
    from diagnose.testing import run_log

    start = (
        "(APIServer pid=501) INFO 03-02 09:00:01 [api_server.py:1885] vLLM API server version 0.11.0\n"
        "(APIServer pid=501) INFO 03-02 09:00:01 [utils.py:253] non-default args: {'model': '/models/Qwen3-32B'}\n"
        "(EngineCore_DP0 pid=612) INFO 03-02 09:00:09 [core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/Qwen3-32B'\n"
    )
    for starts in (1, 2):
        engine, log = run_log(builtin_library(), start * starts)
        assert engine.finish(inputs=[log.summary()]).attempts == starts


def test_a_missing_top_level_module_is_installed_under_its_distribution_name() -> None:
    """`No module named 'cv2'` is fixed by installing opencv: the package change names the
    distribution pip knows, not the import name; a module of the engine's own is left to the
    signatures for a broken engine install."""
    cause = primary(run_text("ModuleNotFoundError: No module named 'cv2'\n"))
    assert cause is not None and cause.signature == "python-module-not-installed"
    assert cause.package is not None
    assert (cause.package.name, cause.package.action) == ("opencv-python-headless", "install")
    plain = primary(run_text("ModuleNotFoundError: No module named 'sentencepiece'\n"))
    assert plain is not None and plain.package is not None
    assert plain.package.name == "sentencepiece"


def test_intel_extension_missing_off_x86_is_the_engines_path_and_other_modules_are_installed() -> (
    None
):
    """IPEX cannot be installed on a POWER or Arm machine: the engine's upgrade, not an
    install; any other module on such a machine is still installed, and IPEX on x86 too."""
    frame = (
        '  File "/opt/conda/lib/python3.11/site-packages/vllm-0.6.6+cpu-py3.11-linux-{arch}.egg/'
        'vllm/distributed/parallel_state.py", line 338, in all_reduce\n'
    )
    missing = "ModuleNotFoundError: No module named '{module}'\n"

    def package(arch: str, module: str) -> tuple[str, str]:
        cause = primary(run_text(frame.format(arch=arch) + missing.format(module=module)))
        assert cause is not None and cause.package is not None
        return cause.package.name, cause.package.action

    assert package("ppc64le", "intel_extension_for_pytorch") == ("vllm", "upgrade")
    assert package("aarch64", "sentencepiece") == ("sentencepiece", "install")
    assert package("x86_64", "intel_extension_for_pytorch")[1] == "install"


def test_a_message_the_log_wrapped_mid_sentence_is_quoted_whole() -> None:
    """A pasted error broken over lines (a forum or a terminal wrapped it): the lines that go
    on with its sentence are evidence too; an addendum after a full stop is not."""
    wrapped = run_text(
        "ValueError: To serve at least one request with the model's max seq len (1048576),\n"
        "22.5 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(17.39 GiB).\n"
        "Based on the available memory, the estimated maximum model length is 810208.\n"
    )
    cause = primary(wrapped)
    assert cause is not None
    assert [e.line for e in cause.evidence][:2] == [1, 2]
    assert 3 not in [e.line for e in cause.evidence]


def test_a_bind_that_fails_after_uvicorns_startup_line_means_the_start_was_never_ready() -> None:
    """uvicorn says "Application startup complete." before it binds the port: the bind error
    after it is the failure, not something that happened while serving."""
    diagnosis = run_text(
        "INFO:     Started server process [60858]\n"
        "INFO:     Waiting for application startup.\n"
        "INFO:     Application startup complete.\n"
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
        "address already in use\n"
        "INFO:     Waiting for application shutdown.\n"
        "INFO:     Application shutdown complete.\n"
    )
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "http-port-in-use"
    assert diagnosis.phase_reached != "ready"
    assert all(p.phase != "ready" for a in diagnosis.timeline.attempts for p in a.phases)


def test_a_program_seen_building_the_engines_arguments_is_the_one_to_upgrade() -> None:
    """No list names the program: its frame calls the argument class, so its code passes the
    keyword, and its upgrade (by its distribution's name) is the change."""
    cause = primary(
        run_text(
            ' File "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab12/trinity'
            '/common/models/vllm_model.py", line 64, in __init__\n'
            " engine_args = vllm.AsyncEngineArgs(\n"
            "TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument "
            "'disable_log_requests'\n"
        )
    )
    assert cause is not None and cause.signature == "engine-args-unexpected-keyword"
    assert cause.patch is None or not cause.patch.args_remove
    assert cause.package is not None
    assert (cause.package.name, cause.package.action) == ("trinity-rft", "upgrade")
