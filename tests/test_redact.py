"""Secrets in log lines never reach a report, in any format, unless --no-redact is given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diagnose.core.models import Confidence, Diagnosis, Finding, Patch, Role, Severity
from diagnose.core.redact import Redactor, redact
from tests.conftest import invoke

HF = "hf_abcdefghijklmnopqrstuvwxyz0123"
SK = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX12"
API_FLAG = "s3cr3t-value-123"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.sig"
URL_PASSWORD = "hunter2pass"
SECRETS = [HF, SK, API_FLAG, BEARER, URL_PASSWORD]

LOG = f"""\
[2026-03-01 10:00:01] FAILED download with token {HF}
[2026-03-01 10:00:02] FAILED openai key {SK}
[2026-03-01 10:00:03] FAILED launch: python -m sglang.launch_server --api-key {API_FLAG} --port 30000
[2026-03-01 10:00:04] FAILED request header Authorization: Bearer {BEARER}
[2026-03-01 10:00:05] FAILED clone https://alice:{URL_PASSWORD}@git.example.com/repo.git
[2026-03-01 10:00:06] FAILED env HF_TOKEN={HF}
"""

SIGNATURE = """\
title: Launch failed
category: unknown
severity: error
match:
  type: line
  needles: ["FAILED"]
  regex: 'FAILED'
explanation: "It failed."
patch_note: "Nothing to change."
examples:
  positive: [{name: hit, log: "FAILED\\n"}]
  negative: [{name: miss, log: "fine\\n"}]
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user signatures
    signatures = tmp_path / "signatures"
    signatures.mkdir()
    (signatures / "test-launch-failed.yaml").write_text(SIGNATURE, encoding="utf-8")
    log = tmp_path / "secrets.log"
    log.write_text(LOG, encoding="utf-8")
    return log, signatures


def run(setup: tuple[Path, Path], *extra: str) -> str:
    log, signatures = setup
    result = invoke(["file", str(log), "--signatures", str(signatures), *extra])
    assert result.exit_code == 1, result.output
    return result.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_secrets_are_redacted_in_every_format(setup, fmt: str) -> None:
    output = run(setup, "-f", fmt)
    for secret in SECRETS:
        assert secret not in output, f"{secret} leaked into {fmt}"
    for kind in ("hf_token", "api_key", "flag", "bearer", "url_password"):
        assert f"<redacted:{kind}:1>" in output, kind
    # The surrounding text stays, so the line still reads (wrapped to 80 columns in text).
    words = " ".join(output.split())
    assert "--api-key <redacted:flag:1> --port 30000" in words
    assert "https://alice:<redacted:url_password:1>@git.example.com" in words


def test_the_same_secret_gets_the_same_placeholder(setup) -> None:
    data = json.loads(run(setup, "-f", "json"))
    (finding,) = [f for f in data["findings"] if f["signature"] == "test-launch-failed"]
    texts = [e["text"] for e in finding["evidence"]]
    assert texts[0].endswith("token <redacted:hf_token:1>")
    assert texts[5].endswith("HF_TOKEN=<redacted:hf_token:1>")
    assert "<redacted:hf_token:2>" not in json.dumps(data)


def test_redaction_counts_are_reported(setup) -> None:
    data = json.loads(run(setup, "-f", "json"))
    counts = data["redactions"]
    # distinct secrets, not mentions: the token appears twice but is one secret
    assert counts == {"hf_token": 1, "api_key": 1, "flag": 1, "bearer": 1, "url_password": 1}
    text = run(setup)
    assert re.search(r"Redacted: .*hf_token", text)
    assert "--no-redact shows them" in " ".join(text.split())
    markdown = run(setup, "-f", "markdown")
    assert "_Secrets redacted from this report:" in markdown


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_no_redact_shows_the_secrets(setup, fmt: str) -> None:
    output = run(setup, "-f", fmt, "--no-redact")
    flat = output.replace("\n  ", " ")  # the text report wraps long lines
    for secret in SECRETS:
        assert secret in flat or secret in output, f"{secret} missing with --no-redact ({fmt})"
    assert "<redacted:" not in output


def test_no_redact_reports_no_counts(setup) -> None:
    data = json.loads(run(setup, "-f", "json", "--no-redact"))
    assert data["redactions"] == {}


# -- the redactor on its own ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "kept"),
    [
        ("token hf_" + "A1" * 12, "hf_token", "token "),
        ("OPENAI_API_KEY=sk-" + "x" * 30, "api_key", "OPENAI_API_KEY="),
        ("DB_PASSWORD=correcthorse", "env", "DB_PASSWORD="),
        ("--hf-token=hf_" + "b" * 24, "hf_token", "--hf-token="),
        ("authorization: basic dXNlcjpwYXNzd29yZA==", "authorization", "authorization: basic "),
        ("postgres://bob:pw1234@db:5432/x", "url_password", "postgres://bob:"),
        ("AWS key AKIAABCDEFGHIJKLMNOP", "aws_key", "AWS key "),
        ("GITHUB_TOKEN: ghp_abcdefghijklmnopqrstuvwxyz", "api_key", "GITHUB_TOKEN: "),
    ],
)
def test_redactor_rules(text: str, kind: str, kept: str) -> None:
    redactor = Redactor()
    out = redactor.text(text)
    assert out.startswith(kept)
    assert "<redacted:" in out
    assert kind in redactor.counts


@pytest.mark.parametrize(
    "text",
    [
        "Load weight end. type=Qwen3_5MoeForConditionalGeneration, avail mem=80.54 GB",
        "tokenizer_path='/models/Qwen3.5-122B-A10B', tokenizer_mode='auto'",
        "max_total_num_tokens=1800704, chunked_prefill_size=8192",
        "HF_TOKEN=None",
        "Set HF_TOKEN=hf_... in the unit",
    ],
)
def test_redactor_leaves_ordinary_lines_alone(text: str) -> None:
    redactor = Redactor()
    assert redactor.text(text) == text
    assert redactor.counts == {}


def test_redact_covers_patch_values_and_env_keys() -> None:
    finding = Finding(
        id="f1",
        signature="x",
        category="unknown",
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title="t",
        explanation=f"token {HF}",
        confidence=Confidence.HIGH,
        evidence=[],
        patch=Patch(env_set={"HF_TOKEN": "plainvalue123"}, dropin=f"Environment=HF_TOKEN={HF}\n"),
    )
    cleaned = redact(Diagnosis(findings=[finding], primary="f1"))
    (out,) = cleaned.findings
    assert HF not in out.explanation
    assert out.patch is not None
    assert out.patch.env_set["HF_TOKEN"].startswith("<redacted:env:")
    assert HF not in (out.patch.dropin or "")
    assert set(cleaned.redactions) >= {"env", "hf_token"}
