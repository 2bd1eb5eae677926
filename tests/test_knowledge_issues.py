"""The known-issue base: records valid and in sync with their index, each found through the
whole library as users run it, none firing on a healthy log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.core.models import Confidence, Diagnosis
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.knowledge import mined
from diagnose.knowledge.issue_base import (
    INDEX_NAME,
    IssueBase,
    anchors_payload,
    builtin_base,
    index_payload,
    load_records,
)
from diagnose.knowledge.issue_lint import coverage, lint
from diagnose.knowledge.known_issues import Fix
from diagnose.knowledge.location import ANCHORS_NAME, records_dir
from diagnose.library import engine_for, load_library
from diagnose.render import render
from tests.conftest import REPO, builtin_library, primary, run_cli, run_text

RECORDS = load_records(records_dir())
BY_ID = {record.id: record for record in RECORDS}
HEALTHY = sorted(
    [
        *(REPO / "fixtures/samples/healthy").iterdir(),
        *(REPO / "fixtures/incidents").glob("healthy*"),
        REPO / "fixtures/incidents/dist-init-slow-ok.journal.txt",
        REPO / "fixtures/journal/healthy-stop.journal.txt",
    ]
)


def test_the_base_is_large_and_drawn_from_many_threads() -> None:
    threads = {thread.url for record in RECORDS for thread in record.threads}
    assert len(RECORDS) >= 300 and len(threads) >= 200, (len(RECORDS), len(threads))


def test_the_shipped_index_and_anchors_are_in_sync_with_the_records() -> None:
    help_ = "run `diagnose known-issues build` after changing a record"
    index = (records_dir() / INDEX_NAME).read_text(encoding="utf-8")
    assert index == index_payload(RECORDS), help_
    anchors = (records_dir() / ANCHORS_NAME).read_text(encoding="utf-8")
    assert anchors == anchors_payload(RECORDS), help_


def test_lint_finds_no_error() -> None:
    assert [p for p in lint(RECORDS) if p.error] == []


def test_lint_lets_each_engine_claim_a_wording_both_print_once() -> None:
    sglang = BY_ID["sglang-fp8-block-quant-tp-not-divisible"]
    vllm = BY_ID["vllm-fp8-block-moe-tp-not-divisible"]
    shared = set(vllm.message.also) | {vllm.message.template}
    assert shared & set(sglang.message.also)  # the same ValueError in both engines' fp8.py
    assert [p for p in lint([sglang, vllm]) if p.error] == []
    twice = vllm.model_copy(update={"id": "vllm-second-claim"})
    assert [p.message for p in lint([vllm, twice]) if p.error] == [
        f"same wording as {vllm.id}: {text!r}"
        for text in (vllm.message.template, *vllm.message.also)
    ]
    anywhere = sglang.model_copy(update={"id": "any-engine-claim", "engine": "any"})
    assert any("same wording" in p.message for p in lint([vllm, anywhere]))


def test_covered_by_names_a_hand_signature_or_release_tables() -> None:
    library = {signature.id for signature in load_library(include_user_dirs=False)}
    library |= mined.RELEASE_TABLES | mined.ARGPARSE_READINGS
    for record in RECORDS:
        assert record.covered_by is None or record.covered_by in library, record.id


@pytest.mark.parametrize("record_id", sorted(BY_ID))
def test_each_example_is_found_by_the_whole_library(record_id: str) -> None:
    """Its example log alone, read as ``diagnose file`` reads it: the primary is the record,
    the hand signature that covers it, or another record that names the same kind of cause."""
    record = BY_ID[record_id]
    cause = primary(run_text(record.example.log))
    assert cause is not None, "no failure found in the example"
    if record.covered_by is not None:
        assert cause.signature == record.covered_by, (cause.signature, cause.tier)
        return
    assert cause.tier == "known_issue", (cause.signature, cause.tier)
    if cause.signature != record.id:
        assert BY_ID[cause.signature].category == record.category, cause.signature


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_no_record_fires_on_a_healthy_log(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    assert [m.record.id for m in builtin_base().match(lines)] == []


def test_leave_one_thread_out_removes_the_records_of_that_thread() -> None:
    record = next(r for r in RECORDS if r.covered_by is None)
    url = record.threads[0].url
    base = builtin_base().without_threads([url])
    assert all(url not in entry.thread_urls for entry in base.entries)
    assert len(base.entries) < len(builtin_base().entries)


def test_a_finding_from_the_base_says_where_it_came_from() -> None:
    log = (
        "[2026-03-12 09:14:09] server_args=ServerArgs(model_path='/models/X', tp_size=1)\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.tier == "known_issue"
    assert cause.category == "gpu_arch_support"
    assert cause.confidence is Confidence.MEDIUM
    assert cause.references and all(r.startswith("https://github.com/") for r in cause.references)
    assert "resolved public threads" in cause.explanation


def test_the_decisive_message_is_the_printed_error_not_the_code_line_that_raises_it() -> None:
    """A traceback shows the ``raise`` statement (its f-string matches the template too) and
    then the message it printed: the evidence is the message; the code line alone still finds
    the record."""
    raising = '    raise ValueError(f"{model.__class__.__name__} does not support LoRA yet.")\n'
    printed = "ValueError: Qwen3ASRForConditionalGeneration does not support LoRA yet.\n"
    frame = '  File ".../vllm/v1/worker/lora_model_runner_mixin.py", line 38, in load_lora_model\n'
    cause = primary(
        run_text("vllm serve Qwen/Qwen3-ASR-0.6B --enable-lora\n" + frame + raising + printed)
    )
    assert cause is not None and cause.signature == "vllm-model-does-not-support-lora"
    assert [e.line for e in cause.evidence] == [4]
    alone = primary(run_text("vllm serve Qwen/Qwen3-ASR-0.6B --enable-lora\n" + frame + raising))
    assert alone is not None and alone.signature == "vllm-model-does-not-support-lora"


def test_holes_bind_values_that_fill_the_fix() -> None:
    base = IssueBase(
        [
            BY_ID[next(iter(BY_ID))].model_copy(
                update={
                    "message": BY_ID[next(iter(BY_ID))].message.model_copy(
                        update={
                            "template": "unknown option --{flag:word} in launch line",
                            "also": (),
                        }
                    )
                }
            )
        ]
    )
    [match] = base.match(["error: unknown option --foo-bar in launch line"])
    assert match.values == {"flag": "foo-bar"}


def test_coverage_counts_records_and_threads() -> None:
    rows = coverage(RECORDS)
    assert sum(row[2] for row in rows) == len(RECORDS)
    assert json.dumps(rows)  # plain data for the command's table


# -- the known-issues commands ---------------------------------------------------------------


def _copy_of_base(tmp_path: Path, count: int = 5) -> Path:
    directory = tmp_path / "records"
    for path in sorted(records_dir().rglob("*.yaml"))[:count]:
        target = directory / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return directory


def test_lint_passes_the_shipped_base() -> None:
    result = run_cli("known-issues", "lint")
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().endswith("0 error(s), 0 warning(s)")


def test_lint_names_the_file_and_key_of_a_broken_record(tmp_path: Path) -> None:
    directory = _copy_of_base(tmp_path)
    broken = next(directory.rglob("*.yaml"))
    broken.write_text(broken.read_text().replace("category:", "category: nonsense\nold_category:"))
    result = run_cli("known-issues", "lint", "--dir", directory)
    assert result.returncode == 1
    assert f"{broken}: error:" in result.stdout


def test_build_writes_an_index_that_lint_then_accepts(tmp_path: Path) -> None:
    directory = _copy_of_base(tmp_path)
    assert "out of date" in run_cli("known-issues", "lint", "--dir", directory).stdout
    built = run_cli("known-issues", "build", "--dir", directory)
    assert built.returncode == 0 and "(5 records)" in built.stdout
    assert run_cli("known-issues", "lint", "--dir", directory).returncode == 0


def test_coverage_prints_a_row_per_engine_and_category() -> None:
    result = run_cli("known-issues", "coverage")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].split() == ["engine", "category", "records", "threads"]
    assert result.stdout.splitlines()[-1].split()[1] == str(len(RECORDS))


def test_add_drafts_a_record_from_the_first_unexplained_error(tmp_path: Path) -> None:
    thread = "https://github.com/sgl-project/sglang/issues/1234"
    log = tmp_path / "x.log"
    log.write_text(
        "[2026-03-12 09:14:21 TP0] Load weight begin.\n"
        "[2026-03-12 09:14:40 TP0] ValueError: frobnicator 7 rejected /opt/models/x\n"
    )
    result = run_cli("known-issues", "add", "--from", log, "--thread", thread, "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    [draft] = tmp_path.rglob("*.yaml")
    text = draft.read_text()
    assert "ValueError: frobnicator {n1:int} rejected {p1:path}" in text
    assert thread in text and "TODO" in text


def test_add_refuses_a_thread_that_is_not_a_thread(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("ValueError: frobnicator 7 rejected\n")
    result = run_cli("known-issues", "add", "--from", log, "--thread", "see slack")
    assert result.returncode == 2
    assert "--thread" in result.stderr and "Traceback" not in result.stderr


def test_reports_name_the_source_and_the_package_change() -> None:
    log = (
        "ImportError: /usr/local/lib/python3.10/dist-packages/sgl_kernel/common_ops.abi3.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
    )
    diagnosis = run_text(log)
    cause = primary(diagnosis)
    assert cause is not None and cause.package is not None
    for fmt in ("text", "markdown"):
        shown = " ".join(render(diagnosis, fmt).split())  # as wrapped at any width
        assert "known issue from resolved public threads" in shown, fmt
        assert f"{cause.package.action} {cause.package.name}" in shown, fmt
    assert json.loads(render(diagnosis, "json"))["findings"][0]["tier"] == "known_issue"


def _diagnosed(log: str, engine_version: tuple[str, str] | None = None) -> Diagnosis:
    engine = engine_for(builtin_library(), engine_version=engine_version)
    logs = [LogInput.from_text(log, "x.log")]
    run_logs(engine, logs)
    return engine.finish(inputs=[i.summary() for i in logs])


def test_a_record_of_other_releases_does_not_replace_the_broad_signature() -> None:
    log = "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory\n"
    # the CUDA 13 mismatch of SGLang 0.5 and later cannot be the cause in SGLang 0.4.4
    old = primary(_diagnosed(log, ("sglang", "0.4.4")))
    assert old is not None and old.signature == "cuda-runtime-library-not-found"
    assert old.package is not None and old.package.name == "torch"
    assert old.patch is not None and "LD_LIBRARY_PATH" in old.patch.env_set
    recent = primary(_diagnosed(log, ("sglang", "0.5.6")))
    assert recent is not None and recent.signature == "sgl-kernel-cuda12-wheel-with-cuda13-torch"


def test_the_engine_is_read_from_traceback_paths_and_imports_or_the_given_version() -> None:
    frame = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.10/site-packages/vllm/entrypoints/openai/api_server.py", '
        "line 12, in <module>\n"
        "    from vllm import cuda_utils\n"
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n"
    )
    assert _diagnosed(frame).engine == "vllm"
    bare = (
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n"
    )
    assert _diagnosed(bare).engine is None
    assert _diagnosed(bare, ("sglang", "0.4.4")).engine == "sglang"


def test_a_version_hole_fills_the_package_change() -> None:
    log = (
        "Exception: flashinfer_python with minimum required version 0.2.5 is not installed. "
        "Please "
        "uninstall the old version and reinstall the latest version by following the "
        "instructions at https://docs.flashinfer.ai/installation.html.\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.package is not None
    assert "{" not in cause.package.spec
    assert cause.package.spec == ">=0.2.5"


def test_a_placeholder_with_spaces_stays_one_command_line_word() -> None:
    log = (
        "ValueError: The number of required GPUs exceeds the total number of available GPUs "
        "in the placement group.\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.patch is not None
    assert cause.patch.args_add == ["--tensor-parallel-size", "<GPUs available>"]


def test_the_detail_lines_of_an_nccl_error_name_its_cause() -> None:
    log = (
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 'peer access is not supported between these two devices'\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature == "nccl-p2p-peer-access-unsupported"
    assert cause.patch is not None and cause.patch.env_set == {"NCCL_P2P_DISABLE": "1"}
    assert cause.evidence[0].line == 1  # the broad finding's place: the NCCL error itself


def test_a_long_wording_matches_word_for_word_whatever_the_case_and_quotes() -> None:
    log = (
        "valueerror: loading acme-vl-8b/ requires you to execute the configuration file in that "
        "repo on your local machine. make sure you have read the code there to avoid malicious "
        "use, then set the option 'trust_remote_code=true\u2019 to remove this error.\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature == "transformers-trust-remote-code-required"
    assert cause.patch is not None and cause.patch.args_add == ["--trust-remote-code"]
    short = "valueerror: cuda error: an illegal memory access was encountered\n"
    found = primary(_diagnosed(short))  # a short wording is never read loosely
    assert found is None or found.tier != "known_issue"


def test_a_message_quoted_up_to_its_first_clause_matches_the_record_it_begins() -> None:
    """`CUDA_HOME environment variable is not set`, quoted without the sentence that follows
    it, is the start of a record's wording: it matches, at a word's end and long enough only."""
    base = builtin_base()
    record = "cuda-home-not-set-for-jit-build"
    assert [m.record.id for m in base.match(["CUDA_HOME environment variable is not set"])] == [
        record
    ]
    said = base.match(["OSError: CUDA_HOME environment variable is not set."])
    assert [m.record.id for m in said] == [record] and said[0].values == {}
    assert base.match(["CUDA_HOME environment variable is no"]) == []  # inside a word
    assert base.match(["CUDA_HOME environment"]) == []  # too short to say which


def test_a_line_cut_after_a_value_matches_the_start_of_its_wording() -> None:
    """A thread's excerpt that stops in the middle of Triton's message, after the first value:
    the start of the wording matches as a whole, and only at a word's end."""
    base = builtin_base()
    cut = (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 106496, Hardware limit"
    )
    said = base.match([cut], engine="sglang")
    assert [m.record.id for m in said] == ["triton-out-of-shared-memory-small-gpu"]
    assert said[0].values == {}  # nothing is bound from a cut line
    assert base.match([cut.replace("Hardware limit", "Hardware lim")], engine="sglang") == []
    assert base.match([cut.replace("106496", "lots")], engine="sglang") == []  # not an int


