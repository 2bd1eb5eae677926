"""Version awareness: signatures state the engine versions they apply to; the log says which runs."""

from __future__ import annotations

import pytest

from diagnose.core.models import Confidence
from diagnose.core.versions import at_least, at_most, release
from diagnose.render import render
from tests.conftest import REPO, by_signature, fixture, primary, run_engine, run_text

SPEC_V2 = (
    "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with "
    "radix cache when using --mamba-scheduler-strategy no_buffer.To use radix cache with speculative "
    "decoding, please use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
)


@pytest.mark.parametrize(
    ("version", "bound", "least", "most"),
    [
        ("0.5.10", "0.5.9", True, False),
        ("0.5.9", "0.5.10", False, True),
        ("0.5.10.post1", "0.5.10", True, True),
        ("0.5.10rc1", "0.5.10", True, True),
        ("0.5.23", "0.5", True, True),
        ("1.0", "0.5.23", True, False),
        ("v0.11.0", "0.11", True, True),
    ],
)
def test_versions_compare_by_their_numbers(
    version: str, bound: str, least: bool, most: bool
) -> None:
    assert at_least(version, bound) is least
    assert at_most(version, bound) is most


def test_unreadable_versions_claim_nothing() -> None:
    assert release("unknown") is None
    assert at_least("unknown", "0.5.10") and at_most("unknown", "0.5.10")


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        (
            "INFO 05-12 02:45:15 [api_server.py:1043] vLLM API server version 0.8.5.post1",
            "vllm_version",
            "0.8.5.post1",
        ),
        (
            "(EngineCore pid=38078) INFO 08-02 09:19:57 [core.py:114] Initializing a V1 LLM engine (v0.25.1) with config: model='x'",
            "vllm_version",
            "0.25.1",
        ),
        (
            "(APIServer pid=7) INFO 01-02 12:34:56 [startup.py:20] vLLM server version 0.34.0, serving model Qwen/Qwen3-8B",
            "vllm_version",
            "0.34.0",
        ),
        (
            "Mar 05 09:00:00.000000 gpu-node-07 python3[4999]: SGLang version: 0.5.23",
            "sglang_version",
            "0.5.23",
        ),
        ("sglang==0.5.10", "sglang_version", "0.5.10"),
        ("vllm=0.8.4", "vllm_version", "0.8.4"),
        ("vllm==0.10.1.post1", "vllm_version", "0.10.1.post1"),
        ("vLLM version: 0.6.6.post1+gaudi000", "vllm_version", "0.6.6.post1+gaudi000"),
        ("sglang: 0.5.2rc1", "sglang_version", "0.5.2rc1"),
        (  # pip's resolver names the installed release of a package in a conflict
            "vllm 0.15.0 requires transformers<5,>=4.56.0, but you have transformers 5.0.1.dev0 "
            "which is incompatible.",
            "vllm_version",
            "0.15.0",
        ),
        (
            "sglang 0.5.2 has requirement torch==2.8.0, but you'll have torch 2.9.0 which is "
            "incompatible.",
            "sglang_version",
            "0.5.2",
        ),
        (
            "vllm 0.10.1.1 requires xformers==0.0.31, which is not installed.",
            "vllm_version",
            "0.10.1.1",
        ),
        (
            "verl 0.4.1 requires vllm<=0.8.5, but you have vllm 0.9.2 which is incompatible.",
            "vllm_version",
            "0.9.2",
        ),
        (  # a nightly, with the report's note on where it came from
            "vLLM version: 0.18.2rc1.dev71 (main branch, post-#38826)",
            "vllm_version",
            "0.18.2rc1.dev71",
        ),
    ],
)
def test_the_engine_version_is_read_from_the_log(line: str, key: str, value: str) -> None:
    from diagnose.testing import run_log

    engine, _ = run_log([], line + "\n")
    assert engine.facts[key] == value


