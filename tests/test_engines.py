"""Engine profiles: found by the registry; phases and banners come from them."""

from __future__ import annotations

from diagnose.engines import display_name, profile, profiles
from diagnose.engines.phases import launch_marker, phase_of


def test_the_registry_finds_every_engine_module() -> None:
    assert [p.name for p in profiles()] == ["sglang", "vllm"]
    assert profile("nothing-known").name == "generic"
    assert display_name("vllm") == "vLLM" and display_name(None) == "the engine"


def test_phases_and_banners_come_from_the_profiles() -> None:
    assert phase_of("Load weight begin. avail mem=139.20 GB", "sglang") == "load_weights"
    assert phase_of("Application startup complete.", "vllm") == "ready"
    # uvicorn's bare line (older vLLM) is ready; SGLang's is not: it is ready after its warm-up
    assert phase_of("Application startup complete.", None) == "ready"
    assert phase_of("Application startup complete.", "sglang") is None
    assert launch_marker("non-default args: {'model': 'x'}") == "non-default args:"
