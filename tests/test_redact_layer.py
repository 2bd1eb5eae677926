"""The redaction layer: every place an LLM server prints a credential, every output format.

The key-based cases are the lines SGLang and vLLM really print at start-up (SGLang's
``server_args=ServerArgs(...)`` repr, vLLM's ``non-default args: {...}`` dict), with a planted
value; the shape cases use made-up tokens of the real formats.
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.core.engine import Engine
from diagnose.core.redact import Redactor, redact, secret_name
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import load_facts, load_library
from diagnose.render import render
from diagnose.render.live import status_panel

S = "Zq8vN3xKp2Lw7Rt"  # a planted secret without any shape of its own: only its key gives it away

KEYED = [
    # SGLang 0.5.x prints its whole ServerArgs repr at start-up
    f"server_args=ServerArgs(model_path='/models/Qwen3', tokenizer_path='/models/Qwen3', "
    f"host='0.0.0.0', port=30000, api_key='{S}', admin_api_key=None, served_model_name='q')",
    # vLLM's "non-default args" dict
    f"INFO 03-01 11:53:10 [utils.py:253] non-default args: {{'model_tag': 'Qwen/Qwen3', "
    f"'api_key': ['{S}'], 'hf_token': '{S}x'}}",
    f'{{"model": "q", "password": "{S}", "port": 8000}}',
    f"connecting to redis://:{S}@cache.internal:6379/0",
    f"postgres://svc:{S}@db.internal/x",
    f"curl -H 'X-Api-Key: {S}' http://127.0.0.1:30000/v1/models",
    f"request headers: Authorization: Basic {S}",
    f"password={S}",
    f"PASSWORD={S}",
    f"aws_secret_access_key = {S}",
    f"AWS_SECRET_ACCESS_KEY={S}",
    f"hf_token={S}",
    f"export OPENAI_API_KEY={S}",
    f'Environment="HF_TOKEN={S}"',
    f"python -m sglang.launch_server --model q --api-key {S} --port 30000",
    f"vllm serve q --api-key={S}",
    f"accessToken: {S}",
    f"db.password => {S}",
    f"https://api.example.com/v1?api_key={S}&x=1",
]

SHAPED = [
    ("hf_token", "hf_" + "aB3" * 12),
    ("api_key", "sk-proj-" + "Ab1_" * 10),
    ("api_key", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("api_key", "nvapi-" + "x9Y8z7W6" * 4),
    ("aws_key", "AKIA" + "Z2Y3X4W5V6U7T8S9"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
]

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAx8Kd2u1vQk5yJmW3nP0aBcDeFgHiJkLmNoPqRsTuVwXyZ012\n"
    "3456789abcdefGHIJKLmnopqRSTUVwxyz0123456789ABCDEFabcdefghij+/Qk9\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_BODY = PEM.splitlines()[1:3]

ORDINARY = [
    "server_args=ServerArgs(model_path='/models/Qwen3.5-122B-A10B', tokenizer_path="
    "'/models/Qwen3.5-122B-A10B', tokenizer_mode='auto', skip_tokenizer_init=False, "
    "api_key=None, admin_api_key=None, num_reserved_decode_tokens=512, ssl_keyfile=None)",
    "Load weight end. type=Qwen3_5MoeForConditionalGeneration, avail mem=80.54 GB",
    "max_total_num_tokens=1800704, chunked_prefill_size=8192, max_prefill_tokens=16384",
    "KeyError: 'model.layers.0.mlp.experts.w13_weight'",
    "Time to first token: 0.52s",
    "HF_TOKEN=None",
    "Set HF_TOKEN=hf_... in the unit",
    "Environment=HF_TOKEN=$HF_TOKEN",
    "num_key_value_heads=8, head_dim=128",
]


@pytest.mark.parametrize("line", KEYED)
def test_a_secret_after_a_secret_key_is_redacted(line: str) -> None:
    redactor = Redactor()
    out = redactor.text(line)
    assert S not in out, out
    assert "<redacted:" in out
    assert sum(redactor.counts.values()) >= 1


def test_the_words_around_a_redacted_value_stay() -> None:
    out = Redactor().text(KEYED[0])
    assert "api_key='<redacted:secret:1>', admin_api_key=None" in out
    assert "model_path='/models/Qwen3'" in out
    assert Redactor().text(KEYED[3]) == (
        "connecting to redis://:<redacted:url_password:1>@cache.internal:6379/0"
    )


@pytest.mark.parametrize(("kind", "token"), SHAPED)
def test_a_token_is_redacted_by_its_shape_wherever_it_stands(kind: str, token: str) -> None:
    redactor = Redactor()
    out = redactor.text(f"download failed (using {token}) retrying")
    assert token not in out
    assert out == f"download failed (using <redacted:{kind}:1>) retrying"
    assert redactor.counts == {kind: 1}


@pytest.mark.parametrize(
    "line",
    [
        f"AUTHORIZATION: Basic {S}",
        f"Authorızation: Basic {S}",  # noqa: RUF001 (a dotless i: the rule ignores case)
        f"BEARER {S}",
        f"Proxy-Auth_Token = {S}",
    ],
)
def test_the_cheap_checks_before_each_rule_miss_no_case_or_separator(line: str) -> None:
    """Each rule runs only on a text that holds its needle (a shape's literal, a secret
    name's ending): in any case the rule matches, with any separators in the name."""
    assert S not in Redactor().text(line)


def test_a_token_wrapped_onto_the_next_line_is_redacted_whole() -> None:
    token = "hf_" + "aB3" * 12
    out = Redactor().text(f"token {token[:26]}\n{token[26:]}\nnext line")
    assert token[26:] not in out and token[:26] not in out
    assert out.endswith("\nnext line")


def test_a_value_on_the_line_after_its_key_is_redacted() -> None:
    out = Redactor().lines(["python -m sglang.launch_server --api-key", f"{S} --port 30000"])
    assert S not in "".join(out)
    assert out[1].endswith(" --port 30000")


def test_a_private_key_block_is_redacted_in_one_string_and_across_lines() -> None:
    redactor = Redactor()
    whole = redactor.text(f"loaded key\n{PEM}\ndone")
    assert all(body not in whole for body in PEM_BODY)
    assert "-----BEGIN RSA PRIVATE KEY-----" in whole and whole.endswith("done")
    lines = Redactor().lines(["ssl: using", *PEM.splitlines(), "server ready"])
    assert all(body not in line for body in PEM_BODY for line in lines)
    assert lines[-1] == "server ready"


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_are_left_alone(line: str) -> None:
    redactor = Redactor()
    assert redactor.text(line) == line
    assert redactor.counts == {}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("X-Api-Key", True),
        ("aws_secret_access_key", True),
        ("accessToken", True),
        ("HF_TOKEN", True),
        ("ssl_keyfile_password", True),
        ("tokenizer_path", False),
        ("max_total_num_tokens", False),
        ("num_key_value_heads", False),
        ("ssl_keyfile", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


# -- every output format, with the whole pipeline --------------------------------------------


@functools.cache
def _library():  # type: ignore[no-untyped-def]
    return load_library(include_user_dirs=False), load_facts()


BASE_LOG = [
    "[2026-03-01 11:53:10] server_args=ServerArgs(model_path='/models/q', port=30000)",
    "[2026-03-01 11:53:20 TP0] Load weight begin. avail mem=79.10 GB",
    "[2026-03-01 11:53:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 2412, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.19 GiB of which 1.06 GiB is free.",
    "[2026-03-01 11:53:41] Received sigquit from a child process. It usually means the child "
    "failed.",
]

PLANTED = st.sampled_from(
    [
        lambda s: f"api_key='{s}'",
        lambda s: f"'hf_token': '{s}'",
        lambda s: f'"password": "{s}"',
        lambda s: f"redis://:{s}@cache:6379",
        lambda s: f"X-Api-Key: {s}",
        lambda s: f"--api-key {s}",
        lambda s: f"HF_TOKEN={s}",
        lambda s: f"Authorization: Bearer {s}",
    ]
)
SECRET = st.text(
    alphabet="abcdefghkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=40
)


def _outputs(lines: list[str], redacted: bool = True) -> list[str]:
    signatures, facts = _library()
    engine = Engine(signatures, facts=facts)
    log = LogInput.from_text("\n".join(lines) + "\n", name="planted.log")
    run_logs(engine, [log])
    diagnosis = engine.finish(inputs=[log.summary()])
    diagnosis = redact(diagnosis) if redacted else diagnosis
    return [render(diagnosis, fmt, width=100, color=False) for fmt in ("text", "json", "markdown")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    planted=PLANTED,
    secret=SECRET,
    where=st.integers(min_value=0, max_value=len(BASE_LOG) - 1),
    shaped=st.sampled_from([None, *[t for _, t in SHAPED]]),
)
def test_a_planted_secret_never_reaches_any_output(
    planted, secret: str, where: int, shaped
) -> None:  # type: ignore[no-untyped-def]
    lines = list(BASE_LOG)
    lines[where] = f"{lines[where]} {planted(secret)}"
    if shaped:
        lines.insert(where, f"[2026-03-01 11:53:30] using token {shaped} for downloads")
    for output in _outputs(lines):
        assert secret not in output
        if shaped:
            assert shaped not in output


def test_the_planted_lines_do_reach_the_reports_unredacted() -> None:
    """What makes the property above worth having: the error line is evidence."""
    lines = [*BASE_LOG[:5], f"{BASE_LOG[5]} api_key='{S}'", *BASE_LOG[6:]]
    assert all(S in output for output in _outputs(lines, redacted=False))
    assert all(S not in output and "<redacted:" in output for output in _outputs(lines))


def test_counts_per_kind_reach_the_json_report() -> None:
    lines = [*BASE_LOG[:5], f"{BASE_LOG[5]} hf_token={S} HF again: {SHAPED[0][1]}", *BASE_LOG[6:]]
    data = json.loads(_outputs(lines)[1])
    assert data["redactions"] == {"hf_token": 1, "secret": 1}


def test_a_value_a_template_copied_is_redacted_too() -> None:
    """A secret recognised in the evidence is replaced wherever else it occurs, even where
    no rule would see it (an explanation that quotes only the value)."""
    from diagnose.core.models import Confidence, Diagnosis, Evidence, Finding, Role, Severity

    finding = Finding(
        id="f1", signature="x", category="unknown", severity=Severity.ERROR,
        role=Role.ROOT_CAUSE, title="t", explanation=f"the server refused {S}",
        confidence=Confidence.HIGH, patch=None,
        evidence=[Evidence(source="a.log", line=1, text=f"api_key='{S}'")],
    )  # fmt: skip
    cleaned = redact(Diagnosis(findings=[finding], primary="f1"))
    (out,) = cleaned.findings
    assert S not in out.explanation and S not in out.evidence[0].text
    assert out.explanation == "the server refused <redacted:secret:1>"


def test_the_live_watch_display_is_redacted() -> None:
    from datetime import datetime, timezone

    from rich.console import Console

    from diagnose.commands.watch import Watcher

    signatures, facts = _library()
    now = datetime(2026, 3, 1, 11, 53, tzinfo=timezone.utc)
    watcher = Watcher(Engine(signatures, facts=facts), "x.log", clock=lambda: now)
    watcher.feed([f"[2026-03-01 11:53:00] server_args=ServerArgs(api_key='{S}', port=1)"])
    console = Console(width=200, record=True, color_system=None)
    console.print(status_panel("x.log", None, None, now, 1, watcher.last_line, [], ""))
    shown_live = console.export_text()
    assert S not in shown_live
    assert "api_key='<redacted:secret:1>'" in shown_live
    shown = Watcher(Engine(signatures, facts=facts), "x.log", clock=lambda: now, redactor=None)
    shown.feed([f"[2026-03-01 11:53:00] api_key='{S}'"])
    assert S in shown.last_line  # --no-redact
