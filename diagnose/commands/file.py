"""``diagnose file``: saved logs, gzip files and stdin."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import engine_for, load_library

Warn = Callable[[str], None]


def diagnose_files(
    arguments: list[str],
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Warn,
    engine_version: tuple[str, str] | None = None,
    knowledge: bool = True,
) -> Diagnosis:
    """Read every input in turn through one engine, so one diagnosis covers them all;
    ``knowledge=False`` leaves out the tiers below the hand signatures."""
    if not arguments:
        if sys.stdin.isatty():
            raise UserError(
                "no input",
                help="pass a log file, or pipe one in: journalctl -u UNIT | diagnose file",
            )
        arguments = ["-"]
    engine = engine_for(
        load_library(signature_dirs),
        hang_after=hang_after,
        engine_version=engine_version,
        knowledge=knowledge,
    )
    logs = [LogInput.from_argument(argument) for argument in arguments]
    with _progress_bar(logs) as progress:
        run_logs(engine, logs, warn, progress)
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


PROGRESS_FROM_BYTES = 256 << 20
"""Inputs this large take a few seconds: show a progress bar on a terminal."""


def _plain_size(log: LogInput) -> int | None:
    """Bytes to read, when known in advance (a plain file, not gzip or a pipe)."""
    if log.path is None:
        return None
    try:
        if not log.path.is_file():
            return 0  # reading it fails with its own message
        with log.path.open("rb") as handle:
            if handle.read(2) == b"\x1f\x8b":
                return None
        return log.path.stat().st_size
    except OSError:  # unreadable: reading it fails with its own message
        return 0


@contextlib.contextmanager
def _progress_bar(logs: list[LogInput]) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar on a terminal for large inputs (bytes read and rate), else nothing."""
    sizes = [_plain_size(log) for log in logs]
    known = sum(size for size in sizes if size)
    if not sys.stderr.isatty() or (known < PROGRESS_FROM_BYTES and None not in sizes):
        yield None
        return
    from rich.console import Console  # only here: a report without a bar never loads rich
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    columns = [TextColumn("reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn()]
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("read", total=known if None not in sizes else None)
        yield lambda size: bar.advance(task, size)
