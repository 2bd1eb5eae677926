"""What the mined release tables settle by themselves: a value or flag the installed release
refuses that a newer one accepts, a near spelling, an architecture only newer releases have.
Every log goes through the whole library, so a hand signature that decides first would show."""

from __future__ import annotations

from diagnose.core.models import Finding
from diagnose.knowledge import mined
from diagnose.knowledge.mined import accepts
from diagnose.knowledge.source_tier import engine_source_findings
from tests.conftest import primary
from tests.test_knowledge_source import _cause, _diagnose, _view

VLLM_092_PARSERS = (
    "'deepseek_v3', 'granite-20b-fc', 'granite', 'hermes', 'internlm', 'jamba', 'llama4_pythonic', "
    "'llama4_json', 'llama3_json', 'minimax', 'mistral', 'phi4_mini_json', 'pythonic', 'xlam'"
)


def _upgrade(cause: Finding, engine: str) -> str:
    assert cause.package is not None, cause.explanation
    assert (cause.package.name, cause.package.action) == (engine, "upgrade")
    return cause.package.spec


def _refusal_with_list(architecture: str, version: str, listed_as: str) -> str:
    """vLLM's refusal of ``architecture`` with the list of what ``version`` registers, printed
    as that release prints it (``listed_as`` holds ``{}`` for the names)."""
    names = ", ".join(f"'{a}'" for a in sorted(mined.registries("vllm")[version].architectures))
    return (
        f"ValueError: Model architectures ['{architecture}'] are not supported for now. "
        f"Supported architectures: {listed_as.format(names)}\n"
    )


def test_the_registries_hold_what_each_release_registers() -> None:
    registries = mined.registries("vllm")
    assert set(registries) == set(mined.versions("vllm"))
    assert "Qwen3ForCausalLM" not in registries["0.7.3"].architectures
    assert "Qwen3ForCausalLM" in registries["0.34.0"].architectures
    assert accepts("vllm", "0.9.2", "--tool-call-parser", "glm45") is False
    assert accepts("vllm", "0.34.0", "--tool-call-parser", "glm45") is True
    assert accepts("sglang", "0.5.23", "--mm-attention-backend", "triton_attn") is True


def test_a_parser_name_a_newer_release_registers_asks_for_that_release() -> None:
    log = (
        "vllm serve: error: argument --tool-call-parser: invalid choice: 'glm45' "
        f"(choose from {VLLM_092_PARSERS})\n"
    )
    cause = _cause(log)
    assert cause.category == "launch_args"
    spec = _upgrade(cause, "vllm")
    first = mined.first_release_with(
        "vllm", lambda v: accepts("vllm", v, "--tool-call-parser", "glm45")
    )
    assert spec == f">={first}" and first not in ("0.5.5", None)
    assert cause.patch is None


def test_a_value_no_release_accepts_gets_its_near_spelling_as_the_patch() -> None:
    log = (
        "launch_server.py: error: argument --mm-attention-backend: invalid choice: 'triton' "
        "(choose from 'sdpa', 'fa3', 'triton_attn', 'ascend_attn')\n"
    )
    cause = _cause(log)
    assert cause.package is None
    assert cause.patch is not None
    assert cause.patch.args_remove == ["--mm-attention-backend"]
    assert cause.patch.args_add == ["--mm-attention-backend", "triton_attn"]


def test_a_quantization_method_no_release_implements_needs_its_plugin_not_an_upgrade() -> None:
    """The installed release's own list (the newest mined one's methods), and a method that no
    mined release implements: an upgrade does not bring it, a plugin does."""
    newest = mined.versions("vllm")[-1]
    methods = sorted(mined.flag_values("vllm", newest, "--quantization") or ())
    log = f"ValueError: Unknown quantization method: exl3. Must be one of {methods}\n"
    cause = _cause(log)
    assert cause.category == "model_unsupported"
    assert cause.package is None
    assert f"No vLLM release up to {newest} implements `exl3`" in cause.explanation
    assert any("plugin package that registers `exl3`" in a for a in cause.system_actions)


