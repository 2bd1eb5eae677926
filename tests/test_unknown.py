"""When nothing matches: the unknown failure, its templates, and drafting a signature from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.core.incident import template_of
from diagnose.core.models import Confidence, Role, Severity
from diagnose.library import load_directory
from diagnose.render import render
from diagnose.testing import check_signature
from tests.conftest import (
    REPO,
    builtin_library,
    fixture,
    invoke,
    primary,
    run_cli,
    run_engine,
    run_text,
)

VLLM_DIED = fixture("fixtures/unknown/vllm-worker-died.journal.txt")
SGLANG_CRASH = fixture("fixtures/unknown/sglang-unknown-crash.journal.txt")

HEALTHY = [
    fixture("fixtures/incidents/healthy-sglang.journal.txt"),
    fixture("fixtures/incidents/dist-init-slow-ok.journal.txt"),
    fixture("fixtures/journal/healthy-stop.journal.txt"),
    *sorted(
        fixture(f"fixtures/samples/healthy/{p.name}")
        for p in (REPO / "fixtures/samples/healthy").iterdir()
    ),
]


@pytest.mark.parametrize(
    ("line", "template"),
    [
        (
            "Rank 3 scheduler died during initialization (exit code: -9)",
            "Rank <NUM> scheduler died during initialization (exit code: <NUM>)",
        ),
        (
            "Failed to fetch shard 7 from /models/Q/model-00007-of-00039.safetensors: Error 5",
            "Failed to fetch shard <NUM> from <PATH>: Error <NUM>",
        ),
        ("connect to 10.0.4.9:29500 refused", "connect to <ADDR> refused"),
        (
            "request 3f2a9c1e-7b4d-4e2a-9f1c-0a1b2c3d4e5f at 0x7f3a2c001e40 failed",
            "request <ID> at <ID> failed",
        ),
    ],
)
def test_templates_mask_numbers_paths_ids_and_addresses(line: str, template: str) -> None:
    assert template_of(line) == template


def test_an_unknown_failure_has_the_first_error_the_last_lines_and_templates() -> None:
    diagnosis = run_engine(VLLM_DIED)
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "unknown-failure"
    assert (cause.category, cause.severity, cause.role) == (
        "unknown",
        Severity.ERROR,
        Role.ROOT_CAUSE,
    )
    assert cause.confidence is Confidence.LOW
    assert cause.patch is None and cause.patch_note and "signatures new" in cause.patch_note
    lines = [e.line for e in cause.evidence]
    assert 6 in lines and "(line 6)" in cause.explanation, "the first error"
    assert {7, 8, 9, 10} <= set(lines), "the last lines before the exit, and the exit"
    assert "status=1/FAILURE" in cause.explanation
    assert "Worker proc VllmWorker-1 died unexpectedly" in cause.explanation
    [template] = cause.templates
    assert (
        template.template
        == "Worker proc VllmWorker-<NUM> died unexpectedly, shutting down executor."
    )
    assert (template.count, template.first_line) == (2, 6)
    assert template.first_ts is not None


def test_an_unrecognised_traceback_and_a_failure_exit() -> None:
    """With the hand signatures alone, the catch-all names the exception; the unknown failure
    adds the rest to it."""
    cause = primary(run_engine(SGLANG_CRASH, signatures=builtin_library()))
    assert cause is not None and cause.signature == "python-exception-unexplained"
    assert cause.confidence is Confidence.LOW
    lines = {e.line for e in cause.evidence}
    assert {7, 10, 15, 18, 19, 20} <= lines, "first error, traceback, last lines, exit"
    assert cause.explanation.startswith("systemd reports that the main process failed")
    assert "SafetensorError" in cause.explanation
    by_template = {t.template: t for t in cause.templates}
    shards = by_template[
        "Failed to fetch shard <NUM> from <PATH>: Error <NUM> (Input/output error)"
    ]
    assert (shards.count, shards.first_line) == (3, 7)
    assert cause.templates[0] is shards or cause.templates[0] == shards, "most frequent first"


def test_a_known_issue_explains_what_no_signature_does() -> None:
    """The whole library, as users run it: the truncated-shard error is a known issue from
    resolved threads, reported as such, with its thread and its fix."""
    cause = primary(run_engine(SGLANG_CRASH))
    assert cause is not None and cause.tier == "known_issue"
    assert cause.category == "model_access"
    assert "SafetensorError" in cause.evidence[0].text
    assert cause.references and cause.references[0].startswith("https://github.com/")
    assert cause.confidence is Confidence.MEDIUM


def test_an_error_at_the_end_of_a_plain_log() -> None:
    diagnosis = run_text(
        "[2026-03-12 09:14:09] server_args={'model_path': '/models/X', 'tp_size': 2}\n"
        "[2026-03-12 09:14:21 TP0] Init torch distributed begin.\n"
        "[2026-03-12 09:14:40 TP0] fatal: license check failed for node 17 (code 28)\n"
    )
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "unknown-failure"
    assert "The log ends with an error" in cause.explanation
    assert cause.templates[0].template.startswith("fatal: license check failed for node <NUM>")


@pytest.mark.parametrize(
    "line",
    [
        "process_inputs() got an unexpected keyword argument 'priority'",
        "get_kv_cache_spec() missing 1 required positional argument: 'vllm_config'",
        "expert_indices.size(1) == args->top_k (1 vs. 6) : expert_indices dim1 must match top_k.",
    ],
)
def test_an_exception_message_without_its_class_is_a_failure(line: str) -> None:
    """A wrapper, or a poster, quotes a TypeError's message without its class, or a C++ check
    prints its comparison: the line is the failure, not "no failure found"."""
    cause = primary(run_text("vllm serve /models/X --tensor-parallel-size 2\n" + line + "\n"))
    assert cause is not None
    assert cause.evidence[-1].text == line


def test_a_failure_in_cuda_graph_capture_suspects_the_capture_path() -> None:
    frames = (
        f"(EngineCore_DP0 pid=812) ERROR 08-01 10:02:11 [core.py:700] {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py",'
            " line 2206, in capture_model",
            "    self._dummy_run(num_tokens, capture_attn_cudagraph=True)",
            "RuntimeError: shared tensor 7 was freed before replay",
        )
    )
    cause = primary(run_text("".join(frames)))
    assert cause is not None and cause.category == "unknown"
    [suspect] = cause.hypotheses
    assert "`capture_model`" in suspect.cause and "`--enforce-eager`" in suspect.check
    plain = primary(run_text("RuntimeError: shared tensor 7 was freed before replay\n"))
    assert plain is not None and plain.hypotheses == []


def test_an_error_that_names_the_variable_it_lacks_sets_it_with_a_placeholder() -> None:
    cause = primary(
        run_text(
            "ERROR 11-26 22:38:07 [engine.py:506] Please set HF_MODEL to a HuggingFace name "
            "e.g. meta-llama/Llama-3.1-8B-Instruct\n"
        )
    )
    assert cause is not None and cause.signature == "message-words"
    assert cause.patch is not None
    assert cause.patch.env_set == {
        "HF_MODEL": "<a HuggingFace name, e.g. meta-llama/Llama-3.1-8B-Instruct>"
    }
    assert cause.patch.placeholders()


def test_an_unexplained_error_whose_words_name_an_area() -> None:
    """No signature, known issue or engine message explains it: its own words name the area,
    at low confidence and with no patch."""
    cause = primary(
        run_text(
            "[2026-03-12 09:14:21 TP0] Init torch distributed begin.\n"
            "[2026-03-12 09:14:40 TP0] fatal: could not open shared memory segment 17 (code 28)\n"
        )
    )
    assert cause is not None and cause.signature == "message-words"
    assert (cause.category, cause.tier, cause.confidence) == ("host_oom", "generic", Confidence.LOW)
    assert cause.patch is None
    assert "its own words point at host or shared memory" in cause.explanation.lower()


def test_words_of_a_rule_scoped_to_modules_name_no_area_of_an_unplaced_message() -> None:
    """The word "invalid" names model_unsupported only in a model's or a quantization's code:
    a message no template places (a glog error line of a transfer engine) is not read so."""
    cause = primary(
        run_text(
            "E0819 11:21:45.193161 147554 transfer_metadata.cpp:588] Failed to open segment "
            "prefill-0: Invalid argument [22]\n"
        )
    )
    assert cause is not None and cause.signature == "unknown-failure"
    assert "transfer_metadata.cpp:588" in cause.evidence[0].text


def test_the_reason_a_line_below_the_first_error_gives_is_read() -> None:
    """A C++ layer prints its failure with a code first and the reason two lines later (CANN's
    `EJ0003: ... Reason: ...`): that line's words name the area, and both lines are evidence.
    A reason far below it is not read as this error's."""
    first = (
        "[rank0]: RuntimeError: createHCCLComm:compiler_depend.ts:1479 HCCL function error: "
        "HcclGetRootInfo(&hcclID), error code is 11\n"
        "[rank0]: [ERROR] 2025-03-26-17:01:03 (PID:159, Device:0) ERR02200 DIST call hccl api failed.\n"
    )
    reason = (
        "[rank0]: EJ0003: [PID: 159] Failed to bind the IP port. Reason: The IP address and port "
        "have been bound already.\n"
    )
    cause = primary(run_text(first + reason))
    assert cause is not None and cause.signature == "message-words"
    assert cause.category == "port_in_use"
    assert [e.line for e in cause.evidence] == [1, 3]
    assert "the line below it that gives its reason" in cause.explanation
    far_below = first + "[rank0]: RuntimeError: retrying\n" * 8 + reason
    assert primary(run_text(far_below)).signature == "unknown-failure"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "title", "said", "check"),
    [
        (
            "EJ0003: [PID: 159] Failed to bind the IP port[60000]. Reason: The IP address and "
            "port have been bound already.",
            "Port 60000 is already taken on this host",
            "in Linux's default range for the local ports of outgoing connections",
            "ss -tanp | grep ':60000'",
        ),
        (
            "AssertionError: mla_gluon requires gfx950 (CDNA4), got gfx942",
            "The code path that failed does not support this GPU's architecture",
            "(`gfx950`, `CDNA4`, `gfx942`)",
            "rocminfo | grep gfx",
        ),
    ],
)
def test_words_that_name_their_values_say_the_mechanism_and_its_check(
    line: str, title: str, said: str, check: str
) -> None:
    """A port or a GPU architecture the message names is read as what it says (another
    process holds the port; the code refuses this GPU), with the command that confirms it:
    still low confidence, still no patch."""
    cause = primary(run_text(line + "\n"))
    assert cause is not None and cause.signature == "message-words"
    assert (cause.title, cause.confidence, cause.patch) == (title, Confidence.LOW, None)
    assert said in cause.explanation and "read it as a lead" not in cause.explanation
    assert check in cause.next_checks[0]


