"""Every fix the tool gives on the accuracy benchmark's real incidents uses only flags that the
release in the log has: a flag the release lacks is a fix that fails as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.knowledge import mined
from diagnose.library import engine_for
from tests.conftest import REPO, builtin_library

CASES = sorted((REPO / "benchmarks" / "accuracy" / "cases").glob("*.yaml"))


def _case(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_fix_adds_only_flags_of_the_release_in_the_log(path: Path) -> None:
    case = _case(path)
    engine, version = case["engine"], case.get("version")
    given = (engine, str(version)) if version else None
    diagnosis_engine = engine_for(builtin_library(), engine_version=given)
    run_logs(diagnosis_engine, [LogInput.from_text(case["log"], f"{path.stem}.log")])
    diagnosis = diagnosis_engine.finish()
    cause = diagnosis.finding(diagnosis.primary)
    if cause is None or cause.patch is None:
        return
    flags = [  # a key of a JSON option (`--speculative-config.method`) is its option's
        word.split("=", 1)[0].split(".", 1)[0]
        for word in cause.patch.args_add
        if word.startswith("--")
    ]
    if version:  # the release the thread names: each flag as that release has it
        release = mined.nearest_version(engine, str(version))
        assert release is not None
        table = mined.flag_table(engine, release)
        missing = [f for f in flags if table.lookup(f).outcome not in ("exact", "abbreviation")]
        if missing:  # kept only with the upgrade that brings them, said in the note
            assert cause.package is not None and cause.package.name == engine, missing
            assert all(f"`{f}` came with" in (cause.patch_note or "") for f in missing)
    else:  # no release shown: each flag of some release of the engine
        tables = [mined.flag_table(engine, v) for v in mined.versions(engine)]
        known = ("exact", "abbreviation")
        missing = [f for f in flags if not any(t.lookup(f).outcome in known for t in tables)]
        assert not missing, f"{cause.signature} adds {missing}, which no {engine} release has"
