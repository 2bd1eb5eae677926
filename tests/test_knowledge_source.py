"""The engine-source tier: the decisive message matched against the mined templates of the
release that printed it, with its category, bound values and a fix checked against that
release's tables; never a finding on a healthy log, nothing loaded when a signature decides."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from diagnose.core.explain import Candidate, IncidentView
from diagnose.core.models import Confidence, Diagnosis, Evidence, Finding
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.knowledge import mined, source_index
from diagnose.knowledge.mined import ENGINE_NAMES, template_rows
from diagnose.knowledge.source_index import (
    SOURCES,
    SourceIndex,
    build_index,
    builtin_index,
    match_message,
    strip_exception,
)
from diagnose.knowledge.source_tier import (
    ReleaseContext,
    _option_judgement,
    builtin_knowledge,
    derive_fix,
    engine_source_findings,
)
from diagnose.library import engine_for
from diagnose.render import render
from tests.conftest import REPO, builtin_library, primary, run_text

HEALTHY = sorted(
    [
        *(REPO / "fixtures/samples/healthy").iterdir(),
        *(REPO / "fixtures/reasoning").glob("healthy-*"),
        *(REPO / "benchmarks/accuracy/healthy").glob("*.yaml"),
    ]
)

# A message of SGLang 0.5.17-0.5.18 (sglang/srt/entrypoints/engine.py) that no hand signature
# or known issue names; it tells the user which flag to set.
WEIGHT_CACHE_DAEMON = """\
Mar 04 10:00:00 gpu-node-07 python3[4101]: [2026-03-04 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', dp_size=2)
Mar 04 10:00:01 gpu-node-07 python3[4101]: Traceback (most recent call last):
Mar 04 10:00:01 gpu-node-07 python3[4101]:   File "/opt/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/engine.py", line 412, in _launch_weight_cache_daemons
Mar 04 10:00:01 gpu-node-07 python3[4101]: ValueError: Weight cache daemon mode does not support dp_size > 1. Please set --dp-size 1 when using --weight-cache-mode daemon.
Mar 04 10:00:02 gpu-node-07 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE
"""
# SGLang 0.5.23's MegaMoE check (sglang/srt/arg_groups/mega_moe_hook.py) still tells the
# user to lower --cuda-graph-max-bs, a flag that release split into -decode and -prefill.
STALE_FLAG = """\
[2026-03-04 10:00:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V4', tp_size=8)
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/mega_moe_hook.py", line 88, in validate_mega_moe_token_budget
ValueError: DeepSeekV4 with MegaMoE requires SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK to cover the largest decode / verify forward on one rank. Current values: largest decode graph bucket x tokens per request = 1024, SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK=512. Raise the env var to at least 1024 or lower --cuda-graph-max-bs / --max-running-requests / --speculative-num-draft-tokens.
"""
SIGNATURE_DECIDES = """\
Mar 04 10:00:01 gpu-node-07 python3[4101]: [2026-03-04 10:00:01] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use
Mar 04 10:00:01 gpu-node-07 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE
"""


def _diagnose(text: str, version: tuple[str, str] | None = None) -> Diagnosis:
    engine = engine_for(builtin_library(), engine_version=version)
    log = LogInput.from_text(text, "test.log")
    run_logs(engine, [log])
    return engine.finish(inputs=[log.summary()])


def _cause(text: str, version: tuple[str, str] | None = None) -> Finding:
    found = primary(_diagnose(text, version))
    assert found is not None
    return found


def _view(*messages: str, engine: str | None = "sglang", version: str | None = None):
    candidates = tuple(
        Candidate(text=m, evidence=Evidence(source="x.log", line=n + 1, text=m))
        for n, m in enumerate(messages)
    )
    return IncidentView(candidates, engine, version, None)


def test_the_shipped_index_holds_what_the_mined_templates_give() -> None:
    for source in SOURCES:
        shipped = builtin_index(source)
        assert shipped is not None, source
        built = SourceIndex(build_index(source, template_rows(source)))
        assert shipped.versions == built.versions
        assert shipped._keys == built._keys, f"{source}: run scripts/build_source_index.py"
        assert shipped.rows() == built.rows(), f"{source}: run scripts/build_source_index.py"
        assert shipped.classes == built.classes, f"{source}: run scripts/build_source_index.py"


@pytest.mark.parametrize(
    ("message", "engine", "version", "spec"),
    [
        (
            "TypeError: Qwen3VLDummyInputsBuilder.get_dummy_processor_inputs() takes 3 "
            "positional arguments but 4 were given",
            "vllm",
            "0.11.0rc2.dev31",
            ">=0.11.0",  # a nightly: the release it became
        ),
        (
            "AttributeError: 'MlxModelRunnerStub' object has no attribute 'prefill_aware_swa'",
            "sglang",
            None,
            None,
        ),
        (
            "AttributeError: '_AsyncLLMEngine' object has no attribute '_process_worker_outputs'",
            "vllm",
            "0.1.4",
            ">0.1.4",
        ),
        (  # relayed by the server as an HTTP error's body, status first
            "400 Gemma4ToolParser.__init__() takes 2 positional arguments but 3 were given",
            "vllm",
            "0.18.2rc1.dev71",
            ">=0.19.1",
        ),
        (  # relayed to the client in the JSON of an API error
            "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': "
            "'Gemma4ToolParser.__init__() takes 2 positional arguments but 3 were given', "
            "'type': 'BadRequestError', 'param': None, 'code': 400}",
            "vllm",
            "0.18.1",
            ">0.18.1",
        ),
        (
            "AttributeError: module 'sglang.srt.layers.quantization.deep_gemm_wrapper' has no "
            "attribute 'get_col_major_tma_aligned_tensor'. Did you mean: "
            "'get_mn_major_tma_aligned_tensor'?",
            "sglang",
            "0.5.1.post3",
            ">0.5.1.post3",
        ),
    ],
)
def test_a_call_or_attribute_the_engines_own_class_lacks_is_a_build_to_upgrade(
    message: str, engine: str, version: str | None, spec: str | None
) -> None:
    """Two parts of the installed engine disagree on one of its own classes or inner modules
    (a nightly, a port): the code is the engine's, so a newer build of it is the fix; with no
    release shown, the newest mined one (a bare upgrade may keep what is installed)."""
    if spec is None:
        spec = f">={builtin_index(engine).versions[-1]}"
    found = engine_source_findings(_view(message, engine=engine, version=version))
    assert len(found) == 1
    cause = found[0]
    assert (cause.category, cause.tier, cause.confidence) == (
        "kernel_build",
        "engine_source",
        Confidence.LOW,
    )
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        engine,
        spec,
        "upgrade",
    )
    assert cause.raised_in is not None and cause.raised_in.startswith(
        f"{ENGINE_NAMES[engine]}, {engine}."
    )


def test_a_message_logged_without_its_class_before_its_traceback_is_one_error() -> None:
    """vLLM logs the engine's exception without its class, then the traceback that ends on it:
    the reading of the first line (an engine class out of step) replaces the broad reading of
    the last (one package calling into another)."""
    prefix = "ERROR 05-26 00:17:47 [engine.py:448] "
    site = "/usr/local/lib/python3.12/dist-packages"
    log = "".join(
        prefix + line + "\n"
        for line in (
            "'ColumnParallelLinear' object has no attribute 'input_scale'",
            "Traceback (most recent call last):",
            f'  File "{site}/vllm/model_executor/layers/quantization/fp8.py", line 301, in process',
            "    input_scale=layer.input_scale,",
            f'  File "{site}/torch/nn/modules/module.py", line 1928, in __getattr__',
            "    raise AttributeError(",
            "AttributeError: 'ColumnParallelLinear' object has no attribute 'input_scale'. "
            "Did you mean: 'input_size'?",
        )
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-own-code-mismatch"


def test_an_engine_class_misused_in_a_programs_frame_is_that_program_out_of_step() -> None:
    """The engine's class asked for what it lacks by a program built on the engine (its frame
    is the traceback's innermost): the program's release, not the engine's, is the change."""
    site = "/opt/venv/lib/python3.10/site-packages"
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{site}/outlines/serve/vllm.py", line 60, in __init__\n'
        "    vocab = tokenizer.get_vocab()\n"
        "AttributeError: 'TokenizerGroup' object has no attribute 'get_vocab'\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-caller-written-for-another-release"
    assert "`outlines.serve.vllm`" in cause.explanation
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "outlines",
        "upgrade",
    )
    in_the_engine = log.replace("outlines/serve/vllm.py", "vllm/engine/llm_engine.py")
    own = primary(run_text(in_the_engine))
    assert own is not None and own.signature == "vllm-own-code-mismatch"


def test_an_engine_class_asked_by_the_engines_own_model_code_names_that_code() -> None:
    """A model file of the engine asks its own class for what it lacks (frames with the source
    tree's relative paths, torch's ``__getattr__`` innermost): the report names the model code
    that asks, and reads it as a bug of that path, not as a plugin or a port."""
    log = (
        'File "vllm/model_executor/model_loader/utils.py", line 61, in initialize_model\n'
        "    model = model_class(vllm_config=vllm_config, prefix=prefix)\n"
        'File "vllm/model_executor/models/qwen3_vl_moe.py", line 457, in __init__\n'
        "    assert self.language_model.start_layer >= len(\n"
        'File "torch/nn/modules/module.py", line 1964, in __getattr__\n'
        "    raise AttributeError(...)\n"
        "AttributeError: 'Qwen3MoeLLMForCausalLM' object has no attribute 'start_layer'\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "vllm-own-code-mismatch"
    assert (
        cause.raised_in == "vLLM, vllm.model_executor.models.qwen3_vl_moe (Qwen3MoeLLMForCausalLM)"
    )
    assert "the code that asks is vLLM's own too" in cause.explanation
    assert "a bug of this vLLM release in the code for this model" in cause.explanation
    assert cause.category == "model_unsupported"  # the code that asks is a model's file


def test_a_model_file_calling_a_shared_function_as_its_release_no_longer_defines_it() -> None:
    """The engine's own file for a model calls a shared function with an argument the same
    release dropped (frames elided by `...`, a wrapper's exception printed after): a bug of the
    release for this model, the upgrade its fix, not a mixed install or a program's call."""
    log = (
        "(EngineCore_DP0 pid=855) ERROR ... EngineCore failed to start.\n"
        "Traceback (most recent call last):\n"
        "  ...\n"
        '  File ".../vllm/model_executor/models/jais2.py", line 168, in __init__\n'
        "    self.rotary_emb = get_rope(\n"
        "TypeError: get_rope() got an unexpected keyword argument 'rotary_dim'\n"
        "RuntimeError: Engine core initialization failed. See root cause above.\n"
    )
    cause = _cause(log)
    assert cause.signature == "vllm-model-file-behind-its-release"
    assert cause.category == "model_unsupported"
    assert "`vllm.model_executor.models.jais2`" in cause.explanation
    assert cause.package is not None and (cause.package.name, cause.package.action) == (
        "vllm",
        "upgrade",
    )


def test_an_attribute_a_plugins_platform_class_itself_lacks_is_the_plugin_out_of_step() -> None:
    message = "type object 'SpyrePlatform' has no attribute 'spyre_warmup_shapes'"
    [found] = engine_source_findings(_view(message, engine="vllm", version="0.8.1"))
    assert found.signature == "vllm-platform-plugin-mismatch"
    assert found.explanation.startswith("The class `SpyrePlatform` has no attribute")
    assert found.package is not None and found.package.name == "vllm-spyre"


@pytest.mark.parametrize(
    "message",
    [
        "TypeError: LLM.generate() got an unexpected keyword argument 'prompt_token_ids'",
        "AttributeError: 'MyPluginRunner' object has no attribute 'prefill_aware_swa'",
        "AttributeError: 'NoneType' object has no attribute 'shape'",
    ],
)
def test_a_mismatch_of_a_public_or_foreign_class_is_not_the_engines_own(message: str) -> None:
    """A program calling the engine's public API was written for another release, which way is
    not known; a class the engine does not define is someone else's code."""
    assert engine_source_findings(_view(message, engine="vllm")) == []


def test_pythons_refusal_for_another_packages_module_is_not_an_engine_template() -> None:
    """vLLM's modules refuse unknown names in the same words as Python does for any module;
    `module 'os' has no attribute ...` is the standard library's, not vLLM's own check."""
    message = "module 'os' has no attribute 'sched_getaffinity'"
    assert engine_source_findings(_view(message, engine="vllm", version="0.9.0")) == []


def test_a_check_that_takes_one_value_of_an_option_sets_it_read_in_a_release_that_raises_it() -> (
    None
):
    """`only supports fp8 kv-cache, got {kv_cache_dtype}`: the hole is an option with fixed
    values and the text names the one it takes. With no release shown, the tables are those
    of the newest mined release that raises the message (vLLM 0.29.0 here, not 0.34.0)."""
    found = engine_source_findings(
        _view(
            "AssertionError: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got auto",
            engine="vllm",
        )
    )
    assert len(found) == 1 and found[0].category == "launch_args"
    patch = found[0].patch
    assert patch is not None and patch.args_add == ["--kv-cache-dtype", "fp8"]
    assert found[0].raised_in is not None and "0.24.0 to 0.29.0" in found[0].raised_in


def test_an_engine_message_no_signature_knows_gives_a_sourced_finding_with_a_checked_fix() -> None:
    cause = _cause(WEIGHT_CACHE_DAEMON, ("sglang", "0.5.17"))
    assert cause.tier == "engine_source"
    assert cause.category == "launch_args"
    assert cause.confidence is Confidence.LOW
    assert cause.raised_in is not None
    assert cause.raised_in.startswith("SGLang 0.5.17, sglang.srt.entrypoints.engine")
    assert "Derived from the engine's source, SGLang 0.5.17" in cause.explanation
    assert cause.patch is not None and cause.patch.args_add == ["--dp-size", "1"]
    assert any("does not support dp_size > 1" in e.text for e in cause.evidence)


UNLISTED_BACKBONE = (
    '  File "/workspace/.venv/lib/python3.11/site-packages/sglang/srt/configs/internvl.py", '
    "line 318, in __init__\n"
    "    raise ValueError(\n"
    "ValueError: Unsupported architecture: Qwen2ForCausalLM\n"
)


def test_a_model_refused_by_a_value_its_check_does_not_list_offers_the_newest_release() -> None:
    """Every mined release writes the check, but what it takes grows: with no release in the
    log, the newest is the fix to try; where the log shows the release, none is guessed."""
    cause = _cause(UNLISTED_BACKBONE)
    assert (cause.tier, cause.category) == ("engine_source", "model_unsupported")
    newest = mined.versions("sglang")[-1]
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "sglang",
        f">={newest}",
        "upgrade",
    )
    assert "a value this release does not list" in cause.explanation
    shown = _cause(UNLISTED_BACKBONE, ("sglang", newest))
    assert shown.tier == "engine_source" and shown.package is None


def test_holes_are_bound_and_a_stale_flag_is_mapped_to_its_successors_never_offered() -> None:
    cause = _cause(STALE_FLAG, ("sglang", "0.5.23"))
    assert cause.tier == "engine_source"
    assert cause.raised_in and "SGLang 0.5.23, sglang.srt.arg_groups.mega_moe_hook" in (
        cause.raised_in
    )
    assert "model_label = `DeepSeekV4`" in cause.explanation
    assert "decode_tokens = `1024`" in cause.explanation
    assert "`--cuda-graph-max-bs-decode`, `--cuda-graph-max-bs-prefill`" in cause.explanation
    assert "no longer has" in cause.explanation
    offered = cause.patch.args_add if cause.patch else []
    assert "--cuda-graph-max-bs" not in offered
    # the variable it names, with the type and default the release declares
    assert "`SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK` (int, default" in (
        cause.explanation
    )


def test_the_same_message_on_a_release_that_has_the_flag_sets_it() -> None:
    message = "ValueError: Please set --dp-size 1 when using --weight-cache-mode daemon."
    fix = derive_fix(message, {}, ReleaseContext("sglang", "0.5.17", "0.5.17"))
    assert fix.patch is not None and fix.patch.args_add == ["--dp-size", "1"]
    stale = derive_fix(
        "lower --cuda-graph-max-bs to 64", {}, ReleaseContext("sglang", "0.5.23", None)
    )
    assert stale.patch is None
    assert any("--cuda-graph-max-bs-decode" in s for s in stale.sentences)
    kept = derive_fix(
        "lower --cuda-graph-max-bs to 64", {}, ReleaseContext("sglang", "0.5.16", None)
    )
    assert kept.patch is not None and kept.patch.args_add == ["--cuda-graph-max-bs", "64"]


def test_a_hole_named_after_an_option_suggests_its_nearest_value_only_where_the_text_names_it() -> (
    None
):
    context = ReleaseContext("sglang", "0.5.18", "0.5.18")
    template = (
        "KV4 MLA expects attention_backend to be one of {choices}, but got {attention_backend}"
    )
    message = "KV4 MLA expects attention_backend to be one of ['flashmla'], but got flashinfr"
    fix = derive_fix(message, {"attention_backend": "flashinfr"}, context, template)
    assert any("the nearest is `flashinfer`" in s for s in fix.sentences)
    tensor = derive_fix(
        "MSA supports bf16 or fp8_e4m3fn Q, got torch.float32",
        {"dtype": "torch.float32"},
        context,
        "MSA supports bf16 or fp8_e4m3fn Q, got {dtype}",
    )
    assert tensor.sentences == []


def test_an_option_value_the_engine_refuses_by_name_is_a_launch_argument_of_that_option() -> None:
    """`Unsupported tool_call_parser: deepseek-r1`, quoted by a client with no error word: no
    rule knows the template, but it shows a launch option's value. The option it names is the
    one to change (deepseek-r1 is a --reasoning-parser value: that option is left alone)."""
    cause = _cause(
        "openai_tool_adapter.py:32 - Tool parsing failed: Unsupported tool_call_parser: "
        "deepseek-r1\n"
    )
    assert (cause.category, cause.tier) == ("launch_args", "engine_source")
    assert "`deepseek-r1` is not a value of `--tool-call-parser`" in cause.explanation
    assert "`qwen25`" in cause.explanation
    assert cause.patch is None
    assert cause.patch_note is not None and "Set `--tool-call-parser`" in cause.patch_note
    # a hole named after an attribute path is the option its name ends with
    kv = _cause("Unsupported kv_cache_dtype: fp8_e5m3.\n", ("sglang", "0.5.23"))
    assert "the nearest is `fp8_e5m2`" in kv.explanation and kv.patch is None
    # a one-word name beside a hole is a tensor's as often as an option's: no category from it
    context = ReleaseContext("sglang", "0.5.23", None)
    assert _option_judgement("unsupported dtype: {dtype}", context).category is None
    assert _option_judgement("Invalid deepep_mode: {mode}", context).category == "launch_args"


def test_a_message_asking_to_raise_an_option_by_its_python_name_is_a_launch_argument() -> None:
    """vLLM's encoder-budget check (v1/core/encoder_cache_manager.py) names no rule's words
    and no flag, only the option's Python name and the way to move it."""
    # (a known issue of the same message now decides the whole diagnosis: the tier is asked
    # directly)
    [cause] = engine_source_findings(
        _view(
            "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger "
            "than max_num_batched_tokens (2048). Please increase max_num_batched_tokens.",
            engine="vllm",
        )
    )
    assert (cause.category, cause.tier) == ("launch_args", "engine_source")
    assert cause.patch is not None
    assert cause.patch.args_add == ["--max-num-batched-tokens", "<higher than 2048>"]
    context = ReleaseContext("vllm", "0.10.2", None)
    named = "{x} is larger than max_num_batched_tokens ({y})."  # names it, asks nothing
    assert _option_judgement(named, context).category is None
    not_an_option = "Please increase num_tokens_padded."
    assert _option_judgement(not_an_option, context).category is None


def test_an_unrecognized_renamed_flag_names_its_successor_and_keeps_its_value() -> None:
    log = "launch_server.py: error: unrecognized arguments: --nsa-decode-backend flashmla\n"
    cause = _cause(log, ("sglang", "0.5.23"))
    assert cause.tier == "engine_source" and cause.category == "launch_args"
    assert "renamed to `--dsa-decode-backend`" in cause.explanation
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--nsa-decode-backend"]
    assert cause.patch.args_add == ["--dsa-decode-backend", "flashmla"]


def test_an_unrecognized_near_miss_gets_did_you_mean() -> None:
    cause = _cause("launch_server.py: error: unrecognized arguments: --tp-szie 2\n", None)
    assert "did you mean `--tp-size`" in cause.explanation
    assert cause.patch is None


def test_an_unrecognized_switch_no_release_has_is_dropped_with_its_near_spellings() -> None:
    """A switch sets nothing in a release without it: the start needs it gone, and the near
    spellings stay a hint, never the change."""
    cause = _cause("vllm: error: unrecognized arguments: --enable-metrics\n", None)
    assert cause.patch is not None
    assert (cause.patch.args_remove, cause.patch.args_add) == (["--enable-metrics"], [])
    assert "drop it (or, if you meant one, set `--enable-mfu-metrics`" in cause.explanation


def test_an_unrecognized_flag_whose_value_confirms_the_nearest_spelling_is_replaced() -> None:
    """`cutlass` is a value of the nearest spelling, --fp8-gemm-backend (and of the farther
    --moe-runner-backend): the value confirms the nearest, which the patch sets."""
    log = "sglang serve: error: unrecognized arguments: --fp8-gemm-runner-backend cutlass\n"
    cause = _cause(log, ("sglang", "0.5.23"))
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--fp8-gemm-runner-backend"]
    assert cause.patch.args_add == ["--fp8-gemm-backend", "cutlass"]
    unconfirmed = "sglang serve: error: unrecognized arguments: --fp8-gemm-runner-backend foo\n"
    assert _cause(unconfirmed, ("sglang", "0.5.23")).patch is None


def test_an_unknown_path_flag_becomes_the_subjects_flag_that_takes_a_path() -> None:
    """vLLM 0.7.3's one LoRA flag that takes a path asks for ``name=path``; SGLang's model
    flags that mention a path are several, and the model's own path flag is the one."""
    lora = "vllm: error: unrecognized arguments: --lora-path /adapters/sql-lora\n"
    cause = _cause(lora, ("vllm", "0.7.3"))
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--lora-path"]
    assert cause.patch.args_add == ["--lora-modules", "sql-lora=/adapters/sql-lora"]
    model = "launch_server.py: error: unrecognized arguments: --model-dir /models/qwen\n"
    cause = _cause(model, ("sglang", "0.5.23"))
    assert cause.patch is not None
    assert cause.patch.args_add == ["--model-path", "/models/qwen"]


def test_a_python_keyword_given_as_an_argument_becomes_its_flag() -> None:
    log = "vllm: error: unrecognized arguments: trust_remote_code=True max_num_seqs=64\n"
    cause = _cause(log, ("vllm", "0.7.3"))
    assert cause.patch is not None
    assert cause.patch.args_remove == ["trust_remote_code=True", "max_num_seqs=64"]
    assert cause.patch.args_add == ["--trust-remote-code", "--max-num-seqs", "64"]
    assert "Python keyword spelling of `--trust-remote-code`" in cause.explanation


def test_the_other_engines_spellings_are_rewritten_to_this_releases_every_one() -> None:
    """SGLang's flags given to vLLM are neither newer nor older vLLM flags: each is rewritten
    to the spelling of the release in the log, with its value; the record for "a flag from a
    newer release", which fits any unrecognized flag, gives way."""
    for log in (
        "vllm: error: unrecognized arguments: --mem-fraction-static 0.85 --context-length 65536\n",
        "INFO 05-02 10:11:12 api_server.py:528] vLLM API server version 0.6.3.post1\n"
        "api_server.py: error: unrecognized arguments: --mem-fraction-static 0.85 "
        "--context-length 65536\n",
    ):
        cause = _cause(log)
        assert cause.tier == "engine_source" and "SGLang's flag" in cause.explanation
        assert cause.patch is not None and cause.package is None
        assert cause.patch.args_remove == ["--mem-fraction-static", "--context-length"]
        assert cause.patch.args_add == [
            "--gpu-memory-utilization", "0.85", "--max-model-len", "65536"
        ]  # fmt: skip


def test_a_known_issue_whose_open_hole_holds_most_of_the_line_is_of_low_confidence() -> None:
    from diagnose.knowledge.tiers import known_issue_findings

    wide = _view(
        "vllm: error: unrecognized arguments: --mem-fraction-static 0.85 --context-length 65536",
        engine="vllm",
    )
    [finding] = known_issue_findings(wide)
    assert finding.signature == "vllm-flag-newer-than-installed"
    assert finding.confidence is Confidence.LOW
    # the record names the flag table's reading as covering it: even a narrow match gives way
    narrow = _view("vllm: error: unrecognized arguments: --x", engine="vllm")
    assert known_issue_findings(narrow)[0].confidence is Confidence.LOW


def test_a_path_hole_never_takes_a_flag() -> None:
    from diagnose.knowledge.tiers import known_issue_findings

    flags = _view("api_server.py: error: unrecognized arguments: --foo 1", engine="vllm")
    assert all(
        f.signature != "vllm-api-server-positional-model" for f in known_issue_findings(flags)
    )
    path = _view("api_server.py: error: unrecognized arguments: /models/Qwen3-8B", engine="vllm")
    assert known_issue_findings(path)[0].signature == "vllm-api-server-positional-model"


def test_a_template_whose_holes_hold_most_of_a_line_is_no_reading_of_it() -> None:
    """SGLang's `{kv_cache_dtype} is not supported for {model_arch}` has four fixed words; a
    vLLM warning that happens to hold them is not that error."""
    line = (
        "WARNING 10-09 08:58:51 [chat_utils.py:376] 'add_generation_prompt' is not supported for "
        "mistral tokenizer, so it will be ignored."
    )
    assert engine_source_findings(_view(line, engine=None)) == []
    # a hole holding more than half of the message: vLLM's speculative-decoding
    # `{method} is not supported yet.` is no reading of transformers' GGUF refusal, which
    # transformers' own template reads
    gguf = "ValueError: GGUF model with architecture gemma3 is not supported yet."
    found = engine_source_findings(_view(gguf, engine="vllm", version="0.12.0"))
    assert [f.raised_in for f in found] == [
        "transformers 5.25.0, transformers.modeling_gguf_pytorch_utils (load_gguf_checkpoint)"
    ]
    # `model` in its words is no option's: no `--speculative-draft-model-quantization` to change
    assert found[0].patch is None


def test_a_generic_template_matches_only_a_whole_message() -> None:
    rows = [
        {
            "id": "demo-000000000001",
            "text": "Bad value: {value}",
            "exception": "ValueError",
            "level": "error",
            "kind": "raise",
            "module": "demo.config",
            "function": "check",
            "startup": True,
            "versions": ["1.0"],
        }
    ]
    index = SourceIndex(build_index("demo", rows))
    [row] = index.rows()
    assert row.generic
    assert [h.values for h in match_message(index, "ValueError: Bad value: 7")] == [{"value": "7"}]
    assert match_message(index, "while loading the model: Bad value: 7") == []


def test_a_fixed_sentence_is_not_read_where_another_programs_sentence_goes_on() -> None:
    """`An unexpected error occurred` (a tool parser's log line) is not a client's `An
    unexpected error occurred while talking to vLLM. ...`; the line itself, or with a detail
    after punctuation, is."""
    rows = [
        {
            "id": "demo-000000000002",
            "text": "An unexpected error occurred",
            "exception": None,
            "level": "error",
            "kind": "log",
            "module": "demo.parser",
            "function": "parse",
            "startup": False,
            "versions": ["1.0"],
        }
    ]
    index = SourceIndex(build_index("demo", rows))
    assert match_message(index, "An unexpected error occurred") != []
    assert match_message(index, "An unexpected error occurred: boom") != []
    talking = '"An unexpected error occurred while talking to vLLM. The error was: 400"'
    assert match_message(index, talking) == []
    assert match_message(index, "An unexpected error occurred while parsing") == []


def test_a_message_cut_short_matches_the_start_of_its_template_only_from_its_beginning() -> None:
    rows = [
        {
            "id": "demo-000000000002",
            "text": "Loaded weights leave no room under --frac={frac}.\nRaise --frac above {low:float}.",
            "exception": "ValueError",
            "level": "error",
            "kind": "raise",
            "module": "demo.memory",
            "function": "profile",
            "startup": True,
            "versions": ["1.0"],
        }
    ]
    index = SourceIndex(build_index("demo", rows))
    [hit] = match_message(index, "ValueError: Loaded weights leave no room under --frac=0.88.")
    assert hit.cut_short and hit.values == {"frac": "0.88"}
    [whole] = match_message(
        index, "ValueError: Loaded weights leave no room under --frac=0.88. Raise --frac above 0.9."
    )
    assert not whole.cut_short and whole.values == {"frac": "0.88", "low": "0.9"}
    assert match_message(index, "args: Loaded weights leave no room under --frac=0.88") == []
    assert match_message(index, "Loaded weights leave no room under --frac=" + "x, " * 30) == []


def _demo_row(number: int, text: str, module: str, exception: str = "ValueError") -> dict:
    return {
        "id": f"demo-{number:012d}",
        "text": text,
        "exception": exception,
        "level": "error",
        "kind": "raise",
        "module": module,
        "function": "__init__",
        "startup": True,
        "versions": ["1.0"],
    }


def test_a_text_several_modules_write_is_one_row_that_names_the_others() -> None:
    text = "Layer-wise windows are not supported: {n} of {total} layers use one."
    rows = [_demo_row(n, text, f"demo.models.m{n}") for n in (1, 2, 3)]
    [row] = SourceIndex(build_index("demo", rows)).rows()
    assert (row.module, row.elsewhere) == ("demo.models.m1", ("demo.models.m2", "demo.models.m3"))


def test_a_message_cut_short_without_its_quotes_beats_a_template_whose_hole_took_it_all() -> None:
    rows = [
        _demo_row(1, "{kind} is not supported.", "demo.layers"),
        _demo_row(
            2,
            "Sliding windows on some layers only is not supported. This model sets "
            "`max_window_layers` = {layers} below `num_hidden_layers` = {total}.",
            "demo.models.qwen",
        ),
    ]
    index = SourceIndex(build_index("demo", rows))
    message = (
        "ValueError: Sliding windows on some layers only is not supported. This model sets "
        "max_window_layers = 64"
    )
    [hit] = match_message(index, message)
    assert hit.template.module == "demo.models.qwen"
    assert hit.cut_short and hit.values == {"layers": "64"}
    short = "ValueError: Quantized weights of this layer type is not supported."
    assert [h.template.module for h in match_message(index, short)] == ["demo.layers"]


def test_the_module_a_traceback_names_is_the_place_of_a_text_several_modules_write() -> None:
    message = (
        "ValueError: Sliding window for some but all layers is not supported. This model uses "
        "sliding window but max_window_layers = 64"
    )
    frame = (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/qwen2.py", '
        "line 330, in __init__\n    raise ValueError("
    )
    shown = Candidate(message, Evidence(source="x.log", line=9, text=message), frame=frame)
    [found] = engine_source_findings(IncidentView((shown,), "vllm", "0.8.4", None))
    assert found.raised_in is not None
    assert ", vllm.model_executor.models.qwen2; the same words are in " in found.raised_in
    [unshown] = engine_source_findings(_view(message, engine="vllm", version="0.8.4"))
    assert unshown.raised_in is not None and "vllm.model_executor.models.qwen2" in unshown.raised_in


def test_wrappers_are_never_the_decisive_message() -> None:
    wrapper = "Scheduler hit an exception: Traceback (most recent call last):"
    judged = [builtin_knowledge().judge(h) for h in match_message(builtin_index("sglang"), wrapper)]
    assert judged and all(j.role == "wrapper" for j in judged)
    assert engine_source_findings(_view(wrapper)) == []
    cause = (
        "ValueError: Weight cache daemon mode does not support dp_size > 1. Please set "
        "--dp-size 1 when using --weight-cache-mode daemon."
    )
    [found] = engine_source_findings(_view(wrapper, cause, version="0.5.17"))
    assert "does not support dp_size" in found.evidence[0].text


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_no_finding_from_this_tier_on_a_healthy_log(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".yaml":
        text = yaml.safe_load(text)["log"]
    diagnosis = _diagnose(text)
    assert [f.signature for f in diagnosis.findings if f.tier == "engine_source"] == []
    # and every line of it handed to the tier directly, as if the server had failed
    lines = [line for line in text.splitlines() if line.strip()]
    assert engine_source_findings(_view(*lines, engine=None)) == []


def test_nothing_is_loaded_when_a_hand_signature_decides() -> None:
    source_index.builtin_index.cache_clear()
    cause = _cause(SIGNATURE_DECIDES)
    assert cause.tier == "signature" and cause.category == "port_in_use"
    assert source_index.builtin_index.cache_info().currsize == 0


def test_reports_say_where_in_the_engine_the_message_comes_from() -> None:
    diagnosis = _diagnose(WEIGHT_CACHE_DAEMON, ("sglang", "0.5.17"))
    words = "derived from the engine's source, SGLang 0.5.17, sglang.srt.entrypoints.engine"
    assert words in " ".join(render(diagnosis, "text").split())
    assert words in render(diagnosis, "markdown")
    finding = json.loads(render(diagnosis, "json"))["findings"][0]
    assert finding["tier"] == "engine_source"
    assert finding["raised_in"].startswith("SGLang 0.5.17, sglang.srt.entrypoints.engine")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git for a clean tree")
def test_the_built_wheel_carries_the_knowledge_files(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip(f"no wheel could be built here: {built.stderr.strip()[-200:]}")
    [wheel] = tmp_path.glob("diagnose-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for source in SOURCES:
        assert f"diagnose/_knowledge/source-index/{source}.idx" in names
        assert f"diagnose/_knowledge/mined/{source}/templates.jsonl.gz" in names
    assert "diagnose/_knowledge/engine-source-rules.yaml" in names
    assert "diagnose/_knowledge/overrides.yaml" in names
    assert "diagnose/_knowledge/mined/sglang/flags/0.5.23.json" in names


# SGLang 0.5.1 to 0.5.9 (sglang/srt/server_args.py) reject trtllm_mha off SM100 with these
# words; later releases word it otherwise.
OLD_RELEASE_MESSAGE = (
    "ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). "
    "Please use a different backend."
)


def test_a_message_of_an_older_release_is_matched_and_named_with_that_release() -> None:
    (found,) = engine_source_findings(_view(OLD_RELEASE_MESSAGE, version="0.5.9"))
    assert found.category == "gpu_arch_support"
    assert found.raised_in and found.raised_in.startswith("SGLang 0.5.9, sglang.srt.server_args")
    assert "weaker" not in found.explanation


def test_with_no_version_shown_every_mined_release_counts() -> None:
    (found,) = engine_source_findings(_view(OLD_RELEASE_MESSAGE, version=None))
    assert found.raised_in and found.raised_in.startswith("SGLang 0.5.1.post3 to 0.5.9")
    assert "weaker" not in found.explanation
    (newer,) = engine_source_findings(_view(OLD_RELEASE_MESSAGE, version="0.5.23"))
    assert "does not write this message as mined" in newer.explanation


def test_a_message_listing_the_values_allowed_here_sets_the_portable_one() -> None:
    log = (
        "AssertionError: Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on "
        "Blackwell GPUs for hybrid GDN models. Got attention_backend=flashinfer.\n"
    )
    cause = engine_source_findings(_view(log.strip(), version="0.5.23"))[
        0
    ]  # a known issue says it too
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--attention-backend"]
    assert cause.patch.args_add == ["--attention-backend", "triton"]  # runs on any GPU


@pytest.mark.parametrize(
    "allowed, chosen",
    [
        # SGLang's deterministic-inference check on a Blackwell GPU: Ascend's backend and the
        # FlashAttention generations are bound to hardware, Triton's kernels are not
        ("['ascend', 'fa3', 'fa4', 'flashinfer', 'triton']", "triton"),
        ("['ascend', 'fa3', 'flashinfer']", "flashinfer"),  # no Triton: the first unbound one
        ("['ascend', 'fa3']", "ascend"),  # every one bound: the first, as printed
    ],
)
def test_of_the_values_allowed_the_fix_takes_one_no_hardware_binds(
    allowed: str, chosen: str
) -> None:
    log = (
        f"ValueError: Currently only {allowed} attention backends are supported for "
        "deterministic inference, but you explicitly specified 'trtllm_mha'."
    )
    cause = engine_source_findings(_view(log, version="0.5.23"))[0]
    assert cause.patch is not None and cause.patch.args_add == ["--attention-backend", chosen]


def test_a_hole_named_after_an_option_beside_the_values_allowed_sets_the_option() -> None:
    """`{dtype} is not supported ... Supported dtypes: [torch.float16]`: the hole is the
    option's value, the printed list what it may be here (a dtype as torch prints it), so the
    fix sets `--dtype float16` and the finding is a launch argument."""
    log = (
        "ValueError: torch.bfloat16 is not supported for quantization method awq. "
        "Supported dtypes: [torch.float16]"
    )
    cause = engine_source_findings(_view(log, engine="vllm", version="0.6.0"))[0]
    assert cause.category == "launch_args"
    assert cause.patch is not None
    assert cause.patch.args_add == ["--dtype", "float16"]
    assert "is not a value of `--dtype`" not in cause.explanation  # torch.bfloat16 is one


def test_a_message_asking_to_raise_or_lower_a_flag_gives_a_placeholder_on_that_side() -> None:
    context = ReleaseContext("sglang", "0.5.23", None)
    raised = derive_fix(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
        {"mem_fraction_static": "0.88"},
        context,
        # the log cut the message short: the rest of the engine's template names the fix
        "Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static above "
        "{suggested_mem_fraction_static:float} (minimum viable",
        cut_short=True,
    )
    assert raised.patch is not None
    assert raised.patch.args_add == ["--mem-fraction-static", "<higher than 0.88>"]
    assert raised.patch.placeholders() == ["<higher than 0.88>"]
    bounded = derive_fix("Try to raise --mem-fraction-static above 0.9.", {}, context)
    assert bounded.patch is not None
    assert bounded.patch.args_add == ["--mem-fraction-static", "<above 0.9>"]
    whole = derive_fix(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
        {"mem_fraction_static": "0.88"},
        context,
        "... Raise --mem-fraction-static above {suggested_mem_fraction_static:float}",
    )
    assert whole.patch is None  # the template's rest counts only for a message cut short


def test_a_feature_the_message_requires_turns_on_its_boolean_option() -> None:
    """`Chunked prefill is required for mamba cache mode 'align'`: the feature in words is the
    option `--enable-chunked-prefill`, and its `--no-` form comes off the command line."""
    context = ReleaseContext("vllm", "0.20.2", "0.20.2")
    fix = derive_fix(
        "1 validation error for VllmConfig Assertion failed, Chunked prefill is required for "
        "mamba cache mode 'align'.",
        {},
        context,
    )
    assert fix.patch is not None
    assert fix.patch.args_add == ["--enable-chunked-prefill"]
    assert fix.patch.args_remove == ["--no-enable-chunked-prefill"]
    assert fix.names_launch_option  # the finding is the launch option's (launch_args)
    assert derive_fix("A GPU is required for this model.", {}, context).patch is None


def test_a_value_above_an_option_raises_the_option_to_it() -> None:
    """`LoRA rank {rank} is greater than max_lora_rank {max_lora_rank}`: the option goes up to
    the value, or to the smallest of its fixed values that holds it."""
    context = ReleaseContext("vllm", "0.6.6.post1", "0.6.6.post1")
    template = "LoRA rank {rank} is greater than max_lora_rank {max_lora_rank}."
    fix = derive_fix(
        "LoRA rank 64 is greater than max_lora_rank 16.",
        {"rank": "64", "max_lora_rank": "16"},
        context,
        template,
    )
    assert fix.patch is not None and fix.patch.args_add == ["--max-lora-rank", "64"]
    unbound = derive_fix("LoRA rank x is greater than max_lora_rank 16.", {}, context, template)
    assert unbound.patch is None  # no value to raise it to
    # where the option takes fixed values, the smallest that holds the need
    newer = ReleaseContext("vllm", "0.34.0", "0.34.0")
    odd = derive_fix("", {"rank": "48", "max_lora_rank": "16"}, newer, template)
    assert odd.patch is not None and odd.patch.args_add == ["--max-lora-rank", "64"]


def test_a_flag_given_as_an_example_in_the_rest_of_a_cut_message_is_the_fix() -> None:
    """vLLM 0.5's bfloat16 check ends `... for example: --dtype=half.`; a log that shows
    only its first sentences still gets that setting from the source's rest."""
    context = ReleaseContext("vllm", "0.5.5", "0.5.5")
    fix = derive_fix(
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
        {},
        context,
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
        "{gpu_name} GPU has compute capability {major}.{minor}. You can use float16 instead "
        "by explicitly setting the`dtype` flag in CLI, for example: --dtype=half.",
        cut_short=True,
    )
    assert fix.patch is not None and fix.patch.args_add == ["--dtype", "half"]


def test_a_message_refusing_an_option_value_asks_for_another_value_of_that_option() -> None:
    context = ReleaseContext("sglang", "0.5.9", "0.5.9")
    fix = derive_fix(
        "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). "
        "Please use a different backend.",
        {},
        context,
    )
    assert fix.patch is not None
    assert fix.patch.args_add == ["--attention-backend", "<a value other than trtllm_mha>"]
    assert fix.patch.args_remove == ["--attention-backend"]
    # a value inside a longer name (the sgl-deep-gemm wheel) is no refused value
    wheel = derive_fix(
        "Single batch overlap is not supported on SM90 GPUs with the latest sgl-deep-gemm wheel.",
        {},
        ReleaseContext("sglang", "0.5.23", None),
    )
    assert wheel.patch is None


def test_a_message_another_release_words_with_a_clause_less_matches_its_template() -> None:
    index = builtin_index("vllm")
    assert index is not None
    message = "max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled"  # the mined releases add "based on the speculative decoding settings" after the value
    hits = match_message(index, message)
    assert hits and all(hit.reworded for hit in hits)
    assert hits[0].template.function == "VllmConfig._set_max_num_scheduled_tokens"
    assert list(hits[0].values.values()) == ["-1792"]
    unrelated = "max_num_scheduled_tokens is set to 8192 and the scheduler keeps that budget now"
    assert not any(hit.reworded for hit in match_message(index, unrelated))


def test_an_option_named_by_its_python_name_is_raised_with_a_placeholder() -> None:
    fix = derive_fix(
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        {},
        ReleaseContext("vllm", "0.34.0", None),
    )
    assert fix.patch is not None
    flag, value = fix.patch.args_add  # one of the alternatives the message offers: the first
    assert flag == "--gpu-memory-utilization" and "higher" in value and value.startswith("<")


def test_a_flag_the_message_says_to_do_without_is_removed() -> None:
    fix = derive_fix(
        "With `vllm serve`, you should provide the model as a positional argument or in a "
        "config file instead of via the `--model` option.",
        {},
        ReleaseContext("vllm", "0.11.0", "0.11.0"),
    )
    assert fix.patch is not None and fix.patch.args_remove == ["--model"]


def test_an_invalid_attention_backend_is_read_as_a_forced_backend_not_an_unknown() -> None:
    """vLLM's own message when VLLM_ATTENTION_BACKEND (or a flag) forces a backend that this
    platform and engine lack: a launch setting, said at low confidence."""
    log = (
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/platforms/cuda.py", line 171, in '
        "get_attn_backend_cls\n"
        "    raise ValueError(\n"
        "ValueError: Invalid attention backend for cuda, with use_v1: False use_mla: False\n"
    )
    cause = _cause(log, ("vllm", "0.7.3"))
    assert (cause.tier, cause.category, cause.confidence) == (
        "engine_source",
        "launch_args",
        Confidence.LOW,
    )


def test_an_error_naming_an_invalid_repository_points_at_reaching_the_model() -> None:
    """No record knows this wording: the words rule alone reads it, as a lead."""
    cause = _cause("RuntimeError: weights loader: invalid repository 'org/no-such-model'\n")
    assert (cause.tier, cause.category, cause.confidence) == (
        "generic",
        "model_access",
        Confidence.LOW,
    )
    assert cause.patch is None


def test_a_name_quoted_otherwise_than_the_release_quotes_it_still_matches() -> None:
    """vLLM 0.9.2 writes the option in backticks; a page the log was copied from renders them
    away or turns them into quotes."""
    cause = _cause(
        "ValueError: 'mm_processor_kwargs' is only supported for multimodal models.\n",
        ("vllm", "0.9.2"),
    )
    assert cause.tier == "engine_source"
    assert cause.raised_in is not None and "_init_multimodal_config" in cause.raised_in
    assert cause.category == "model_unsupported"


def test_a_refusal_the_engine_calls_temporary_is_fixed_by_the_first_release_without_it() -> None:
    """The message is raised up to vLLM 0.6.6.post1 among the releases whose messages were
    mined; the next one, 0.7.3, is the release to upgrade to."""
    message = (
        "AttributeError: Model Phi3ForCausalLM does not support BitsAndBytes quantization yet.\n"
    )
    cause = _cause(message, ("vllm", "0.6.3.post1"))
    assert cause.category == "model_unsupported"
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm",
        ">=0.7.3",
        "upgrade",
    )
    assert cause.patch is None
    assert "does not support this *yet*" in cause.explanation


def test_a_refused_pair_no_later_release_lifts_is_fixed_by_leaving_the_feature_out() -> None:
    """gpt-oss from a bitsandbytes checkpoint, the release not shown: no release to move to is
    known, so the fix is a checkpoint in another format."""
    message = (
        "AttributeError: Model GptOssForCausalLM does not support BitsAndBytes quantization yet. "
        "No 'packed_modules_mapping' found.\n"
    )
    cause = _cause(message, None)
    assert cause.package is None and cause.patch is None
    assert cause.patch_note is not None
    assert "refuses `GptOssForCausalLM` with BitsAndBytes quantization" in cause.patch_note
    assert "another format" in cause.patch_note


def test_a_model_version_above_every_listed_one_is_a_newer_model_than_the_release() -> None:
    """MiniCPM-V 4.5 on vLLM 0.10.1: the version shown is above the list, so any later release
    is the way (the wording's own history is not: a later release renamed only its hole)."""
    cause = _cause(
        "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. "
        "Got version: (4, 5)\n",
        ("vllm", "0.10.1"),
    )
    assert cause.category == "model_unsupported"
    assert cause.raised_in is not None and "0.10.2 to 0.29.0" in cause.raised_in
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm",
        ">0.10.1",
        "upgrade",
    )
    assert "newer version of the model" in cause.explanation


def test_a_newer_model_on_a_release_the_log_does_not_show_is_the_newest_release() -> None:
    """The engine is known from the traceback's paths, its release is not: the newest mined
    one, named (a bare upgrade may keep what is installed)."""
    cause = _cause(
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/models/minicpmv.py",'
        " line 1432, in __new__\n"
        "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. "
        "Got version: (4, 5)\n"
    )
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec, cause.package.action) == (
        "vllm",
        f">={builtin_index('vllm').versions[-1]}",
        "upgrade",
    )


def test_a_version_list_no_later_release_words_so_is_fixed_by_the_first_that_does_not() -> None:
    """vLLM 0.10.0 lists MiniCPM-V 2.0 to 2.6 and shows no version; 0.9.2 is the last mined
    release to word it so, 0.10.2 the first after it."""
    cause = _cause(
        "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, and 2.6\n",
        ("vllm", "0.10.0"),
    )
    assert cause.category == "model_unsupported"
    assert cause.package is not None and cause.package.spec == ">=0.10.2"


def test_a_model_version_within_the_list_is_no_upgrade() -> None:
    cause = _cause(
        "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. "
        "Got version: (1, 0)\n",
        ("vllm", "0.10.2"),
    )
    assert cause.package is None


def test_no_upgrade_of_an_engine_the_log_does_not_name() -> None:
    message = (
        "AttributeError: Model Phi3ForCausalLM does not support BitsAndBytes quantization yet.\n"
    )
    cause = _cause(message)
    assert cause.tier == "engine_source"
    assert cause.package is None


def test_a_value_the_message_offers_outright_for_its_flag_is_the_fix() -> None:
    """SGLang lists the modules to add, or offers `all`: the one value that fits any adapter."""
    cause = _cause(
        "ValueError: LoRA adapter 'ce37' contains target modules ['down_proj', 'o_proj'] that "
        "are not included in the specified --lora-target-modules ['embed_tokens']. Please "
        "update --lora-target-modules to include all required modules: ['down_proj', "
        "'embed_tokens', 'o_proj'], or use 'all' to enable all supported modules.\n",
        ("sglang", "0.5.1.post3"),
    )
    assert cause.tier == "engine_source"
    assert cause.patch is not None
    assert cause.patch.args_add == ["--lora-target-modules", "all"]


def test_a_check_no_later_release_writes_is_read_with_the_first_release_without_it() -> None:
    """vLLM 0.6.6.post1 is the last mined release to refuse a world larger than TP x PP; an
    engine run inside a trainer's larger world (a colocated rollout) starts from 0.7.3 on."""
    cause = _cause(
        "RuntimeError: world_size (8) is not equal to tensor_model_parallel_size (4) x "
        "pipeline_model_parallel_size (1)\n",
        ("vllm", "0.6.3.post1"),
    )
    assert cause.category == "launch_args"
    assert cause.package is not None
    assert (cause.package.name, cause.package.spec) == ("vllm", ">=0.7.3")
    assert "changed or removed" in cause.explanation


def test_a_refused_pair_that_is_no_quantization_names_no_checkpoint_format() -> None:
    from diagnose.knowledge.source_tier import _REFUSED_PAIR

    found = _REFUSED_PAIR.search("ValueError: FlashInferBackend doesn't support sliding window.")
    assert found is not None
    assert (found.group("subject"), found.group("feature")) == (
        "FlashInferBackend",
        "sliding window",
    )


def test_a_library_class_called_as_another_release_defines_it_names_the_library() -> None:
    """transformers' GenerationConfig is no engine class: the call that does not fit it is a
    pair of releases (the caller's and transformers') that do not fit, fixed by the package."""
    cause = _cause(
        "TypeError: GenerationConfig.validate() got an unexpected keyword argument 'strict'\n"
    )
    assert cause.signature == "transformers-called-as-another-release-defines-it"
    assert cause.category == "kernel_build" and cause.tier == "engine_source"
    assert cause.package is not None
    assert (cause.package.name, cause.package.action) == ("transformers", "upgrade")
    attribute = _cause("AttributeError: 'GenerationConfig' object has no attribute 'strict_x'\n")
    assert attribute.package is not None and attribute.package.action == "pin"


def test_a_library_class_spelled_in_snake_case_is_the_librarys() -> None:
    """Triton's knobs are classes in snake case (``runtime_knobs``): an attribute one lacks is
    the caller and Triton out of step; a snake-case name no mined library binds stays unread."""
    cause = _cause(
        "AttributeError: 'runtime_knobs' object has no attribute 'kernel_load_start_hook'\n"
    )
    assert cause.signature == "triton-called-as-another-release-defines-it"
    assert cause.raised_in == "triton, triton.knobs (runtime_knobs)"
    assert cause.package is not None and cause.package.name == "triton"
    unknown = _cause("AttributeError: 'no_such_thing' object has no attribute 'kernel_load'\n")
    assert "called-as-another-release-defines-it" not in unknown.signature


def test_a_class_name_the_engine_binds_and_a_library_keeps_deep_inside_is_the_engines() -> None:
    """SGLang's FlashInfer backend defines its own DecodeMetadata; a FlashInfer submodule binds
    the same name, which FlashInfer's package does not export: no library lead."""
    cause = _cause("AttributeError: 'DecodeMetadata' object has no attribute 'prefill_wrappers'\n")
    assert "called-as-another-release-defines-it" not in cause.signature


_TYPO_IN = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/model_loader/loader.py",'
    " line 441, in load_model\n"
    "    model = _initialize_model(vllm_config=vllm_config)\n"
    '  File "/usr/local/lib/python3.10/dist-packages/{file}", line 141, in get_quant_method\n'
    "    logger.warning_one(\n"
    "AttributeError: 'Logger' object has no attribute 'warning_one'. Did you mean: 'warning_once'?\n"
)


