"""``diagnose preflight`` knows the model and the release (issue 32, item 5): the heads against
the tensor-parallel size, the context against the model's position limit and RoPE scaling,
options that need a companion, ``User=``/``Group=``/``WorkingDirectory=`` under ``--root``,
and removed options rewritten into the option that replaced them, values translated. The
tensor-parallel size offered is computed from the weights, the GPUs and the memory fraction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.preflight import sizing
from tests.conftest import FIXTURES, fake_nvidia_smi
from tests.test_preflight import PREFLIGHT, _json, _run

LLAMA = "/models/Llama-3.3-70B-Instruct"  # under --root fixtures/preflight
QWEN = "/models/Qwen2.5-7B-Instruct"
A100_80 = [f"{i}, NVIDIA A100-SXM4-80GB, 0, 81920" for i in range(4)]


def _preflight(*args: str, env: dict[str, str] | None = None, gpus: list[str] | None = None,
               tmp: Path | None = None) -> dict:  # fmt: skip
    options: tuple[str, ...] = ("--no-gpu",)
    if gpus is not None:
        assert tmp is not None
        env = {**fake_nvidia_smi(tmp, [], gpus), **(env or {})}
        options = ()
    result = _run("preflight", "--root", PREFLIGHT, "--no-port", *options, "-f", "json", "--",
                  *args, env=env)  # fmt: skip
    return _json(result)


def _by(report: dict, signature: str) -> list[dict]:
    return [f for f in report["findings"] if f["signature"] == signature]


def _one(report: dict, signature: str) -> dict:
    found = _by(report, signature)
    assert len(found) == 1, [f["signature"] for f in report["findings"]]
    return found[0]


# -- heads and the tensor-parallel size ---------------------------------------------------


def test_tp_that_does_not_divide_the_heads(tmp_path: Path) -> None:
    report = _preflight("vllm", "serve", LLAMA, "--tensor-parallel-size", "6",
                        gpus=[*A100_80, *A100_80], tmp=tmp_path)  # fmt: skip
    finding = _one(report, "parallel-size-not-divisible")
    assert finding["role"] == "root_cause" and finding["severity"] == "critical"
    assert "64 attention heads and 8 KV heads" in finding["explanation"]
    assert "Tensor-parallel size 4 divides them and fits" in finding["explanation"]
    assert "141.1 GB of weights / TP 4 = 35.3 GB per GPU" in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--tensor-parallel-size", "4"]
    assert any(e["source"].endswith("config.json") for e in finding["evidence"])
    fine = _preflight("vllm", "serve", LLAMA, "--tensor-parallel-size", "8")
    assert _by(fine, "parallel-size-not-divisible") == []


def test_more_ranks_than_kv_heads_replicate_them() -> None:
    """28 heads, 4 KV heads: TP 7 divides the heads but not the KV heads; TP 4 and 2 do both."""
    assert _by(_preflight("vllm", "serve", QWEN, "-tp", "4"), "parallel-size-not-divisible") == []
    finding = _one(_preflight("vllm", "serve", QWEN, "-tp", "7"), "parallel-size-not-divisible")
    assert "7 does not divide its 4 KV heads." in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--tensor-parallel-size", "4"]


def test_dp_attention_splits_the_heads_over_tp_over_dp() -> None:
    sglang = ("python3", "-m", "sglang.launch_server", "--model-path", QWEN, "--tp-size", "8")
    assert _by(_preflight(*sglang), "parallel-size-not-divisible")  # 28 heads, 8 ranks
    spread = _preflight(*sglang, "--dp-size", "8", "--enable-dp-attention")
    assert _by(spread, "parallel-size-not-divisible") == []  # 1 attention rank per group


def test_the_issue_70b_at_tp2_on_80gb_has_no_room_for_kv(tmp_path: Path) -> None:
    """Weights alone (70.6 GB per GPU) are under 80 GB x 0.85, but one full-length sequence
    of KV cache is not: TP 4, which needs CUDA_VISIBLE_DEVICES widened to four GPUs."""
    command = ("python3", "-m", "sglang.launch_server", "--model-path", LLAMA,
               "--tp-size", "2", "--mem-fraction-static", "0.85")  # fmt: skip
    report = _preflight(*command, env={"CUDA_VISIBLE_DEVICES": "0,1"}, gpus=A100_80, tmp=tmp_path)
    finding = _one(report, "model-too-large-for-tp")
    assert "85.9 GB x 0.85" in finding["explanation"]
    assert "Tensor-parallel size 4 fits" in finding["explanation"]
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in finding["explanation"]
    patch = finding["patch"]
    assert patch["args_add"] == ["--tp-size", "4"]
    assert patch["env_set"] == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    # the fix, applied, passes
    fixed = _preflight(*command[:-3], "4", "--mem-fraction-static", "0.85",
                       env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, gpus=A100_80, tmp=tmp_path)  # fmt: skip
    assert fixed["findings"] == []


def test_no_tp_fits_says_what_else_is_needed(tmp_path: Path) -> None:
    two = A100_80[:2]
    command = ("vllm", "serve", LLAMA, "--tensor-parallel-size", "2")
    finding = _one(_preflight(*command, gpus=two, tmp=tmp_path), "model-too-large-for-tp")
    assert finding["patch"] is None
    assert "No tensor-parallel size fixes it here" in finding["explanation"]
    assert "quantized checkpoint" in finding["explanation"]


def test_sizing_never_just_doubles() -> None:
    shape = sizing.ModelShape(heads=40, kv_heads=8, layers=40, head_dim=128, kv_layers=40)
    choice = sizing.choose_tp(shape, current=1, pp=1, weights_gb=29.5, gpu_total_gb=24.0,
                              fraction=0.9, context=4096, visible=None, gpu_count=8)  # fmt: skip
    assert choice.tp == 2  # 14.8 GB per GPU + KV fits 21.6 GB
    big = sizing.choose_tp(shape, current=1, pp=1, weights_gb=90.0, gpu_total_gb=24.0,
                           fraction=0.9, context=4096, visible=None, gpu_count=8)  # fmt: skip
    assert big.tp == 8  # 40 heads: 3 and 6 do not divide them, 4 does not fit (22.5 + KV)
    assert sizing.choose_tp(shape, 1, 1, 400.0, 24.0, 0.9, 4096, None, 8).missing


# -- the context length -------------------------------------------------------------------


def test_context_above_max_position_embeddings() -> None:
    finding = _one(_preflight("vllm", "serve", QWEN, "--max-model-len", "131072"),
                   "context-length-above-model-max")  # fmt: skip
    assert "max_position_embeddings=32768" in finding["explanation"]
    assert finding["patch"]["args_add"] == ["--max-model-len", "32768"]
    sglang = ("python3", "-m", "sglang.launch_server", "--model-path", QWEN)
    finding = _one(_preflight(*sglang, "--context-length", "65536"),
                   "context-length-above-model-max")  # fmt: skip
    assert finding["patch"]["args_add"] == ["--context-length", "32768"]


def test_rope_scaling_as_each_engine_applies_it() -> None:
    yarn = json.dumps({"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 32768}})  # fmt: skip
    vllm = _preflight("vllm", "serve", QWEN, "--max-model-len", "128K", "--hf-overrides", yarn)
    assert _by(vllm, "context-length-above-model-max") == []  # 32768 x 4 = 131072
    sglang = ("python3", "-m", "sglang.launch_server", "--model-path", QWEN,
              "--json-model-override-args", yarn, "--context-length", "131072")  # fmt: skip
    assert _by(_preflight(*sglang), "context-length-above-model-max")  # SGLang: factor 1
    allowed = _preflight(*sglang, env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    assert _by(allowed, "context-length-above-model-max") == []
    # llama3 scaling is already in max_position_embeddings (131072): not multiplied again
    llama = _preflight("vllm", "serve", LLAMA, "--max-model-len", "131072", "-tp", "8")
    assert _by(llama, "context-length-above-model-max") == []
    over = _preflight("vllm", "serve", LLAMA, "--max-model-len", "262144", "-tp", "8")
    assert _by(over, "context-length-above-model-max")


# -- options that need a companion --------------------------------------------------------


def test_auto_tool_choice_needs_a_parser() -> None:
    finding = _one(_preflight("vllm", "serve", QWEN, "--enable-auto-tool-choice"),
                   "vllm-auto-tool-choice-needs-parser")  # fmt: skip
    assert finding["patch"]["args_add"] == ["--tool-call-parser", "hermes"]
    given = _preflight("vllm", "serve", QWEN, "--enable-auto-tool-choice",
                       "--tool-call-parser", "hermes")  # fmt: skip
    assert given["findings"] == []


def test_reasoning_needs_its_parser_where_the_release_has_the_switch() -> None:
    old = _run("preflight", "--root", PREFLIGHT, "--no-gpu", "--no-port", "-f", "json",
               "--engine-version", "vllm==0.8.5.post1", "--",
               "vllm", "serve", "Qwen/Qwen3-8B", "--enable-reasoning")  # fmt: skip
    finding = _one(_json(old), "vllm-reasoning-needs-parser")
    assert finding["patch"]["args_add"] == ["--reasoning-parser", "qwen3"]
    # newer releases removed the switch: --reasoning-parser alone turns reasoning on
    new = _preflight("vllm", "serve", "Qwen/Qwen3-8B", "--enable-reasoning",
                     "--reasoning-parser", "qwen3")  # fmt: skip
    assert _by(new, "vllm-reasoning-needs-parser") == []
    removed = _one(new, "launch-unrecognized-arguments")
    assert "nothing replaces it" not in removed["explanation"]
    assert "`--reasoning-parser` now turns the same thing on" in removed["explanation"]
    assert removed["patch"]["args_remove"] == ["--enable-reasoning"]
    assert removed["patch"]["args_add"] == []


# -- removed options, translated ----------------------------------------------------------


def test_speculative_model_becomes_speculative_config() -> None:
    report = _preflight("vllm", "serve", QWEN, "--speculative-model", "/models/draft",
                        "--num-speculative-tokens", "5")  # fmt: skip
    finding = _one(report, "launch-unrecognized-arguments")  # one finding for the pair
    assert "nothing replaces it" not in finding["explanation"]
    patch = finding["patch"]
    assert patch["args_remove"] == ["--speculative-model", "--num-speculative-tokens"]
    assert patch["args_add"][0] == "--speculative-config"
    assert json.loads(patch["args_add"][1]) == {"model": "/models/draft",
                                                "num_speculative_tokens": 5}  # fmt: skip
    ngram = _preflight("vllm", "serve", QWEN, "--speculative-model", "[ngram]",
                       "--ngram-prompt-lookup-max", "4", "--num-speculative-tokens", "3",
                       "--speculative-config", '{"disable_by_batch_size": 8}')  # fmt: skip
    patch = _one(ngram, "launch-unrecognized-arguments")["patch"]
    assert "--speculative-config" in patch["args_remove"]  # merged into one value
    assert json.loads(patch["args_add"][1]) == {
        "disable_by_batch_size": 8, "method": "ngram", "prompt_lookup_max": 4,
        "num_speculative_tokens": 3,
    }  # fmt: skip


def test_a_release_that_still_has_the_option_is_left_alone() -> None:
    result = _run("preflight", "--no-gpu", "--no-port", "-f", "json",
                  "--engine-version", "vllm==0.7.3", "--",
                  "vllm", "serve", "m", "--speculative-model", "d",
                  "--num-speculative-tokens", "5")  # fmt: skip
    assert _by(_json(result), "launch-unrecognized-arguments") == []


# -- User=, Group=, WorkingDirectory= under --root ----------------------------------------


def _unit(tmp_path: Path, settings: str) -> dict:
    unit = tmp_path / "vllm.service"
    unit.write_text(f"[Service]\n{settings}ExecStart=/usr/bin/vllm serve {QWEN}\n")
    result = _run("preflight", "--unit-file", unit, "--root", PREFLIGHT,
                  "--no-gpu", "--no-port", "-f", "json")  # fmt: skip
    return _json(result)


def test_user_group_and_directory_that_do_not_exist_under_root(tmp_path: Path) -> None:
    report = _unit(tmp_path, "User=vllm\nGroup=render\nWorkingDirectory=/srv/vllm\n")
    problems = [f["explanation"] for f in _by(report, "systemd-exec-failed")]
    assert any(f"User=vllm does not exist under {PREFLIGHT}" in p and "217/USER" in p
               for p in problems)  # fmt: skip
    assert any("Group=render does not exist" in p and "216/GROUP" in p for p in problems)
    assert any("WorkingDirectory=/srv/vllm does not exist" in p for p in problems)
    fine = _unit(tmp_path, "User=sglang\nGroup=sglang\nWorkingDirectory=/opt/sglang\n")
    assert _by(fine, "systemd-exec-failed") == []


def test_no_passwd_under_root_is_said_not_guessed(tmp_path: Path) -> None:
    unit = FIXTURES / "units/001-mirofish-vllm-tp2-awq.service"
    result = _run("preflight", "--unit-file", unit, "--root", tmp_path,
                  "--no-gpu", "--no-port", "-f", "json")  # fmt: skip
    notes = _json(result)["notes"]
    assert any("User=" in n and "not checked, there is no etc/passwd" in n for n in notes)


def test_an_inline_comment_makes_user_invalid_not_missing(tmp_path: Path) -> None:
    """Real unit 024: ``User=your_username  # Replace ...`` is an invalid name that systemd
    ignores (the service runs as root); ``WorkingDirectory=/path/to/llama/cpp  # Optional``
    does not exist (status 200/CHDIR)."""
    unit = FIXTURES / "units/024-dotfiles-llama-inline-comments.service"
    result = _run("preflight", "--unit-file", unit, "--root", tmp_path,
                  "--no-gpu", "--no-port", "-f", "json")  # fmt: skip
    report = _json(result)
    assert any("is not a valid name" in n and "runs as root" in n for n in report["notes"])
    problems = [f["explanation"] for f in _by(report, "systemd-exec-failed")]
    assert any("WorkingDirectory=/path/to/llama/cpp" in p and "200/CHDIR" in p for p in problems)
    assert not any("217/USER" in p for p in problems)


@pytest.mark.parametrize(("engine", "tokens"), [("vllm", 4096), ("sglang", 8192)])
def test_which_position_key_each_engine_reads(engine: str, tokens: int) -> None:
    """vLLM takes the smallest of the keys it knows; SGLang the first in its own order."""
    limit = sizing.context_limit({"max_position_embeddings": 4096, "seq_length": 8192}, engine)
    assert limit is not None and limit.tokens == tokens
