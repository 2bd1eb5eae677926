"""An error no tier explains that names the component an engine variable switches on."""

from __future__ import annotations

import pytest

from diagnose.core.models import Confidence
from diagnose.knowledge.switches import named_feature_flag, named_switch
from tests.conftest import primary, run_text

MRV2 = (
    "ValueError: Model Runner V2 supports pooling tasks ['classify', 'embed', "
    "'token_classify'], but this model selects 'embed&token_classify' from ['embed', "
    "'embed&token_classify', 'token_classify', 'token_embed']."
)


def test_the_component_a_switch_turns_on_is_the_lead_and_switching_it_off_the_test() -> None:
    cause = primary(run_text(MRV2 + "\n"))
    assert cause is not None and cause.signature == "engine-switch-code-path"
    assert (cause.tier, cause.confidence) == ("generic", Confidence.LOW)
    assert cause.patch is not None and cause.patch.env_set == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert "Start once with `VLLM_USE_V2_MODEL_RUNNER=0`" in cause.explanation


@pytest.mark.parametrize(
    ("text", "engines", "version", "switch"),
    [
        (MRV2, ("vllm", "sglang"), None, ("VLLM_USE_V2_MODEL_RUNNER", "vllm")),
        (MRV2, ("vllm",), "0.11.0", None),  # a release without the variable
        (MRV2, ("sglang",), None, None),  # another engine's switch
        # a version suffix alone names no component
        (
            "ValueError: Invalid attention backend for cuda, with use_v1: False",
            ("vllm",),
            None,
            None,
        ),
        # off by default, and not set: the component never ran
        ("RuntimeError: AITER FP4BMM kernel failed on this device", ("vllm",), None, None),
        # words of the paths in the message are not the message's
        (
            "KeyError: 'x' in /opt/model_runner_v2/cache.py",
            ("vllm",),
            None,
            None,
        ),
    ],
)
def test_a_switch_is_named_by_every_own_word_in_its_release(
    text: str, engines: tuple[str, ...], version: str | None, switch: tuple[str, str] | None
) -> None:
    assert named_switch(text, engines, version) == switch


def test_a_message_about_the_variable_it_names_is_no_switchs_component() -> None:
    """vLLM's check of VLLM_NVFP4_GEMM_BACKEND names FlashInfer and GEMM, every own word of
    SGLang's SGLANG_ENABLE_FLASHINFER_GEMM: the message is about the variable it names."""
    log = (
        "ValueError: Invalid value '' for VLLM_NVFP4_GEMM_BACKEND. Valid options: "
        "['flashinfer-cudnn', 'flashinfer-trtllm', 'flashinfer-cutlass', 'cutlass', 'marlin'].\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.signature != "engine-switch-code-path"


PREFIX_REFUSAL = (
    "AssertionError: new complete prefill with start_pos > 0 not supported\n"
    "(prefix caching not yet implemented in unified path)\n"
)


def test_a_refusal_naming_a_default_on_feature_turns_its_flag_off() -> None:
    """Reduced from vllm-project/vllm-metal issue 184: the platform's path has no prefix
    caching, which vLLM turns on by itself."""
    cause = primary(run_text(PREFIX_REFUSAL))
    assert cause is not None and cause.signature == "engine-flag-feature-not-handled"
    assert (cause.category, cause.confidence) == ("launch_args", Confidence.LOW)
    assert cause.patch is not None and cause.patch.args_remove == ["--enable-prefix-caching"]
    assert cause.patch.args_add in (["--disable-prefix-caching"], ["--no-enable-prefix-caching"])


@pytest.mark.parametrize(
    ("text", "version", "off"),
    [
        (PREFIX_REFUSAL, "0.11.0", "--no-enable-prefix-caching"),  # the release's own spelling
        ("ValueError: chunked prefill is not supported with this backend", "0.11.0",
         "--no-enable-chunked-prefill"),
        # no refusal: the feature is only named
        ("INFO prefix caching enabled, hit rate 0.0%", "0.11.0", None),
    ],
)  # fmt: skip
def test_the_flag_that_turns_a_refused_feature_off_is_the_releases(
    text: str, version: str, off: str | None
) -> None:
    named = named_feature_flag(text, ("vllm",), version)
    assert (named[0] if named else None) == off