def test_words_alone_never_make_a_failure_of_a_healthy_log() -> None:
    diagnosis = run_text(
        "[2026-03-12 09:14:21 TP0] Load weight end. type=Qwen3ForCausalLM, mem usage=15.27 GB\n"
        "[2026-03-12 09:14:40] The server is fired up and ready to roll!\n"
        '[2026-03-12 09:15:02] INFO: 127.0.0.1 - "POST /v1/chat/completions" 200 OK\n'
    )
    assert diagnosis.primary is None


@pytest.mark.parametrize(
    ("log", "notice"),
    [
        (
            "(APIServer pid=7) RuntimeError: Engine core initialization failed. See root cause "
            "above. Failed core proc(s): {'EngineCore_DP0': 1}\n",
            "Engine core initialization failed",
        ),
        (
            "[2026-03-12 09:14:40] Rank 0 scheduler is dead. Please check if there are relevant logs.\n"
            "[2026-03-12 09:14:41] Received sigquit from a child process. It usually means the child failed.\n",
            "Rank 0 scheduler is dead",
        ),
    ],
)
def test_a_failure_notice_without_its_cause_says_the_cause_is_not_in_the_input(
    log: str, notice: str
) -> None:
    """An excerpt that holds only the engine's word that it failed (the API server's wrapper,
    a dead scheduler) is a failure whose cause was left out, not a healthy log."""
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "unknown-failure"
    assert "the error that made it fail is not in this input" in cause.explanation
    assert any(notice in e.text for e in cause.evidence)


