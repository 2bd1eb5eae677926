"""The direct path (a plain ``file`` or ``journal`` run parsed without typer) gives a command
exactly what the typer app gives it, or leaves the argument list to the app."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.cli import common, direct
from diagnose.cli.app import app
from diagnose.cli.spec import COMMANDS
from diagnose.core.errors import ExitCode

from .conftest import REPO

RUNNERS: dict[str, Callable[..., ExitCode]] = {
    "file": common.run_file,
    "journal": common.run_journal,
}


def _through_typer(argv: list[str], environ: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    """The command and parameters the typer app hands over for ``argv``; None when it
    refuses the list (a usage error)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def recorder(name: str) -> Callable[..., ExitCode]:
        def record(*args: Any, **kwargs: Any) -> ExitCode:
            bound = inspect.signature(RUNNERS[name]).bind(*args, **kwargs)
            seen.append((name, dict(bound.arguments)))
            return ExitCode.OK

        return record

    with pytest.MonkeyPatch.context() as patch:
        for name in RUNNERS:
            patch.setattr(common, f"run_{name}", recorder(name))
        patch.delenv("DIAGNOSE_JOBS", raising=False)
        for variable, value in environ.items():
            patch.setenv(variable, value)
        try:
            app(argv, standalone_mode=False)
        except Exception as error:
            if isinstance(getattr(error, "exit_code", None), int):
                return None  # click's usage errors carry an exit code
            raise
        finally:
            common.show_tracebacks = False
    return seen[0] if seen else None


def _value(spec: dict[str, Any]) -> st.SearchStrategy[str]:
    kind = spec["value"]
    if kind == "choice":
        return st.sampled_from([*spec["choices"], "yaml", "JSON"])
    if kind == "int":
        return st.sampled_from(["0", "1", "8", "12", "-1", "x", "2.5", " 3"])
    if kind == "path":
        return st.sampled_from(["out.json", "reports/x.md", "-", "a b", "--weird"])
    return st.sampled_from(["5m", "30s", "sglang==0.5.23", "", "a=b", "-", "-5"])


@st.composite
def _argument_lists(draw: st.DrawFn, command: str) -> tuple[list[str], dict[str, str]]:
    spec = COMMANDS[command]
    argv = ["--debug"] if draw(st.booleans()) else []
    argv.append(command)
    options = [key for key, parameter in spec.items() if parameter["kind"] != "argument"]
    if command == "journal" and draw(st.integers(0, 9)):
        argv += [draw(st.sampled_from(["-u", "--unit", "--unit=x"]))]
        argv += [] if argv[-1] == "--unit=x" else ["sglang.service"]
    for _ in range(draw(st.integers(0, 6))):
        choice = draw(st.sampled_from([*options, "ARGUMENT", "ODD"]))
        if choice == "ARGUMENT":
            argv.append(draw(st.sampled_from(["server.log", "-", "b.log.gz", "x y.log"])))
        elif choice == "ODD":
            argv.append(draw(st.sampled_from(["--bogus", "-fjson", "--", "--help", "-h"])))
        else:
            parameter = spec[choice]
            name = draw(st.sampled_from([*parameter["names"], *parameter.get("off", [])]))
            if parameter["kind"] == "flag":
                argv.append(name)
            elif name.startswith("--") and draw(st.booleans()):
                argv.append(f"{name}={draw(_value(parameter))}")
            else:
                argv += [name, draw(_value(parameter))]
    jobs = draw(st.sampled_from([None, "", "3", "x"]))
    return argv, ({} if jobs is None else {"DIAGNOSE_JOBS": jobs})


@pytest.mark.parametrize("command", list(COMMANDS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_direct_path_reads_what_typer_reads_or_leaves_it_to_typer(
    command: str, data: st.DataObject
) -> None:
    argv, environ = data.draw(_argument_lists(command))
    parsed = direct.parse(argv, environ)
    if parsed is None:
        return
    assert parsed.command == command
    assert parsed.debug == ("--debug" in argv[: argv.index(command)])
    assert _through_typer(argv, environ) == (command, parsed.values)


@pytest.mark.parametrize(
    "argv",
    [
        ["file", "server.log"],
        ["file", "a.log", "-f", "json", "b.log", "--fail-on=warning", "-o", "-", "-j", "2"],
        ["--debug", "file", "-", "--signatures", "x", "--signatures=y", "--no-redact"],
        ["file", "--format", "markdown", "--format", "html", "--hang-after", "2m"],
        ["journal", "-u", "sglang", "--no-progress", "--file", "a.journal", "-S", "-1h"],
        ["journal", "--unit=vllm.service", "--invocations", "3", "--apply", "--progress"],
    ],
)
def test_the_usual_ways_of_writing_a_run_take_the_direct_path(argv: list[str]) -> None:
    parsed = direct.parse(argv, {})
    if argv[-1] == "-1h":  # a value that looks like an option: typer decides
        assert parsed is None
        return
    assert parsed is not None
    command = argv[1] if argv[0] == "--debug" else argv[0]
    assert _through_typer(argv, {}) == (command, parsed.values)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["file", "--help"],
        ["journal"],  # --unit is required: typer says so
        ["file", "--format", "yaml"],
        ["file", "-fjson"],
        ["file", "--jobs", "-1"],
        ["file", "--", "-odd.log"],
        ["watch", "server.log"],
        ["signatures", "list"],
        ["--no-such-option", "file"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert direct.parse(argv, {}) is None


def test_the_jobs_variable_counts_unless_the_option_is_given() -> None:
    from_variable = direct.parse(["file", "a.log"], {"DIAGNOSE_JOBS": "3"})
    from_option = direct.parse(["file", "a.log", "-j", "1"], {"DIAGNOSE_JOBS": "3"})
    assert from_variable is not None and from_variable.values["jobs"] == 3
    assert from_option is not None and from_option.values["jobs"] == 1
    assert direct.parse(["file", "a.log"], {"DIAGNOSE_JOBS": "many"}) is None


def test_version_is_answered_directly(capsys: pytest.CaptureFixture[str]) -> None:
    assert direct.run(["--version", "file", "--bogus"], {}) == ExitCode.OK
    from diagnose import __version__

    assert capsys.readouterr().out == f"diagnose {__version__}\n"


def test_the_committed_spec_is_what_the_app_declares() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_cli_spec.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
