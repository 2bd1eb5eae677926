"""The accuracy benchmark's package check: one project under its names (benchmarks/accuracy)."""

from __future__ import annotations

import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "accuracy"))
import score


def test_a_renamed_or_differently_spelled_distribution_is_the_same_project() -> None:
    assert score.project("flashinfer") == score.project("flashinfer-python")
    assert score.project("unsloth_zoo") == score.project("Unsloth-Zoo")
    assert score.project("torch") != score.project("torchao")


def test_a_package_change_is_matched_by_project_and_action() -> None:
    finding = {"package": {"name": "flashinfer-python", "spec": "", "action": "install"}}
    assert score.covers_package(finding, {"name": "flashinfer", "action": "install"})
    assert not score.covers_package(finding, {"name": "flashinfer", "action": "upgrade"})


def test_the_judges_rendering_says_a_cause_once() -> None:
    import judge

    cut = "oneCCL cannot start its OFI transport: libfabric found no provider (ret -61, pr"
    whole = cut + "oviders 0), so the process group fails."
    assert judge.tool_answer({"findings": []}) is None
    assert judge._cause(cut + "…", whole) == whole
    assert judge._cause("Port in use", "Another server holds 8000.") == (
        "Port in use. Another server holds 8000."
    )
