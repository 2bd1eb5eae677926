"""Write a deterministic, realistic SGLang journal export of a given size.

A long-running TP4 unit as `journalctl -o short-precise` prints it: a startup, then mostly
periodic `Decode batch` / `Prefill batch` lines and uvicorn access lines (over 95 % of the
lines), a few benign warnings, and a handful of planted failures near the end (a CUDA OOM
traceback, an NCCL watchdog timeout, a restart loop) so the benchmark also measures the work
on interesting lines.

    python benchmarks/generate_log.py --size 100M --output /tmp/bench.log
"""

from __future__ import annotations

import argparse
import random
import re
from datetime import datetime, timedelta
from pathlib import Path

HOST = "gpu-node-07"
PID = 48211
UNIT = "sglang-qwen.service"

STARTUP = """\
[{ts}] server_args=ServerArgs(model_path='/models/Qwen3.5-122B-A10B', tp_size=4, mem_fraction_static=0.88, speculative_algorithm='EAGLE', mamba_scheduler_strategy='extra_buffer')
[{ts} TP0] Init torch distributed begin.
[{ts} TP1] Init torch distributed begin.
[{ts} TP2] Init torch distributed begin.
[{ts} TP3] Init torch distributed begin.
[{ts} TP0] Init torch distributed ends. elapsed=2.11 s, mem usage=0.61 GB
[{ts} TP0] Load weight begin. avail mem=139.20 GB
[{ts} TP0] Load weight end. elapsed=198.41 s, type=Qwen3_5MoeForConditionalGeneration, avail mem=80.54 GB, mem usage=58.66 GB.
[{ts} TP0] KV Cache is allocated. #tokens: 1203456, K size: 30.12 GB, V size: 30.12 GB
[{ts} TP0] Memory pool end. avail mem=16.62 GB
[{ts} TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=16.62 GB
[{ts} TP0] Capture cuda graph end. Time elapsed: 46.93 s. mem usage=1.21 GB. avail mem=15.41 GB.
[{ts} TP0] max_total_num_tokens=1203456, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=262144, available_gpu_mem=15.38 GB
[{ts}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[{ts}] The server is fired up and ready to roll!
"""

PLANTED = """\
[{ts} TP2] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2736, in run_scheduler_process
    scheduler.event_loop_overlap()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 139.80 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 138.67 GiB memory in use.
[rank1]:[E302 10:01:02.123456789 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88123, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600082 milliseconds before timing out.
[{ts}] Received sigquit from a child process. It usually means the child failed.
"""

SYSTEMD_FAILURE = [
    f"{UNIT}: Main process exited, code=killed, status=9/KILL",
    f"{UNIT}: Failed with result 'signal'.",
    f"{UNIT}: Scheduled restart job, restart counter is at {{n}}.",
    f"Started {UNIT} - SGLang Qwen3.5-122B-A10B server.",
]


def _decode(rng: random.Random) -> str:
    running = rng.randint(1, 48)
    return (
        f"Decode batch, #running-req: {running}, #token: {rng.randint(1000, 900000)}, "
        f"token usage: {rng.random():.2f}, accept len: {rng.uniform(1.5, 3.9):.2f}, "
        f"cuda graph: True, gen throughput (token/s): {rng.uniform(200, 4000):.2f}, "
        f"#queue-req: {rng.randint(0, 9)}"
    )


def _prefill(rng: random.Random) -> str:
    return (
        f"Prefill batch, #new-seq: {rng.randint(1, 8)}, #new-token: {rng.randint(16, 8192)}, "
        f"#cached-token: {rng.randint(0, 60000)}, token usage: {rng.random():.2f}, "
        f"#running-req: {rng.randint(0, 48)}, #queue-req: {rng.randint(0, 9)}, "
        f"#pending-token: 0, cuda graph: False, input throughput (token/s): {rng.uniform(1000, 90000):.2f}"
    )


def _access(rng: random.Random) -> str:
    return (
        f"INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(30000, 65000)} - "
        f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
    )


def _journal(stamp: datetime, ident: str, message: str) -> str:
    return f"{stamp.strftime('%b %d %H:%M:%S.%f')} {HOST} {ident}: {message}\n"


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 100M, 1G)")
    return int(
        float(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]
    )


def generate(size: int, output: Path, seed: int = 7) -> int:
    """Write about ``size`` bytes; returns the number of lines written."""
    rng = random.Random(seed)
    stamp = datetime(2026, 3, 2, 9, 0, 0)
    app = f"python3[{PID}]"
    written = lines = 0
    planted_at = int(size * 0.97)
    planted = False
    restarts = 0
    with output.open("w", encoding="utf-8") as out:

        def emit(ident: str, message: str) -> None:
            nonlocal written, lines
            line = _journal(stamp, ident, message)
            out.write(line)
            written += len(line)
            lines += 1

        emit("systemd[1]", f"Started {UNIT} - SGLang Qwen3.5-122B-A10B server.")
        for text in STARTUP.format(ts=stamp.strftime("%Y-%m-%d %H:%M:%S")).splitlines():
            emit(app, text)
        while written < size:
            stamp += timedelta(microseconds=rng.randint(2000, 400000))
            ts = stamp.strftime("%Y-%m-%d %H:%M:%S")
            roll = rng.random()
            if roll < 0.62:
                emit(app, f"[{ts} TP0] {_decode(rng)}")
            elif roll < 0.82:
                emit(app, f"[{ts}] {_access(rng)}")
            elif roll < 0.995:
                emit(app, f"[{ts} TP0] {_prefill(rng)}")
            elif roll < 0.998:
                emit(
                    app,
                    f"[{ts} TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.4431 -> 0.6817",
                )
            else:
                emit(app, f"[{ts}] WARNING:  Invalid HTTP request received.")
            if not planted and written >= planted_at:
                planted = True
                for text in PLANTED.format(ts=ts).splitlines():
                    emit(app, text)
                for _ in range(3):
                    restarts += 1
                    for text in SYSTEMD_FAILURE:
                        emit("systemd[1]", text.format(n=restarts))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("100M"))
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args()
    lines = generate(arguments.size, arguments.output, arguments.seed)
    print(f"wrote {arguments.output}: {arguments.output.stat().st_size} bytes, {lines} lines")


if __name__ == "__main__":
    main()
