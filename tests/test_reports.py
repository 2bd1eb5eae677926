"""The three report formats: snapshots of each seed failure, the JSON contract, hostile text."""

from __future__ import annotations

import json
import re

import pytest

from diagnose.core.models import CATEGORIES, Diagnosis
from diagnose.core.redact import redact
from diagnose.render import render
from tests.conftest import fixture, primary, run_engine, run_text

CASES = {
    "crashloop": ["fixtures/incidents/qwen-122b-crashloop.journal.txt"],
    "dist-init-stall": [
        "fixtures/incidents/dist-init-stall.journal.txt",
        "fixtures/gpu/nvidia-smi-4xh200-1gb.txt",
    ],
    "oom-cuda-graph": ["fixtures/incidents/oom-cuda-graph.log"],
    "oom-kv-cache": ["fixtures/incidents/oom-kv-cache.log"],
    "host-oom": ["fixtures/incidents/host-oom.journal.txt"],
    "healthy": ["fixtures/incidents/healthy-sglang.journal.txt"],
}
FORMATS = ["text", "json", "markdown"]


def report(diagnosis: Diagnosis, fmt: str) -> str:
    """What ``diagnose file`` prints into a pipe: redacted, 100 columns, no colour."""
    return render(redact(diagnosis), fmt, width=100, color=False)


def diagnose_case(case: str) -> Diagnosis:
    return run_engine(*(fixture(p) for p in CASES[case]))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(CASES))
def test_report_snapshot(case: str, fmt: str, snapshot, in_repo) -> None:
    text = report(diagnose_case(case), fmt)
    assert str(in_repo) not in text, "reports name inputs as given, never by absolute path"
    assert text == snapshot


# -- the JSON contract ---------------------------------------------------------------------------------

ROLES = {"root_cause", "symptom", "advisory"}
SEVERITIES = {"critical", "error", "warning", "info"}
CONFIDENCES = {"high", "medium", "low"}
PATCH_KEYS = {"env_set", "env_unset", "args_add", "args_remove", "unit_set", "dropin"} | {
    "kubernetes",
    "compose",
    "docker_run",
    "context_note",
}
FINDING_KEYS = {
    "id",
    "signature",
    "category",
    "severity",
    "role",
    "caused_by",
    "title",
    "explanation",
    "confidence",
    "evidence",
    "patch",
    "next_checks",
}
EVIDENCE_KEYS = {"source", "line", "timestamp", "host", "unit", "text"}


def check_contract(data: dict) -> None:
    kinds = {i["name"]: i["kind"] for i in data["inputs"]}
    assert data["schema_version"] == 1
    assert data["tool"]["name"] == "diagnose" and isinstance(data["tool"]["version"], str)
    assert data["inputs"], "every report says what it read"
    for item in data["inputs"]:
        assert {"kind", "name", "records", "first_ts", "last_ts"} <= set(item)
        assert item["kind"] in {"file", "stdin", "journal"}
        assert isinstance(item["records"], int)
    assert data["deployment"]["kind"] in {"systemd", "docker", "kubernetes", "unknown"}
    ids = [f["id"] for f in data["findings"]]
    assert len(ids) == len(set(ids))
    assert data["primary"] is None or data["primary"] in ids
    for finding in data["findings"]:
        assert set(finding) >= FINDING_KEYS, FINDING_KEYS - set(finding)
        assert finding["role"] in ROLES
        assert finding["severity"] in SEVERITIES
        assert finding["confidence"] in CONFIDENCES
        assert finding["category"] in CATEGORIES
        if finding["role"] == "symptom":
            assert finding["caused_by"] in ids
        else:
            assert finding["caused_by"] is None
        if finding["id"] == data["primary"]:
            assert finding["role"] == "root_cause"
            assert finding["severity"] in {"critical", "error"}
        assert finding["evidence"]
        for evidence in finding["evidence"]:
            assert set(evidence) >= EVIDENCE_KEYS
            if kinds.get(evidence["source"]) == "journal":  # the journal: cursors, no lines
                assert evidence["line"] is None and evidence["cursor"]
            else:  # a file or stdin, a `journalctl -o json` export included: lines count
                assert isinstance(evidence["line"], int) and evidence["line"] >= 1
            assert isinstance(evidence["text"], str)
        patch = finding["patch"]
        if patch is not None:
            assert set(patch) == PATCH_KEYS
            assert all(
                isinstance(k, str) and isinstance(v, str) for k, v in patch["env_set"].items()
            )
            assert all(
                isinstance(a, str)
                for a in patch["env_unset"] + patch["args_add"] + patch["args_remove"]
            )
            assert all(
                re.fullmatch(r"[A-Z][A-Za-z]+\.[A-Z][A-Za-z]+", k) for k in patch["unit_set"]
            )
            assert patch["dropin"] is None or isinstance(patch["dropin"], str)
        assert all(isinstance(c, str) for c in finding["next_checks"])
    if data["primary"] is None:
        assert not [
            f
            for f in data["findings"]
            if f["severity"] in {"critical", "error"} and f["role"] == "root_cause"
        ]