def test_a_variable_the_installed_release_removed_from_its_envs_names_the_last_release() -> None:
    """A plugin reads one of vLLM's variables from `vllm.envs` that the installed release no
    longer declares: the last release that does is the engine's fix, read from the tables."""
    log = "AttributeError: module 'vllm.envs' has no attribute 'VLLM_USE_FLASHINFER_MOE_FP16'\n"
    variable = mined.env_vars("vllm")["VLLM_USE_FLASHINFER_MOE_FP16"]
    last = max(variable.declared_in, key=lambda v: mined.release(v) or ())
    cause = _cause(log, ("vllm", "0.24.0"))
    assert cause.package is not None
    assert (cause.package.spec, cause.package.action) == (f"=={last}", "downgrade")
    assert "a plugin or a program built on vLLM" in cause.explanation
    # a release that still declares it: not this reading
    older = _cause(log, ("vllm", last))
    assert older.package is None or older.package.spec != f"=={last}"


def test_another_model_family_is_no_near_spelling_but_the_other_engines_format_name_is() -> None:
    log = (
        "launch_server.py: error: argument --tool-call-parser: invalid choice: 'llama4' "
        "(choose from 'qwen25', 'mistral', 'llama3', 'deepseekv3', 'pythonic')\n"
    )
    cause = _cause(log)
    assert cause.patch is not None, cause.explanation
    assert cause.patch.args_add == ["--tool-call-parser", "pythonic"]  # never llama3


def test_an_architecture_only_newer_releases_register_asks_for_the_engine_that_printed_it() -> None:
    cause = _cause(_refusal_with_list("Qwen3ForCausalLM", "0.7.3", "dict_keys([{}])"))
    assert cause.category == "model_unsupported"
    spec = _upgrade(cause, "vllm")
    assert spec.startswith(">=0.") and spec != ">=0.7.3"


def test_a_release_older_than_any_mined_is_compared_itself_not_as_the_oldest_mined() -> None:
    """vLLM's V0 engine prints its release; one before the oldest mined lacks what every mined
    release registers, so the upgrade goes to a release known to have it."""
    oldest = mined.versions("vllm")[0]
    assert "Gemma2ForCausalLM" in mined.registries("vllm")[oldest].architectures
    log = (
        "INFO 06-28 10:11:12 llm_engine.py:100] Initializing an LLM engine (v0.4.2) with config: "
        "model='google/gemma-2-9b-it', tokenizer='google/gemma-2-9b-it'\n"
        "ValueError: Model architectures ['Gemma2ForCausalLM'] are not supported for now. "
        "Supported architectures: ['AquilaModel', 'AquilaForCausalLM', 'BaiChuanForCausalLM', "
        "'GemmaForCausalLM', 'LlamaForCausalLM']\n"
    )
    cause = _cause(log)
    assert cause.category == "model_unsupported"
    assert _upgrade(cause, "vllm") == f">={oldest}"
    assert "(0.4.2)" in cause.explanation


def test_an_architecture_a_platform_backend_lacks_offers_no_upgrade() -> None:
    """The Neuron backend's own list refused the model: the GPU registry's releases say
    nothing of it, so no upgrade is offered and no flag either."""
    log = (
        "ERROR 12-10 20:13:47 engine.py:366] Model architectures ['OPTForCausalLM'] are not "
        "supported on Neuron for now. Supported architectures: ['LlamaForCausalLM', "
        "'MistralForCausalLM']\n"
    )
    cause = _cause(log)
    assert cause.category == "model_unsupported"
    assert cause.package is None and cause.patch is None
    assert "Neuron backend" in cause.title and "'LlamaForCausalLM'" in cause.explanation


