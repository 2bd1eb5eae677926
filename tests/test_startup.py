"""What a small run imports: a diagnosis a hand signature decides, with the library cache
warm, loads neither the knowledge tiers nor YAML, the JSON report no terminal renderer, and a
plain run of ``file`` no typer (diagnose.cli.direct).
(How long it takes is measured in benchmarks/startup.py, not here.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import journalgen
from .conftest import FIXTURES

INCIDENT = FIXTURES / "incidents" / "qwen-122b-crashloop.journal.txt"
needs_journal = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl",
)
PROBE = """
import atexit
import gc
import sys
atexit.register(lambda: print(f"UNFROZEN_AT_EXIT={len(gc.get_objects())}", file=sys.stderr))
from diagnose.cli import common, main
collections = []
freeze_imported = common.freeze_imported
def freeze_then_count():
    freeze_imported()
    gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info))
common.freeze_imported = freeze_then_count
sys.argv = ["diagnose", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("MODULES=" + ",".join(sorted(sys.modules)), file=sys.stderr)
loader = sys.modules.get("pydantic.plugin._loader")
looked_for = getattr(loader, "_plugins", None) is not None
print(f"PLUGINS_LOOKED_FOR={looked_for}", file=sys.stderr)
print(f"GC_FROZEN={gc.get_freeze_count() > 0} GC_GEN0={gc.get_threshold()[0]}", file=sys.stderr)
print(f"COLLECTIONS_AFTER_IMPORTS={len(collections)}", file=sys.stderr)
"""


def _run(
    cache: Path, *args: str, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DIAGNOSE_CACHE_DIR": str(cache)}
    environment.pop("PYDANTIC_DISABLE_PLUGINS", None)
    environment.update(extra or {})
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )


def _modules(cache: Path, *args: str, extra: dict[str, str] | None = None) -> tuple[set[str], str]:
    result = _run(cache, *args, extra=extra)
    line = next(x for x in result.stderr.splitlines() if x.startswith("MODULES="))
    return set(line.removeprefix("MODULES=").split(",")), result.stdout


def test_a_decided_json_run_with_a_warm_cache_loads_no_tier_yaml_or_renderer(
    tmp_path: Path,
) -> None:
    args = ("file", str(INCIDENT), "--format", "json")
    cold, _ = _modules(tmp_path, *args)
    assert "yaml" in cold  # the first run parses the library and fills the cache
    warm, report = _modules(tmp_path, *args)
    assert json.loads(report)["primary"]  # a hand signature decided
    assert "yaml" not in warm
    assert not {"diagnose.knowledge.tiers", "diagnose.knowledge.source_tier"} & warm
    assert not {m for m in warm if m.startswith("rich.")}
    assert not {m for m in warm if m.split(".")[0] in {"typer", "click"}}


def test_a_decided_single_host_run_loads_no_fleet_tier_seam_or_workers(tmp_path: Path) -> None:
    args = ("file", str(INCIDENT), "--format", "json")
    _modules(tmp_path, *args)  # fills the cache
    warm, _ = _modules(tmp_path, *args)
    assert "diagnose.core.engine" in warm  # the probe ran the diagnosis
    assert not {"diagnose.core.fleet", "diagnose.core.explain", "multiprocessing"} & warm


def test_a_run_that_suggests_no_spelling_loads_no_difflib(tmp_path: Path) -> None:
    args = ("file", str(INCIDENT), "--format", "json")
    _modules(tmp_path, *args)  # fills the cache
    warm, _ = _modules(tmp_path, *args)
    assert "diagnose.core.engine" in warm
    assert "difflib" not in warm


def test_a_run_without_ask_or_a_config_file_loads_nothing_of_the_assistant(
    tmp_path: Path,
) -> None:
    args = ("file", str(INCIDENT), "--format", "json")
    warm, _ = _modules(tmp_path, *args, extra={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert "diagnose.core.engine" in warm
    assert {m for m in warm if m.startswith("diagnose.assistant")} == {"diagnose.assistant"}
    assert not {m for m in warm if m.split(".")[0] in {"openai", "httpx", "tomllib"}}


def test_an_undecided_run_still_asks_the_tiers(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-03-03 11:53:10] server_args=ServerArgs(model_path='/models/q', tp_size=4)\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/sglang/srt/managers/scheduler.py", line 2210, in run_scheduler_process\n'
        "    raise RuntimeError('scheduler failed: the frobnicator is out of sync')\n"
        "RuntimeError: scheduler failed: the frobnicator is out of sync\n"
    )
    modules, _ = _modules(tmp_path, "file", str(log), "--format", "json")
    assert {
        "diagnose.knowledge.tiers",
        "diagnose.knowledge.source_tier",
        "diagnose.core.explain",
    } <= modules


def test_the_command_line_looks_for_no_pydantic_plugins(tmp_path: Path) -> None:
    """Looking for them reads every installed package's metadata, at every start; even the
    module that would look is not imported."""
    result = _run(tmp_path, "file", str(INCIDENT), "--format", "json")
    assert "PLUGINS_LOOKED_FOR=False" in result.stderr.splitlines()
    modules, report = _modules(tmp_path, "file", str(INCIDENT), "--format", "json")
    assert json.loads(report)["primary"]
    assert "importlib.metadata" not in modules


def test_plugins_the_user_enables_by_name_are_still_looked_for(tmp_path: Path) -> None:
    extra = {"PYDANTIC_DISABLE_PLUGINS": "some_plugin"}
    result = _run(tmp_path, "file", str(INCIDENT), "--format", "json", extra=extra)
    assert "PLUGINS_LOOKED_FOR=True" in result.stderr.splitlines()


def test_pydantic_takes_only_the_entry_point_the_stand_in_loader_has() -> None:
    """The command line stands in for pydantic's plugin loader with its one entry point
    (diagnose.cli): a pydantic release that takes more from it must fail here, not at a run."""
    import pydantic.plugin

    package = Path(str(pydantic.plugin.__file__)).parent
    takes = {
        line.strip()
        for path in package.parent.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if "_loader import" in line
    }
    assert takes == {"from ._loader import get_plugins"}


def test_the_cycle_collector_leaves_what_the_start_loaded_alone(tmp_path: Path) -> None:
    result = _run(tmp_path, "file", str(INCIDENT), "--format", "json")
    assert "GC_FROZEN=True GC_GEN0=50000" in result.stderr.splitlines()


def test_a_small_run_sets_off_no_collection_once_its_command_is_imported(tmp_path: Path) -> None:
    """The imported modules are frozen before the library loads: its objects alone do not
    reach the collector's threshold, which would walk everything imported (5% of the run)."""
    args = ("file", str(INCIDENT), "--format", "json")
    _run(tmp_path, *args)  # fills the cache
    result = _run(tmp_path, *args)
    assert "COLLECTIONS_AFTER_IMPORTS=0" in result.stderr.splitlines()


def _journal_args(tmp_path: Path) -> tuple[str, ...]:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "a.journal")
    return (
        "journal",
        "-u",
        journalgen.UNIT,
        "--file",
        str(journal),
        "--no-gpu",
        "--format",
        "json",
    )