def test_a_wrapper_after_the_real_error_leaves_the_real_error_first() -> None:
    cause = primary(
        run_text(
            "(EngineCore_DP0 pid=9) ERROR 03-12 09:14:40 [core.py:700] RuntimeError: license "
            "server unreachable for node 7\n"
            "(APIServer pid=7) RuntimeError: Engine core initialization failed. See root cause "
            "above. Failed core proc(s): {'EngineCore_DP0': 1}\n"
        )
    )
    assert cause is not None and cause.signature == "unknown-failure"
    assert "license server unreachable" in cause.explanation
    assert "not in this input" not in cause.explanation


@pytest.mark.parametrize(
    ("line", "category"),
    [
        ("runtimeerror: cuda error: out of memory while allocating the kv cache", "gpu_oom"),
        ("oserror: [errno 2] no such file or directory: '/models/x/config.json'", "model_access"),
        ("valueerror: could not find model locally at /models/flux/", "model_access"),
        ("runtimeerror: the extension was compiled against torch 2.3.0, not 2.5.1", "kernel_build"),
        (
            "runtimeerror: failed to import transformers.models.bloom.modeling_bloom because of "
            "the following error (look up to see its traceback): /usr/lib/python3/dist-packages/te",
            "kernel_build",
        ),
        (
            "valueerror: input tensor must be the same size as output size times world size",
            "nccl_runtime",
        ),
        (
            "runtimeerror: found tesla p40 which is too old to be supported by the triton gpu "
            "compiler. triton only supports devices of cuda capability >= 7.0",
            "gpu_arch_support",
        ),
        ("assertionerror: mla_gluon requires gfx950 (cdna4), got gfx942", "gpu_arch_support"),
    ],
)
def test_an_exception_line_lower_cased_by_the_poster_is_a_failure(line: str, category: str) -> None:
    """A forum post lower-cases the whole excerpt: its exception line is still the failure,
    and its words still name the area."""
    cause = primary(run_text(line + "\n"))
    assert cause is not None and cause.signature == "message-words"
    assert cause.category == category