def test_a_name_the_engines_own_code_misspells_is_a_bug_of_that_release() -> None:
    log = _TYPO_IN.format(file="vllm/model_executor/layers/quantization/awq_marlin.py")
    cause = _cause(log, ("vllm", "0.8.5.post1"))
    assert cause.signature == "vllm-code-misspells-a-name"
    assert cause.category == "kernel_build" and cause.confidence is Confidence.MEDIUM
    assert cause.package is not None and (cause.package.name, cause.package.spec) == (
        "vllm",
        ">0.8.5.post1",
    )
    assert "vllm.model_executor.layers.quantization.awq_marlin" in cause.explanation
    # the same words raised in another package's code are no engine bug, and no library's
    # template whose module is not the raising one reads them either
    elsewhere = _cause(
        log.replace("vllm/model_executor/layers/quantization/awq_marlin.py", "myplugin/quant.py")
    )
    assert elsewhere.signature != "vllm-code-misspells-a-name"
    assert not (elsewhere.raised_in or "").startswith("flashinfer")


@pytest.mark.parametrize(
    "message",
    [
        # another package's module: the installed torch lacks the name, not a slip of vLLM's
        "AttributeError: module 'torch' has no attribute 'float8_e4m3fnuz'. Did you mean: "
        "'float8_e4m3fn'?",
        # a model config: transformers' release or the checkpoint's, not vLLM's code
        "AttributeError: 'Qwen2Config' object has no attribute 'rope_thetas'. Did you mean: "
        "'rope_theta'?",
        # names too far apart for a slip: a renamed attribute of another release
        "AttributeError: 'Scheduler' object has no attribute 'running_queue'. Did you mean: "
        "'waiting_queue'?",
    ],
)
def test_pythons_hint_is_no_typo_of_the_engine_where_another_release_lacks_the_name(
    message: str,
) -> None:
    log = _TYPO_IN.format(file="vllm/model_executor/layers/quantization/awq_marlin.py")
    log = log.replace(
        "AttributeError: 'Logger' object has no attribute 'warning_one'. Did you mean: "
        "'warning_once'?",
        message,
    )
    assert _cause(log).signature != "vllm-code-misspells-a-name"