def test_an_architecture_the_installed_release_has_is_left_to_the_other_tiers() -> None:
    log = (
        "(EngineCore_DP0 pid=1) ValueError: Model architectures ['LlamaForCausalLM'] are not "
        "supported for now.\n"
    )
    cause = _cause(log, ("vllm", "0.34.0"))
    assert cause.package is None or cause.package.spec != ">=0.34.0"


def test_the_transformers_fallbacks_refusal_of_an_architecture_asks_for_the_release_with_it() -> (
    None
):
    """vLLM 0.8 to 0.9 say an architecture they lack through the Transformers fallback; the
    registries name the first release that has it."""
    first = mined.first_release_with(
        "vllm", lambda v: "MiniMaxM1ForCausalLM" in mined.registries("vllm")[v].architectures
    )
    log = (
        "ValueError: Cannot find model module. 'MiniMaxM1ForCausalLM' is not a registered model "
        "in the Transformers library (only relevant if the model is meant to be in Transformers) "
        "and 'AutoModel' is not present in the model config's 'auto_map' (relevant if the model "
        "is custom).\n"
    )
    cause = _cause(log, ("vllm", "0.9.1"))
    assert cause.category == "model_unsupported"
    assert _upgrade(cause, "vllm") == f">={first}"


def test_a_text_variants_class_no_release_registers_is_overridden_to_the_familys_class() -> None:
    """`Gemma4TextForCausalLM` is no registered class, `Gemma4ForCausalLM` is: the config's
    architecture is overridden to it, instead of "no flag adds an architecture"."""
    registries = mined.registries("vllm")
    assert not any("Gemma4TextForCausalLM" in r.architectures for r in registries.values())
    log = "Model architectures ['Gemma4TextForCausalLM'] are not supported for now.\n"
    cause = _cause(log)
    assert cause.category == "model_unsupported"
    assert cause.patch is not None
    assert cause.patch.args_add == ["--hf-overrides", '{"architectures": ["Gemma4ForCausalLM"]}']
    assert "Gemma4ForCausalLM" in cause.title


def test_a_class_with_no_registered_family_gets_no_guessed_override() -> None:
    log = "Model architectures ['Zorblax7TextForCausalLM'] are not supported for now.\n"
    cause = _cause(log, ("vllm", "0.34.0"))
    assert cause.patch is None or "--hf-overrides" not in cause.patch.args_add


def test_the_release_that_printed_the_list_names_the_engine_of_a_makers_own_class() -> None:
    """vLLM 0.4's list of what it supports names the engine; the class is one no release of
    either engine has (a checkpoint whose config names its maker's own class)."""
    cause = _cause(_refusal_with_list("FunctionaryForCausalLM", "0.5.5", "[{}]"))
    assert cause.category == "model_unsupported"
    assert "No vLLM release" in cause.title and cause.package is None
    assert "--hf-overrides" in cause.explanation


def test_no_vllm_implementation_nor_a_compatible_transformers_one_asks_for_the_release() -> None:
    """vLLM's Transformers fallback refusing a class that later releases implement natively:
    the release that registers it, not the message's own hint (VLLM_USE_V1=0)."""
    log = (
        "Current error from vLLM: SmolVLMForConditionalGeneration has no vLLM implementation "
        "and the Transformers implementation is not compatible with vLLM. Try setting "
        "VLLM_USE_V1=0.\n"
    )
    first = mined.first_release_with(
        "vllm",
        lambda v: "SmolVLMForConditionalGeneration" in mined.registries("vllm")[v].architectures,
    )
    assert _upgrade(_cause(log), "vllm") == f">={first}"


def test_a_flag_added_after_the_installed_release_asks_for_an_upgrade() -> None:
    cause = _cause("launch_server.py: error: unrecognized arguments: --max-loaded-loras 1\n")
    assert cause.category == "launch_args"
    first = mined.first_release_with(
        "sglang",
        lambda v: mined.flag_table("sglang", v).lookup("--max-loaded-loras").outcome == "exact",
    )
    assert _upgrade(cause, "sglang") == f">={first}"
    assert f"added in SGLang {first}" in cause.title


