"""The command line. It only wires: options -> library -> sources -> engine -> renderer -> exit."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from diagnose import __version__
from diagnose.engine import Engine
from diagnose.errors import ExitCode, UserError
from diagnose.library import load_facts, load_library
from diagnose.models import Diagnosis, Severity
from diagnose.redact import redact
from diagnose.render import render
from diagnose.signature import Signature, parse_duration
from diagnose.sources.files import LogInput, events

app = typer.Typer(
    name="diagnose",
    help="Why did the LLM server fail to start, and what to change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
signatures_app = typer.Typer(help="List, show and test the signature library.", no_args_is_help=True)
app.add_typer(signatures_app, name="signatures")

_debug = False


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"


SignatureDirs = Annotated[
    list[Path] | None,
    typer.Option("--signatures", help="Extra signature directory (repeatable); overrides by id."),
]
FormatOption = Annotated[Format | None, typer.Option("--format", "-f", help="Report format (default: text).")]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to this file.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"diagnose {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    global _debug
    _debug = debug


def _write_atomically(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    try:
        handle = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=directory, prefix=f".{path.name}.", delete=False
        )
    except OSError as error:
        raise UserError(f"{path}: cannot write report: {error.strerror}") from None
    try:
        with handle:
            handle.write(text)
        os.replace(handle.name, path)
    except OSError as error:
        Path(handle.name).unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write report: {error.strerror}") from None


def _emit(diagnosis: Diagnosis, fmt: Format | None, output: Path | None, no_redact: bool) -> None:
    if not no_redact:
        diagnosis = redact(diagnosis)
    chosen = (fmt or Format.text).value
    to_terminal = output is None and sys.stdout.isatty()
    width = os.get_terminal_size().columns if to_terminal else 100
    text = render(diagnosis, chosen, width=width, color=to_terminal)
    if output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(output, text)


def _exit_code(diagnosis: Diagnosis, fail_on: FailOn) -> ExitCode:
    threshold = Severity(fail_on.value).rank
    if any(f.severity.rank >= threshold for f in diagnosis.findings):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _library(extra: list[Path] | None) -> list[Signature]:
    return load_library(extra or [])


@app.command("file")
def file_command(
    paths: Annotated[list[str] | None, typer.Argument(help="Log files (plain or gzip); - for stdin.")] = None,
    fmt: FormatOption = None,
    output: OutputOption = None,
    signature_dirs: SignatureDirs = None,
    fail_on: Annotated[FailOn, typer.Option(help="Lowest severity that makes the exit code 1.")] = FailOn.error,
    hang_after: Annotated[
        str | None, typer.Option(help="Quiet time after a startup step that counts as a hang (e.g. 5m).")
    ] = None,
    no_redact: Annotated[bool, typer.Option("--no-redact", help="Show secrets in the report.")] = False,
) -> None:
    """Diagnose saved logs: journalctl exports, copies of stdout, gzip files, or stdin."""
    arguments = paths or []
    if not arguments:
        if sys.stdin.isatty():
            raise UserError("no input", help="pass a log file, or pipe one in: journalctl -u UNIT | diagnose file")
        arguments = ["-"]
    try:
        hang_seconds = parse_duration(hang_after) if hang_after is not None else None
    except ValueError as error:
        raise UserError(f"--hang-after: {error}") from None
    signatures = _library(signature_dirs)
    engine = Engine(signatures, facts=load_facts(), hang_after=hang_seconds)
    logs = [LogInput.from_argument(argument) for argument in arguments]
    for log in logs:
        for event in events(log):
            engine.feed(event)
    for log in logs:
        for warning in log.warnings:
            typer.echo(f"diagnose: warning: {warning}", err=True)
    for signature_id, reason in engine.skipped.items():
        typer.echo(f"diagnose: warning: {signature_id}: {reason}", err=True)
    diagnosis = engine.finish(input_kinds={log.name: log.kind for log in logs})
    if sum(i.records for i in diagnosis.inputs) == 0:
        names = ", ".join(log.name for log in logs)
        raise UserError(f"{names}: no log lines to read", help="check the file, or the journalctl command that made it")
    _emit(diagnosis, fmt, output, no_redact)
    raise typer.Exit(_exit_code(diagnosis, fail_on))


@signatures_app.command("list")
def signatures_list(
    signature_dirs: SignatureDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per signature.")] = False,
) -> None:
    """Every signature: id, category, severity and title."""
    signatures = sorted(_library(signature_dirs), key=lambda s: (s.category, s.id))
    for signature in signatures:
        if as_json:
            typer.echo(json.dumps({"id": signature.id, "category": signature.category,
                                   "severity": signature.severity.value, "title": signature.title}))
        else:
            typer.echo(f"{signature.id:<40} {signature.category:<20} {signature.severity.value:<9} {signature.title}")


@signatures_app.command("test")
def signatures_test(
    directory: Annotated[Path | None, typer.Argument(help="A directory of signatures (default: built-in).")] = None,
) -> None:
    """Run every signature's positive and negative examples."""
    from diagnose.library import builtin_dir, load_directory
    from diagnose.testing import check_signature

    signatures = load_directory(directory or builtin_dir())
    failed = passed = expected = 0
    for signature in signatures:
        for result in check_signature(signature):
            if result.passed:
                passed += 1
            elif result.xfail:
                expected += 1
                typer.echo(f"XFAIL {result.test_id}: {result.xfail}")
            else:
                failed += 1
                typer.echo(f"FAIL  {result.test_id}")
                for problem in result.problems:
                    typer.echo(f"      {problem}")
    typer.echo(f"{passed} passed, {failed} failed" + (f", {expected} xfailed" if expected else ""))
    raise typer.Exit(ExitCode.FINDINGS if failed else ExitCode.OK)


def main() -> None:
    """Entry point: one handler for user errors (exit 2) and internal errors (exit 3)."""
    try:
        code = app(standalone_mode=False)
    except UserError as error:
        typer.echo(f"diagnose: error: {error}", err=True)
        sys.exit(ExitCode.USER_ERROR)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except KeyboardInterrupt:
        typer.echo("diagnose: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(ExitCode.OK)
    except Exception as error:  # the one place internal errors become exit 3
        import click

        if isinstance(error, click.exceptions.Abort):
            sys.exit(130)
        if isinstance(error, click.ClickException):
            error.show()
            sys.exit(ExitCode.USER_ERROR)
        if _debug:
            traceback.print_exc()
        typer.echo(
            f"diagnose: internal error: {type(error).__name__}: {error}\n"
            "Please report it at https://github.com/diagnose-llm/diagnose/issues (run with --debug for the traceback).",
            err=True,
        )
        sys.exit(ExitCode.INTERNAL_ERROR)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
