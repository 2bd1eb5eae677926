"""SGLang: its launch banners and phase lines, its command line, its flag defaults."""

from __future__ import annotations

from diagnose.engines.base import (
    SHARED_FLAG_ALIASES,
    EngineProfile,
    KnownLine,
    PhaseMarkers,
    Profile,
)

PROFILE: EngineProfile = Profile(
    name="sglang",
    display_name="SGLang",
    prog="sglang serve",
    graphs_off_flag="--disable-cuda-graph",
    issue_tracker="https://github.com/sgl-project/sglang/issues",
    phase_markers=(
        PhaseMarkers("launch", ("server_args=",)),
        PhaseMarkers("dist_init", ("Init torch distributed begin.",)),
        PhaseMarkers("load_weights", ("Load weight begin.",)),
        PhaseMarkers("kv_cache", ("Load weight end.",)),
        PhaseMarkers(
            "cuda_graph",
            (
                "Capture cuda graph begin.",
                "decode CUDA graph begin.",
                "Capture draft cuda graph begin.",
            ),
        ),
        PhaseMarkers("http_server", ("max_total_num_tokens=",)),
        PhaseMarkers("warmup", ("Uvicorn running on",), lines="own_or_unknown"),
        PhaseMarkers(
            "ready", ("The server is fired up and ready to roll!",), lines="own_or_unknown"
        ),
    ),
    noise=(
        KnownLine(
            r"\): error: operation scheduled before its operands",
            "Triton's MLIR diagnostic from SGLang's decode attention kernel; SGLang prints "
            "'The following error message ... can be ignored' for it",
        ),
    ),
    wrappers=(
        KnownLine(
            r"Rank \d+ scheduler is dead\. Please check if there are relevant logs",
            "the tokenizer manager found a scheduler gone; the scheduler's own error came first",
        ),
    ),
    death_notices=(
        KnownLine(
            r"Received sigquit from a child process|SIGQUIT received",
            "a child (scheduler, detokenizer) failed; SGLang then kills its process tree",
        ),
        KnownLine(
            r"Subprocess \S+ \(pid=\d+\) crashed",
            "SGLang's subprocess watchdog saw a child die and triggers SIGQUIT",
        ),
        KnownLine(
            r"(?:Rank \d+ )?scheduler died during initialization",
            "a scheduler died while the server started",
        ),
    ),
    flag_aliases=SHARED_FLAG_ALIASES,
    defaults={
        "host": "127.0.0.1",
        "port": 30000,
        "tp_size": 1,
        "pp_size": 1,
        "nnodes": 1,
        "base_gpu_id": 0,
        "mamba_scheduler_strategy": "auto",
    },
    executable="sglang",
    env_prefixes=("SGLANG_", "SGL_"),
    code_packages=("sgl_kernel",),
    module_prefix="sglang.",
)