def test_a_flag_no_release_has_and_nothing_spelled_near_is_dropped_with_its_value() -> None:
    """A launcher's llama.cpp option given to vLLM: no release has it, so the patch takes it out,
    and a sampling setting says where the engine takes it."""
    cause = _cause("vllm: error: unrecognized arguments: --temperature 0.8\n", ("vllm", "0.11.0"))
    assert cause.category == "launch_args"
    assert cause.patch is not None and cause.patch.args_remove == ["--temperature"]
    assert "per request" in cause.explanation


def test_a_flag_spelled_with_underscores_is_respelled_with_its_value() -> None:
    log = "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2"
    for cause in (
        _cause(log + "\n", ("sglang", "0.5.5.post3")),  # a known issue says it too
        engine_source_findings(_view(log, version="0.5.5.post3"))[0],
    ):
        assert cause.patch is not None
        assert cause.patch.args_remove == ["--reasoning_parser"]
        assert cause.patch.args_add == ["--reasoning-parser", "kimi_k2"]
    assert "spelled `--reasoning-parser`" in cause.title


def test_a_signature_without_a_fix_takes_the_one_the_release_tables_derive() -> None:
    log = (
        "vllm serve: error: argument --tool-call-parser: invalid choice: 'glm45' "
        f"(choose from {VLLM_092_PARSERS})\n"
    )
    cause = _cause(log, ("vllm", "0.9.2"))
    assert cause.signature == "invalid-tool-call-parser" and cause.tier == "signature"
    assert _upgrade(cause, "vllm").startswith(">=0.")
    assert "this version only knows" in cause.explanation  # the signature's own words stay


def test_a_short_excerpt_with_no_error_word_is_still_read_by_the_tiers() -> None:
    excerpt = "extract_hidden_states requires num_speculative_tokens to be 1\n"  # pasted alone
    cause = _cause(excerpt)
    assert (cause.tier, cause.category) == ("engine_source", "spec_decode_config")
    padded = "".join(f"INFO 03-25 05:44:{n:02d} [api_server.py:1] step {n}\n" for n in range(45))
    assert primary(_diagnose(padded + excerpt)) is None  # in a whole log it is no error line


def test_an_unknown_quantization_method_a_newer_release_lists_asks_for_that_release() -> None:
    listed = (
        "'aqlm', 'awq', 'deepspeedfp', 'tpu_int8', 'fp8', 'fbgemm_fp8', 'marlin', 'gguf', "
        "'gptq_marlin_24', 'gptq_marlin', 'awq_marlin', 'gptq', 'squeezellm', "
        "'compressed-tensors', 'bitsandbytes', 'qqq', 'experts_int8'"
    )
    # vLLM 0.5.5's methods; modelopt came in a later release, mxfp4 in one whose parser has no
    # choices for it (its registry says)
    cause = _cause(f"ValueError: Unknown quantization method: modelopt. Must be one of [{listed}].")
    assert _upgrade(cause, "vllm") == ">=0.6.3.post1"
    newer = _cause(f"ValueError: Unknown quantization method: mxfp4. Must be one of [{listed}].")
    assert _upgrade(newer, "vllm") == ">=0.10.2"
    # a method no mined release lists: no made-up release, but the plugin that brings it
    other = _cause(f"ValueError: Unknown quantization method: bitnet. Must be one of [{listed}].")
    assert other.package is None
    assert "an upgrade does not bring it" in other.explanation


VLLM_092_QUANTIZATION = (
    "'aqlm', 'awq', 'deepspeedfp', 'tpu_int8', 'fp8', 'ptpc_fp8', 'fbgemm_fp8', 'modelopt', "
    "'modelopt_fp4', 'marlin', 'bitblas', 'gguf', 'gptq_marlin_24', 'gptq_marlin', "
    "'gptq_bitblas', 'awq_marlin', 'gptq', 'compressed-tensors', 'bitsandbytes', 'qqq', 'hqq', "
    "'experts_int8', 'neuron_quant', 'ipex', 'quark', 'moe_wna16', 'torchao', 'auto-round', 'rtn'"
)


