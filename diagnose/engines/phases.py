"""Startup phases, in order, and the lines that announce them (SGLang and vLLM, old and new)."""

from __future__ import annotations

# (phase, engine or None for both, literal markers). Order is the order of a healthy start.
PHASES: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    (
        "launch",
        None,
        ("server_args=", "non-default args:", "vLLM API server version", "vLLM server version"),
    ),
    (
        "dist_init",
        None,
        ("Init torch distributed begin.", "Init parallel begin.", "distributed_init_method="),
    ),
    (
        "load_weights",
        None,
        ("Load weight begin.", "Loading model from scratch", "Starting to load model"),
    ),
    ("kv_cache", None, ("Load weight end.", "Loading weights took", "Model loading took")),
    (
        "cuda_graph",
        None,
        (
            "Capture cuda graph begin.",
            "decode CUDA graph begin.",
            "Capture draft cuda graph begin.",
            "Capturing CUDA graph",
            "Capturing cudagraphs",
        ),
    ),
    (
        "http_server",
        None,
        (
            "max_total_num_tokens=",
            "init engine (profile",
            "Starting vLLM API server",
            "Starting vLLM server",
        ),
    ),
    ("warmup", "sglang", ("Uvicorn running on",)),
    ("ready", "sglang", ("The server is fired up and ready to roll!",)),
    ("ready", "vllm", ("Application startup complete.",)),
)

PHASE_ORDER: dict[str, int] = {}
for _name, _engine, _markers in PHASES:
    PHASE_ORDER.setdefault(_name, len(PHASE_ORDER))


def phase_of(text: str, engine: str | None) -> str | None:
    """The phase a line announces, if any."""
    for name, phase_engine, markers in PHASES:
        if phase_engine is not None and engine is not None and phase_engine != engine:
            continue
        if (
            phase_engine is not None
            and engine is None
            and name == "ready"
            and phase_engine == "vllm"
        ):
            continue
        if any(marker in text for marker in markers):
            return name
    return None


def launch_marker(text: str) -> str | None:
    """Which launch banner a line is (vLLM prints two per start: its version, then its args)."""
    return next((marker for marker in PHASES[0][2] if marker in text), None)
