"""The installed command, run as a user runs it: exit codes, errors, inputs, outputs, wiring."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, invoke

CRASHLOOP = "fixtures/incidents/qwen-122b-crashloop.journal.txt"
KV_CACHE = "fixtures/incidents/oom-kv-cache.log"
HEALTHY = "fixtures/incidents/healthy-sglang.journal.txt"


def _installed() -> str:
    beside = Path(sys.executable).parent / "diagnose"
    if beside.is_file():
        return str(beside)
    found = shutil.which("diagnose")
    assert found, "the diagnose command is not installed (pip install -e .)"
    return found


DIAGNOSE = [_installed()]
MODULE = [sys.executable, "-m", "diagnose"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No user signatures, whatever the machine has, and the repository as the working
    directory: for subprocesses (the returned environment) and in-process runs alike."""
    config = str(tmp_path / "config")
    monkeypatch.setenv("XDG_CONFIG_HOME", config)
    monkeypatch.chdir(REPO)
    return {**os.environ, "XDG_CONFIG_HOME": config, "COLUMNS": "80"}


def run(
    args: list[str],
    env: dict[str, str],
    stdin: bytes | None = None,
    command: list[str] = DIAGNOSE,
    cwd: Path = REPO,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*command, *args], input=stdin, capture_output=True, cwd=cwd, env=env, timeout=60
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8"),
        result.stderr.decode("utf-8"),
    )


# -- exit codes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [DIAGNOSE, MODULE], ids=["script", "python-m"])
def test_exit_1_with_a_finding(command: list[str], env) -> None:
    result = run(["file", CRASHLOOP], env, command=command)
    assert result.returncode == 1, result.stderr
    assert "ROOT CAUSE" in result.stdout
    assert "sglang-spec-v2-required" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("command", [DIAGNOSE, MODULE], ids=["script", "python-m"])
def test_exit_0_on_a_healthy_log(command: list[str], env) -> None:
    result = run(["file", HEALTHY], env, command=command)
    assert result.returncode == 0, result.stderr
    assert "No failure found" in result.stdout


def test_fail_on_critical_ignores_an_error_only_finding(env, tmp_path: Path) -> None:
    # The restart loop alone (severity error) is the only finding here.
    lines = [line for line in (REPO / CRASHLOOP).read_text().splitlines() if "systemd[1]" in line]
    log = tmp_path / "loop.log"
    log.write_text("\n".join(lines) + "\n")
    data = json.loads(invoke(["file", str(log), "-f", "json"]).stdout)
    assert {f["severity"] for f in data["findings"]} == {"error"}
    assert invoke(["file", str(log)]).exit_code == 1
    assert invoke(["file", str(log), "--fail-on", "critical"]).exit_code == 0


# -- user errors: exit 2, one line, no traceback ------------------------------------------------------


def _user_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""
    return result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["file", "no/such/file.log"], "no/such/file.log: no such file"),
        (["file", "fixtures"], "fixtures: is a directory"),
        (["file", KV_CACHE, "--hang-after", "soon"], "--hang-after: not a duration: 'soon'"),
        (
            ["file", KV_CACHE, "--signatures", "no/such/dir"],
            "no/such/dir: not a directory of signatures",
        ),
        (["signatures", "show", "no-such-signature"], "no signature 'no-such-signature'"),
    ],
    ids=["missing-file", "directory", "bad-hang-after", "bad-signature-dir", "unknown-signature"],
)
def test_user_errors_are_one_line(args: list[str], expected: str, env) -> None:
    stderr = _user_error(run(args, env))
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith("diagnose: error: ")
    assert expected in stderr


