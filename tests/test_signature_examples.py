"""Tests generated from the signature library: every positive and negative example is a test.

``pytest -k <signature-id>`` runs one signature's examples. The harness is the package's own
(``diagnose.testing``), the same one ``diagnose signatures test`` uses.
"""

from __future__ import annotations

import functools
import json
import textwrap
from pathlib import Path

import pytest

from diagnose.core.errors import UserError
from diagnose.core.models import Severity
from diagnose.core.signature import Signature
from diagnose.core.signature_file import Example
from diagnose.library import (
    load_directory,
    load_file,
    load_library,
    load_relations,
    load_signature_files,
)
from diagnose.testing import ExampleResult, check_signature
from tests.conftest import invoke

LIBRARY = {s.id: s for s in load_signature_files(include_user_dirs=False)}


@functools.cache
def _results(signature_id: str) -> dict[str, ExampleResult]:
    return {r.test_id: r for r in check_signature(LIBRARY[signature_id])}


def _cases() -> list:
    params = []
    for signature in LIBRARY.values():
        examples = [*signature.examples.positive, *signature.examples.negative]
        for example in examples:
            test_id = f"{signature.id}::{example.name}"
            marks = [pytest.mark.xfail(reason=example.xfail, strict=True)] if example.xfail else []
            params.append(pytest.param(signature.id, test_id, id=test_id, marks=marks))
    return params


@pytest.mark.parametrize(("signature_id", "test_id"), _cases())
def test_example(signature_id: str, test_id: str) -> None:
    result = _results(signature_id)[test_id]
    assert result.passed, (
        f"{test_id} ({'positive' if result.positive else 'negative'}): "
        + "; ".join(result.problems)
    )


def _positive_cases() -> list:
    params = []
    for signature in LIBRARY.values():
        for example in signature.examples.positive:
            test_id = f"{signature.id}::{example.name}"
            marks = [pytest.mark.xfail(reason=example.xfail, strict=False)] if example.xfail else []
            params.append(pytest.param(signature, example, id=test_id, marks=marks))
    return params


