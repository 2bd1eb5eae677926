"""Derived values of signatures: the text function that picks the choice a refused value meant."""

from __future__ import annotations

import pytest

from diagnose.core.expr import (
    Arithmetic,
    Condition,
    ExpressionError,
    choice_list,
    nearest_choice,
    template_fields,
    version_change,
)

KV_CACHE_DTYPES = "'auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3'"


@pytest.mark.parametrize(
    ("value", "choices", "nearest"),
    [
        ("fp8_e4m3fn", KV_CACHE_DTYPES, "fp8_e4m3"),  # closest spelling
        ("deepseek_r1", "deepseek-r1, qwen3", "deepseek-r1"),  # - and _ alike
        ("Auto", KV_CACHE_DTYPES, "auto"),  # case
        ("flashin", "[triton, flashinfer, fa3]", "flashinfer"),  # the one choice it begins
        ("fp8", "'auto', 'half', 'float16', 'bfloat16', 'float', 'float32'", None),
        ("flash_attn", "triton, torch_native, flashinfer, fa3, flashmla", None),  # 0.67: too far
    ],
)
def test_nearest_choice_patches_only_a_near_spelling(
    value: str, choices: str, nearest: str | None
) -> None:
    assert (
        Arithmetic("nearest_choice(value, choices)").value({"value": value, "choices": choices})
        == nearest
    )


def test_a_hint_may_take_a_looser_spelling_than_a_patch() -> None:
    choices = choice_list("triton, torch_native, flashinfer, fa3, flashmla")
    assert nearest_choice("flash_attn", choices) is None
    assert nearest_choice("flash_attn", choices, cutoff=0.6) == "flashmla"


def test_text_function_without_its_values_derives_nothing() -> None:
    assert Arithmetic("nearest_choice(value, choices)").value({"value": "fp8"}) is None


@pytest.mark.parametrize(
    "source", ["nearest_choice(value)", "nearest_choice(value, 'a, b')", "1 + nearest_choice(a, b)"]
)
def test_text_function_takes_two_captured_names_at_the_top(source: str) -> None:
    with pytest.raises(ExpressionError):
        Arithmetic(source)


@pytest.mark.parametrize(
    ("installed", "wanted", "change"),
    [
        ("0.6.13", "0.6.14", "upgrade"),
        ("0.6.15", "0.6.14", "downgrade"),
        ("0.5.10", "0.5.9", "downgrade"),  # by release numbers, not as text
        ("2.5", "2.5.0", None),
        ("0.6.14", "latest", None),
    ],
)
def test_version_change_is_the_direction_a_package_moves(
    installed: str, wanted: str, change: str | None
) -> None:
    assert version_change(installed, wanted) == change


@pytest.mark.parametrize(
    ("condition", "value", "holds"),
    [
        ("engine_version < '0.10.0'", "0.8.5", True),  # by release numbers, not as text
        ("engine_version < '0.10.0'", "0.9", True),  # a two-number release the user gave
        ("engine_version < '0.10.0'", "0.9.2.post1", True),
        ("engine_version >= '0.10.0'", "0.10.1rc1", True),
        ("engine_version >= '0.10.0'", "v0.14.1", True),
        ("engine_version < '0.10.0'", "0.14.1", False),
        ("engine_version < '0.10.0'", "nightly", False),  # no release: compared as text
        ("value < 0.9", "0.85", True),  # two numbers stay numbers
        ("value > 1", "2", True),
    ],
)
def test_an_ordering_of_releases_compares_their_numbers(
    condition: str, value: str, holds: bool
) -> None:
    name = condition.split()[0]
    assert Condition(condition).holds({name: value}) is holds


@pytest.mark.parametrize(
    ("condition", "value", "holds"),
    [
        ("name in 'EngineCore*, APIServer'", "EngineCore_DP3", True),  # a prefix
        ("name in 'EngineCore*, APIServer'", "APIServer", True),
        ("name in 'EngineCore*, APIServer'", "APIServer_1", False),  # no star: the whole value
        ("name not in 'EngineCore*, APIServer'", "run_inference_one_model", True),
        ("name in 'EAGLE, NEXTN'", "EAGLE3", False),
    ],
)
def test_a_member_ending_in_a_star_is_a_prefix(condition: str, value: str, holds: bool) -> None:
    assert Condition(condition).holds({"name": value}) is holds


def test_braces_that_are_no_field_are_refused_at_load_not_dropped_when_filled() -> None:
    """JSON or a jsonpath in a text (`{"cudagraph_mode": "PIECEWISE"}`) parses as a field
    nothing fills, and the text would vanish from the report: it must be written `{{ }}`."""
    with pytest.raises(ExpressionError, match="no field name"):
        template_fields("""`--compilation-config '{"cudagraph_mode": "PIECEWISE"}'`""")
    with pytest.raises(ExpressionError, match="no field name"):
        template_fields("`kubectl get pod POD -o jsonpath='{.spec.containers[0].args}'`")
    assert template_fields("""`'{{"cudagraph_mode": "PIECEWISE"}}'` at {limit}""") == {"limit"}