def test_a_package_whose_version_cannot_be_read_points_at_the_environment() -> None:
    """`packaging` refuses a version string (a stale folder or a broken install left `N/A`):
    the installed packages, not a setting."""
    cause = primary(run_text("packaging.version.InvalidVersion: Invalid version: 'N/A'\n"))
    assert cause is not None and cause.signature == "message-words"
    assert cause.category == "kernel_build"


def test_source_code_under_vllms_error_prefix_is_not_the_first_error() -> None:
    """An excerpt that starts inside a vLLM traceback: every line carries `ERROR`, but the
    indented source line above the exception is code, not the error."""
    prefix = "(VllmWorkerProcess pid=43) ERROR 07-07 13:43:36 multiproc_worker_utils.py:226] "
    cause = primary(
        run_text(
            f"{prefix}    self._wrapper.begin_forward(\n"
            f"{prefix}RuntimeError: Out of workspace memory in AlignedAllocator\n"
        )
    )
    assert cause is not None and cause.evidence
    assert "The first error (line 2): RuntimeError: Out of workspace memory" in cause.explanation


def test_a_wrapper_that_announces_the_next_line_is_not_the_first_error() -> None:
    """torch.compile's `BackendCompilerFailed: backend='inductor' raised:` ends with a colon:
    the error it wraps is the next line, the one read (a known issue knows this one)."""
    cause = primary(
        run_text(
            "ERROR 07-01 10:00:10 [core.py:515] torch._dynamo.exc.BackendCompilerFailed: "
            "backend='inductor' raised:\n"
            "ERROR 07-01 10:00:10 [core.py:515] RuntimeError: Cannot find a working triton "
            "installation. Either the package is not installed or it is too old.\n"
        )
    )
    assert cause is not None and cause.signature == "pytorch-inductor-triton-missing"
    assert cause.category == "kernel_build"
    assert [e.line for e in cause.evidence] == [2]


