"""Engine profiles: what is known about each inference engine, behind one protocol.

Each module of this package that defines ``PROFILE`` is an engine; adding one is adding a
module. ``generic`` stands for any server no profile knows.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from diagnose.engines.base import EngineProfile

GENERIC_NAME = "generic"


@functools.cache
def profiles() -> tuple[EngineProfile, ...]:
    """Every known engine's profile (not the generic one), in module-name order."""
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        profile = getattr(loaded, "PROFILE", None)
        if profile is not None and profile.name != GENERIC_NAME:
            found.append(profile)
    return tuple(found)


def profile(name: str | None) -> EngineProfile:
    """The profile of the engine called ``name``; the generic one when none is."""
    from diagnose.engines.generic import PROFILE as generic

    return next((p for p in profiles() if p.name == name), generic)


def benign_lines() -> tuple[str, ...]:
    """Every profile's known-noise regexes (wrappers of an earlier failure included), the
    generic ones first."""
    every = (profile(None), *profiles())
    return tuple(line.pattern for p in every for line in (*p.noise, *p.wrappers))


def cause_elsewhere_lines() -> tuple[str, ...]:
    """Every profile's regexes of lines that say a failure happened without saying which:
    wrappers of an earlier failure and notices that a process died."""
    every = (profile(None), *profiles())
    return tuple(line.pattern for p in every for line in (*p.wrappers, *p.death_notices))


def death_notices() -> tuple[str, ...]:
    """Every profile's regexes of lines that say a process of the server died."""
    return tuple(line.pattern for p in (profile(None), *profiles()) for line in p.death_notices)


def display_name(name: str | None) -> str:
    """``SGLang``, ``vLLM``; ``the engine`` for an unknown one."""
    return profile(name).display_name