@pytest.mark.parametrize(("signature", "example"), _positive_cases())
def test_the_whole_library_finds_each_positive_example(
    signature: Signature, example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As users run it: the example alone, read by ``diagnose file`` with every built-in
    signature, is found; a critical signature is the primary finding, unless the example
    names the signature that rightly outranks it (``superseded_by``)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-signatures"))
    log = tmp_path / f"{example.name}.log"
    log.write_text(example.log, encoding="utf-8")
    result = invoke(["file", str(log), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    found = [f["signature"] for f in report["findings"]]
    primary = next(
        (f["signature"] for f in report["findings"] if f["id"] == report["primary"]), None
    )
    if example.superseded_by is not None:
        assert primary == example.superseded_by, f"primary {primary}, findings {found}"
        return
    assert signature.id in found, f"not found by the whole library; it reported {found}"
    if signature.severity is Severity.CRITICAL:
        assert primary == signature.id, f"critical, but the primary is {primary} ({found})"


def test_every_signature_has_examples_of_both_kinds() -> None:
    assert LIBRARY, "the built-in library is empty"
    for signature in LIBRARY.values():
        assert signature.examples.positive and signature.examples.negative, signature.id


# -- the harness itself reports failures -----------------------------------------------------

_GOOD = """\
title: A test failure
category: unknown
severity: error
match:
  type: line
  needles: ["boom"]
  regex: 'boom (?P<what>\\w+)'
explanation: "It went boom ({what})."
patch_note: "Nothing to change."
examples:
  positive:
    - name: boom
      log: |
        quiet line
        boom engine
      lines: [2]
      captures: {what: engine}
  negative:
    - name: quiet
      log: |
        quiet line
"""


def _write(directory: Path, stem: str, text: str) -> Path:
    path = directory / f"{stem}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_harness_passes_a_good_signature(tmp_path: Path) -> None:
    signature = load_file(_write(tmp_path, "test-boom", _GOOD))
    results = check_signature(signature)
    assert [(r.test_id, r.positive, r.passed) for r in results] == [
        ("test-boom::boom", True, True),
        ("test-boom::quiet", False, True),
    ]


def test_harness_reports_missed_lines_wrong_captures_and_unexpected_matches(tmp_path: Path) -> None:
    text = _GOOD.replace("lines: [2]", "lines: [1]").replace("{what: engine}", "{what: turbine}")
    text = text.replace(
        "    - name: quiet\n      log: |\n        quiet line\n",
        "    - name: quiet\n      log: |\n        boom again\n",
    )
    signature = load_file(_write(tmp_path, "test-boom", text))
    positive, negative = check_signature(signature)
    assert not positive.passed
    assert any("missed line(s) [1]" in p for p in positive.problems), positive.problems
    assert any("capture what: expected 'turbine', got 'engine'" in p for p in positive.problems)
    assert not negative.passed
    assert negative.problems == ["expected no finding; matched unexpectedly: line 1: boom again"]


def test_categories_follow_the_evidence_and_examples_check_them(tmp_path: Path) -> None:
    """The first `categories` rule whose conditions hold names the finding's category; an
    example that states a category fails when the finding has another."""
    text = _GOOD.replace(
        "category: unknown\n",
        "category: unknown\ncategories:\n  - when: [\"what == 'turbine'\"]\n"
        "    category: gpu_hardware\n",
    ).replace(
        "      captures: {what: engine}\n", "      captures: {what: engine}\n      category: X\n"
    )
    turbine = text.replace("boom engine", "boom turbine").replace(
        "{what: engine}", "{what: turbine}"
    )
    passing = load_file(_write(tmp_path, "test-boom", turbine.replace("X", "gpu_hardware")))
    assert all(r.passed for r in check_signature(passing))
    failing = load_file(_write(tmp_path, "test-boom", text.replace("X", "gpu_hardware")))
    positive, _ = check_signature(failing)
    assert positive.problems == ["category: expected gpu_hardware, got ['unknown']"]


def test_loader_refuses_an_unknown_category_in_categories(tmp_path: Path) -> None:
    text = _GOOD.replace(
        "category: unknown\n",
        "category: unknown\ncategories:\n  - {when: [what], category: vibes}\n",
    )
    assert "unknown category 'vibes'" in _refused(_write(tmp_path, "test-boom", text))


# -- the loader refuses bad signature files ---------------------------------------------------


def _refused(path: Path) -> str:
    with pytest.raises(UserError) as caught:
        load_file(path)
    message = str(caught.value)
    assert str(path) in message, message
    return message


def test_loader_accepts_the_good_file(tmp_path: Path) -> None:
    signature = load_file(_write(tmp_path, "test-boom", _GOOD))
    assert isinstance(signature, Signature)
    assert signature.id == "test-boom"


def test_loader_refuses_a_signature_without_a_negative_example(tmp_path: Path) -> None:
    text = _GOOD.split("  negative:")[0]
    message = _refused(_write(tmp_path, "test-boom", text))
    assert "examples.negative" in message


def test_loader_refuses_an_empty_negative_list(tmp_path: Path) -> None:
    text = _GOOD.split("  negative:")[0] + "  negative: []\n"
    message = _refused(_write(tmp_path, "test-boom", text))
    assert "examples.negative" in message


def test_loader_refuses_a_signature_without_a_positive_example(tmp_path: Path) -> None:
    start, rest = _GOOD.split("  positive:\n")
    text = start + "  negative:" + rest.split("  negative:")[1]
    message = _refused(_write(tmp_path, "test-boom", text))
    assert "examples.positive" in message


def test_loader_refuses_an_unknown_key_and_names_its_path(tmp_path: Path) -> None:
    text = _GOOD.replace('  needles: ["boom"]\n', '  needles: ["boom"]\n  neddles: ["typo"]\n')
    message = _refused(_write(tmp_path, "test-boom", text))
    assert "match.line.neddles" in message, message


def test_loader_refuses_an_unknown_top_level_key(tmp_path: Path) -> None:
    message = _refused(_write(tmp_path, "test-boom", _GOOD + "severty: error\n"))
    assert "severty" in message


def test_loader_refuses_an_id_that_differs_from_the_file_stem(tmp_path: Path) -> None:
    message = _refused(_write(tmp_path, "test-boom", "id: other-name\n" + _GOOD))
    assert "'other-name'" in message
    assert "differs from the file name" in message


def test_loader_refuses_a_regex_that_does_not_compile(tmp_path: Path) -> None:
    text = _GOOD.replace("regex: 'boom (?P<what>\\w+)'", "regex: 'boom (?P<what>\\w+'")
    message = _refused(_write(tmp_path, "test-boom", text))
    assert "match.line" in message
    assert "regex does not compile" in message


def test_loader_refuses_invalid_yaml(tmp_path: Path) -> None:
    message = _refused(_write(tmp_path, "test-boom", "title: [unclosed\n"))
    assert "not valid YAML" in message


def test_loader_refuses_an_unknown_category(tmp_path: Path) -> None:
    message = _refused(
        _write(tmp_path, "test-boom", _GOOD.replace("category: unknown", "category: vibes"))
    )
    assert "unknown category 'vibes'" in message


def test_directory_loader_refuses_duplicate_ids(tmp_path: Path) -> None:
    _write(tmp_path, "test-boom", _GOOD)
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", "test-boom", _GOOD)
    with pytest.raises(UserError, match="duplicate signature id 'test-boom'"):
        load_directory(tmp_path)


def test_a_user_directory_overrides_a_builtin_signature_with_the_same_id(tmp_path: Path) -> None:
    builtin = LIBRARY["host-oom-kill"]
    text = _GOOD.replace("title: A test failure", "title: My own host OOM")
    _write(tmp_path, "host-oom-kill", text)
    merged = {s.id: s for s in load_library([tmp_path], include_user_dirs=False)}
    assert merged["host-oom-kill"].title == "My own host OOM" != builtin.title
    assert set(merged) == {s.id for s in load_library(include_user_dirs=False)}


def test_every_relation_names_signatures_of_the_library() -> None:
    """``_relations.yaml`` is read by the ranking: an id missing from the library there would
    silently change nothing. Each winner carries its relations as ``supersedes``."""
    for winner, losers in load_relations().supersedes.items():
        assert {winner, *losers} <= LIBRARY.keys(), sorted({winner, *losers} - LIBRARY.keys())
        assert set(losers) <= set(LIBRARY[winner].supersedes), winner