def test_a_version_in_a_sentence_or_a_command_is_not_the_engines() -> None:
    from diagnose.testing import run_log

    engine, _ = run_log([], "I upgraded vllm to 0.9.1 and ran pip install vllm==0.9.2\n")
    assert "vllm_version" not in engine.facts
    engine, _ = run_log([], "vllm 0.9.1 is what I run\nbut you have vllm installed\n")
    assert "vllm_version" not in engine.facts


def test_real_vllm_sample_shows_its_version() -> None:
    from diagnose.testing import run_log

    text = fixture("fixtures/samples/healthy/003-vllm-0.8.5-r1-distill-14b-wrong-model-404.log")
    engine, _ = run_log([], (REPO / text).read_text(encoding="utf-8"))
    assert engine.facts["vllm_version"] == "0.8.5.post1"


def test_in_range_keeps_its_confidence_and_says_what_fixed_it() -> None:
    cause = primary(run_text(f"SGLang version: 0.5.10\n{SPEC_V2}\n"))
    assert cause is not None and cause.signature == "sglang-spec-v2-required"
    assert cause.confidence is Confidence.HIGH
    assert cause.applies_to == "SGLang 0.5.10"
    assert cause.fixed_in == "SGLang 0.5.23"
    assert "Fixed in SGLang 0.5.23: upgrading also fixes it." in cause.explanation


def test_out_of_range_is_demoted_with_a_note_not_dropped() -> None:
    diagnosis = run_text(f"sglang==0.5.19\n{SPEC_V2}\n")
    cause = by_signature(diagnosis, "sglang-spec-v2-required")
    assert cause is not None and diagnosis.primary == cause.id
    assert cause.confidence is Confidence.LOW
    assert "This applies to SGLang 0.5.10; the log shows SGLang 0.5.19." in cause.explanation


def test_a_version_at_or_past_the_fix_is_outside_too() -> None:
    cause = primary(run_text(f"SGLang version: 0.5.23.post1\n{SPEC_V2}\n"))
    assert cause is not None and cause.confidence is Confidence.LOW
    assert "the log shows SGLang 0.5.23.post1" in cause.explanation


def test_min_only_range() -> None:
    line = "sglang serve: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer\n"
    old = primary(run_text("SGLang version: 0.5.15\n" + line))
    new = primary(run_text("SGLang version: 0.5.23\n" + line))
    unknown = primary(run_text(line))
    assert old is not None and new is not None and unknown is not None
    assert old.confidence is Confidence.LOW and "SGLang 0.5.23 and later" in old.explanation
    assert new.confidence is Confidence.HIGH and unknown.confidence is Confidence.HIGH
    assert new.applies_to == "SGLang 0.5.23 and later"


def test_without_a_version_nothing_changes() -> None:
    cause = primary(run_engine(fixture("fixtures/incidents/qwen-122b-crashloop.journal.txt")))
    assert cause is not None and cause.confidence is Confidence.HIGH
    assert "the log shows" not in cause.explanation


def test_versions_are_rendered_in_text_and_markdown() -> None:
    diagnosis = run_text(f"sglang==0.5.19\n{SPEC_V2}\n")
    text = render(diagnosis, "text")
    assert "applies to SGLang 0.5.10; fixed in SGLang 0.5.23" in text
    markdown = render(diagnosis, "markdown")
    assert "**Applies to:** SGLang 0.5.10" in markdown
    assert "**Fixed in:** SGLang 0.5.23" in markdown
    assert '"fixed_in": "SGLang 0.5.23"' in render(diagnosis, "json")


def test_a_bad_version_in_a_signature_is_refused(tmp_path) -> None:
    from diagnose.core.errors import UserError
    from diagnose.library import load_file

    source = fixture("signatures/sglang/sglang-ambiguous-renamed-flag.yaml")
    text = (REPO / source).read_text(encoding="utf-8").replace('min: "0.5.23"', 'min: "soon"')
    path = tmp_path / "sglang-ambiguous-renamed-flag.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=r"versions\.min: not a version"):
        load_file(path)