@pytest.mark.parametrize("case", list(CASES))
def test_json_report_follows_the_contract(case: str) -> None:
    check_contract(json.loads(report(diagnose_case(case), "json")))


def test_json_contract_holds_for_journal_json_input() -> None:
    data = json.loads(
        report(run_engine(fixture("fixtures/incidents/crashloop.journal.json")), "json")
    )
    check_contract(data)
    evidence = data["findings"][0]["evidence"]
    assert all(e["cursor"] for e in evidence)


def test_json_primary_of_the_crashloop() -> None:
    data = json.loads(report(diagnose_case("crashloop"), "json"))
    first = data["findings"][0]
    assert data["primary"] == first["id"] == "f1"
    assert first["patch"]["env_set"] == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert data["findings"][1]["caused_by"] == "f1"


def test_dropin_in_json_is_what_the_text_report_shows() -> None:
    diagnosis = diagnose_case("crashloop")
    data = json.loads(report(diagnosis, "json"))
    dropin = data["fix"]["dropin"]  # the unit's one drop-in, every finding's change merged
    assert dropin and data["fix"]["changes_behaviour"]
    lines = report(diagnosis, "text").splitlines()
    block = dropin.rstrip("\n").splitlines()
    start = lines.index(block[0])
    assert lines[start : start + len(block)] == block, "the drop-in as plain lines, unboxed"
    markdown = report(diagnosis, "markdown")
    assert f"```ini\n{dropin.rstrip()}\n```" in markdown


# -- hostile log text -----------------------------------------------------------------------------------

HOSTILE_LINE = (
    "[2026-03-01 11:53:32 TP0] Capture cuda graph failed: CUDA out of memory. "
    "[bold red]x[/] [link=http://evil]y[/link] \x1b]0;title\x07 \x1b[2J"
    " ``` # heading"
)


def hostile_diagnosis() -> Diagnosis:
    log = "\n".join(
        [
            "[2026-03-01 11:53:30] server_args=ServerArgs(tp_size=1, mem_fraction_static=0.88)",
            HOSTILE_LINE,
            "```",
            "# heading outside",
            "[2026-03-01 11:53:33 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            "Exception: Capture cuda graph failed: CUDA out of memory. ```",
            "```",
            "# injected heading",
            "",
        ]
    )
    diagnosis = run_text(log, "hostile.log")
    cause = primary(diagnosis)
    assert cause is not None, "the hostile lines must reach the report to be tested"
    assert any("[bold red]" in e.text for e in cause.evidence)
    return diagnosis


def test_hostile_markup_appears_literally_in_text() -> None:
    text = render(redact(hostile_diagnosis()), "text", width=400, color=False)  # no wrapping
    assert "[bold red]x[/]" in text
    assert "[link=http://evil]y[/link]" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_escape_byte_in_any_format(fmt: str) -> None:
    output = report(hostile_diagnosis(), fmt)
    assert "\x1b" not in output
    assert "\x07" not in output
    assert "\x9b" not in output


def test_text_with_colour_has_escapes_only_from_the_renderer() -> None:
    output = render(redact(hostile_diagnosis()), "text", width=400, color=True)
    assert "\x1b]0;" not in output, "no OSC from the log"
    assert "\x1b[2J" not in output
    assert "[bold red]x[/]" in output


def _fences(markdown: str) -> list[tuple[int, str]]:
    """(line number, fence) of every line that opens or closes a code block."""
    return [
        (n, m.group(1))
        for n, line in enumerate(markdown.splitlines())
        if (m := re.match(r"^(`{3,})", line))
    ]


def test_markdown_fence_cannot_be_closed_by_log_text() -> None:
    markdown = report(hostile_diagnosis(), "markdown")
    # Walk the document as a CommonMark reader does: a fence closes only with a run of at
    # least its own length. Every heading must lie outside every code block.
    inside: str | None = None
    headings_outside = []
    for line in markdown.splitlines():
        fence = re.match(r"^(`{3,})\s*(\S*)$", line) or re.match(r"^(`{3,})(\w*)$", line)
        if inside is None and line.startswith("```"):
            inside = re.match(r"^(`+)", line).group(1)  # type: ignore[union-attr]
            continue
        if inside is not None:
            if fence and len(fence.group(1)) >= len(inside) and not fence.group(2):
                inside = None
            continue
        if line.startswith("#"):
            headings_outside.append(line)
    assert inside is None, "every code block is closed"
    assert not [h for h in headings_outside if "heading" in h], headings_outside
    assert "# Postmortem" in markdown.splitlines()[0]
    # The evidence block's fence is longer than any backtick run in the log text.
    evidence_fence = next(f for _, f in _fences(markdown) if len(f) > 3)
    assert len(evidence_fence) >= 4


def test_markdown_inline_text_is_escaped() -> None:
    markdown = report(hostile_diagnosis(), "markdown")
    timeline = [line for line in markdown.splitlines() if line.startswith("| 2026-")]
    assert timeline
    for row in timeline:
        assert "[bold red]" not in row
        assert "\\[bold red\\]" in row or "bold red" not in row
        assert row.count("|") - row.count("\\|") == 5, "log text cannot add table columns"
