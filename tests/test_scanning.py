"""The scanned reading path: same diagnosis whichever scanner runs, and needles that are rare."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks.generate_log import _access, _decode, _prefill
from diagnose.core.engine import Engine
from diagnose.core.scan import NeedleScanner
from diagnose.inputs.files import LogInput, events
from diagnose.library import load_facts, load_library
from diagnose.render import render

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(
    path.relative_to(ROOT)
    for folder in ("incidents", "samples/real", "samples/healthy", "gpu")
    for path in (ROOT / "fixtures" / folder).iterdir()
    if path.is_file() and path.suffix in {".log", ".txt", ".json"}
)


def _diagnose(path: Path, scanner_backend: str | None) -> str:
    signatures = load_library(include_user_dirs=False)
    engine = Engine(signatures, facts=load_facts())
    needles = engine.needles()
    assert needles is not None
    scanner = NeedleScanner(needles, backend=scanner_backend) if scanner_backend else None
    log = LogInput.from_argument(str(path))
    for event in events(log, scanner):
        engine.feed(event)
    return render(engine.finish(inputs=[log.summary()]), "json")


@pytest.mark.parametrize("path", FIXTURES, ids=str)
def test_every_reading_path_gives_the_same_json(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    every_line = _diagnose(path, None)
    assert _diagnose(path, "pyahocorasick") == every_line
    pytest.importorskip("hyperscan")
    assert _diagnose(path, "hyperscan") == every_line


def test_every_pattern_has_a_needle() -> None:
    """The scanner only looks at lines holding a needle: a pattern without one would make
    every line a candidate (and the slow path the only path)."""
    missing = [
        f"{s.id}: {p.regex[:50]}"
        for s in load_library(include_user_dirs=False)
        for p in s.patterns()
        if not p.needles
    ]
    missing += [f"_facts.yaml: {p.regex[:50]}" for p in load_facts() if not p.needles]
    assert missing == []


def test_needles_are_rare_in_a_busy_healthy_server_log() -> None:
    """Needles must not fire on the periodic lines that make up 95 % of a real log."""
    rng = random.Random(3)
    stamp = "[2026-03-02 10:00:00 TP0] "
    periodic = [stamp + make(rng) for make in (_decode, _prefill, _access) for _ in range(3000)]
    engine = Engine(load_library(include_user_dirs=False), facts=load_facts())
    needles = engine.needles()
    assert needles is not None
    common = {
        needle: hits
        for needle in needles
        if (hits := sum(needle in line for line in periodic)) > len(periodic) // 1000
    }
    assert common == {}


def test_an_engine_and_the_scanner_of_its_input_build_one_automaton() -> None:
    """Building the automaton of the library's needles is most of what scanning a small
    input costs: the engine's needle set and the input's scanner share it."""
    engine = Engine(load_library(include_user_dirs=False), facts=load_facts())
    needles = engine.needles()
    assert needles is not None and all(needle.isascii() for needle in needles)
    scanner = NeedleScanner(needles, backend="pyahocorasick")
    assert scanner._automaton is engine._needle_set._automaton


def test_a_journal_is_scanned_with_the_automaton_until_it_proves_large(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A journal's size is unknown up front: a small one must not pay for importing and
    compiling Hyperscan, and a large one switches to it with the same entries kept."""
    from diagnose.inputs import pipeline

    engine = Engine(load_library(include_user_dirs=False), facts=load_facts())
    batch = [b"Loading weights", b"CUDA out of memory. Tried to allocate 2.00 GiB", b"ok"] * 40
    monkeypatch.setattr(pipeline, "HEAD_ENTRIES", 0)
    small = pipeline.journal_prefilter(engine)
    assert small is not None
    assert small.scanner().backend == "pyahocorasick"
    kept_small = small(batch)

    monkeypatch.setattr(pipeline, "SMALL_INPUT_BYTES", len(batch) * 10)
    large = pipeline.journal_prefilter(engine)
    assert large is not None
    assert large(batch) == kept_small and kept_small
    pytest.importorskip("hyperscan")
    assert large.scanner().backend == "hyperscan"
    assert large(batch) == kept_small
