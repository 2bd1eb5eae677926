"""The unit parser over every real unit in fixtures/units, the quirks INDEX.md lists, and
patches rendered against a unit (the ExecStart= argv round-trips through the parser)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnose.core.models import Patch
from diagnose.systemd.unit import (
    ExecCommand,
    build_config,
    find_unit,
    load_unit_file,
    parse_environment_assignments,
    parse_environment_file,
    parse_rendered_exec_start,
    parse_systemctl_cat,
    parse_unit_text,
    patched_argv,
    quote_word,
    remove_flags,
    render_patch,
    split_words,
)
from tests.conftest import systemd_verify

UNITS = Path(__file__).parent.parent / "fixtures" / "units"
ALL_UNITS = sorted(UNITS.glob("*.service"))


def _reparse(exec_start: str) -> list[str] | None:
    """An ExecStart= value read back as systemd would, continuations included."""
    return parse_rendered_exec_start(f"[Service]\nExecStart={exec_start}\n")


def _load(stem: str, root: Path | None = None) -> object:
    (path,) = UNITS.glob(f"{stem}*.service")
    return load_unit_file(path, path.name, root)


@pytest.mark.parametrize("path", ALL_UNITS, ids=lambda p: p.name[:3])
def test_every_sample_unit_parses(path: Path) -> None:
    config = load_unit_file(path, path.name, root=Path("/nonexistent-root"))
    if path.name.startswith("014"):
        assert config.command is None
        assert any("no ExecStart=" in problem for problem in config.problems)
        return
    assert config.command is not None, config.warnings
    argv = config.command.argv
    assert argv and argv[0], argv
    # What we would write back reads back the same.
    assert _reparse(config.command.render()) == argv


def test_there_are_25_units() -> None:
    assert len(ALL_UNITS) == 25


def test_commented_execstart_is_not_a_second_command_003() -> None:
    config = _load("003")
    assert len(config.exec_start) == 1
    argv = config.command.argv
    assert argv[:2] == ["/home/ubuntu/deepseek_lab/venv3/bin/vllm", "serve"]
    assert argv[argv.index("--limit-mm-per-prompt") + 1] == '{"image": 1, "video": 0}'
    assert (
        argv[argv.index("--compilation-config") + 1] == '{"cudagraph_capture_sizes": [1, 2, 4, 8]}'
    )
    assert "--max-num-seqs" in argv and "--enforce-eager" not in argv
    assert config.environment["VLLM_MM_INPUT_CACHE_GIB"] == "8"
    assert config.environment["PYTHONUNBUFFERED"] == "1"


def test_missing_trailing_newline_004_013() -> None:
    for stem in ("004", "013"):
        (path,) = UNITS.glob(f"{stem}*.service")
        assert not path.read_bytes().endswith(b"\n")
        config = _load(stem)
        assert config.get("Install", "WantedBy")


def test_stray_line_before_unit_is_warned_not_fatal_005() -> None:
    config = _load("005")
    assert any(":1: not a Key=value line" in w for w in config.warnings)
    argv = config.command.argv
    assert argv[-2:] == ["--tool-call-parser", "qwen3_coder"]
    assert config.environment["CUDA_HOME"] == "/usr/local/cuda-13.0"


def test_bash_script_is_one_word_with_variables_kept_009_010() -> None:
    for stem in ("009", "010"):
        config = _load(stem)
        argv = config.command.argv
        assert argv[:2] == ["/bin/bash", "-lc"]
        assert len(argv) == 3
        assert "${ARGS[@]}" in argv[2] or "$${ARGS[@]}" in argv[2]
        assert config.command.through_shell
    env = parse_environment_file((UNITS / "009-omnimesh-qwen-vllm-bash-unescaped.env").read_text())
    assert env["LIMIT_MM_PER_PROMPT"] == '{"image":2,"video":1,"audio":1}'
    assert env["MODEL_PATH"] == "/path/to/model"
    assert "PYTHON_BIN" in env


def test_dropin_merges_and_specifiers_stay_011() -> None:
    (path,) = UNITS.glob("011*.service")
    dropin = UNITS / "011-qwen-cluster-notify-supervisor.d" / "20-recovery.conf"
    config = build_config(
        "qwen-vllm.service", (str(path), path.read_text()), [(str(dropin), dropin.read_text())]
    )
    assert config.dropins == [str(dropin)]
    assert config.values("Service", "RestartSec") == ["300", "300"]
    assert config.get("Unit", "StartLimitIntervalSec") == "0"
    assert config.environment["HOME"] == "%h"
    assert config.environment_files[0].path == "%h/.config/qwen-cluster/active.env"
    assert not config.environment_files[0].optional
    assert (
        config.command.argv[1]
        == "%h/Qwen3.8-Flash-Next-Dual-DGX-Sparks/deploy/qwen_cluster_supervisor.py"
    )


def test_optional_environment_files_and_whole_word_variables_019(tmp_path: Path) -> None:
    (tmp_path / "etc/sglang").mkdir(parents=True)
    (UNITS / "019-aur-sglang-template@.sglang.conf").read_bytes()
    shutil.copy(UNITS / "019-aur-sglang-template@.sglang.conf", tmp_path / "etc/sglang/sglang.conf")
    config = _load("019", root=tmp_path)
    assert [(f.path, f.optional) for f in config.environment_files] == [
        ("/etc/sglang/sglang.conf", True),
        ("/etc/sglang/sglang.env", True),
        ("/etc/sglang/%i.conf", True),
        ("/etc/sglang/%i.env", True),
    ]
    assert config.problems == []  # optional files may be missing
    assert config.command.argv[-2:] == ["$SGLANG_OPTS", "$SGLANG_ARGS"]
    effective = config.effective_environment
    assert effective["SGLANG_OPTS"] == "--port 30000 --sleep-on-idle"
    assert effective["CUDA_HOME"] == "/opt/cuda"


def test_missing_required_environment_file_is_a_problem_023(tmp_path: Path) -> None:
    config = _load("023", root=tmp_path)
    assert any("llama-server.env does not exist" in p for p in config.problems)
    assert all(w.startswith("${") for w in config.command.argv[1:] if not w.startswith("-"))


def test_literal_path_variable_in_environment_021() -> None:
    config = _load("021")
    assert config.environment["PATH"] == "/usr/local/cuda/bin:$PATH"


def test_inline_comment_is_part_of_the_value_024() -> None:
    config = _load("024")
    assert config.get("Service", "User") == "your_username  # Replace with your system user"
    assert config.get("Service", "WorkingDirectory") == "/path/to/llama/cpp  # Optional"
    assert any("no inline comments" in w for w in config.warnings)
    assert config.command.argv[0] == "llama-server"


def test_variable_executable_and_quoted_variables_025() -> None:
    config = _load("025")
    argv = config.command.argv
    assert argv[0] == "${LLAMCPP_DIR}/build/bin/llama-server"
    assert argv[argv.index("-m") + 1] == "${MODEL_PATH}"
    assert argv[-1] == "${JINJA_ENABLED}"
    assert config.get("Service", "Restart") == "${RESTART_MODE}"


def test_templates_keep_percent_i_015_016() -> None:
    for stem in ("015", "016"):
        config = _load(stem)
        assert any("%i" in word for word in config.command.argv)


def test_exec_prefixes() -> None:
    command = ExecCommand.parse("-+/usr/bin/python3 -m x")
    assert command.prefix == "-+"
    assert command.argv == ["/usr/bin/python3", "-m", "x"]
    assert command.render() == "-+/usr/bin/python3 -m x"
    assert ExecCommand.parse("!!@/bin/sh sh -c 'echo hi'").argv == [
        "/bin/sh",
        "sh",
        "-c",
        "echo hi",
    ]


def test_environment_with_several_quoted_assignments() -> None:
    assert parse_environment_assignments('"A=1" "B=two words" C=3 \'D={"x": 1}\'') == [
        ("A", "1"),
        ("B", "two words"),
        ("C", "3"),
        ("D", '{"x": 1}'),
    ]


def test_continuation_skips_comment_lines_and_empty_reset() -> None:
    text = (
        "[Service]\nExecStart=/bin/a \\\n# a comment inside\n  --x 1\n"
        "Environment=A=1\nEnvironment=\nEnvironment=B=2\n"
    )
    config = build_config("t.service", ("t.service", text))
    assert config.command.argv == ["/bin/a", "--x", "1"]
    assert config.environment == {"B": "2"}


def test_dropin_resets_exec_start() -> None:
    base = "[Service]\nExecStart=/bin/old --a 1\n"
    dropin = "[Service]\nExecStart=\nExecStart=/bin/new --b 2\n"
    config = build_config("t.service", ("t.service", base), [("d.conf", dropin)])
    assert len(config.exec_start) == 1
    assert config.command.argv == ["/bin/new", "--b", "2"]


def test_quoting_round_trips_awkward_words() -> None:
    words = [
        "plain",
        "two words",
        "it's",
        'say "hi"',
        "back\\slash",
        "",
        '{"a": [1, 2]}',
        "tab\there",
        ";",
    ]
    line = " ".join(quote_word(w) for w in words)
    assert split_words(line) == words
    assert quote_word('{"a": 1}') == "'{\"a\": 1}'"


def test_a_word_starting_with_hash_survives_a_continuation_line() -> None:
    """systemd skips a comment line inside a continuation: ``#tag`` alone on one would vanish."""
    command = ExecCommand("", ["/bin/x", "#tag", "--a", "1", *(f"--long-{i}" for i in range(20))])
    text = f"[Service]\nExecStart={command.render()}\n"
    (setting,) = parse_unit_text(text).settings
    assert ExecCommand.parse(setting.value).argv == command.argv


