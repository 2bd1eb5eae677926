"""Writing a report: redaction, the chosen format, stdout or an atomically written file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from diagnose.atomic import write_atomically
from diagnose.core.errors import ExitCode, UserError
from diagnose.core.models import Diagnosis, Severity
from diagnose.core.redact import redact
from diagnose.render import render
from diagnose.render.terminal import terminal


def _terminal_width() -> int | None:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no stdout, or not a terminal
        return None


def write_report(path: Path, text: str) -> None:
    """Write a report atomically: a failed run leaves the previous report whole."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        write_atomically(directory / path.name, text)
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory", help="name a file: -o DIR/report.md") from None
    except OSError as error:
        raise UserError(f"{path}: cannot write: {error.strerror}") from None


def emit(diagnosis: Diagnosis, fmt: str, output: Path | None, no_redact: bool) -> None:
    """Render the diagnosis (redacted unless asked not to) to stdout or ``output``."""
    if not no_redact:
        diagnosis = redact(diagnosis)
    if output is not None and str(output) == "-":
        output = None
    to_terminal = output is None and sys.stdout is not None and sys.stdout.isatty()
    style = terminal(os.environ, to_terminal, _terminal_width() if to_terminal else None)
    text = render(diagnosis, fmt, width=style.width, color=style.color and output is None)
    if output is None:
        write_stdout(text)
    else:
        write_report(output, text)


def write_stdout(text: str) -> None:
    """Write to stdout, flushed. A closed stdout is a user error (exit 2); so is a full disk,
    raised as ``OSError`` for the entry point to report in one line."""
    if sys.stdout is None:
        raise UserError("stdout is closed", help="write the report to a file: -o FILE")
    sys.stdout.write(text)
    sys.stdout.flush()


def exit_code(diagnosis: Diagnosis, fail_on: str = "error") -> ExitCode:
    """1 when a finding reaches ``fail_on`` severity, on any host, else 0 (the contract's table)."""
    threshold = Severity(fail_on).rank
    findings = [*diagnosis.findings, *(f for h in diagnosis.hosts or [] for f in h.findings)]
    if any(f.severity.rank >= threshold for f in findings):
        return ExitCode.FINDINGS
    return ExitCode.OK
