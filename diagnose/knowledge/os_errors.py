"""An error no tier explains that carries an operating-system error number: Python's
``[Errno 13] Permission denied: '/models/x/config.json'``, Rust's ``(os error 28)``, c10d's
``errno: 113 - No route to host``. The number says what the system refused and the path or the
address says where, which is most of a cause: the finding names both, what usually leads there
(a volume not mounted, a service user without access, a full disk, a peer not listening) and
the check that tells which.

Asked after the engine's code faults and before the message-words tier; a lead at low
confidence, like them.
"""

from __future__ import annotations

from typing import NamedTuple

import regex

from diagnose.core.explain import Candidate, IncidentView, lead
from diagnose.core.models import Finding, Patch

SIGNATURE = "os-error"
_OWNED_DIRECTORY = "<a directory the server's user owns>"
_OS_ERROR = regex.compile(
    r"\[Errno (?P<number>-?\d+)\] (?P<words>[^:'\n\]]+?)(?=$|[:'\")\],]| \()"
    r"(?:: '(?P<path>[^'\n]+)'(?: -> '[^'\n]+')?)?"
    r"|(?P<words>[A-Z][\w ,'-]{2,60}?) \(os error (?P<number>\d+)\)"
    r"|errno: (?P<number>\d+) - (?P<words>[^\n()]+?)(?=$|[)\n])"
)
"""The three spellings of a system error: Python's (with the path it names), Rust's (the
safetensors, tokenizers and hf_transfer libraries) and c10d's."""
_ADDRESS = regex.compile(
    r"host='(?P<host>[^'\s]+)', port=(?P<port>\d+)"
    r"|(?<![\w.])(?P<host>(?:\d{1,3}\.){3}\d{1,3}|\[[0-9a-fA-F:]+\]|[a-z][\w-]*(?:\.[\w-]+)+)"
    r":(?P<port>\d{2,5})\b"
    r"|\('(?P<host>[^']+)', (?P<port>\d{2,5})\)"
)
"""An address a network error names: urllib3's ``host='huggingface.co', port=443``,
``10.0.0.2:29500``, a socket's ``('10.0.0.2', 29500)``."""
_DEVICE = regex.compile(r"^/dev/(?:nvidia|dri|kfd|infiniband|accel|davinci|neuron)")
_SHARED_MEMORY = regex.compile(r"^/dev/shm\b|^/psm_|^/torch_")
_MODEL = regex.compile(
    r"\.(?:safetensors|bin|pt|pth|gguf|model|tiktoken)$|/(?:config|generation_config|"
    r"tokenizer(?:_config)?|preprocessor_config|model\.safetensors\.index)\.json$"
    r"|/models?(?:/|$)|/models--|/checkpoints?/|/snapshots/|/weights?/",
    regex.IGNORECASE,
)
_LIBRARY = regex.compile(r"\.so(?:\.[\d.]+)?$")
_QUOTED_PATH = regex.compile(r"[\"'](?P<path>/[^\"'\n]{2,300})[\"']")
"""A path a message quotes in its own words (Rust's ``while creating file "/tmp/x": ...``)."""
_CACHES = (
    (regex.compile(r"/tiktoken-rs-cache(?:/|$)"), "TIKTOKEN_RS_CACHE_DIR"),
    (regex.compile(r"/data-gym-cache(?:/|$)|/tiktoken(?:_cache)?(?:/|$)"), "TIKTOKEN_CACHE_DIR"),
    (regex.compile(r"/huggingface(?:/|$)"), "HF_HOME"),
    (regex.compile(r"/\.triton(?:/|$)|/triton_cache(?:/|$)"), "TRITON_CACHE_DIR"),
    (regex.compile(r"/torchinductor"), "TORCHINDUCTOR_CACHE_DIR"),
    (regex.compile(r"/torch_extensions(?:/|$)"), "TORCH_EXTENSIONS_DIR"),
    (regex.compile(r"/\.cache/vllm(?:/|$)"), "VLLM_CACHE_ROOT"),
    (regex.compile(r"/\.cache/flashinfer(?:/|$)"), "FLASHINFER_WORKSPACE_BASE"),
    (regex.compile(r"/\.cache/outlines(?:/|$)"), "OUTLINES_CACHE_DIR"),
    (regex.compile(r"/\.nv/ComputeCache(?:/|$)"), "CUDA_CACHE_PATH"),
    (regex.compile(r"/\.cache(?:/|$)"), "XDG_CACHE_HOME"),
)
"""Cache directories the engines' libraries write at start-up, with the variable that moves each
(the first that fits): a cache another user created first, or one under a read-only home."""


