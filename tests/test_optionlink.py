"""An unexplained error read against the launch options: the option whose own words the
error names is the lead (core/optionlink.py)."""

from __future__ import annotations

from diagnose.core.optionlink import (
    env_assignments,
    forced_test_switch,
    launch_options,
    linked_option,
    words_of,
)
from tests.conftest import primary, run_text

ERROR = "AttributeError: 'TransformersForCausalLM' object has no attribute 'tp_size'"


def test_options_come_from_a_command_line_and_from_printed_settings() -> None:
    command = " --model-path /m/gemma --port 30000 --model-impl transformers --trust-remote-code"
    assert launch_options(command, None) == [
        ("--model-path", "/m/gemma"), ("--port", "30000"), ("--model-impl", "transformers"),
        ("--trust-remote-code", None),
    ]  # fmt: skip
    settings = "{'model': '/m/gemma', 'model_impl': 'transformers', 'enforce_eager': True}"
    assert ("--model-impl", "transformers") in launch_options(None, settings)
    assert ("--enforce-eager", None) in launch_options(None, settings)


def test_words_split_camel_and_snake_case() -> None:
    assert {"transformers", "causal", "lm", "tp", "size"} <= words_of(ERROR)


def test_the_one_option_the_error_names_is_the_link() -> None:
    options = [("--model-impl", "transformers"), ("--mem-fraction-static", "0.8")]
    link = linked_option(ERROR, options)
    assert link is not None and (link.flag, link.word) == ("--model-impl", "transformers")


def test_no_link_from_generic_words_paths_numbers_or_two_options() -> None:
    assert linked_option("ValueError: bad model path", [("--model-path", "/models/x")]) is None
    assert linked_option("ValueError: size 4 is wrong", [("--tp-size", "4")]) is None
    both = [("--model-impl", "transformers"), ("--tokenizer-mode", "transformers")]
    assert linked_option(ERROR, both) is None


def test_a_failure_in_an_options_code_path_says_so_with_the_test_of_it() -> None:
    """The option the error names outranks a tier's low-confidence lead that changes nothing."""
    log = (
        "python3 -m sglang.launch_server --model-path unsloth/gemma-3-27B-it --port 30000 "
        "--model-impl transformers\n"
        f"{ERROR}\n"
        "[2025-08-25 14:58:09] Received sigquit from a child process. It usually means the "
        "child failed.\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "launch-option-code-path"
    assert cause.category == "launch_args" and cause.confidence.value == "low"
    assert cause.patch is not None and cause.patch.args_remove == ["--model-impl"]
    assert cause.package is not None and cause.package.action == "upgrade"
    # the engine's source knows the class: its reading stays, as the other way to see it
    assert any("is SGLang's own class" in alternative for alternative in cause.alternatives)
    unrelated = log.replace("--model-impl transformers", "--mem-fraction-static 0.8")
    other = primary(run_text(unrelated))
    assert other is not None and other.signature == "sglang-own-code-mismatch"


def test_engine_variables_set_on_a_line_are_read_with_their_values() -> None:
    line = "docker run -e VLLM_USE_FLASHINFER_MOE_FP8=1 -e SGLANG_X=0 --env HF_TOKEN=t vllm/vllm"
    assert env_assignments(line) == [("VLLM_USE_FLASHINFER_MOE_FP8", "1"), ("SGLANG_X", "0")]
    assert env_assignments("$VLLM_PORT=8000 is not set here, nor MY_VLLM_X=1") == []


def test_a_variable_links_by_its_name_and_only_when_it_is_on() -> None:
    error = 'File "/usr/lib/python3/site-packages/flashinfer/fused_moe/core.py", line 5, in run'
    on = [("VLLM_USE_FLASHINFER_MOE_FP8", "1"), ("--port", "8000")]
    link = linked_option(error, on)
    assert link is not None and link.is_variable and link.word == "flashinfer"
    assert linked_option(error, [("VLLM_USE_FLASHINFER_MOE_FP8", "0")]) is None


def test_one_test_switch_on_is_a_lead_two_are_none() -> None:
    link = forced_test_switch({"VLLM_TEST_FORCE_FP8_MARLIN": "1", "VLLM_USE_V1": "1"})
    assert link is not None and (link.flag, link.word) == (
        "VLLM_TEST_FORCE_FP8_MARLIN",
        "test switch",
    )
    assert forced_test_switch({"VLLM_TEST_FORCE_FP8_MARLIN": "0"}) is None
    assert forced_test_switch({"VLLM_TEST_A": "1", "VLLM_TEST_B": "1"}) is None


def test_a_forced_test_path_that_fails_is_unset_first() -> None:
    """The real shape of a DGX Spark report: Marlin forced by a test switch, then an engine
    class lacks an attribute the forced path asks for."""
    log = (
        "export VLLM_NVFP4_GEMM_BACKEND=marlin\n"
        "export VLLM_TEST_FORCE_FP8_MARLIN=1\n"
        "vllm serve unsloth/Qwen3.6-35B-A3B-NVFP4-Fast --port 8000 --max-model-len 262144\n"
        "(EngineCore pid=689378) AttributeError: 'ParallelLMHead' object has no attribute "
        "'output_size_per_partition'\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature == "launch-option-code-path"
    assert cause.patch is not None and cause.patch.env_unset == ["VLLM_TEST_FORCE_FP8_MARLIN"]
    assert "is a test switch" in cause.explanation
    assert primary(run_text(log.replace("FP8_MARLIN=1", "FP8_MARLIN=0"))).signature != (
        "launch-option-code-path"
    )


def test_a_variable_an_error_message_quotes_is_not_one_the_log_set() -> None:
    quoted = (
        "ValueError: Current values: tokens = 1024, "
        "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK=512. Raise the env var"
    )
    assert env_assignments(quoted) == []
    assert env_assignments("VLLM_A=1 VLLM_B=2 vllm serve m") == [("VLLM_A", "1"), ("VLLM_B", "2")]
    assert env_assignments("      - VLLM_A=1") == [("VLLM_A", "1")]
    assert env_assignments('Environment="VLLM_A=1"') == [("VLLM_A", "1")]
