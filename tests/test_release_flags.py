"""A finding's added flags are read against the release the log shows."""

from __future__ import annotations

from diagnose.core.models import (
    Confidence,
    Evidence,
    Finding,
    PackageAction,
    Patch,
    Role,
    Severity,
)
from diagnose.knowledge import mined
from diagnose.knowledge.deferred import ReleaseFixChecks
from diagnose.knowledge.release_flags import checked_flags, newer_flags
from tests.conftest import primary, run_text


def _adding(*words: str) -> Finding:
    return Finding(
        id="f1",
        signature="demo",
        category="launch_args",
        severity=Severity.CRITICAL,
        role=Role.ROOT_CAUSE,
        title="demo",
        explanation="demo",
        confidence=Confidence.HIGH,
        evidence=[],
        patch=Patch(args_add=list(words)),
    )


def test_a_flag_split_since_is_written_as_the_release_spells_it_with_its_value() -> None:
    checked = checked_flags(_adding("--cuda-graph-max-bs", "8"), "sglang", "0.5.23")
    assert checked.patch is not None
    assert checked.patch.args_add == [
        "--cuda-graph-max-bs-decode", "8", "--cuda-graph-max-bs-prefill", "8"
    ]  # fmt: skip
    assert "spells `--cuda-graph-max-bs`" in (checked.patch_note or "")


def test_a_flag_the_release_dropped_is_left_out_with_its_value() -> None:
    checked = checked_flags(_adding("--swap-space", "4", "--enforce-eager"), "vllm", "0.34.0")
    assert checked.patch is not None and checked.patch.args_add == ["--enforce-eager"]
    assert "`--swap-space` is gone" in (checked.patch_note or "")


def test_a_flag_newer_than_the_release_comes_with_the_upgrade_that_brings_it() -> None:
    checked = checked_flags(_adding("--disable-custom-all-reduce"), "sglang", "0.1.17")
    assert checked.patch is not None and checked.patch.args_add == ["--disable-custom-all-reduce"]
    assert checked.package is not None
    assert (checked.package.name, checked.package.spec, checked.package.action) == (
        "sglang", ">=0.2.15", "upgrade"
    )  # fmt: skip


def test_nothing_changes_where_the_log_shows_no_release_or_the_flag_is_there() -> None:
    finding = _adding("--cuda-graph-max-bs", "8")
    assert checked_flags(finding, "sglang", None) == finding
    present = _adding("--tp-size", "2")
    assert checked_flags(present, "sglang", "0.5.23") == present


def test_another_engines_flag_is_left_out_with_or_without_a_release() -> None:
    """SGLang's --nccl-port is no vLLM flag in any release: a fix that adds it fails as
    written on vLLM, whatever the release."""
    finding = _adding("--nccl-port", "<free port>", "--tensor-parallel-size", "2")
    for shown in (None, "0.8.3"):
        checked = checked_flags(finding, "vllm", shown)
        assert checked.patch is not None
        assert checked.patch.args_add == ["--tensor-parallel-size", "2"]
        assert "`--nccl-port` is no flag of any vLLM release" in (checked.patch_note or "")
    alone = checked_flags(_adding("--nccl-port", "29600"), "vllm", None)
    assert alone.patch is None


def test_with_no_engine_in_view_a_flag_neither_engine_has_is_left_out() -> None:
    """A trainer's message that names its own option (``--num_processes``) in a log that
    shows no engine: no SGLang or vLLM release has it, so the engine's fix does not add it;
    a flag one engine has stays. Through the release checks, as every finding passes them."""
    finding = _adding("--num-processes", "--tensor-parallel-size", "2")
    checked = ReleaseFixChecks()(finding, None, None)
    assert checked.patch is not None
    assert checked.patch.args_add == ["--tensor-parallel-size", "2"]
    assert "`--num-processes` is no flag of any SGLang or vLLM release" in (
        checked.patch_note or ""
    )
    alone = ReleaseFixChecks()(_adding("--num-processes"), None, None)
    assert alone.patch is None