def _cache_variable(path: str) -> str | None:
    """The variable that moves the cache ``path`` lies in; None for a path in no known cache."""
    return next((variable for pattern, variable in _CACHES if pattern.search(path)), None)


_COMPILERS = frozenset(("gcc", "cc", "c++", "g++", "clang", "nvcc", "ninja", "hipcc", "make"))


class _Reading(NamedTuple):
    category: str
    title: str
    meaning: str
    check: str
    variable: str | None = None
    """An environment variable that moves the directory the error names elsewhere."""


def _what(path: str) -> str:
    """What a path is, for the words of a reading."""
    if _DEVICE.search(path):
        return "device"
    if _SHARED_MEMORY.search(path):
        return "shared_memory"
    if "/" not in path:
        return "program"
    if _LIBRARY.search(path):
        return "library"
    if _MODEL.search(path):
        return "model"
    return "file"


def _access(path: str | None, number: int) -> _Reading:
    denied = "Permission denied" if number == 13 else "Operation not permitted"
    if path is None:
        return _Reading(
            "unit_config",
            f"The system refused the server an operation ({denied})",
            "The process lacks a right the operation needs: a capability or device a container "
            "was started without (`--cap-add`, `--device`, `--ipc=host`, `privileged`), a "
            "systemd sandbox option (`NoNewPrivileges=`, `CapabilityBoundingSet=`, "
            "`SystemCallFilter=`, `PrivateDevices=`), or a security module (SELinux, AppArmor). "
            "Grant the one the failing call needs, or turn off the feature that makes the call.",
            "`journalctl -k` and `ausearch -m avc` around the failure for a denial; the frames "
            "above the error for the call that was refused.",
        )
    what = _what(path)
    if what == "device":
        return _Reading(
            "unit_config",
            f"The server may not open the device `{path}`",
            f"The server's process is denied the device file `{path}`: in a container the "
            "device was not passed in (`--gpus`/`--device`, the GPU resource of the pod), under "
            "systemd `PrivateDevices=` or `DevicePolicy=` hides it, or the service user is not "
            "in the group that owns it. Pass the device in, or drop the sandbox option that "
            "hides it.",
            f"`ls -l {path}` and `id` as the server's user; `systemctl show UNIT -p "
            "PrivateDevices -p DevicePolicy`.",
        )
    if what == "model":
        return _Reading(
            "model_access",
            f"The server's user may not read the model files at `{path}`",
            f"The model file or directory `{path}` exists but the user the server runs as may "
            "not read it: the files belong to another user (downloaded with `sudo`, or a "
            "volume whose owner differs from the container's user), or a directory on the way "
            "lacks the execute bit. Give that user read access (`chmod -R a+rX` on the model "
            "directory, or `chown` it to the service user; `fsGroup`/`--user` in a container), "
            "or run the server as the files' owner.",
            f"`namei -l {path}` as the server's user (`sudo -u USER namei -l ...`): the first "
            "component it may not enter or read.",
        )
    if what == "program":
        return _Reading(
            "unit_config",
            f"The server may not run the program `{path}`",
            f"Starting `{path}` was refused: the file is not executable for the server's user, "
            "or it lies on a file system mounted `noexec`. Make it executable, or install it "
            "where the server may run it.",
            f"`command -v {path}` and `ls -l $(command -v {path})` as the server's user.",
        )
    variable = _cache_variable(path)
    if variable is not None:
        return _Reading(
            "unit_config",
            f"The server's user may not write its cache at `{path}`",
            f"The user the server runs as may not create or write `{path}`, a cache a library "
            f"writes at start-up: the directory belongs to another user (on a shared host, "
            f"whoever ran first created it, often under `/tmp`; or an earlier run as root), or "
            f"the home it lies in is read-only (a container's arbitrary user ID, systemd "
            f"`ProtectHome=`). Point `{variable}` at a directory this user owns (or give the "
            "user that directory).",
            f"`namei -l {path}` as the server's user: the directory's owner and mode.",
            variable,
        )
    return _Reading(
        "unit_config",
        f"The server's user may not write or read `{path}`",
        f"The user the server runs as is denied `{path}`: the directory belongs to another "
        "user (a cache made by an earlier run as root, a volume whose owner differs from the "
        "container's user), or a sandbox makes it read-only (systemd `ProtectHome=`, "
        "`ProtectSystem=`; OpenShift's arbitrary user ID). Give the user that directory, or "
        "point the setting that names it (a cache variable such as `HF_HOME`, "
        "`TRITON_CACHE_DIR`, `XDG_CACHE_HOME`; a flag's path) at one it owns.",
        f"`namei -l {path}` as the server's user; `systemctl show UNIT -p User -p "
        "ProtectHome -p ProtectSystem`.",
    )


