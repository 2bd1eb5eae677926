"""Shared helpers: where the fixtures are, and two ways to run diagnose on them."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from diagnose.cli.app import app
from diagnose.core.engine import Engine
from diagnose.core.models import Diagnosis, Finding
from diagnose.core.signature import Signature
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import CACHE_DIR_VARIABLE, engine_for, load_facts, load_library

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
INCIDENTS = FIXTURES / "incidents"
GPU = FIXTURES / "gpu"
SAMPLES = FIXTURES / "samples"


def pytest_configure(config: pytest.Config) -> None:
    """The run's own library cache: tests never read or fill the user's."""
    cache = Path(tempfile.mkdtemp(prefix="diagnose-test-cache-"))
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    os.environ[CACHE_DIR_VARIABLE] = str(cache)


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
    if signatures is None:  # the whole library, with its knowledge tiers, as users run it
        engine = engine_for(builtin_library(), hang_after=hang_after)
    else:
        engine = Engine(list(signatures), facts=load_facts(), hang_after=hang_after)
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


def systemd_verify(unit: Path) -> str:
    """``systemd-analyze verify`` of ``unit`` (with the drop-ins beside it), asserted to
    pass; its stderr. Skips the test where systemd cannot run it here (no bus)."""
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    if "Failed to" in result.stderr and "bus" in result.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    return result.stderr


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


SMI_ROWS = [  # fixtures/gpu/nvidia-smi-4xh200-1gb.txt, as --query-gpu prints it
    "0, NVIDIA H200, 1143, 143771",
    "1, NVIDIA H200, 1141, 143771",
    "2, NVIDIA H200, 1149, 143771",
    "3, NVIDIA H200, 1139, 143771",
]
IDLE_ROWS = [f"{i}, NVIDIA H200, 0, 143771" for i in range(4)]  # nvidia-smi-h200-idle.txt


def fake_nvidia_smi(
    directory: Path, processes: list[str], rows: list[str] = SMI_ROWS
) -> dict[str, str]:
    """A stand-in ``nvidia-smi`` (we lack the GPUs) printing real captured rows; the PATH
    that finds it."""
    script = directory / "nvidia-smi"
    gpus = "\\n".join(rows)
    uuids = "\\n".join(f"{i}, GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4))
    apps = "\\n".join(processes)
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=index,uuid) printf '{uuids}\\n' ;;\n"
        f"  --query-gpu=*) printf '{gpus}\\n' ;;\n"
        f"  --query-compute-apps=*) printf '{apps}' ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"}