def test_the_quantization_methods_of_releases_whose_parser_lists_none_are_mined() -> None:
    option = mined.flag_table("vllm", "0.9.2").lookup("--quantization").option
    assert option is not None and option.choices is None  # the parser does not list them
    listed = {name.strip("'") for name in VLLM_092_QUANTIZATION.split(", ")}
    assert mined.registries("vllm")["0.9.2"].quantization_methods == listed
    assert accepts("vllm", "0.9.2", "--quantization", "mxfp4") is False
    assert accepts("vllm", "0.10.2", "--quantization", "mxfp4") is True


def test_a_quantization_method_only_a_newer_vllm_registers_asks_for_that_release() -> None:
    """vLLM 0.9 on checks the method against a ``Literal``, not the launch parser: the mined
    registries say which release brought it."""
    log = (
        "(EngineCore_0 pid=1) ValueError: Unknown quantization method: mxfp4. Must be one of "
        f"[{VLLM_092_QUANTIZATION}].\n"
    )
    for version in (None, ("vllm", "0.9.2")):
        cause = _cause(log, version)
        assert cause.signature == "vllm-release-tables", cause.signature
        assert _upgrade(cause, "vllm") == ">=0.10.2"
        assert "`--quantization mxfp4` needs a newer vLLM" in cause.title
    # an older release's parser refuses it too, and the newer ones that list it have no choices
    option = mined.flag_table("vllm", "0.8.5.post1").lookup("--quantization").option
    assert option is not None and option.choices is not None
    choices = ", ".join(f"'{choice}'" for choice in option.choices if choice is not None)
    log = "vllm serve: error: argument --quantization/-q: invalid choice: 'mxfp4' (choose from "
    assert _upgrade(_cause(f"{log}{choices})\n"), "vllm") == ">=0.10.2"


def test_a_value_later_releases_dropped_is_offered_within_the_releases_that_accept_it() -> None:
    """bitsandbytes left vLLM's quantization methods in a later release: an old release that
    refuses it is sent to the window of releases that take it, and a release past the window
    is sent back into it."""
    takes = lambda v: accepts("vllm", v, "--quantization", "bitsandbytes")  # noqa: E731
    window = mined.release_window("vllm", takes)
    assert window is not None
    first, until = window
    assert until is not None and mined.first_release_with("vllm", takes) is None
    old = _cause(
        "ValueError: Unknown quantization method: bitsandbytes. Must be one of "
        "['awq', 'gptq', 'squeezellm', 'marlin'].\n",
        ("vllm", "0.4.0"),
    )
    assert old.category == "model_unsupported"
    assert _upgrade(old, "vllm") == f">={first},<{until}"
    newest = mined.versions("vllm")[-1]
    printed = ", ".join(
        f"'{m}'" for m in sorted(mined.registries("vllm")[newest].quantization_methods)
    )
    removed = _cause(
        f"ValueError: Unknown quantization method: bitsandbytes. Must be one of [{printed}].\n",
        ("vllm", newest),
    )
    assert removed.package is not None
    assert (removed.package.action, removed.package.spec) == ("downgrade", f">={first},<{until}")


def test_an_engine_function_called_with_another_releases_arguments_blames_the_caller() -> None:
    """`resolve_hf_chat_template` is vLLM's (its module API lists it): a call missing an
    argument that the installed release requires comes from code written for another one."""
    assert "vllm.entrypoints.chat_utils" in mined.modules_naming("vllm", "resolve_hf_chat_template")
    cause = _cause(
        "[rank0]: TypeError: resolve_hf_chat_template() missing 1 required keyword-only "
        "argument: 'model_config'\n"
    )
    assert cause.signature == "vllm-function-called-by-another-release"
    assert cause.category == "kernel_build" and cause.package is None
    assert "another vLLM release" in cause.title
    unknown = _cause("TypeError: frobnicate_widgets() got an unexpected keyword argument 'x'\n")
    assert unknown.signature != "vllm-function-called-by-another-release"


