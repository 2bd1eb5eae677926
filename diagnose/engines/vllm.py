"""vLLM: its launch banners and phase lines, its command line, its flag defaults."""

from __future__ import annotations

from diagnose.engines.base import (
    SHARED_FLAG_ALIASES,
    EngineProfile,
    KnownLine,
    PhaseMarkers,
    Profile,
)

PROFILE: EngineProfile = Profile(
    name="vllm",
    display_name="vLLM",
    prog="vllm serve",
    graphs_off_flag="--enforce-eager",
    issue_tracker="https://github.com/vllm-project/vllm/issues",
    phase_markers=(
        PhaseMarkers(
            "launch", ("non-default args:", "vLLM API server version", "vLLM server version")
        ),
        PhaseMarkers(
            "dist_init",
            ("Init parallel begin.", "distributed_init_method=", "Found nccl from library"),
        ),
        PhaseMarkers("load_weights", ("Loading model from scratch", "Starting to load model")),
        PhaseMarkers("kv_cache", ("Loading weights took", "Model loading took")),
        PhaseMarkers("cuda_graph", ("Capturing CUDA graph", "Capturing cudagraphs")),
        PhaseMarkers(
            "http_server",
            ("init engine (profile", "Starting vLLM API server", "Starting vLLM server"),
        ),
        PhaseMarkers(
            "ready", ("Application startup complete.",), lines="own_or_unknown"
        ),  # uvicorn's own line: older vLLM prints it bare, newer as (APIServer pid=N)
    ),
    wrappers=(
        KnownLine(
            r"Engine core initialization failed\. See root cause above"
            r"(?!\. Failed core proc\(s\): \{\}(?![^\n]))",
            "the API server's wrapper for a failure the engine core logged before it: a "
            "consequence, never the cause (with no process named as failed it is read: the "
            "engine may have run out of time to start)",
        ),
        KnownLine(
            r"WorkerProc initialization failed due to an exception in a background process",
            "the engine core's wrapper for a worker's failure logged before it",
        ),
        KnownLine(
            r"Engine process failed to start\. See stack trace for the root cause",
            "the API server's wrapper (0.6-0.7) for a failure the engine process logged before it",
        ),
    ),
    noise=(
        KnownLine(
            r"destroy_process_group\(\) was not called",
            "torch's warning at exit; harmless",
        ),
    ),
    death_notices=(
        KnownLine(
            r"died unexpectedly|Engine core proc \S+ died",
            "vLLM saw a worker or the engine core die and shuts down",
        ),
        KnownLine(
            r"EngineCore encountered a fatal error|EngineDeadError",
            "the engine core died; the API server answers 500 and shuts down",
        ),
    ),
    flag_aliases={
        **SHARED_FLAG_ALIASES,
        "speculative_config_method": "speculative_method",
        "speculative_config_num_speculative_tokens": "num_speculative_tokens",
    },
    defaults={"host": "0.0.0.0", "port": 8000, "tp_size": 1, "pp_size": 1},
    executable="vllm",
    env_prefixes=("VLLM_",),
    module_prefix="vllm.",
    model_positional=True,
)
