"""The assistant's digest: facts a model cannot see in the log, the lines that matter with
their numbers, within the token budget, with no secret left in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.assistant.ask import request_text
from diagnose.assistant.digest import (
    DEFAULT_TOKEN_BUDGET,
    WHY_CHARS,
    build_digest,
    wanted_lines,
)
from diagnose.assistant.sources import file_digest
from diagnose.commands.file import diagnose_files
from diagnose.inputs.excerpt import read_excerpt
from diagnose.inputs.files import LogInput
from tests.conftest import INCIDENTS, REPO, run_cli
from tests.test_redact_layer import KEYED, PEM, PEM_BODY, SHAPED, S

SGLANG_BAD_FLAG = """\
[2026-03-03 11:53:20] SGLang version: 0.5.9
python -m sglang.launch_server --model-path /models/q --mem-fraction-statik 0.8 --tp 2
usage: launch_server.py [-h] --model-path MODEL_PATH
launch_server.py: error: unrecognized arguments: --mem-fraction-statik 0.8
"""


def digest_of(text: str, tmp_path: Path, budget: int = DEFAULT_TOKEN_BUDGET, name: str = "x.log"):
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    facts: dict[str, object] = {}
    diagnosis = diagnose_files([str(log)], [], None, lambda _: None, facts=facts)
    return file_digest(diagnosis, facts, [str(log)], budget)


def test_the_digest_carries_the_release_facts_the_log_does_not(tmp_path: Path) -> None:
    digest = digest_of(SGLANG_BAD_FLAG, tmp_path)
    assert "version: 0.5.9" in digest.text
    assert "--mem-fraction-statik: NOT an option of this release" in digest.text
    assert "closest: --mem-fraction-static" in digest.text
    assert "L4: launch_server.py: error: unrecognized arguments" in digest.text
    assert digest.lines[2].startswith("python -m sglang.launch_server")
    assert str(tmp_path) not in digest.text  # the file's name, not its folders


def test_without_a_version_the_tables_release_is_said_to_be_no_fix(tmp_path: Path) -> None:
    """The newest mined release stands in for tables only: a model must not read it as the
    release to upgrade to."""
    digest = digest_of(SGLANG_BAD_FLAG.replace("SGLang version: 0.5.9", "start"), tmp_path)
    assert "version: not shown in the log" in digest.text
    assert "this one is no evidence of a fix" in digest.text
    assert "no evidence of a fix" not in digest_of(SGLANG_BAD_FLAG, tmp_path).text


def test_the_digest_leaves_out_the_tools_reading_of_the_words(tmp_path: Path) -> None:
    """A message-words lead only restates the words the model reads itself (and would lead
    it): the digest lists the candidates that carry knowledge, here none."""
    words = "RuntimeError: CUDA driver error (handle.hpp:141): 200 (CUDA_ERROR_INVALID_IMAGE)\n"
    digest = digest_of(words, tmp_path)
    assert "message-words" not in digest.text and "tier generic" not in digest.text
    assert "L1: RuntimeError: CUDA driver error" in digest.text
    assert "tier engine_source, argparse-sglang-flags" in digest_of(SGLANG_BAD_FLAG, tmp_path).text


def test_each_candidate_carries_its_mechanism_clipped_to_one_line(tmp_path: Path) -> None:
    """A candidate's title is generic; its explanation is the mechanism the tool knows (here,
    pipeline stages that do not skip another stage's tensors): one line, cut at a word."""
    log = (
        "vllm serve /models/GLM-4.7-FP8 --pipeline-parallel-size 4\n"
        "(Worker_PP2 pid=2211) ERROR 03-02 11:40:02 [multiproc_executor.py:671] KeyError: "
        "'layers.3.mlp.shared_experts.down_proj.weight'\n"
    )
    [why] = [line for line in digest_of(log, tmp_path).text.splitlines() if "why:" in line]
    assert "pipeline-parallel size of 4" in why
    assert len(why) <= len("  why: ") + WHY_CHARS + 2 and why.endswith(" …")


def test_the_digest_says_what_ran_the_server_and_the_request_assumes_nothing(
    tmp_path: Path,
) -> None:
    """A pod's log reaches the model as a pod's: the request does not say systemd ran it, and
    the digest says what the log shows (a fix then takes that place's form)."""
    pod = (
        "Back-off restarting failed container vllm in pod vllm-0_default\n"
        "vllm: error: unrecognized arguments: --enable-metrics\n"
    )
    digest = digest_of(pod, tmp_path)
    assert "## What ran it\nkubernetes (the log shows a pod's events)" in digest.text
    assert "run by systemd" not in request_text(digest)
    assert "## What ran it\nnot shown by the log" in digest_of(SGLANG_BAD_FLAG, tmp_path).text


