"""``diagnose file``: saved logs, gzip files and stdin."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from diagnose.engine import Engine
from diagnose.errors import UserError
from diagnose.library import load_facts, load_library
from diagnose.models import Diagnosis
from diagnose.scan import NeedleScanner
from diagnose.sources.files import LogInput, events

Warn = Callable[[str], None]


def diagnose_files(
    arguments: list[str],
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Warn,
) -> Diagnosis:
    """Read every input in turn through one engine, so one diagnosis covers them all."""
    if not arguments:
        if sys.stdin.isatty():
            raise UserError(
                "no input",
                help="pass a log file, or pipe one in: journalctl -u UNIT | diagnose file",
            )
        arguments = ["-"]
    engine = Engine(load_library(signature_dirs), facts=load_facts(), hang_after=hang_after)
    logs = [LogInput.from_argument(argument) for argument in arguments]
    run_logs(engine, logs, warn)
    for signature_id, reason in engine.skipped.items():
        warn(f"{signature_id}: {reason}")
    diagnosis = engine.finish(inputs=[log.summary() for log in logs])
    notes = [w for log in logs for w in log.warnings]
    notes += [f"signature {sid} skipped: {reason}" for sid, reason in engine.skipped.items()]
    diagnosis = diagnosis.model_copy(update={"notes": notes})
    if sum(i.records for i in diagnosis.inputs) == 0:
        names = ", ".join(log.name for log in logs)
        raise UserError(
            f"{names}: no log lines to read", help="check the file, or the command that made it"
        )
    return diagnosis


def run_logs(engine: Engine, logs: list[LogInput], warn: Warn | None = None) -> None:
    """Feed every log through ``engine``, one after the other, on one timeline of positions."""
    needles = engine.needles()
    scanner = NeedleScanner(needles) if needles else None
    first_seq = 0
    for log in logs:
        for event in events(log, scanner, first_seq):
            engine.feed(event)
        first_seq += log.lines
        for warning in log.warnings:
            if warn is not None:
                warn(warning)