def test_a_traceback_cut_after_its_position_markers_ends_at_its_code_line() -> None:
    """A log cut inside a traceback ends with Python's `^^^^` under the last code line: the
    report says the log stops there, before the exception that names the error, and shows
    the last frame; the code's words (a process group here) are read as no message."""
    prefix = "ERROR 10-15 09:00:49 [multiproc_executor.py:628] "
    cause = primary(
        run_text(
            f'{prefix}  File "/opt/vllm/vllm/distributed/parallel_state.py", '
            "line 363, in __init__\n"
            f"{prefix}    handle = rendezvous_all(self.buffer, self.group.group_name)\n"
            f"{prefix}             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        )
    )
    assert cause is not None and cause.signature == "unknown-failure"
    assert "^^^^" not in cause.explanation
    assert "stops inside a traceback, before the exception line" in cause.explanation
    assert "handle = rendezvous_all(self.buffer, self.group.group_name)" in cause.explanation
    assert "No error line came before it" not in cause.explanation
    library = primary(
        run_text(
            f'{prefix}  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/models/'
            'gemma3n.py", line 88, in __init__\n'
            f"{prefix}    self.tower = AutoModel.from_config(config.vision_config)\n"
            f'{prefix}  File "/opt/venv/lib/python3.12/site-packages/timm/models/_factory.py", '
            "line 110, in create_model\n"
        )
    )
    assert library is not None and "timm/models/_factory.py" in library.explanation
    assert "The engine's own code called into it from" in library.explanation
    assert "AutoModel.from_config(config.vision_config)" in library.explanation


def test_a_requested_stop_is_no_failure() -> None:
    diagnosis = run_text(
        "Mar 12 09:00:00.000000 gpu-node-07 systemd[1]: Started x.service - X.\n"
        "Mar 12 09:00:05.000000 gpu-node-07 python3[9]: [2026-03-12 09:00:05] server_args={'tp_size': 1}\n"
        "Mar 12 09:01:00.000000 gpu-node-07 systemd[1]: Stopping x.service - X...\n"
        "Mar 12 09:01:00.500000 gpu-node-07 python3[9]: [2026-03-12 09:01:00] SIGTERM received. Shutting down.\n"
        "Mar 12 09:01:01.000000 gpu-node-07 python3[9]: RuntimeError: Event loop stopped before Future completed.\n"
        "Mar 12 09:01:01.100000 gpu-node-07 systemd[1]: x.service: Main process exited, code=exited, status=1/FAILURE\n"
        "Mar 12 09:01:01.200000 gpu-node-07 systemd[1]: x.service: Failed with result 'exit-code'.\n"
    )
    assert diagnosis.primary is None


def test_a_restart_loop_follows_from_the_unknown_failure() -> None:
    attempt = (
        "Mar 12 09:0{m}:00.000000 gpu-node-07 systemd[1]: Started x.service - X.\n"
        "Mar 12 09:0{m}:05.000000 gpu-node-07 python3[9{m}]: [2026-03-12 09:0{m}:05] server_args={{'tp_size': 1}}\n"
        "Mar 12 09:0{m}:09.000000 gpu-node-07 python3[9{m}]: [2026-03-12 09:0{m}:09] FATAL: license check failed for node 7\n"
        "Mar 12 09:0{m}:10.000000 gpu-node-07 systemd[1]: x.service: Main process exited, code=exited, status=1/FAILURE\n"
        "Mar 12 09:0{m}:10.100000 gpu-node-07 systemd[1]: x.service: Failed with result 'exit-code'.\n"
        "Mar 12 09:0{m}:20.000000 gpu-node-07 systemd[1]: x.service: Scheduled restart job, restart counter is at {m}.\n"
    )
    diagnosis = run_text("".join(attempt.format(m=m) for m in range(1, 6)))
    cause = primary(diagnosis)
    assert cause is not None and cause.signature == "unknown-failure"
    assert cause.attempts == 5
    assert cause.templates[0].count == 5
    others = [f for f in diagnosis.findings if f is not cause]
    assert others and all(f.role is not Role.ROOT_CAUSE for f in others)
    assert all(f.caused_by == cause.id for f in others if f.role is Role.SYMPTOM)


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: Path(p).name)
def test_quiet_on_healthy_logs(path: str) -> None:
    diagnosis = run_engine(path)
    assert diagnosis.primary is None, [(f.signature, f.explanation) for f in diagnosis.findings]
    assert all(f.signature != "unknown-failure" for f in diagnosis.findings)


def test_a_specific_signature_leaves_no_unknown_failure() -> None:
    diagnosis = run_engine(fixture("fixtures/incidents/qwen-122b-crashloop.journal.txt"))
    assert all(f.signature != "unknown-failure" for f in diagnosis.findings)


def test_templates_are_rendered() -> None:
    diagnosis = run_engine(VLLM_DIED)
    assert "Unexplained error lines, most frequent first" in render(diagnosis, "text")
    markdown = render(diagnosis, "markdown")
    assert "| 2 | Worker proc VllmWorker-\\<NUM\\> died unexpectedly" in markdown
    assert '"templates": [' in render(diagnosis, "json")