def test_a_library_template_is_not_read_into_a_message_another_package_raised() -> None:
    """A traceback a page joined onto one line: its last frame before the message says whose
    code raised it."""
    prefix = "(VllmWorker rank=3 pid=1796) ERROR 05-03 05:43:44 [multiproc_executor.py:435] "
    joined = (
        f'{prefix}  File "/usr/local/lib/python3.10/dist-packages/{{file}}", line 141, in '
        f"get_quant_method{prefix}    logger.warning_one({prefix}AttributeError: 'Logger' object"
        " has no attribute 'warning_one'. Did you mean: 'warning_once'?\n"
    )
    plugin = _cause(joined.format(file="myplugin/quant.py"))
    assert not (plugin.raised_in or "").startswith("flashinfer")  # its template's words alone
    engine = _cause(joined.format(file="vllm/model_executor/layers/quantization/awq_marlin.py"))
    assert engine.signature == "vllm-code-misspells-a-name"


def test_a_command_given_twice_names_the_images_entrypoint() -> None:
    """`docker run vllm/vllm-openai vllm serve MODEL`: the entrypoint already runs `vllm serve`,
    the repeated `vllm` is read as the model, and argparse refuses `serve MODEL`."""
    log = "vllm: error: unrecognized arguments: serve /models/Qwen3-8B --port 8000\n"
    cause = _cause(log, ("vllm", "0.11.0"))
    assert cause.tier == "engine_source" and cause.category == "launch_args"
    assert cause.title == "`vllm serve` is given twice: the image's entrypoint already runs it"
    assert "give `/models/Qwen3-8B` first" in cause.explanation
    assert (
        cause.patch is None and cause.patch_note == "Change the command line by hand (see above)."
    )