def test_a_value_the_release_names_otherwise_is_written_its_way() -> None:
    """vLLM 0.10.2 calls the Triton backend ``TRITON_ATTN_VLLM_V1`` and has no
    ``--attention-backend``: the fix sets its variable with its own spelling."""
    checked = checked_flags(_adding("--attention-backend", "TRITON_ATTN"), "vllm", "0.10.2")
    assert checked.patch is not None
    assert checked.patch.args_add == []
    assert checked.patch.env_set == {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN_VLLM_V1"}
    assert "spells `--attention-backend TRITON_ATTN` as `TRITON_ATTN_VLLM_V1`" in (
        checked.patch_note or ""
    )
    assert checked.package is None  # no upgrade: the variable does it
    current = _adding("--attention-backend", "TRITON_ATTN")
    assert checked_flags(current, "vllm", "0.34.0") == current


def test_a_variable_the_release_dropped_becomes_its_flag() -> None:
    finding = _adding().model_copy(
        update={"patch": Patch(env_set={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})}
    )
    checked = ReleaseFixChecks()(finding, "vllm", "0.34.0")  # as the engine runs it
    assert checked.patch is not None
    assert checked.patch.env_set == {}
    assert checked.patch.args_add == ["--attention-backend", "FLASHINFER"]
    assert checked_flags(finding, "vllm", "0.10.2") == finding


def test_a_value_no_release_spelling_fits_is_kept_with_the_releases_values() -> None:
    checked = checked_flags(_adding("--attention-backend", "NO_SUCH_KERNEL"), "vllm", "0.34.0")
    assert checked.patch is not None
    assert checked.patch.args_add == ["--attention-backend", "NO_SUCH_KERNEL"]
    note = checked.patch_note or ""
    assert "does not take `--attention-backend NO_SUCH_KERNEL`" in note and "`TRITON_ATTN`" in note


def _removing(flag: str, evidence_text: str) -> Finding:
    return _adding().model_copy(
        update={
            "patch": Patch(args_remove=[flag]),
            "evidence": [Evidence(source="x.log", line=1, text=evidence_text)],
        }
    )


def test_a_refused_option_newer_releases_have_is_fixed_by_the_upgrade_not_by_dropping_it() -> None:
    refused = (
        "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'"
    )
    added = mined.first_release_with_flag("vllm", "--worker-extension-cls")
    assert added is not None
    fixed = newer_flags(
        _removing("--worker-extension-cls", refused), "vllm", None, ["--worker-extension-cls"]
    )
    assert fixed.patch is not None and fixed.patch.args_remove == []
    assert fixed.package is not None
    assert (fixed.package.name, fixed.package.spec) == ("vllm", f">={added}")


def test_a_keyword_the_shown_release_defines_yet_refuses_is_a_mixed_install() -> None:
    """vLLM 0.6.3 and the mined releases either side of it all take ``num_scheduler_steps``:
    an ``EngineArgs`` that refuses it is not 0.6.3's code, so the fix is a clean reinstall,
    not dropping the option."""
    refused = (
        "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'num_scheduler_steps'"
    )
    finding = _removing("--num-scheduler-steps", refused)
    fixed = ReleaseFixChecks()(finding, "vllm", "0.6.3")
    assert fixed.category == "kernel_build" and fixed.patch is None
    assert fixed.package == PackageAction(name="vllm", spec="==0.6.3", action="reinstall")
    assert "not vLLM 0.6.3's" in fixed.explanation
    gone = ReleaseFixChecks()(finding, "vllm", "0.11.0")  # the release that dropped it
    assert gone.category == "launch_args" and gone.package is None


def test_an_option_the_log_does_not_show_refused_is_dropped_as_the_finding_says() -> None:
    checks = ReleaseFixChecks()
    finding = _removing("--worker-extension-cls", "RuntimeError: something else")
    assert checks(finding, "vllm", None) is finding
    assert checks(finding, "vllm", "0.34.0") is finding  # the release has it
    refused = (
        "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'"
    )
    assert checks(_removing("--worker-extension-cls", refused), "vllm", None).package is not None
    changed = _removing("--worker-extension-cls", refused).model_copy(
        update={
            "patch": Patch(args_remove=["--max-model-len"], args_add=["--max-model-len", "8192"])
        }
    )
    assert checks(changed, "vllm", None) is changed  # a value changed, not an option dropped


def _program_passing(keyword: str, program: str) -> Finding:
    """A finding whose fix is a program's upgrade: its code passed ``keyword`` to EngineArgs."""
    return _adding().model_copy(
        update={
            "patch": None,
            "package": PackageAction(name=program, spec="", action="upgrade"),
            "evidence": [
                Evidence(
                    source="x.log",
                    line=1,
                    text="TypeError: EngineArgs.__init__() got an unexpected keyword argument "
                    f"'{keyword}'",
                )
            ],
        }
    )


def test_a_keyword_newer_releases_have_makes_the_engine_the_upgrade_not_the_program() -> None:
    """TRL passed `worker_extension_cls`, which came with a later vLLM: TRL is not behind."""
    checks = ReleaseFixChecks()
    fixed = checks(_program_passing("worker_extension_cls", "trl"), "vllm", None)
    assert fixed.package is not None
    assert (fixed.package.name, fixed.package.action) == ("vllm", "upgrade")
    assert fixed.package.spec.startswith(">=")
    assert "`trl` is written for that newer vLLM" in (fixed.patch_note or "")


def test_python_3_9s_unnamed_class_is_read_by_the_call_above_and_older_than_mined() -> None:
    """Before Python 3.10 the refusal names no class; the code line above calls
    AsyncEngineArgs. vLLM 0.5.0 is older than every mined release, and all of them have the
    option: the upgrade is to the oldest mined, said as such."""
    unnamed = _program_passing("limit_mm_per_prompt", "llamafactory").model_copy(
        update={
            "evidence": [
                Evidence(
                    source="x.log",
                    line=4,
                    text="    self.model = AsyncLLMEngine.from_engine_args("
                    "AsyncEngineArgs(**engine_args))",
                ),
                Evidence(
                    source="x.log",
                    line=5,
                    text="TypeError: __init__() got an unexpected keyword argument "
                    "'limit_mm_per_prompt'",
                ),
            ]
        }
    )
    fixed = ReleaseFixChecks()(unnamed, "vllm", "0.5.0")
    oldest = mined.versions("vllm")[0]
    assert fixed.package == PackageAction(name="vllm", spec=f">={oldest}", action="upgrade")
    assert "the oldest release mined" in (fixed.patch_note or "")
    alone = unnamed.model_copy(update={"evidence": unnamed.evidence[1:]})
    assert ReleaseFixChecks()(alone, "vllm", "0.5.0").package == unnamed.package


def test_a_keyword_the_engine_dropped_leaves_the_programs_upgrade() -> None:
    """OpenRLHF still passed `worker_use_ray`, which vLLM removed: OpenRLHF is behind."""
    checks = ReleaseFixChecks()
    finding = _program_passing("worker_use_ray", "openrlhf")
    assert checks(finding, "vllm", "0.7.0").package == finding.package
    assert checks(finding, "vllm", None).package == finding.package


def test_with_no_release_shown_a_variable_only_later_releases_read_says_so() -> None:
    """An older installed release ignores VLLM_ENGINE_READY_TIMEOUT_S: the note names the first
    release that reads it; a variable every mined release reads gets no note."""
    finding = _adding().model_copy(
        update={
            "patch": Patch(env_set={"VLLM_ENGINE_READY_TIMEOUT_S": "1800"}),
            "tier": "known_issue",
        }
    )
    checked = ReleaseFixChecks()(finding, "vllm", None)
    assert checked.patch == finding.patch
    assert "VLLM_ENGINE_READY_TIMEOUT_S is read from vLLM 0.14.1 on" in (checked.patch_note or "")
    old = _adding().model_copy(
        update={"patch": Patch(env_set={"VLLM_USE_MODELSCOPE": "1"}), "tier": "known_issue"}
    )
    assert ReleaseFixChecks()(old, "vllm", None).patch_note is None
    by_hand = finding.model_copy(update={"tier": "signature"})  # written for its releases
    assert ReleaseFixChecks()(by_hand, "vllm", None).patch_note is None


def test_one_key_of_a_json_option_is_kept_where_the_release_has_the_option() -> None:
    """`--speculative-config.num_speculative_tokens` is no flag in the tables; it sets one key
    of `--speculative-config`, which the release has: the fix keeps it."""
    log = (
        "vllm serve zai-org/GLM-4.5-Air --speculative-config.method mtp "
        "--speculative-config.num-speculative-tokens 2\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "num-speculative-tokens\n"
        "  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=2, "
        "input_type=int]\n"
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.patch is not None
    assert cause.patch.args_add == ["--speculative-config.num_speculative_tokens", "2"]
    assert cause.patch.args_remove == ["--speculative-config.num-speculative-tokens"]