def test_remove_flags_with_values_and_equals_form() -> None:
    argv = ["/bin/x", "--a", "1", "--b=2", "--flag", "--c_d", "3", "--e", "4"]
    assert remove_flags(argv, ["--a", "--b", "--c-d"]) == ["/bin/x", "--flag", "--e", "4"]
    assert remove_flags(argv, ["--flag"]) == [
        "/bin/x",
        "--a",
        "1",
        "--b=2",
        "--c_d",
        "3",
        "--e",
        "4",
    ]


def test_a_stray_argument_is_removed_only_where_it_stands_alone() -> None:
    argv = ["/bin/vllm", "serve", "m", "trust_remote_code=True", "--x", "trust_remote_code=True"]
    # the value of --x stays: only a word that stands as an argument is the stray one
    assert remove_flags(argv, ["trust_remote_code=True"]) == [
        "/bin/vllm",
        "serve",
        "m",
        "--x",
        "trust_remote_code=True",
    ]


def test_args_add_replaces_an_existing_flag_and_escapes_literals() -> None:
    argv = ["/bin/x", "--mamba-scheduler-strategy=no_buffer", "--port", "30000"]
    patch = Patch(args_add=["--mamba-scheduler-strategy", "extra_buffer", "--note", "50%$HOME"])
    assert patched_argv(argv, patch) == [
        "/bin/x",
        "--port",
        "30000",
        "--mamba-scheduler-strategy",
        "extra_buffer",
        "--note",
        "50%%$$HOME",
    ]