def test_the_digest_is_the_same_for_the_same_input(tmp_path: Path) -> None:
    assert digest_of(SGLANG_BAD_FLAG, tmp_path).text == digest_of(SGLANG_BAD_FLAG, tmp_path).text


def test_a_long_log_is_cut_to_the_budget_keeping_the_evidence_and_its_traceback(
    tmp_path: Path,
) -> None:
    crash = (INCIDENTS / "qwen-122b-crashloop.journal.txt").read_text(encoding="utf-8")
    noise = "".join(
        f"Mar 03 11:50:{i % 60:02d} gpu-node-07 python3[1]: step {i} ok\n" for i in range(20000)
    )
    digest = digest_of(noise + crash, tmp_path, budget=2000)
    assert digest.tokens <= 2000
    evidence = 20000 + 26  # the ValueError line of the crash
    assert f"L{evidence}: " in digest.text and "ValueError: Speculative decoding" in digest.text
    assert f"L{20000 + 7}: " in digest.text  # its traceback's header
    assert f"exit: Main process exited, code=exited, status=1/FAILURE (L{20000 + 27}" in digest.text
    assert "… " not in digest.text.splitlines()[0]


def test_the_excerpt_reads_lines_by_their_numbers_across_chunks(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 300001)))
    excerpt = read_excerpt(LogInput.from_argument(str(log)), {5, 150000, 299999}, head=2, tail=3)
    assert excerpt.total == 300000
    assert excerpt.lines == {
        1: "line 1", 2: "line 2", 5: "line 5", 150000: "line 150000",
        299998: "line 299998", 299999: "line 299999", 300000: "line 300000",
    }  # fmt: skip


def test_show_digest_prints_the_digest_and_no_report(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SGLANG_BAD_FLAG, encoding="utf-8")
    shown = run_cli("file", log, "--show-digest")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("[system]\nYou diagnose why")
    assert "\n[user]\n# diagnose digest" in shown.stdout
    assert "nothing was sent" in shown.stderr
    assert '"findings"' not in shown.stdout and "Root cause" not in shown.stdout


def test_show_digest_of_stdin_quotes_the_evidence(tmp_path: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", "--show-digest"],
        input=SGLANG_BAD_FLAG,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "unrecognized arguments: --mem-fraction-statik" in shown.stdout
    assert "numbered in this digest" in shown.stdout


MORE_SHAPES = [
    "ghp_" + "Zx9" * 12,
    "glpat-" + "Qw8e" * 5,
    "xoxb-" + "12345678-" * 3 + "AbCdEfGh",
    "github_pat_" + "11AB" * 10,
]
SECRETS = [S, *(token for _, token in SHAPED), *MORE_SHAPES, *PEM_BODY]
PLANTS = [
    *KEYED,
    *(f"download failed (using {token}) retrying" for _, token in SHAPED),
    *(f"git clone failed with {token} for the weights" for token in MORE_SHAPES),
    f"request headers: Authorization: Bearer {S}",
    f"Environment=HF_TOKEN={S}",
    PEM,
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plants=st.lists(st.sampled_from(PLANTS), min_size=1, max_size=6),
    at=st.lists(
        st.integers(min_value=0, max_value=len(SGLANG_BAD_FLAG.splitlines())),
        min_size=6,
        max_size=6,
    ),
    budget=st.sampled_from([400, 1500, DEFAULT_TOKEN_BUDGET]),
)
def test_no_secret_the_redactor_knows_reaches_any_digest(
    tmp_path: Path, plants: list[str], at: list[int], budget: int
) -> None:
    lines = SGLANG_BAD_FLAG.splitlines()
    for plant, position in zip(plants, at, strict=False):
        lines.insert(position, plant)
    digest = digest_of("\n".join(lines) + "\n", tmp_path, budget)
    for secret in SECRETS:
        assert secret not in digest.text


def test_what_is_read_again_is_around_the_evidence(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(SGLANG_BAD_FLAG, encoding="utf-8")
    diagnosis = diagnose_files([str(log)], [], None, lambda _: None)
    wanted = wanted_lines(diagnosis)
    assert 4 in wanted and 1 in wanted
    excerpt = read_excerpt(LogInput.from_argument(str(log)), wanted, 0, 0)
    assert build_digest(diagnosis, {}, excerpt).lines[4].startswith("launch_server.py: error")


def test_score_writes_each_cases_digest(tmp_path: Path) -> None:
    scored = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/accuracy/score.py"), "--filter", "vllm-015",
         "--digests", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    digest = (tmp_path / "vllm-015-enable-reasoning-removed.txt").read_text(encoding="utf-8")
    assert "[user]\n# diagnose digest" in digest and "--enable-reasoning" in digest
