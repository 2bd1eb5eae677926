"""Secrets go by ``EnvironmentFile=`` (issue 32, item 4): a fix that sets ``HF_TOKEN`` or an
API key never writes its value into a drop-in, where ``systemctl show`` prints it to every
user; the drop-in reads a 0600 file the admin owns and says how to make it."""

from __future__ import annotations

from diagnose.core.dropin import (
    Fix,
    environment_lines,
    render_dropin,
    render_fixes,
    secrets_path,
)
from diagnose.core.models import Patch
from diagnose.systemd.unit import parse_unit_text

UNIT = "vllm.service"
SECRETS = "/etc/systemd/system/vllm.service.d/secrets.env"


def _settings(text: str) -> list[tuple[str, str]]:
    return [(s.key, s.value) for s in parse_unit_text(text).settings]


def test_a_secret_is_read_from_a_file_never_written() -> None:
    patch = Patch(env_set={"HF_TOKEN": "<a read token>", "HF_HUB_OFFLINE": "0"})
    text = render_dropin(patch, UNIT)
    assert text is not None
    settings = _settings(text)
    assert ("Environment", "HF_HUB_OFFLINE=0") in settings
    assert ("EnvironmentFile", SECRETS) in settings
    assert not any("HF_TOKEN" in value for key, value in settings if key == "Environment")
    assert f"sudo install -m 0600 -o root -g root /dev/null {SECRETS}" in text
    assert "# Fill in" not in text  # the placeholder is not in the file: nothing to fill in


def test_every_secret_name_and_only_those() -> None:
    lines = environment_lines(
        {"VLLM_API_KEY": "x", "OPENAI_API_KEY": "y", "CUDA_VISIBLE_DEVICES": "0,1"}, UNIT
    )
    assert "Environment=CUDA_VISIBLE_DEVICES=0,1" in lines
    assert lines[-1] == f"EnvironmentFile={SECRETS}"
    assert not any(line.startswith("Environment=") and "KEY" in line for line in lines)
    assert secrets_path("sglang@a.service") == "/etc/systemd/system/sglang@a.service.d/secrets.env"


def test_the_accumulated_drop_in_keeps_secrets_out_too() -> None:
    fix = Fix(id="hf-gated-repo@x", signature="hf-gated-repo", incident="x",
              patch=Patch(env_set={"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwx"}))  # fmt: skip
    text = render_fixes(UNIT, [fix], None)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert f"EnvironmentFile={SECRETS}" in body
    assert not any("hf_abc" in line for line in body)
    assert not any("hf_abc" in line for line in text.splitlines())  # not in the record either
