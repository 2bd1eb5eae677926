"""Reasoning about the whole incident (issue 14): each fixture of ``fixtures/reasoning`` run as a
user runs it (``diagnose file X --format json``) against what ``expected.yaml`` says it shows.

The fields are documented at the top of ``expected.yaml``; each is one check below. A case that
the tool cannot yet reason about is marked xfail with what is missing (``PENDING``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, invoke

HERE = REPO / "fixtures" / "reasoning"
EXPECTED: list[dict[str, Any]] = yaml.safe_load((HERE / "expected.yaml").read_text())["fixtures"]

PENDING: dict[str, str] = {}
"""Fixture -> what the tool still lacks to reason about it (the case runs as xfail)."""


def _cases() -> list[Any]:
    cases = []
    for entry in EXPECTED:
        marks = []
        if entry["file"] in PENDING:
            marks.append(pytest.mark.xfail(reason=PENDING[entry["file"]], strict=True))
        cases.append(pytest.param(entry, id=entry["file"], marks=marks))
    return cases


def _report(path: Path) -> tuple[int, dict[str, Any]]:
    result = invoke(["file", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def _primary(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in report["findings"] if f["id"] == report["primary"]), None)


def _check_unit(report: dict[str, Any], expect: dict[str, Any], where: str) -> None:
    """The primary finding of ``report`` against one ``expect`` mapping."""
    primary = _primary(report)
    category = expect.get("category")
    if category is None:
        assert primary is None, (
            f"{where}: expected no finding, got {primary and primary['signature']}"
        )
        return
    assert primary is not None, f"{where}: expected {category}, got no finding"
    allowed = {category, *expect.get("accept", [])}
    assert primary["category"] in allowed, (
        f"{where}: primary {primary['category']} ({primary['signature']}), expected {allowed}"
    )
    if "evidence" in expect:
        texts = [e["text"] for e in primary["evidence"]]
        assert any(expect["evidence"] in t for t in texts), (
            f"{where}: no evidence line holds {expect['evidence']!r}: {texts}"
        )
    if "phase" in expect:
        assert primary["phase"] == expect["phase"], f"{where}: phase {primary['phase']}"
    for text in expect.get("mentions", []):
        assert text in primary["explanation"], f"{where}: explanation lacks {text!r}"
    patch = primary["patch"] or {}
    forbid = expect.get("forbid", {})
    assert primary["category"] not in forbid.get("categories", [])
    for key in forbid.get("unit_set", []):
        assert key not in patch.get("unit_set", {}), f"{where}: patch sets {key}"
    for flag in forbid.get("args_add", []):
        assert flag not in patch.get("args_add", []), f"{where}: patch adds {flag}"
    wanted = expect.get("patch", {})
    for name, part in wanted.get("env_contains", {}).items():
        env = patch.get("env_set", {})
        value = env.get(name, env.get(name.upper()))
        assert value is not None and part in value, f"{where}: {name}={value!r} lacks {part!r}"
    for key in wanted.get("unit_set_keys", []):
        assert key in patch.get("unit_set", {}), f"{where}: patch does not set {key}"
    for consequence in expect.get("consequences", []):
        found = [f for f in report["findings"] if f["category"] == consequence]
        assert found, f"{where}: no {consequence} finding"
        assert all(f["caused_by"] == primary["id"] for f in found), f"{where}: {consequence}"


@pytest.mark.parametrize("entry", _cases())
def test_reasoning_fixture(entry: dict[str, Any], in_repo: Path) -> None:
    expect = entry.get("expect", {})
    code, report = _report(Path("fixtures/reasoning") / entry["file"])
    assert code == expect["exit_code"], (
        f"exit {code}: {[f['signature'] for f in report['findings']]}"
    )
    if "split" in entry:
        units = {u["unit"]: u for u in report["units"]}
        assert sorted(units) == sorted(entry["split"])
        for name, unit_expect in entry["units"].items():
            _check_unit(units[name], unit_expect or {}, name)
        return
    _check_unit(report, expect, entry["file"])
    timeline = report.get("timeline") or {}
    if "stalled_for_min" in expect:
        stalled = timeline.get("stalled_for_s")
        assert stalled is not None, "no stall measured"
        assert abs(stalled / 60 - expect["stalled_for_min"]) <= 1, stalled / 60
    if "stopped_by" in expect:
        assert timeline.get("stopped_by") == expect["stopped_by"]


HEALTHY = sorted(
    [
        *(REPO / "fixtures/samples/healthy").iterdir(),
        *(REPO / "benchmarks/accuracy/healthy").iterdir(),
        *HERE.glob("healthy-*"),
    ]
)


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_healthy_logs_stay_without_finding(path: Path, tmp_path: Path) -> None:
    """Clean starts, traffic and operator stops after ready: nothing to report."""
    if path.suffix == ".yaml":  # the benchmark keeps each healthy log in a case file
        log = tmp_path / f"{path.stem}.log"
        log.write_text(yaml.safe_load(path.read_text())["log"])
        path = log
    result = invoke(["file", str(path), "--format", "json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0, [f["signature"] for f in report["findings"]]


def test_single_unit_report_keeps_its_shape(in_repo: Path) -> None:
    """A log of one unit: no ``units`` split, the report reads as before."""
    _, report = _report(Path("fixtures/reasoning/after-ready-sglang-oom.journal.txt"))
    assert report["units"] == []
    assert report["unit"] == "sglang-qwen.service" or report["unit"]
