"""``diagnose file``: saved logs, gzip files and stdin."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis
from diagnose.core.split import KeptBudget, UnitSplitter
from diagnose.inputs.files import LogInput, default_jobs
from diagnose.inputs.pipeline import run_logs_by_host
from diagnose.library import engine_for, load_library
from diagnose.render.terminal import terminal

Warn = Callable[[str], None]


def diagnose_files(
    arguments: list[str],
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Warn,
    engine_version: tuple[str, str] | None = None,
    knowledge: bool = True,
    skew_tolerance_s: float | None = None,
    jobs: int = 0,
    deployment: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Diagnosis:
    """Read every input in turn, one engine per host the lines name, so one diagnosis covers
    each host (several hosts: per-host reports and a fleet summary, see core/fleet.py);
    ``knowledge=False`` leaves out the tiers below the hand signatures; ``jobs`` processes
    read a large file (0: ``files.default_jobs()``); ``deployment`` names what ran the server
    when the log does not say (else it is read from the log); ``facts``, when given, is filled
    with the launch facts (command line, versions) of the one host's engine (the assistant's
    digest)."""
    if not arguments:
        if sys.stdin.isatty():
            raise UserError(
                "no input",
                help="pass a log file, or pipe one in: journalctl -u UNIT | diagnose file",
            )
        arguments = ["-"]
    logs = [LogInput.from_argument(argument) for argument in arguments]
    facts = {} if facts is None else facts
    diagnosis = diagnose_logs(
        logs,
        signature_dirs,
        hang_after,
        warn,
        engine_version,
        knowledge,
        skew_tolerance_s,
        jobs,
        facts=facts,
    )
    from diagnose.core.contextfix import Target, contextualize  # only here: starts fast
    from diagnose.core.deployment import recognise
    from diagnose.core.launch import read_launch
    from diagnose.core.models import Deployment

    sample = log_sample(logs, diagnosis)
    seen = recognise(sample)
    if deployment is not None and deployment != seen.kind:
        seen = Deployment(
            kind=deployment,  # type: ignore[arg-type]
            orchestrator=seen.orchestrator,
            evidence=["given with --deployment"],
        )
    if any(
        f.patch is not None and (f.patch.args_add or f.patch.args_remove)
        for f in diagnosis.findings
    ):
        from diagnose.core.pythonlaunch import python_launch, with_python_launch  # flags only

        evidence = [e.text for f in diagnosis.findings for e in f.evidence]
        diagnosis = with_python_launch(diagnosis, python_launch(sample, evidence))
    return contextualize(diagnosis, seen, Target(launch=read_launch(facts)))


SAMPLE_BYTES = 1 << 20
"""What of each end of a log is read again for the words that say what ran the server."""


def log_sample(logs: list[LogInput], diagnosis: Diagnosis) -> list[str]:
    """The lines that can say what ran the server: each input's head and tail (not stdin,
    which is gone once read) and every finding's evidence."""
    lines = [e.text for f in diagnosis.findings for e in f.evidence]
    for log in logs:
        data = log.data
        if data is None and log.path is not None and _plain_size(log):
            with contextlib.suppress(OSError), log.path.open("rb") as handle:
                data = handle.read(SAMPLE_BYTES)
                size = log.path.stat().st_size
                if size > 2 * SAMPLE_BYTES:
                    handle.seek(size - SAMPLE_BYTES)
                data += handle.read(SAMPLE_BYTES)
        if data:
            sample = (
                data
                if len(data) <= 2 * SAMPLE_BYTES
                else data[:SAMPLE_BYTES] + data[-SAMPLE_BYTES:]
            )
            lines += sample.decode("utf-8", "replace").splitlines()
    return lines


def diagnose_logs(
    logs: list[LogInput],
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Warn,
    engine_version: tuple[str, str] | None = None,
    knowledge: bool = True,
    skew_tolerance_s: float | None = None,
    jobs: int = 0,
    allow_empty: bool = False,
    facts: dict[str, Any] | None = None,
) -> Diagnosis:
    """The diagnosis of logs already opened (see :func:`diagnose_files`); ``allow_empty``: no
    log lines is a report with no finding, not an error (a pod whose record speaks)."""
    if allow_empty and not logs:
        return Diagnosis()
    library = load_library(signature_dirs)
    budget = KeptBudget()  # one for every host: memory does not grow with their number

    def new_engine() -> UnitSplitter:
        return UnitSplitter(
            lambda: engine_for(
                library, hang_after=hang_after, engine_version=engine_version, knowledge=knowledge
            ),
            budget,
        )

    with _progress_bar(logs) as progress:
        engines = run_logs_by_host(new_engine, logs, warn, progress, jobs or default_jobs())
    skipped = {sid: why for engine in engines.values() for sid, why in engine.skipped.items()}
    for signature_id, reason in skipped.items():
        warn(f"{signature_id}: {reason}")
    notes = [w for log in logs for w in log.warnings]
    notes += [f"signature {sid} skipped: {reason}" for sid, reason in skipped.items()]
    inputs = [log.summary() for log in logs]
    if len(engines) == 1:
        diagnosis = next(iter(engines.values())).finish(inputs=inputs)
        diagnosis = diagnosis.model_copy(update={"notes": notes + diagnosis.notes})
        if facts is not None:
            facts.update(next(iter(engines.values())).engine.facts)
    else:
        # only here: a single host's report never loads the fleet summary
        from diagnose.core.fleet import DEFAULT_SKEW_TOLERANCE_S, deployment_of, summarize_fleet

        per_host = {
            host or "(no host)": engine.finish(inputs=[]) for host, engine in engines.items()
        }
        deployments = {
            host or "(no host)": deployment_of(engine.engine.facts)
            for host, engine in engines.items()
        }
        diagnosis = summarize_fleet(
            per_host,
            DEFAULT_SKEW_TOLERANCE_S if skew_tolerance_s is None else skew_tolerance_s,
            deployments,
        )
        diagnosis = diagnosis.model_copy(update={"inputs": inputs, "notes": notes})
    if sum(i.records for i in diagnosis.inputs) == 0 and not allow_empty:
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
    """A rich progress bar on a terminal for large inputs (bytes read and rate), else nothing
    (a pipe, a file, ``TERM=dumb``)."""
    sizes = [_plain_size(log) for log in logs]
    known = sum(size for size in sizes if size)
    small = known < PROGRESS_FROM_BYTES and None not in sizes
    if small or not terminal(os.environ, sys.stderr.isatty()).live:
        yield None
        return
    from rich.console import Console  # only here: a report without a bar never loads rich
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    columns = [TextColumn("reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn()]
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("read", total=known if None not in sizes else None)
        yield lambda size: bar.advance(task, size)