@needs_journal
def test_a_small_journal_run_sets_off_no_collection_once_its_command_is_imported(
    tmp_path: Path,
) -> None:
    args = _journal_args(tmp_path)
    _run(tmp_path, *args)  # fills the cache
    result = _run(tmp_path, *args)
    assert json.loads(result.stdout)["primary"]  # the probe ran the diagnosis
    assert "COLLECTIONS_AFTER_IMPORTS=0" in result.stderr.splitlines()


@needs_journal
def test_a_journal_from_files_loads_no_gpu_snapshot_nor_unit_patching(tmp_path: Path) -> None:
    """No snapshot of this machine's GPUs says anything of saved files, and the unit is not
    installed here: neither is imported."""
    args = _journal_args(tmp_path)
    _modules(tmp_path, *args)  # fills the cache
    warm, report = _modules(tmp_path, *args)
    assert json.loads(report)["primary"]
    assert not {"diagnose.inputs.gpu", "diagnose.systemd.patching", "difflib"} & warm


def test_a_json_report_loads_no_drop_in_renderer(tmp_path: Path) -> None:
    warm, _ = _modules(tmp_path, "file", str(INCIDENT), "--format", "json")
    assert "diagnose.core.engine" in warm
    assert "diagnose.render.common" not in warm


def test_a_one_host_text_report_loads_no_table(tmp_path: Path) -> None:
    """rich's tables are for the fleet summary only."""
    warm, report = _modules(tmp_path, "file", str(INCIDENT))
    assert "ROOT CAUSE" in report
    assert "rich.console" in warm
    assert "rich.table" not in warm


def test_the_cycle_collector_does_not_walk_the_run_again_at_exit(tmp_path: Path) -> None:
    """What the run made is frozen before the interpreter's last collection, which would
    walk all of it (3% of a small run)."""
    result = _run(tmp_path, "file", str(INCIDENT), "--format", "json")
    assert "UNFROZEN_AT_EXIT=0" in result.stderr.splitlines()


def test_no_model_field_takes_a_builtin_as_its_default_factory() -> None:
    """pydantic reads each default factory's signature as it builds a model, and a builtin's
    (``list``, ``dict``) is parsed from text: ``empty_list`` and ``empty_dict`` instead."""
    from pydantic import BaseModel

    import diagnose.core.models
    import diagnose.core.signature
    import diagnose.knowledge.known_issues

    def subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
        return [s for c in cls.__subclasses__() for s in (c, *subclasses(c))]

    modules = (diagnose.core.models, diagnose.core.signature, diagnose.knowledge.known_issues)
    ours = [m for m in subclasses(BaseModel) if m.__module__.startswith("diagnose.")]
    assert {m.__module__ for m in ours} >= {module.__name__ for module in modules}
    builtin_factories = [
        f"{model.__name__}.{name}"
        for model in ours
        for name, field in model.model_fields.items()
        if isinstance(field.default_factory, type)
        and field.default_factory.__module__ == "builtins"
    ]
    assert builtin_factories == []
