"""Startup phases, in order, and the lines that announce them, from the engine profiles."""

from __future__ import annotations

import functools

from diagnose.engines import profiles
from diagnose.engines.base import PHASE_NAMES, PhaseMarkers

PHASE_ORDER: dict[str, int] = {name: index for index, name in enumerate(PHASE_NAMES)}


@functools.cache
def _markers_in_phase_order() -> tuple[tuple[str, PhaseMarkers], ...]:
    """(engine, markers) of every profile, in the order of the phases they announce."""
    pairs = [(p.name, markers) for p in profiles() for markers in p.phase_markers]
    return tuple(sorted(pairs, key=lambda pair: PHASE_ORDER[pair[1].phase]))


def phase_of(text: str, engine: str | None) -> str | None:
    """The phase a line announces, if any."""
    for own, markers in _markers_in_phase_order():
        if markers.counts_on(engine, own) and any(literal in text for literal in markers.literals):
            return markers.phase
    return None


@functools.cache
def launch_markers() -> tuple[str, ...]:
    """Every engine's launch banners (vLLM prints two per start: its version, then its args)."""
    return tuple(
        literal
        for profile in profiles()
        for markers in profile.phase_markers
        if markers.phase == "launch"
        for literal in markers.literals
    )


def launch_marker(text: str) -> str | None:
    """Which launch banner a line is."""
    return next((marker for marker in launch_markers() if marker in text), None)


def all_markers() -> set[str]:
    """Every literal that announces a phase, for the prefilter."""
    return {
        literal
        for profile in profiles()
        for markers in profile.phase_markers
        for literal in markers.literals
    }
