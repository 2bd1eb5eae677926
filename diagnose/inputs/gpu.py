"""One snapshot of the GPUs: memory per GPU and the compute processes on them.

nvidia-ml-py (``pynvml``) when it is installed, else ``nvidia-smi`` in its CSV query form.
The lines become records (origin ``gpu``) in the form signatures already know from saved
``nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv`` output
(``0, 1143 MiB, 143771 MiB``). No nvidia-smi is missing evidence, not an error.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import dataclass, field

from diagnose.core.records import Record

SOURCE = "nvidia-smi"
_QUERY_GPU = "--query-gpu=index,name,memory.used,memory.total"
_QUERY_APPS = "--query-compute-apps=pid,process_name,gpu_uuid,used_memory"
_FORMAT = "--format=csv,noheader,nounits"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    used_mib: int
    total_mib: int


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    gpu_uuid: str
    used_mib: int | None


@dataclass
class GpuSnapshot:
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    missing: str | None = None
    """Why there is no snapshot (missing evidence, not an error)."""
    via: str = "nvidia-smi"

    def records(self) -> list[Record]:
        """Lines for the engine: per GPU as ``--query-gpu=index,memory.used,memory.total
        --format=csv`` prints it (``0, 1143 MiB, 143771 MiB``), then one per process."""
        out = []
        for gpu in self.gpus:
            text = f"{gpu.index}, {gpu.used_mib} MiB, {gpu.total_mib} MiB"
            raw = f"{gpu.index}, {gpu.name}, {gpu.used_mib}, {gpu.total_mib}"
            out.append(
                Record(source=SOURCE, line=None, text=text, raw=raw, origin="gpu", stream=SOURCE)
            )
        for process in self.processes:
            used = "" if process.used_mib is None else str(process.used_mib)
            text = f"{process.pid}, {process.name}, {process.gpu_uuid}, {used}"
            out.append(
                Record(source=SOURCE, line=None, text=text, raw=text, origin="gpu", stream=SOURCE)
            )
        return out


def _number(text: str) -> int | None:
    text = text.strip()
    try:
        return int(float(text))
    except (ValueError, OverflowError):  # not a number, nan, inf
        return None


def parse_query_gpu(text: str) -> list[Gpu]:
    """``index, name, memory.used, memory.total`` rows (noheader, nounits)."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        index, used, total = _number(parts[0]), _number(parts[-2]), _number(parts[-1])
        if index is None or used is None or total is None:
            continue
        gpus.append(Gpu(index, ", ".join(parts[1:-2]), used, total))
    return gpus


def parse_query_apps(text: str) -> list[GpuProcess]:
    """``pid, process_name, gpu_uuid, used_memory`` rows (noheader, nounits)."""
    processes = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or _number(parts[0]) is None:
            continue
        processes.append(
            GpuProcess(int(parts[0]), ", ".join(parts[1:-2]), parts[-2], _number(parts[-1]))
        )
    return processes


def _nvml() -> GpuSnapshot | None:
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: fall back to nvidia-smi, which says why
        return None
    try:
        snapshot = GpuSnapshot(via="nvidia-ml-py")
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            snapshot.gpus.append(Gpu(index, name, memory.used // 2**20, memory.total // 2**20))
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(process, "usedGpuMemory", None)
                snapshot.processes.append(
                    GpuProcess(
                        process.pid,
                        _process_name(process.pid),
                        uuid,
                        used // 2**20 if isinstance(used, int) else None,
                    )
                )
        return snapshot
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "?"


def snapshot(nvidia_smi: str = "nvidia-smi", timeout: float = 20.0) -> GpuSnapshot:
    """One look at the GPUs now."""
    return PendingSnapshot(nvidia_smi).result(timeout)


class PendingSnapshot:
    """A look at the GPUs, started now and read later: the two ``nvidia-smi`` queries run at
    once (each takes about 25 ms on an H200 host), while the caller reads the journal."""

    def __init__(self, nvidia_smi: str = "nvidia-smi") -> None:
        self._done = _nvml()
        self._queries: list[subprocess.Popen[str]] = []
        if self._done is not None:
            return
        binary = shutil.which(nvidia_smi)
        if binary is None:
            self._done = GpuSnapshot(
                missing="nvidia-smi is not on PATH: no GPU memory snapshot in the evidence"
            )
            return
        try:
            for query in (_QUERY_GPU, _QUERY_APPS):
                self._queries.append(
                    subprocess.Popen(
                        [binary, query, _FORMAT],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                        errors="replace",  # a driver's message need not be UTF-8
                    )
                )
        except OSError as error:
            self.cancel()
            self._done = GpuSnapshot(missing=f"nvidia-smi could not run: {error.strerror}")

    def result(self, timeout: float = 20.0) -> GpuSnapshot:
        """The snapshot, waiting at most ``timeout`` seconds for each query."""
        if self._done is not None:
            return self._done
        try:
            (gpus, gpus_error), (apps, _) = (q.communicate(timeout=timeout) for q in self._queries)
        except subprocess.TimeoutExpired:
            self.cancel()
            self._done = GpuSnapshot(
                missing=f"nvidia-smi did not answer within {timeout:g}s "
                "(check `dmesg` for Xid errors)"
            )
            return self._done
        code = self._queries[0].returncode
        if code != 0:
            said = (gpus + gpus_error).strip().splitlines()
            self._done = GpuSnapshot(
                missing=f"nvidia-smi failed: {said[0] if said else f'exit {code}'}"
            )
        else:
            self._done = GpuSnapshot(parse_query_gpu(gpus), parse_query_apps(apps))
        return self._done

    def cancel(self) -> None:
        """Stop the queries still running (the snapshot is not needed after all)."""
        for query in self._queries:
            if query.poll() is None:
                query.kill()
                query.wait()


def uuids(nvidia_smi: str = "nvidia-smi", timeout: float = 20.0) -> dict[str, int]:
    """GPU UUID -> index (to place ``--query-compute-apps`` rows on a GPU); empty if unknown."""
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                found = {}
                for index in range(pynvml.nvmlDeviceGetCount()):
                    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
                    found[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = index
                return found
            finally:
                with contextlib.suppress(Exception):
                    pynvml.nvmlShutdown()
        except Exception:
            pass
    binary = shutil.which(nvidia_smi)
    if binary is None:
        return {}
    try:
        result = subprocess.run(
            [binary, "--query-gpu=index,uuid", _FORMAT],
            capture_output=True,
            text=True,
            errors="replace",  # a driver's message need not be UTF-8
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found = {}
    for line in result.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].startswith(("GPU-", "MIG-")):
            found[parts[1]] = int(parts[0])
    return found
