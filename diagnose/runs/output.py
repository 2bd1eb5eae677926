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
    except (OSError, ValueError):
        return None


def write_report(path: Path, text: str) -> None:
    """Write a report atomically: a failed run leaves the previous report whole."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        write_atomically(directory / path.name, text)
    except OSError as error:
        raise UserError(f"{path}: cannot write: {error.strerror}") from None


def emit(diagnosis: Diagnosis, fmt: str, output: Path | None, no_redact: bool) -> None:
    """Render the diagnosis (redacted unless asked not to) to stdout or ``output``."""
    if not no_redact:
        diagnosis = redact(diagnosis)
    style = terminal(os.environ, output is None and sys.stdout.isatty(), _terminal_width())
    text = render(diagnosis, fmt, width=style.width, color=style.color and output is None)
    if output is None:
        sys.stdout.write(text)
    else:
        write_report(output, text)


def exit_code(diagnosis: Diagnosis, fail_on: str = "error") -> ExitCode:
    """1 when a finding reaches ``fail_on`` severity, on any host, else 0 (the contract's table)."""
    threshold = Severity(fail_on).rank
    findings = [*diagnosis.findings, *(f for h in diagnosis.hosts or [] for f in h.findings)]
    if any(f.severity.rank >= threshold for f in findings):
        return ExitCode.FINDINGS
    return ExitCode.OK
