"""One incident per unit, and the replay buffer the hosts of one input share."""

from __future__ import annotations

from pathlib import Path

from diagnose.core.split import KeptBudget, UnitSplitter
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs_by_host
from diagnose.library import engine_for
from tests.conftest import builtin_library

TWO_UNITS = (
    Path(__file__).parent.parent / "fixtures/reasoning/two-units-sglang-and-vllm.journal.txt"
)
ONE_UNIT = Path(__file__).parent.parent / "fixtures/incidents/healthy-sglang.journal.txt"


def _split(texts: list[str], budget: KeptBudget) -> dict[str | None, UnitSplitter]:
    library = builtin_library()
    return run_logs_by_host(
        lambda: UnitSplitter(lambda: engine_for(library), budget),
        [LogInput.from_text(text) for text in texts],
    )


def test_a_host_that_runs_out_of_the_shared_budget_gives_its_events_back() -> None:
    one_unit = ONE_UNIT.read_text()  # gpu-node-07: one service
    ample = KeptBudget(1000)
    _split([one_unit], ample)
    assert ample.size - ample.left > 10  # it keeps more than 10 events, waiting for a second
    budget = KeptBudget(10)
    splitters = _split([one_unit, TWO_UNITS.read_text()], budget)
    assert budget.left == 10  # what gpu-node-07 kept went back; gpu-node-04 split and replayed
    units = splitters["gpu-node-04"].finish().units
    assert sorted(u.unit or "" for u in units) == ["sglang-chat.service", "vllm-embed.service"]
    assert splitters["gpu-node-07"].finish().units == []


def test_a_second_service_after_the_budget_ran_out_is_one_incident_with_a_note() -> None:
    splitters = _split([TWO_UNITS.read_text()], KeptBudget(2))
    diagnosis = splitters["gpu-node-04"].finish()
    assert diagnosis.units == []
    assert any(
        note.startswith("vllm-embed.service appeared after more events than are kept")
        and "(2, all hosts together)" in note
        for note in diagnosis.notes
    )
    assert _split([TWO_UNITS.read_text()], KeptBudget()).popitem()[1].finish().units