def test_a_refused_cuda_graph_capture_size_is_a_launch_setting_a_later_release_changed() -> None:
    """FlashAttention's full-graph builder refusing capture sizes above 992 (vLLM 0.9.2 to
    0.11.0): the capture sizes are a launch setting, and no later release writes the check."""
    message = "ValueError: Capture size larger than 992 is not supported for full cuda graph."
    (found,) = engine_source_findings(_view(message, engine="vllm"))
    assert found.category == "launch_args" and found.tier == "engine_source"
    assert found.package is not None and (found.package.name, found.package.spec) == (
        "vllm",
        ">=0.12.0",
    )


@pytest.mark.parametrize(
    ("value", "unset", "env_set"),
    [
        ("", ["VLLM_NVFP4_GEMM_BACKEND"], {}),  # an empty value is a value to the check
        ("flashinfer_trtllm", [], {"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-trtllm"}),
    ],
)
def test_a_refused_variable_value_is_unset_or_spelled_as_a_choice(
    value: str, unset: list[str], env_set: dict[str, str]
) -> None:
    """vLLM's own check of a variable's value, its choices printed as a list: the list is one
    value of the template's hole, not words met by chance."""
    message = (
        f"ValueError: Invalid value '{value}' for VLLM_NVFP4_GEMM_BACKEND. Valid options: "
        "['flashinfer-cudnn', 'flashinfer-trtllm', 'flashinfer-cutlass', 'cutlass', 'marlin']."
    )
    (found,) = engine_source_findings(_view(message, engine="vllm", version="0.19.1"))
    assert found.category == "unit_config" and found.tier == "engine_source"
    assert found.patch is not None
    assert (found.patch.env_unset, found.patch.env_set) == (unset, env_set)