@pytest.mark.parametrize("source", [VLLM_DIED, SGLANG_CRASH])
def test_signatures_new_round_trip(source: str, tmp_path: Path) -> None:
    out = tmp_path / "drafts"
    result = invoke(["signatures", "new", "--from", str(REPO / source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    [signature] = load_directory(out)
    assert signature.category == "unknown" and signature.severity is Severity.ERROR
    assert (out / f"{signature.id}.log").is_file()
    text = (out / f"{signature.id}.yaml").read_text(encoding="utf-8")
    assert text.count("TODO") >= 4
    if source == VLLM_DIED:
        assert "(?P<num1>\\d+" in signature.match.regex  # type: ignore[union-attr]
    results = check_signature(signature)
    assert results and all(r.passed for r in results), [r.problems for r in results]
    tested = invoke(["signatures", "test", str(out)])
    assert tested.exit_code == 0, tested.output
    # the fixture is the incident, reduced: the draft still matches it
    diagnosis = run_engine(out / f"{signature.id}.log", signatures=[signature])
    assert any(f.signature == signature.id for f in diagnosis.findings)


def test_signatures_new_refuses_to_overwrite(tmp_path: Path) -> None:
    args = [
        "signatures",
        "new",
        "--from",
        str(REPO / VLLM_DIED),
        "--out",
        str(tmp_path),
        "--id",
        "worker-died",
    ]
    assert invoke(args).exit_code == 0
    before = (tmp_path / "worker-died.yaml").read_text(encoding="utf-8")
    again = run_cli(*args)
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert (tmp_path / "worker-died.yaml").read_text(encoding="utf-8") == before


def test_signatures_new_on_a_healthy_log_is_a_user_error(tmp_path: Path) -> None:
    result = run_cli("signatures", "new", "--from", str(REPO / HEALTHY[0]), "--out", str(tmp_path))
    assert result.returncode == 2
    assert not any(tmp_path.iterdir())


def test_a_process_that_died_without_an_error_of_its_own_gets_the_signal_causes() -> None:
    """The engine's death notice with nothing from the dead process before it: the unknown
    finding lists why a process dies without a word (OOM killer, /dev/shm, native crash)."""
    log = (
        "(APIServer pid=3478) ERROR 10-16 16:27:53 [core_client.py:564] Engine core proc "
        "EngineCore_DP0 died unexpectedly, shutting down client.\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.category == "unknown"
    assert [h.cause.split(":")[0] for h in cause.hypotheses] == [
        "The kernel's OOM killer ended it",
        "Shared memory ran out (SIGBUS)",
        "A crash in native code (SIGSEGV in a kernel or library), which Python cannot report.",
    ]
    other = primary(run_text("Traceback (most recent call last):\nmypkg.WidgetError: bent\n"))
    assert other is not None and other.hypotheses == []


def test_a_kernel_that_fails_under_graph_capture_is_read_with_the_eager_test() -> None:
    log = (
        "RuntimeError: [AITER] /workspace/aiter_meta/csrc/opus_gemm/opus_gemm.cu:540\n"
        "  splitk workspace not initialized for the current CUDA stream.\n"
        "  Call aiter.opus_gemm_workspace_init() before HIP graph capture.\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "message-words"
    assert cause.title == "A kernel fails while the engine captures CUDA (HIP) graphs"
    assert "`--enforce-eager`" in cause.explanation


def test_a_parallel_size_the_release_does_not_support_yet_is_a_launch_setting_to_upgrade() -> None:
    """A refusal of a parallel size for a format (`GGUF quantization hasn't supported tensor
    parallelism yet`) reads as the launch setting, with a size of 1 or a newer release; only the
    words "not ... yet" bring the engine's upgrade."""
    line = (
        "(RayWorkerWrapper pid=11033) ERROR 08-19 16:07:35 worker_base.py:438] ValueError: "
        "GGUF quantization hasn't supported tensor parallelism yet. [repeated 2x across cluster]\n"
    )
    cause = primary(run_text(line))
    assert cause is not None and cause.signature == "message-words"
    assert cause.category == "launch_args"
    assert "tensor parallel size of 1" in cause.explanation
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "vllm",
        "upgrade",
    )
    named = primary(run_text("RuntimeError: custom op --tensor-parallel-size 3 failed to start\n"))
    assert named is not None and named.category == "launch_args"
    assert "does not support" not in named.title  # a flag named, no refusal of the combination
    refused = line.replace(" hasn't supported", " does not support").replace(" yet", "")
    settled = primary(run_text(refused))
    assert settled is not None and settled.category == "launch_args" and settled.package is None