def test_a_wrapper_the_engine_builds_called_by_a_newer_library_blames_the_library_release() -> None:
    """SGLang's NPU port puts a closure of `npu_wrapper_preprocess` in place of an image
    processor's `_preprocess`; a transformers release that calls it with other arguments fails
    on it. A server's request error quotes the TypeError without its class."""
    assert mined.modules_naming("sglang", "npu_wrapper_preprocess")
    cause = _cause(
        "[2026-05-11 11:19:09] Error in request: npu_wrapper_preprocess.<locals>._preprocess() "
        "missing 1 required positional argument: 'interpolation'\n"
    )
    assert cause.signature == "sglang-wrapper-called-by-another-library-release"
    assert cause.category == "kernel_build" and cause.package is None
    assert "pip check" in cause.explanation
    unknown = _cause(
        "Error in request: frobnicate.<locals>.inner() missing 1 required positional argument: 'x'\n"
    )
    assert not unknown.signature.endswith("called-by-another-library-release")


def test_a_refused_blackwell_generation_gpu_is_read_with_the_engines_upgrade_to_try() -> None:
    """Releases admitted the Blackwell generation's later parts check by check: where the log
    shows the engine, its upgrade is the test; an older architecture, or no engine, gets none."""
    newer = "RuntimeError: FlashInfer-CUTLASS MoE kernel does not support current device sm_120\n"
    cause = _cause(newer, ("vllm", "0.15.0"))
    assert (cause.signature, cause.category) == ("message-words", "gpu_arch_support")
    assert _upgrade(cause, "vllm") == ">0.15.0"
    older = "RuntimeError: FlashInfer-CUTLASS MoE kernel does not support current device sm_89\n"
    assert _cause(older, ("vllm", "0.15.0")).package is None
    assert _cause(newer).package is None


def test_a_check_whose_wording_later_releases_changed_dates_the_release_and_asks_for_the_later() -> (
    None
):
    """vLLM 0.17's CPU workers checked the NUMA nodes against every worker of the deployment;
    0.18 counts the local ones and says so. The old wording dates the installed release, and
    the later wording of the same check is the release to try."""
    old = (
        "AssertionError: Not enough allowed NUMA nodes to bind threads of 4 CPUWorkers. "
        "Allowed NUMA nodes are [0, 1].\n"
    )
    cause = _cause(old)
    assert cause.signature == "vllm-check-changed-after-this-release"
    assert _upgrade(cause, "vllm") == ">=0.18.1"
    assert "local CPUWorkers" in cause.explanation
    current = (
        "AssertionError: Not enough allowed NUMA nodes to bind threads of 4 local CPUWorkers. "
        "Allowed NUMA nodes are [0, 1]. Please try to bind threads manually.\n"
    )
    assert _cause(current).signature != "vllm-check-changed-after-this-release"


def test_a_check_that_later_releases_no_longer_make_asks_for_the_release_that_dropped_it() -> None:
    """vLLM 0.9.2's `run_headless` refused a data-parallel rank; later releases keep its other
    checks and not that one: the refusal dates the release, and the one that dropped it is the
    test."""
    cause = _cause("ValueError: data_parallel_rank is not applicable in headless mode\n")
    assert cause.signature == "vllm-check-changed-after-this-release"
    assert _upgrade(cause, "vllm") == ">=0.10.2"
    assert "no longer makes this check" in cause.explanation
    newer = _cause(
        "ValueError: data_parallel_rank is not applicable in headless mode\n", ("vllm", "0.11.0")
    )
    assert (
        newer.signature != "vllm-check-changed-after-this-release"
    )  # the log's release is past it
    kept = _cause("ValueError: data_parallel_size_local must be > 0 in headless mode\n")
    assert kept.signature != "vllm-check-changed-after-this-release"