def _missing(path: str | None) -> _Reading:
    if path is None:
        return _Reading(
            "launch_args",
            "A file the server opens does not exist",
            "A path the server was given, or one it derives, does not exist where it runs: a "
            "wrong path in a flag or variable, a relative path read from another working "
            "directory, or a volume not mounted into the container.",
            "The frames above the error for the file it opened.",
        )
    what = _what(path)
    if what == "program":
        tool = path in _COMPILERS
        return _Reading(
            "kernel_build" if tool else "unit_config",
            f"The program `{path}` is not on the server's PATH",
            f"The server (or a library it loads) runs `{path}`, and no such program is on the "
            "PATH of its environment"
            + (
                ": kernels are compiled at start, and the machine or image has no compiler "
                "toolkit there. Install it (the CUDA toolkit for `nvcc`, `build-essential` for "
                "`gcc`, `ninja` from pip) or put its directory on the unit's `PATH`/`CUDA_HOME`,"
                " or turn off the feature that compiles at start."
                if tool
                else ": a service's PATH is shorter than a login shell's. Install it, or "
                "give the unit a PATH that holds it."
            ),
            f"`systemctl show UNIT -p Environment` and `command -v {path}` in the server's "
            "environment.",
        )
    if what == "device":
        return _Reading(
            "cuda_driver",
            f"The device file `{path}` does not exist",
            f"`{path}` is missing: the driver's kernel module is not loaded (after a driver "
            "update without a reboot, or none installed), or the container was started "
            "without the device.",
            "`ls /dev/nvidia*` and `nvidia-smi` on the host and in the container; `lsmod | grep "
            "nvidia`.",
        )
    if what == "library":
        return _Reading(
            "kernel_build",
            f"The shared library `{path}` does not exist",
            f"A package loads `{path}`, which is not there: the package was built for another "
            "CUDA or Python, or installed incompletely. Reinstall the package that ships it, "
            "built for this environment.",
            f"`ls -l {path}`; `pip show` of the package whose directory holds it.",
        )
    if what == "model":
        return _Reading(
            "model_access",
            f"The model path `{path}` does not exist where the server runs",
            f"`{path}` is not there: the model path is misspelt, relative to another working "
            "directory, on a volume that was not mounted into the container, or a download "
            "that did not finish. Give the server the path where the files are (in a container, "
            "the path inside it).",
            f"`ls -l {path}` where the server runs (inside the container: `docker exec ... ls`).",
        )
    return _Reading(
        "launch_args",
        f"The file `{path}` does not exist where the server runs",
        f"The server opens `{path}` and it is not there: a path given in a flag or an "
        "environment variable is wrong, relative to another working directory (a unit's is `/` "
        "unless `WorkingDirectory=` says otherwise), or on a volume not mounted into the "
        "container. Give the path where the file is on the machine or in the container that "
        "runs the server.",
        f"`ls -l {path}` where the server runs; the flag or variable that names it.",
    )