def test_a_name_the_release_does_not_register_asks_for_one_it_has_and_names_the_plugin() -> None:
    """The registry's own list is the choice; the placeholder stays the user's to fill in (the
    release's values check would otherwise read its example as the value)."""
    message = (
        "KeyError: \"Reasoning parser 'telechat' not found. Available parsers: "
        "['deepseek_r1', 'qwen3', 'glm45']\""
    )
    cause = _cause(message + "\n", ("vllm", "0.19.1"))
    assert cause.category == "launch_args"
    assert cause.patch is not None
    assert cause.patch.args_add == [
        "--reasoning-parser",
        "<one of the registered names, e.g. deepseek_r1>",
    ]
    assert "`--reasoning-parser-plugin`" in cause.explanation


def test_a_flag_no_release_of_either_engine_has_was_written_for_another_build() -> None:
    """No mined vLLM or SGLang release defines it: a fork's, a custom build's or a plugin's,
    which the recipe that passes it expects."""
    cause = _cause("vllm: error: unrecognized arguments: --gdn-decode-kernel b12x\n", None)
    assert cause.title.endswith("(in no vLLM release)")
    assert "written for a fork or a custom build" in cause.explanation
    assert cause.patch is not None and cause.patch.args_remove == ["--gdn-decode-kernel"]
    other = _cause("vllm: error: unrecognized arguments: --mem-fraction-static 0.8\n", None)
    assert "written for a fork" not in other.explanation  # SGLang's flag