def test_rendered_dropin_round_trips_through_the_parser() -> None:
    (path,) = UNITS.glob("003*.service")
    config = load_unit_file(path, "vllm.service")
    patch = Patch(
        env_set={"VLLM_USE_V1": "1"},
        args_add=["--max-num-seqs", "4", "--speculative-config", '{"method": "mtp", "n": 2}'],
        args_remove=["--kv-cache-dtype"],
    )
    rendered = render_patch(patch, config)
    assert rendered.dropin is not None
    assert "ExecStart=\nExecStart=" in rendered.dropin
    argv = parse_rendered_exec_start(rendered.dropin)
    assert argv == patched_argv(config.command.argv, patch)
    assert "--kv-cache-dtype" not in argv and argv.count("--max-num-seqs") == 1
    assert argv[-1] == '{"method": "mtp", "n": 2}'
    merged = build_config(
        "vllm.service", (str(path), path.read_text()), [("50-diagnose.conf", rendered.dropin)]
    )
    assert merged.command.argv == argv
    assert merged.environment["VLLM_USE_V1"] == "1"
    assert "+env: VLLM_USE_V1=1" in rendered.diff
    assert "-argv: --kv-cache-dtype" in rendered.diff


def test_shell_wrapped_command_is_not_patched_009() -> None:
    config = _load("009")
    rendered = render_patch(Patch(args_add=["--x", "1"]), config)
    assert rendered.exec_start is None and rendered.note
    assert "# Launch flags need the whole command line" in rendered.dropin