def _full(path: str | None, words: str) -> _Reading:
    if path is not None and _what(path) == "shared_memory":
        return _Reading(
            "host_oom",
            "Shared memory (/dev/shm) is full",
            "The server's processes exchange tensors through `/dev/shm`, and it is full: a "
            "container's default is 64 MB. Give it more (`docker run --shm-size 16g` or "
            "`--ipc=host`; in Kubernetes an `emptyDir` of `medium: Memory` at `/dev/shm`).",
            "`df -h /dev/shm` where the server runs.",
        )
    where = f"the file system that holds `{path}`" if path else "a file system the server writes"
    return _Reading(
        "model_access" if path and _what(path) == "model" else "unit_config",
        f"No space left on {where}",
        f"{words}: {where} is full (or its quota is). Downloads, compiled-kernel caches and "
        "temporary files fill it. Free space there, or point the cache or download directory "
        "(`HF_HOME`, `TMPDIR`, the engine's cache variable) at a larger file system.",
        f"`df -h {path or '/'}` and `du -sh ~/.cache/*` as the server's user.",
    )


def _read_only(path: str | None) -> _Reading:
    where = f"`{path}`" if path else "the path it writes"
    return _Reading(
        "unit_config",
        f"The server writes to {where}, on a read-only file system",
        f"{where[0].upper()}{where[1:]} lies on a file system mounted read-only for the server: "
        "a volume mounted `:ro` or `readOnly`, a container's read-only root, or systemd's "
        "`ProtectSystem=`/`ReadOnlyPaths=`. Point the setting that names it (a cache variable, "
        "a flag's path) at a writable directory, or mount that one writable.",
        f"`findmnt -T {path or '/'}` where the server runs: its options show `ro`.",
    )


def _network(number: int, words: str, address: str | None) -> _Reading:
    at = f"`{address}`" if address else "the address it connects to"
    if number in (-2, -3, -5):
        return _Reading(
            "network_config",
            f"A host name cannot be resolved ({words})",
            f"The server cannot resolve {at}: no DNS reachable from it (an offline machine, a "
            "container without network), or a misspelt host. For the Hugging Face Hub with "
            "the model already on disk, `HF_HUB_OFFLINE=1` skips the lookup; otherwise give the "
            "server a working resolver or the right host name.",
            "`getent hosts HOST` where the server runs.",
        )
    if number == 111:
        return _Reading(
            "network_config",
            f"Nothing listens at {at} (connection refused)",
            f"The server connects to {at} and nothing listens there: the peer (a Ray head, "
            "the distributed rendezvous, a KV-cache store, a remote endpoint) has not started "
            "yet or died, or listens on another address or port. Start the peer first, or give "
            "the address and port it really listens on.",
            "`ss -ltnp` on the peer's host; `nc -vz HOST PORT` from the server's host.",
        )
    return _Reading(
        "network_config",
        f"The network refused or dropped a connection to {at} ({words})",
        f"The server cannot reach {at}: a route or firewall between the hosts, an address "
        "that is only valid inside another container or network (`docker0`, a pod IP), or a "
        "peer that closed the connection. Open the port, or give an address the hosts can "
        "reach (the interface variables: `NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`).",
        "`ip route get PEER_IP` and `nc -vz HOST PORT` from the server's host.",
    )


