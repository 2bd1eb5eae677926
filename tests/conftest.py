"""Shared helpers: where the fixtures are, and two ways to run diagnose on them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from diagnose.cli import app
from diagnose.commands.file import run_logs
from diagnose.engine import Engine
from diagnose.library import load_facts, load_library
from diagnose.models import Diagnosis, Finding
from diagnose.signature import Signature
from diagnose.sources.files import LogInput

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
INCIDENTS = FIXTURES / "incidents"
GPU = FIXTURES / "gpu"
SAMPLES = FIXTURES / "samples"


def builtin_library() -> list[Signature]:
    """The built-in library only: no user or site directories, whatever the machine has."""
    return load_library(include_user_dirs=False)


def run_engine(
    *paths: str | Path,
    hang_after: float | None = None,
    observed_until: datetime | None = None,
    signatures: Sequence[Signature] | None = None,
) -> Diagnosis:
    """Diagnose files the way ``diagnose file`` reads them (same sources, same engine);
    inputs are named as given, and relative paths are taken from the repository root."""
    logs = [LogInput(path=REPO / path, name=str(path)) for path in paths]  # REPO / abs == abs
    return run_inputs(logs, hang_after, observed_until, signatures)


def run_text(
    text: str,
    name: str = "test.log",
    hang_after: float | None = None,
    observed_until: datetime | None = None,
    signatures: Sequence[Signature] | None = None,
) -> Diagnosis:
    """Diagnose in-memory log text."""
    return run_inputs([LogInput.from_text(text, name)], hang_after, observed_until, signatures)


def feed(
    logs: list[LogInput],
    signatures: Sequence[Signature] | None = None,
    hang_after: float | None = None,
) -> Engine:
    """An engine that has read ``logs`` (not finished yet)."""
    library = builtin_library() if signatures is None else list(signatures)
    engine = Engine(library, facts=load_facts(), hang_after=hang_after)
    run_logs(engine, logs)
    return engine


def run_inputs(
    logs: list[LogInput],
    hang_after: float | None = None,
    observed_until: datetime | None = None,
    signatures: Sequence[Signature] | None = None,
) -> Diagnosis:
    engine = feed(logs, signatures, hang_after)
    return engine.finish(observed_until=observed_until, inputs=[log.summary() for log in logs])


def fixture(relative: str) -> str:
    """A fixture path relative to the repository root (machine-independent in reports)."""
    assert (REPO / relative).is_file(), relative
    return relative


def primary(diagnosis: Diagnosis) -> Finding | None:
    return diagnosis.finding(diagnosis.primary)


def by_signature(diagnosis: Diagnosis, signature_id: str) -> Finding | None:
    return next((f for f in diagnosis.findings if f.signature == signature_id), None)


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m diagnose ARGS`` in a subprocess: exit codes and stderr as a user sees them."""
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def invoke(args: Iterable[str], input: str | bytes | None = None):
    """Run the CLI in-process (typer's runner on the app, standalone mode)."""
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the repository root, so inputs can be named by relative paths."""
    monkeypatch.chdir(REPO)
    return REPO
