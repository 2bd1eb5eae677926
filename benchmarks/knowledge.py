"""What the knowledge tiers cost a diagnosis.

    .venv/bin/python benchmarks/knowledge.py

Times, in one process (best of N, after a warm-up import), small incidents read as
`diagnose file` reads them:
  * decided by a hand signature (neither tier's data may be loaded: no cost);
  * decided by a known issue (the compiled index is loaded and matched);
  * decided by the engine-source tier (a failed start whose only clue is an engine message);
  * each of them with the knowledge tiers switched off,
and prints the cost of each tier (with minus without, plus loading its data on first use).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks  # noqa: F401  (stops with one line outside the project's environment)
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.knowledge import issue_base, location, mined, source_index, source_tier
from diagnose.library import engine_for, load_library

SIGNATURE_DECIDES = """\
Mar 04 10:00:01.100000 gpu-node-07 python3[4101]: [2026-03-04 10:00:01] INFO:     Started server process [4101]
Mar 04 10:00:01.200000 gpu-node-07 python3[4101]: [2026-03-04 10:00:01] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use
Mar 04 10:00:01.300000 gpu-node-07 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE
"""
KNOWN_ISSUE_DECIDES = """\
[2026-03-04 10:00:01 TP0] Load weight begin. avail mem=78.12 GB
[2026-03-04 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 2311, in run_scheduler_process
ImportError: /usr/local/lib/python3.10/dist-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi
"""
ENGINE_SOURCE_DECIDES = """\
Mar 04 10:00:00 gpu-node-07 python3[4101]: [2026-03-04 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', dp_size=2)
Mar 04 10:00:00 gpu-node-07 python3[4101]: [2026-03-04 10:00:00] Using default HuggingFace chat template with detected content format: string
Mar 04 10:00:01 gpu-node-07 python3[4101]: Traceback (most recent call last):
Mar 04 10:00:01 gpu-node-07 python3[4101]:   File "/opt/venv/lib/python3.11/site-packages/sglang/launch_server.py", line 25, in <module>
Mar 04 10:00:01 gpu-node-07 python3[4101]:   File "/opt/venv/lib/python3.11/site-packages/sglang/srt/entrypoints/engine.py", line 412, in _launch_weight_cache_daemons
Mar 04 10:00:01 gpu-node-07 python3[4101]: ValueError: Weight cache daemon mode does not support dp_size > 1. Please set --dp-size 1 when using --weight-cache-mode daemon.
Mar 04 10:00:02 gpu-node-07 systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE
Mar 04 10:00:02 gpu-node-07 systemd[1]: sglang.service: Failed with result 'exit-code'.
"""
ROUNDS = 20


def _diagnose(text: str, knowledge: bool) -> float:
    signatures = load_library(include_user_dirs=False)
    started = time.perf_counter()
    engine = engine_for(signatures, knowledge=knowledge)
    log = LogInput.from_text(text, "bench.log")
    run_logs(engine, [log])
    engine.finish(inputs=[log.summary()])
    return time.perf_counter() - started


def _best(text: str, knowledge: bool) -> float:
    return min(_diagnose(text, knowledge) for _ in range(ROUNDS))


def _first_use(text: str) -> float:
    """One diagnosis with every knowledge cache cleared: what the first run pays."""
    for cached in (
        issue_base.builtin_base,
        location.builtin_anchors,
        source_index.builtin_index,
        source_tier.builtin_knowledge,
        mined.versions,
        mined.flag_table,
        mined.flag_changes,
        mined.env_vars,
    ):
        cached.cache_clear()
    return _diagnose(text, True)


def main() -> None:
    _diagnose(KNOWN_ISSUE_DECIDES, True)  # imports and the library's YAML, paid by every run
    issue_base.builtin_base.cache_clear()
    location.builtin_anchors.cache_clear()
    started = time.perf_counter()
    base = issue_base.builtin_base()
    load_ms = (time.perf_counter() - started) * 1000
    signature = _best(SIGNATURE_DECIDES, True) * 1000
    signature_off = _best(SIGNATURE_DECIDES, False) * 1000
    with_tier = _best(KNOWN_ISSUE_DECIDES, True) * 1000
    without = _best(KNOWN_ISSUE_DECIDES, False) * 1000
    print(f"known-issue base: {len(base.entries)} records, loaded in {load_ms:.1f} ms (first use)")
    print(f"hand signature decides:  {signature:7.1f} ms  (tiers off: {signature_off:.1f} ms)")
    print(f"known issue decides:     {with_tier:7.1f} ms  (tiers off: {without:.1f} ms)")
    print(f"cost of the tier on a diagnosis it decides: {load_ms + with_tier - without:.1f} ms")

    source_index.builtin_index.cache_clear()
    _best(SIGNATURE_DECIDES, True)
    loaded = source_index.builtin_index.cache_info().currsize
    print(f"engine-source indexes loaded when a hand signature decides: {loaded}")
    first = min(_first_use(ENGINE_SOURCE_DECIDES) for _ in range(5)) * 1000
    warm = _best(ENGINE_SOURCE_DECIDES, True) * 1000
    off = _best(ENGINE_SOURCE_DECIDES, False) * 1000
    print(
        f"engine source decides:   {warm:7.1f} ms warm, {first:.1f} ms first use  (tiers off: {off:.1f} ms)"
    )
    print(f"cost of the engine-source tier on a failed start, first use: {first - off:.1f} ms")


if __name__ == "__main__":
    main()
