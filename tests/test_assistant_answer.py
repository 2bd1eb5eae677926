"""The model's answer is checked, not trusted: read out of whatever text wraps it, its
evidence held to the lines the digest showed, its flags and variables to the release's
tables, its fix to what preflight accepts; and the benchmark scores recorded answers through
the same path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.assistant.answer import (
    MAX_ANSWER_CHARS,
    Answer,
    Rejected,
    Release,
    answer_schema,
    check_answer,
    read_answer,
)
from diagnose.assistant.digest import Digest
from diagnose.core.dropin import render_dropin
from diagnose.core.models import Confidence
from tests.conftest import REPO

DIGEST = Digest(
    "# diagnose digest\n...",
    {2: "python -m sglang.launch_server --model-path /models/q", 4: "error: bad flag"},
    "server.log",
)
SGLANG = Release("sglang", "0.5.9")


def answer(**fix: object) -> Answer:
    return Answer.model_validate(
        {
            "category": "launch_args",
            "cause": "A flag is misspelt. The parser stops.",
            "evidence": ["L4", 2],
            "fix": fix,
            "checks": [],
            "confidence": "high",
        }
    )


def test_the_schema_sent_is_the_answer_model() -> None:
    schema = answer_schema()
    assert set(schema["required"]) >= {"category", "cause", "evidence", "fix", "confidence"}
    assert "gpu_oom" in json.dumps(schema)


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(answer().model_dump()),
        "<think>L4 says the flag is wrong.</think>\n" + json.dumps(answer().model_dump()),
        "reasoning without its opening tag</think>" + json.dumps(answer().model_dump()),
        "Here it is:\n```json\n" + json.dumps(answer().model_dump(), indent=2) + "\n```\nDone.",
    ],
)
def test_the_answer_is_read_out_of_reasoning_and_fences(content: str) -> None:
    assert read_answer(content).evidence == [4, 2]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("no json here", "no JSON object in it"),
        ('{"category": "made_up", "cause": "x", "evidence": [], "fix": {}, "confidence": "high"}',
         "category"),
        ("{" + " " * MAX_ANSWER_CHARS + "}", "too large"),
    ],
)  # fmt: skip
def test_an_unusable_answer_is_rejected_in_one_line(content: str, said: str) -> None:
    with pytest.raises(Rejected, match=said) as rejected:
        read_answer(content)
    assert "\n" not in str(rejected.value)


def test_cited_lines_are_read_as_models_write_them() -> None:
    cited = answer().model_dump() | {"evidence": ["L2: python -m sglang", "L3-L4", 9, "L5 - 9"]}
    assert Answer.model_validate(cited).evidence == [2, 3, 4, 9, 5, 6, 7, 8, 9]
    numbers = answer(env_set={"NCCL_P2P_DISABLE": 1}, args_add=["--tp-size", 2]).fix
    assert numbers is not None and numbers.env_set == {"NCCL_P2P_DISABLE": "1"}
    assert numbers.args_add == ["--tp-size", "2"]
    no_fix = answer().model_dump() | {"fix": None}
    checked = check_answer(Answer.model_validate(no_fix), DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is None


def test_evidence_must_cite_a_line_the_digest_showed() -> None:
    made_up = answer().model_copy(update={"evidence": [4, 77]})
    checked = check_answer(made_up, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None
    assert [e.line for e in checked.finding.evidence] == [4]
    assert checked.finding.evidence[0].text == "error: bad flag"
    assert any("L77" in note for note in checked.notes)
    none_left = check_answer(
        answer().model_copy(update={"evidence": [77]}), DIGEST, SGLANG, "m", "f2"
    )
    assert none_left.finding is not None and none_left.finding.confidence is Confidence.LOW


def test_flags_are_rewritten_to_the_releases_spelling_or_left_out() -> None:
    fix = answer(args_add=["--mem-fraction-statik", "0.8", "--no-such-thing-at-all", "1"])
    checked = check_answer(fix, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is not None
    assert checked.finding.patch.args_add == ["--mem-fraction-static", "0.8"]
    assert "written as `--mem-fraction-static`" in (checked.finding.patch_note or "")
    assert "--no-such-thing-at-all" in (checked.finding.patch_note or "")


def test_a_flag_the_log_itself_names_stays_whatever_the_tables_say() -> None:
    """A release newer than the mined ones can bring back a flag an older one removed: where
    the engine's own output advises it, the running release has it."""
    advised = Digest(
        "# diagnose digest\n...",
        {
            4: "To work around this error, add --disable-piecewise-cuda-graph to your launch command."
        },
        "server.log",
    )
    newest = Release("sglang", None)
    fix = answer(args_add=["--disable-piecewise-cuda-graph"])
    checked = check_answer(fix, advised, newest, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is not None
    assert checked.finding.patch.args_add == ["--disable-piecewise-cuda-graph"]
    unadvised = check_answer(fix, DIGEST, newest, "m", "f2")
    assert unadvised.finding is not None
    assert unadvised.finding.patch is None or unadvised.finding.patch.args_add != [
        "--disable-piecewise-cuda-graph"
    ]


def test_a_value_preflight_refuses_is_left_out() -> None:
    checked = check_answer(answer(args_add=["--dtype", "float99"]), DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is None
    assert "preflight refuses `--dtype float99`" in (checked.finding.patch_note or "")


def test_the_engines_variables_are_checked_and_others_kept() -> None:
    fix = answer(env_set={"SGLANG_NO_SUCH_KNOB_XYZ": "1", "NCCL_P2P_DISABLE": "1", "bad name": "1"})
    checked = check_answer(fix, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is not None
    assert checked.finding.patch.env_set == {"NCCL_P2P_DISABLE": "1"}


def test_the_fix_renders_through_the_drop_in_machinery() -> None:
    fix = answer(
        unit_set={"Service.TimeoutStartSec": "900", "Evil\nKey": "x", "Service.X": "a\nb"},
        env_set={"NCCL_DEBUG": "INFO\nExecStart=/bin/sh"},
    )
    checked = check_answer(fix, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.patch is not None
    assert checked.finding.patch.unit_set == {"Service.TimeoutStartSec": "900"}
    assert checked.finding.patch.env_set == {}
    assert "TimeoutStartSec=900" in (render_dropin(checked.finding.patch, "sglang.service") or "")


def test_model_text_reaches_no_terminal_as_control_sequences() -> None:
    loud = answer().model_copy(
        update={"cause": "\x1b[31mRed\x1b[0m cause.\x07\nMore.", "checks": ["\x1b]0;title\x07ls"]}
    )
    checked = check_answer(loud, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None
    shown = [checked.finding.title, checked.finding.explanation, *checked.finding.next_checks]
    assert not any(c in text for text in shown for c in "\x1b\x07\n")


def test_a_package_change_keeps_only_a_pep_440_specifier() -> None:
    good = check_answer(
        answer(package={"name": "sglang", "spec": ">=0.5.10", "action": "upgrade"}),
        DIGEST, SGLANG, "m", "f2",
    )  # fmt: skip
    bad = check_answer(
        answer(package={"name": "sglang", "spec": "latest please", "action": "upgrade"}),
        DIGEST, SGLANG, "m", "f2",
    )  # fmt: skip
    assert good.finding is not None and good.finding.package is not None
    assert good.finding.package.spec == ">=0.5.10"
    # the change is kept without a version (the release's requirements may name one)
    assert bad.finding is not None and bad.finding.package is not None
    assert (bad.finding.package.name, bad.finding.package.spec) == ("sglang", "")
    assert "not a version specifier" in (bad.finding.patch_note or "")


@pytest.mark.parametrize(
    ("name", "spec", "action", "written"),
    [
        ("pyzmq", "pyzmq>=25.1.2", "install", ">=25.1.2"),
        ("sglang", "sglang[srt]==0.4.0", "pin", "==0.4.0"),
        ("vllm", "0.7.3", "upgrade", ">=0.7.3"),
        ("vllm", "0.6.2", "downgrade", "==0.6.2"),
        ("transformers", "latest", "upgrade", "==4.57.1"),
        ("transformers", "transformers", "upgrade", "==4.57.1"),
        ("vllm[audio]", "vllm[audio]>=0.10.0", "install", ">=0.10.0"),
    ],
)
def test_a_spec_written_as_models_write_it_is_read_as_pep_440(
    name: str, spec: str, action: str, written: str
) -> None:
    """The package's name before the spec, a bare version, or no version: the change is kept,
    not dropped, and a change without a version takes the one the log's release pins
    (SGLang 0.5.9 requires transformers 4.57.1)."""
    package = {"name": name, "spec": spec, "action": action}
    checked = check_answer(answer(package=package), DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.package is not None
    assert (checked.finding.package.name, checked.finding.package.spec) == (name, written)


def test_an_answer_without_a_cause_is_no_finding() -> None:
    unknown = answer().model_copy(update={"category": "unknown"})
    assert check_answer(unknown, DIGEST, SGLANG, "m", "f2").finding is None


@pytest.mark.parametrize(
    ("fix", "category"),
    [
        ({"package": {"name": "sglang", "spec": ">=0.5.10", "action": "upgrade"}}, "kernel_build"),
        ({"args_add": ["--disable-cuda-graph"]}, "launch_args"),
        ({"env_set": {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}}, "unit_config"),
    ],
)
def test_a_cause_outside_the_categories_takes_its_category_from_its_fix(
    fix: dict[str, object], category: str
) -> None:
    """A model that names a cause no category fits (a bug of the engine build) and a fix is
    read by its fix, and the note says so; without a fix it is still no finding."""
    unknown = answer(**fix).model_copy(update={"category": "unknown"})
    checked = check_answer(unknown, DIGEST, SGLANG, "m", "f2")
    assert checked.finding is not None and checked.finding.category == category
    assert f"read as {category} from its fix" in (checked.finding.patch_note or "")


def test_score_reads_recorded_answers_through_the_live_path(tmp_path: Path) -> None:
    case = "vllm-019-nccl-p2p-hang-consumer-gpus"
    recorded = {
        "category": "dist_init_hang",
        "cause": "The ranks stall after NCCL set-up: P2P does not work between these GPUs.",
        "evidence": ["L5", 99],
        "fix": {"env_set": {"NCCL_P2P_DISABLE": "1"}},
        "checks": ["nvidia-smi topo -m"],
        "confidence": "medium",
    }
    (tmp_path / f"{case}.json").write_text("<think>…</think>" + json.dumps(recorded))
    out = tmp_path / "scores.json"
    scored = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/accuracy/score.py"), "--filter", "vllm-019-nccl",
         "--assistant", f"replay:{tmp_path}", "--json", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    (result,) = json.loads(out.read_text())
    assert result["tier"] == "assistant" and result["right_cause"] and result["right_fix"]
    refused = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/accuracy/score.py"), "--assistant", "live:x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "replay:DIR" in refused.stderr


def test_the_causes_first_sentence_is_the_title_and_not_said_twice() -> None:
    finding = check_answer(answer(), DIGEST, SGLANG, "m", "f2").finding
    assert finding is not None
    assert (finding.title, finding.explanation) == ("A flag is misspelt", "The parser stops.")


@pytest.mark.parametrize(
    ("log", "role"),
    [
        # the only line of a start that stopped short: the user asks what went wrong
        ("INFO 01-09 16:23:33 [decorators.py:435] Directly load AOT compilation from path /x\n",
         "root_cause"),
        # a server that said it was ready: a low-confidence guess stays beside the report
        ("INFO 01-09 16:23:33 [decorators.py:435] Directly load AOT compilation from path /x\n"
         "INFO:     Application startup complete.\n",
         "advisory"),
    ],
)  # fmt: skip
def test_a_low_confidence_answer_leads_only_where_the_start_stopped_short(
    tmp_path: Path, log: str, role: str
) -> None:
    """Where diagnose found nothing, the model's reading is the answer for a log that never
    shows the server ready, even at low confidence; on a log of a ready server it stays an
    advisory."""
    recorded = {
        "category": "kernel_build",
        "cause": "The server stops right after loading a cached AOT compile artifact.",
        "evidence": ["L1"],
        "fix": {"env_set": {"VLLM_USE_AOT_COMPILE": "0"}},
        "checks": [],
        "confidence": "low",
    }
    answer_file = tmp_path / "answer.json"
    answer_file.write_text(json.dumps(recorded))
    (tmp_path / "server.log").write_text(log)
    run = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(tmp_path / "server.log"), "--ask",
         "--format", "json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "DIAGNOSE_ASSISTANT_URL": f"replay:{answer_file}"},
    )  # fmt: skip
    report = json.loads(run.stdout)
    (finding,) = [f for f in report["findings"] if f["tier"] == "assistant"]
    assert finding["role"] == role
    assert (report["primary"] == finding["id"]) is (role == "root_cause")