def test_systemctl_cat_output_is_split_per_file() -> None:
    text = (
        "# /etc/systemd/system/x.service\n[Service]\nExecStart=/bin/x\n# /not/a/header here\n\n"
        "# /etc/systemd/system/x.service.d/override.conf\n[Service]\nEnvironment=A=1\n"
    )
    files = parse_systemctl_cat(text)
    assert [p for p, _ in files] == [
        "/etc/systemd/system/x.service",
        "/etc/systemd/system/x.service.d/override.conf",
    ]
    assert "ExecStart=/bin/x" in files[0][1]


def test_find_unit_under_a_root_with_dropins_and_template(tmp_path: Path) -> None:
    system = tmp_path / "etc/systemd/system"
    (system / "s@.service.d").mkdir(parents=True)
    (tmp_path / "usr/lib/systemd/system").mkdir(parents=True)
    (tmp_path / "usr/lib/systemd/system/s@.service").write_text("[Service]\nExecStart=/bin/s %i\n")
    (system / "s@.service.d/10-a.conf").write_text("[Service]\nEnvironment=A=1\n")
    (system / "s@.service.d/50-diagnose.conf").write_text("[Service]\nEnvironment=A=2\n")
    config = find_unit("s@one.service", tmp_path, exclude=["50-diagnose.conf"])
    assert config is not None
    assert config.command.argv == ["/bin/s", "%i"]
    assert config.environment == {"A": "1"}
    assert find_unit("missing.service", tmp_path) is None


def test_unparsable_lines_do_not_crash() -> None:
    parsed = parse_unit_text("garbage\nKey=before section\n[Service]\nnot a setting\nA=1\\")
    assert [s.key for s in parsed.settings] == ["A"]
    assert len(parsed.warnings) == 3


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)
def test_rendered_dropin_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    unit = tmp_path / "diag-verify.service"
    unit.write_text(
        "[Unit]\nDescription=t\n\n[Service]\nExecStart=/bin/sh -c 'exec sleep 1' --port 1\n"
        "Restart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    config = load_unit_file(unit, unit.name)
    patch = Patch(
        env_set={"SGLANG_ENABLE_SPEC_V2": "1", "X": "a b%c"},
        args_add=["--mamba-scheduler-strategy", "extra_buffer"],
        unit_set={"Service.RestartSec": "30s", "Unit.StartLimitBurst": "3"},
    )
    rendered = render_patch(patch, config)
    # sh -c: flags after the script would not reach a server; use a plain command instead
    assert rendered.exec_start is None
    unit.write_text(unit.read_text().replace("/bin/sh -c 'exec sleep 1'", "/bin/sleep 1"))
    config = load_unit_file(unit, unit.name)
    rendered = render_patch(patch, config)
    assert rendered.exec_start is not None
    folder = tmp_path / f"{unit.name}.d"
    folder.mkdir()
    (folder / "50-diagnose.conf").write_text(rendered.dropin)
    stderr = systemd_verify(unit)
    assert "50-diagnose.conf" not in stderr, stderr
