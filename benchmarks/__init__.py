"""Benchmarks: run them with the project's environment, ``.venv/bin/python benchmarks/X.py``.

Importing the package checks that environment first, so a benchmark started with another
Python stops with one line that says how to run it, not a traceback from deep inside."""

from __future__ import annotations

import importlib.util
import sys

_NEEDED = ("pydantic", "yaml", "regex", "rich", "typer")


def require_project_environment() -> None:
    """Stop with one line that says how to run the benchmark when this Python lacks the
    project's dependencies (a system ``python`` instead of the README's ``.venv``)."""
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    scanner = importlib.util.find_spec("hyperscan") or importlib.util.find_spec("ahocorasick")
    if missing or scanner is None:
        script = sys.argv[0] or "benchmarks/run.py"
        raise SystemExit(
            f"{script}: this Python ({sys.executable}) lacks the project's dependencies; "
            f"run it as .venv/bin/python {script} after the README's set-up command"
        )


require_project_environment()