_NETWORK = frozenset((-2, -3, -5, 101, 103, 104, 110, 111, 113))
"""Resolver errors, unreachable networks and hosts, resets, time-outs, refusals."""


def _reading(number: int, words: str, path: str | None, text: str) -> _Reading | None:
    if number in (1, 13):
        return _access(path, number)
    if number == 2:
        return _missing(path)
    if number in (28, 122):
        return _full(path, words)
    if number == 30:
        return _read_only(path)
    if number in _NETWORK:
        found = _ADDRESS.search(text)
        address = f"{found.group('host')}:{found.group('port')}" if found else None
        return _network(number, words, address)
    if number == 12:
        return _Reading(
            "host_oom",
            "The host refused the server memory (Cannot allocate memory)",
            "The system would not give the server more host memory: the machine's RAM, a "
            "container's memory limit, or the limit on locked (pinned) memory (`ulimit -l`, "
            "`LimitMEMLOCK=`). Lower what the server holds in host memory (swap space, CPU "
            "offload, fewer processes) or raise the limit that was reached.",
            "`free -g`, `ulimit -l` as the server's user; the container's memory limit.",
        )
    if number in (23, 24):
        return _Reading(
            "unit_config",
            "The server ran out of file descriptors",
            "The process reached its limit of open files (often 1024 for a service): weights "
            "in many shards, sockets and pipes count against it. Raise it (`LimitNOFILE=65535` "
            "in the unit, `--ulimit nofile=65535:65535` for a container).",
            "`cat /proc/$(pgrep -f vllm | head -1)/limits | grep 'open files'`.",
        )
    if number == 18:
        return _Reading(
            "unit_config",
            "A file was moved across file systems (Invalid cross-device link)",
            "A library renames a file from a temporary directory into its cache, and the two "
            "lie on different file systems. Put the temporary directory on the cache's file "
            "system (`TMPDIR` beside it) or the cache beside the temporary directory.",
            "`df` of both paths in the message.",
        )
    if number == 36:
        return _Reading(
            "unit_config",
            "A path is longer than the system allows (File name too long)",
            "A path the server builds is too long for the system (a Unix socket path may hold "
            "107 bytes): a deep `TMPDIR`, cache or working directory makes it so. Give those a "
            "short path.",
            "`echo $TMPDIR` in the server's environment; the length of the path in the message.",
        )
    return None


def _first_os_error(incident: IncidentView) -> tuple[Candidate, regex.Match[str]] | None:
    first = next(iter(incident.readable()), None)
    if first is None or first.cut_short:
        return None
    found = _OS_ERROR.search(first.text[:1000])
    return (first, found) if found is not None else None


def os_error_findings(incident: IncidentView) -> list[Finding]:
    """The first error read by the system error it carries: what was refused, where, and what
    usually leads there."""
    read = _first_os_error(incident)
    if read is None:
        return []
    first, found = read
    number, words = int(found.group("number")), found.group("words").strip()
    path = found.group("path").strip() if found.group("path") else None
    if path is None and (quoted := _QUOTED_PATH.search(first.text[: found.start()])):
        path = quoted.group("path")  # the last path the message names before the error's words
    reading = _reading(number, words, path, first.text)
    if reading is None:
        return []
    return [
        lead(
            first,
            signature=SIGNATURE,
            category=reading.category,
            title=reading.title,
            explanation=(
                f"The first error, `{first.text.strip()[:300]}`, carries the system's error "
                f"{number} ({words}). {reading.meaning} No signature or known issue knows this "
                "message, so the reading comes from the error number and what it names."
            ),
            patch=Patch(env_set={reading.variable: _OWNED_DIRECTORY}) if reading.variable else None,
            patch_note=(
                f"`{reading.variable}` moves the cache; the directory must exist and belong to "
                "the server's user."
                if reading.variable
                else "The change depends on which of the usual causes the check confirms."
            ),
            next_checks=[reading.check],
        )
    ]