def test_a_cut_line_matches_no_record_of_another_engine() -> None:
    """`Model architectures [...] are not supported for now.` begins both engines' records;
    with the engine unknown, a line cut after its value picks neither."""
    base = builtin_base()
    cut = "ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now."
    engines = {m.record.engine for m in base.match([cut], engine=None)}
    assert "vllm" not in engines and "sglang" not in engines


def test_a_reinstall_with_a_minimum_release_is_refused_as_an_upgrade() -> None:
    from pydantic import ValidationError

    from diagnose.knowledge.known_issues import PackageChange

    PackageChange(name="sgl-kernel", spec="", action="reinstall")
    with pytest.raises(ValidationError, match="use action: upgrade"):
        PackageChange(name="sgl-kernel", spec=">=0.2.0", action="reinstall")


def test_a_later_releases_wording_of_the_same_failure_finds_its_record() -> None:
    """vLLM 0.11 and later no longer say "Failed to infer device type" when no platform is
    found: the empty device type reaches torch, whose refusal is the only line left."""
    log = (
        'File ".../vllm/config/device.py", line 78, in __post_init__\n'
        "    self.device = torch.device(self.device_type)\n"
        "RuntimeError: Device string must not be empty\n"
    )
    cause = primary(_diagnosed(log))
    assert cause is not None and cause.signature == "other-vllm-failed-to-infer-device-type"
    assert cause.category == "cuda_driver"