def test_empty_file_is_a_user_error(env, tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    stderr = _user_error(run(["file", str(empty)], env))
    assert stderr.count("\n") == 1
    assert f"{empty}: no log lines to read" in stderr
    assert "help:" in stderr


def test_unknown_format_is_a_usage_error(env) -> None:
    stderr = _user_error(run(["file", KV_CACHE, "--format", "xml"], env))
    assert "'xml' is not one of" in stderr
    assert "--format" in stderr


def test_unknown_command_is_a_usage_error(env) -> None:
    stderr = _user_error(run(["bogus"], env))
    assert "No such command 'bogus'" in stderr


def test_an_invalid_signature_file_is_a_user_error(env, tmp_path: Path) -> None:
    bad = tmp_path / "sigs"
    bad.mkdir()
    (bad / "broken.yaml").write_text("title: x\nunknown_key: 1\n")
    stderr = _user_error(run(["file", KV_CACHE, "--signatures", str(bad)], env))
    assert str(bad / "broken.yaml") in stderr
    assert stderr.count("\n") == 1


# -- inputs ---------------------------------------------------------------------------------------------


def _json(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stdout)


def _primary_signature(data: dict) -> str | None:
    found = {f["id"]: f for f in data["findings"]}
    return found[data["primary"]]["signature"] if data["primary"] else None


def test_stdin_with_a_dash(env) -> None:
    data = (REPO / KV_CACHE).read_bytes()
    result = run(["file", "-", "-f", "json"], env, stdin=data)
    assert result.returncode == 1, result.stderr
    report = _json(result)
    assert report["inputs"][0]["kind"] == "stdin"
    assert report["inputs"][0]["name"] == "<stdin>"
    assert _primary_signature(report) == "sglang-kv-cache-no-room"
    evidence = report["findings"][0]["evidence"]
    assert all(isinstance(e["line"], int) for e in evidence)


def test_piped_stdin_without_an_argument(env) -> None:
    data = (REPO / KV_CACHE).read_bytes()
    result = run(["file", "-f", "json"], env, stdin=data)
    assert result.returncode == 1, result.stderr
    assert _json(result)["inputs"][0]["kind"] == "stdin"
    assert _primary_signature(_json(result)) == "sglang-kv-cache-no-room"


def test_gzip_gives_the_same_result_as_the_plain_file(env, tmp_path: Path) -> None:
    packed = tmp_path / "crashloop.log.gz"
    packed.write_bytes(gzip.compress((REPO / CRASHLOOP).read_bytes()))
    plain = json.loads(invoke(["file", str(REPO / CRASHLOOP), "-f", "json"]).stdout)
    zipped = _json(run(["file", str(packed), "-f", "json"], env))
    for data in (plain, zipped):
        del data["inputs"][0]["name"]
        for finding in data["findings"]:
            for evidence in finding["evidence"]:
                del evidence["source"]
    assert zipped == plain


def test_gzip_on_stdin(env) -> None:
    result = run(["file", "-f", "json"], env, stdin=gzip.compress((REPO / KV_CACHE).read_bytes()))
    assert _primary_signature(_json(result)) == "sglang-kv-cache-no-room"


def test_truncated_gzip_warns_and_still_diagnoses(env, tmp_path: Path) -> None:
    # The failure is early in the log; cut the compressed stream well after it.
    text = (REPO / CRASHLOOP).read_bytes()
    packed = gzip.compress(text)
    whole = len(gzip.compress(text[: text.index(b"restart counter is at 2")]))
    truncated = tmp_path / "cut.log.gz"
    truncated.write_bytes(packed[: max(whole, len(packed) * 3 // 4)])
    assert len(truncated.read_bytes()) < len(packed)
    result = run(["file", str(truncated), "-f", "json"], env)
    assert "warning" in result.stderr
    assert "compressed data ends early" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    assert _primary_signature(_json(result)) == "sglang-spec-v2-required"


def test_two_inputs_make_one_diagnosis(env) -> None:
    result = run(
        [
            "file",
            "fixtures/incidents/dist-init-stall.journal.txt",
            "fixtures/gpu/nvidia-smi-4xh200-1gb.txt",
            "-f",
            "json",
        ],
        env,
    )
    data = _json(result)
    assert [i["name"] for i in data["inputs"]] == [
        "fixtures/incidents/dist-init-stall.journal.txt",
        "fixtures/gpu/nvidia-smi-4xh200-1gb.txt",
    ]
    assert data["findings"][0]["confidence"] == "high"


# -- outputs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_output_file_is_written_and_no_temp_file_is_left(fmt: str, env, tmp_path: Path) -> None:
    out = tmp_path / f"report.{fmt}"
    result = run(["file", CRASHLOOP, "-f", fmt, "-o", str(out)], env)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "config") == [out.name]
    written = out.read_text(encoding="utf-8")
    assert written == invoke(["file", CRASHLOOP, "-f", fmt]).stdout
    if fmt == "json":
        assert json.loads(written)["schema_version"] == 1


def test_output_replaces_an_existing_file(env, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    out.write_text("old report\n")
    run(["file", HEALTHY, "-o", str(out)], env)
    assert out.read_text().startswith("sglang-qwen.service:")


def test_output_into_a_missing_directory_is_a_user_error(env, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "report.txt"
    stderr = _user_error(run(["file", CRASHLOOP, "-o", str(out)], env))
    assert str(out) in stderr
    assert not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["config"])


def test_version(env) -> None:
    result = run(["--version"], env)
    assert result.returncode == 0
    assert re.fullmatch(r"diagnose \d+\.\d+\.\d+\S*\n", result.stdout)


# -- every command is wired ----------------------------------------------------------------------------


def _commands(help_text: str) -> list[str]:
    """Command names from a help screen's Commands section (rich box or plain click)."""
    names: list[str] = []
    in_commands = False
    for line in help_text.splitlines():
        if re.search(r"\bCommands\b", line):
            in_commands = True
            continue
        if in_commands:
            match = re.match(r"^[│|]?\s{1,3}([a-z][a-z0-9-]*)\s{2,}\S", line)
            if match:
                names.append(match.group(1))
            elif line.startswith(("╰", "+")) or (not line.strip() and names):
                break
    return names


def test_all_commands_are_wired(env) -> None:
    top = run(["--help"], env)  # the installed command's help screen
    assert top.returncode == 0
    commands = _commands(top.stdout)
    assert {"file", "signatures"} <= set(commands), commands
    sub = run(["signatures", "--help"], env)
    assert sub.returncode == 0
    subcommands = _commands(sub.stdout)
    assert {"list", "show", "test", "lint", "schema"} <= set(subcommands), subcommands
    everything = [[c] for c in commands] + [["signatures", c] for c in subcommands]
    for words in everything:  # in-process: the same app, without a start-up per command
        result = invoke([*words, "--help"])
        assert result.exit_code == 0, (words, result.output)
        assert "Usage: diagnose " + " ".join(words) in " ".join(result.output.split()), words


def test_commands_seen_in_help_are_all_the_registered_ones(env) -> None:
    import typer.main

    from diagnose.cli.app import app

    group = typer.main.get_command(app)
    registered = set(group.commands)  # type: ignore[attr-defined]
    assert set(_commands(invoke(["--help"]).stdout)) == registered


# -- signatures commands -------------------------------------------------------------------------------


def test_signatures_list(env) -> None:
    result = invoke(["signatures", "list"])
    assert result.exit_code == 0
    rows = result.stdout.splitlines()
    ids = [row.split()[0] for row in rows]
    assert "sglang-spec-v2-required" in ids
    assert len(ids) == len(set(ids))
    as_json = [
        json.loads(line) for line in invoke(["signatures", "list", "--json"]).stdout.splitlines()
    ]
    assert [row["id"] for row in as_json] == ids
    assert all(set(row) == {"id", "category", "severity", "title"} for row in as_json)


def test_signatures_show(env) -> None:
    import yaml

    result = invoke(["signatures", "show", "sglang-spec-v2-required"])
    assert result.exit_code == 0
    data = yaml.safe_load(result.stdout)
    assert data["id"] == "sglang-spec-v2-required"
    assert data["category"] == "spec_decode_config"
    assert data["examples"]["positive"] and data["examples"]["negative"]


def test_signatures_test_passes_on_the_builtin_library(env) -> None:
    result = invoke(["signatures", "test"])
    assert result.exit_code == 0, result.stdout
    assert re.search(r"^\d+ passed, 0 failed", result.stdout, re.M)


def test_signatures_test_fails_on_a_broken_example(env, tmp_path: Path) -> None:
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "test-boom.yaml").write_text(
        "title: Boom\ncategory: unknown\nseverity: error\n"
        "match: {type: line, needles: [boom], regex: 'boom'}\n"
        "explanation: Boom.\npatch_note: none\n"
        "examples:\n"
        '  positive: [{name: misses, log: "quiet\\n"}]\n'
        '  negative: [{name: fine, log: "quiet\\n"}]\n'
    )
    result = invoke(["signatures", "test", str(directory)])
    assert result.exit_code == 1
    assert "FAIL  test-boom::misses" in result.stdout
    assert "expected a finding; none matched" in result.stdout
    assert "1 passed, 1 failed" in result.stdout


def test_signatures_lint_is_clean(env) -> None:
    result = invoke(["signatures", "lint"])  # in process: it runs every example (a minute)
    assert result.stdout.strip() == "0 problem(s)", result.stdout
    assert result.exit_code == 0


def test_signatures_lint_reports_a_problem(env, tmp_path: Path) -> None:
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "test-boom.yaml").write_text(
        "title: Boom\ncategory: unknown\nseverity: error\n"
        "match: {type: line, regex: 'boom'}\n"
        "explanation: Boom.\n"
        "examples:\n"
        '  positive: [{name: hit, log: "boom\\n"}]\n'
        '  negative: [{name: fine, log: "quiet\\n"}]\n'
    )
    result = invoke(["signatures", "lint", "--signatures", str(directory)])
    assert result.exit_code == 1
    assert "test-boom: pattern 'boom' has no needles" in result.stdout
    assert "test-boom: no references" in result.stdout
    assert "test-boom: no patch and no patch_note" in result.stdout


def test_signatures_lint_finds_a_field_nothing_fills(env, tmp_path: Path) -> None:
    """``${VAR}`` in a sentence is a template field no capture fills: the sentence would
    never be shown, so lint names it (a literal brace is written doubled)."""
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "test-field.yaml").write_text(
        "title: Boom\ncategory: unknown\nseverity: error\n"
        "match: {type: line, needles: [boom], regex: 'boom (?P<flag>--\\w+)'}\n"
        "explanation:\n"
        "  - 'Set `{flag}`; an unset variable (`--x ${VAR}`) empties it.'\n"
        "  - 'Literal braces are fine: `${{VAR}}`.'\n"
        "patch_note: None.\nreferences: [https://example.org]\n"
        "examples:\n"
        '  positive: [{name: hit, log: "boom --x\\n"}]\n'
        '  negative: [{name: fine, log: "quiet\\n"}]\n'
    )
    result = invoke(["signatures", "lint", "--signatures", str(directory)])
    assert "test-field: its text names {VAR}" in result.stdout
    assert result.stdout.count("its text names") == 1


def test_committed_schema_is_not_stale(env) -> None:
    result = invoke(["signatures", "schema"])
    assert result.exit_code == 0
    committed = (REPO / "signatures" / "_schema.json").read_text(encoding="utf-8")
    assert result.stdout == committed, (
        "regenerate: diagnose signatures schema > signatures/_schema.json"
    )
    assert json.loads(committed)["title"] == "Signature"


def test_readme_signature_table_is_not_stale(env) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(
        r"<!-- signature-table:start -->\n(.*?)<!-- signature-table:end -->", readme, re.S
    )
    assert match, "README.md lost its signature-table markers"
    result = invoke(["signatures", "list", "--markdown"])
    assert result.exit_code == 0
    assert match.group(1) == result.stdout, (
        "regenerate the table between the markers with: diagnose signatures list --markdown"
    )


def test_explain_renders_a_signature_for_a_reader() -> None:
    result = invoke(["explain", "sglang-cuda-graph-oom"])
    assert result.exit_code == 0
    text = result.output
    assert text.startswith("Out of GPU memory while capturing CUDA graphs\n")
    assert "sglang-cuda-graph-oom: gpu_oom, critical" in text
    assert "add --mem-fraction-static {new_fraction} [when new_fraction]" in text
    assert "https://github.com/sgl-project/sglang/issues/2771" in text


def test_explain_an_unknown_id_is_a_user_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "explain", "no-such-signature"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "diagnose: error: no signature 'no-such-signature' "
        "(help: `diagnose signatures list` shows the ids)"
    )