def test_an_attention_backends_own_refusal_names_another_backend_by_the_releases_option() -> None:
    """The backend cannot run here: another backend is the way on, spelled as the release
    spells it (an option from the releases that have one), never as a patch of a guess."""
    cause = _cause("AssertionError: FlashAttention version not detected.\n", ("vllm", "0.19.1"))
    assert cause.tier == "engine_source"
    assert cause.category == "launch_args"
    assert "`flash_attn` attention backend's own" in cause.explanation
    assert cause.patch is None
    assert cause.patch_note is not None
    assert "`--attention-backend TRITON_ATTN`" in cause.patch_note
    assert "`attention_backend` in `--speculative-config`" in cause.patch_note


def test_a_lora_check_that_a_model_lacks_support_is_the_model_with_a_release_that_dropped_it() -> (
    None
):
    cause = _cause(
        "AttributeError: To support LoRA for MoE model, 'get_expert_mapping' must be implemented\n",
        ("vllm", "0.19.1"),
    )
    assert cause.tier == "engine_source"
    assert cause.category == "model_unsupported"
    assert cause.package is not None
    assert (cause.package.name, cause.package.action) == ("vllm", "upgrade")
    assert cause.package.spec == ">=0.25.1"  # the first mined release without the check


def test_an_engine_class_called_otherwise_from_a_programs_own_file_asks_no_engine_upgrade() -> None:
    """The innermost frame is a program's own source (no installed package): the program and
    the engine release are out of step, and which way is not known, so no engine change is
    guessed (an upgrade would keep the renamed argument)."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/chatbot/app/serving.py", line 41, in build\n'
        "    self.completion = OpenAIServingCompletion(\n"
        "TypeError: OpenAIServingCompletion.__init__() got an unexpected keyword argument "
        "'served_model'\n"
    )
    cause = _cause(log, ("vllm", "0.4.1"))
    assert cause.signature == "program-uses-engine-api-of-another-release"
    assert cause.package is None
    assert "/srv/chatbot/app/serving.py" in cause.explanation
    assert "Install a newer vLLM" not in cause.explanation


def test_an_option_allowed_only_with_anothers_value_drops_it_and_the_options_that_turn_it_on() -> (
    None
):
    cause = _cause(
        "ValueError: data_parallel_external_lb can only be set when data_parallel_size > 1\n",
        ("vllm", "0.22.1"),
    )
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--data-parallel-external-lb", "--data-parallel-rank"]
    assert "only when `--data-parallel-size` > 1" in cause.explanation


def test_an_engine_check_no_rule_names_reads_by_its_code_and_a_wrapper_stays_unread() -> None:
    """An assertion of the engine's own start-up code is a lead in the category of the code
    that raises it; a message that only reports another (``See stack trace``) is never one."""
    check = _cause(
        "AssertionError: Error in memory profiling. Initial free memory 30.3 GiB, current free "
        "memory 30.3 GiB. This happens when other processes sharing the same container release "
        "GPU memory while vLLM is profiling during initialization.\n",
        ("vllm", "0.14.1"),
    )
    assert (check.tier, check.category) == ("engine_source", "kernel_build")
    wrapper = _cause(
        "RuntimeError: Engine process failed to start. See stack trace for the root cause.\n",
        ("vllm", "0.14.1"),
    )
    assert wrapper.tier != "engine_source"


@pytest.mark.parametrize(
    ("message", "bare"),
    [
        (
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig "
            "Value error, fp8 quantization is currently not supported in tpu. [type=value_error, "
            "input_value=ArgsKwargs((), {'model': 'x'}), input_type=ArgsKwargs]",
            "fp8 quantization is currently not supported in tpu.",
        ),
        (  # a field named between the header and the error
            "ValidationError: 2 validation errors for VllmConfig max_model_len Value error, "
            "too long",
            "too long",
        ),
        ("ValueError: plain message", "plain message"),
    ],
)
def test_pydantics_wrapping_is_not_part_of_the_message(message: str, bare: str) -> None:
    """A leading hole (``{quant} quantization is ...``) would take pydantic's header in."""
    assert strip_exception(message) == bare


def test_a_message_both_engines_write_names_neither_when_the_log_names_no_engine() -> None:
    message = (
        "ValueError: Cannot find model module. 'MyLabLMForCausalLM' is not a registered model in "
        "the Transformers library (only relevant if the model is meant to be in Transformers) and "
        "'AutoModel' is not present in the model config's 'auto_map' (relevant if the model is "
        "custom)."
    )
    unnamed = engine_source_findings(_view(message, engine=None))[0]
    assert unnamed.title.startswith("The engine stopped: Cannot find model module.")
    assert "and vLLM writes the same message" in unnamed.explanation
    assert unnamed.category == "model_unsupported"
    named = engine_source_findings(_view(message, engine="vllm"))[0]
    assert named.title.startswith("vLLM stopped: ")
    assert "writes the same message" not in named.explanation