def test_a_long_list_in_a_trailing_hole_is_values_not_a_class_of_message() -> None:
    """A record whose last hole takes the list the message prints (the architectures that
    may be pipelined) names that message, however long the list: it replaces the broad
    NotImplementedError reading."""
    archs = [f"Arch{n}ForCausalLM" for n in range(17)]
    log = (
        "INFO 10-01 10:00:00 api_server.py:1] vLLM API server version 0.6.1\n"
        "NotImplementedError: Pipeline parallelism is only supported for the following  "
        f"architectures: {archs}\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-pipeline-parallel-unsupported-model"


@pytest.mark.parametrize(
    ("heads", "asked", "offered"), [("9", "2", "1"), ("40", "6", "4"), ("28", "8", "4")]
)
def test_a_records_derived_setting_is_computed_from_the_messages_numbers(
    heads: str, asked: str, offered: str
) -> None:
    """The head-count record's size divides the heads and is never above the size asked for
    (the GPUs the host may have); a fixed size in the record would not divide every model."""
    log = (
        f"ValueError: Total number of attention heads ({heads}) must be divisible by tensor "
        f"parallel size ({asked}).\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-attention-heads-not-divisible-by-tp"
    assert cause.patch is not None
    assert cause.patch.args_add == ["--tensor-parallel-size", offered]


def test_a_derive_expression_that_does_not_parse_is_refused() -> None:
    with pytest.raises(ValueError, match="nearest_divisor"):
        Fix(args_add=("--tensor-parallel-size {fit}",), derive={"fit": "nearest_divisor(heads"})
