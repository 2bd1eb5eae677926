"""A container's facts (``kubectl get pod -o json`` with the pod's events, or ``docker
inspect``) read into one shape, and the findings they prove that no log line can: an
``OOMKilled`` exit, a probe that killed a server still starting, /dev/shm, GPUs against
``--tp``/``--pp``, the model's path against the mounts, a read-only root file system.

Pod and container text is untrusted: control characters are dropped here, secrets are
redacted with the report, environment values are never read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from diagnose.core.contextfix import SHM_SIZE, Needs, Target, contextualize
from diagnose.core.launch import LaunchCommand
from diagnose.core.models import (
    Confidence,
    Deployment,
    Diagnosis,
    Evidence,
    Finding,
    Patch,
    Role,
    Severity,
)

DOCKER_DEFAULT_SHM = 64 << 20
"""Docker's /dev/shm unless ``--shm-size`` or ``--ipc=host`` says otherwise (a pod's too)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CACHE_DIRS = ("/root/.cache", "/.cache", "/.triton", "/tmp", "/home")
_ORCHESTRATOR_LABELS = (
    ("serving.kserve.io/", "KServe"),
    ("kaito.sh/", "KAITO"),
    ("model.aibrix.ai/", "AIBrix"),
    ("llm-d.ai/", "llm-d"),
    ("gpustack", "GPUStack"),
)


def clean(text: Any) -> str:
    """Untrusted text as one line: control characters (terminal escapes included) dropped."""
    return _CONTROL.sub("", str(text)).replace("\n", " ").strip()


@dataclass(frozen=True)
class Probe:
    """A probe of the container, as its spec sets it (Kubernetes' defaults filled in)."""

    kind: str  # startup, liveness, readiness
    initial_delay_s: int
    period_s: int
    failure_threshold: int
    path: str | None = None
    port: int | str | None = None

    @property
    def budget_s(self) -> int:
        """How long a start may take before this probe has the container killed."""
        return self.initial_delay_s + self.period_s * self.failure_threshold


@dataclass(frozen=True)
class Event:
    """One event of the pod (or a Docker state line), its time and text."""

    reason: str
    message: str
    at: datetime | None
    count: int = 1
    source: str = "events.json"


@dataclass
class ContainerFacts:
    """What the container's own record says, whatever ran it."""

    deployment: Deployment
    source: str  # pod.json or inspect.json
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    args_key: str = "args"  # where the engine's flags are: args, or command
    restarts: int = 0
    exit_code: int | None = None
    exit_reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    memory_limit: str | None = None
    shm_bytes: int | None = DOCKER_DEFAULT_SHM
    ipc_host: bool = False
    gpus: int | None = None  # None: none asked for; -1: all of the host's
    mounts: list[str] = field(default_factory=list)
    read_only_root: bool = False
    probes: list[Probe] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def target(self, launch: LaunchCommand | None = None) -> Target:
        """The container a patch is for (``launch``: the command the log shows, for a record
        that holds none)."""
        probe = next((p for p in self.probes if p.port), None)
        return Target(
            container=self.deployment.container or "<container>",
            command=self.command,
            args=self.args,
            args_key=self.args_key,
            port=probe.port if probe and probe.port else 8000,
            launch=launch,
        )

    def evidence(
        self, text: str, source: str | None = None, at: datetime | None = None
    ) -> Evidence:
        return Evidence(source=source or self.source, text=clean(text), timestamp=at)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _quantity_bytes(value: str) -> int | None:
    """A Kubernetes quantity (``16Gi``, ``512M``) in bytes."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTE]i?)?", value.strip())
    if not found:
        return None
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "K": 10**3}
    units |= {"M": 10**6, "G": 10**9, "T": 10**12}
    return int(float(found.group(1)) * units.get(found.group(2) or "", 1))


def _orchestrator(labels: dict[str, Any]) -> str | None:
    keys = " ".join(str(key) for key in labels).lower()
    return next((name for prefix, name in _ORCHESTRATOR_LABELS if prefix in keys), None)


def _probe(kind: str, spec: Any) -> Probe | None:
    if not isinstance(spec, dict):
        return None
    http: dict[str, Any] = spec["httpGet"] if isinstance(spec.get("httpGet"), dict) else {}
    return Probe(
        kind=kind,
        initial_delay_s=_int(spec.get("initialDelaySeconds"), 0),
        period_s=_int(spec.get("periodSeconds"), 10),
        failure_threshold=_int(spec.get("failureThreshold"), 3),
        path=http.get("path"),
        port=http.get("port"),
    )


def _owner(metadata: dict[str, Any]) -> str | None:
    """The workload that takes a patch: a ReplicaSet's Deployment, or the controller itself."""
    for owner in metadata.get("ownerReferences") or []:
        if not isinstance(owner, dict) or not owner.get("controller", True):
            continue
        kind, name = str(owner.get("kind", "")), str(owner.get("name", ""))
        if kind == "ReplicaSet" and re.search(r"-[a-z0-9]{5,10}$", name):
            return f"deployment/{clean(name.rsplit('-', 1)[0])}"
        if kind in ("StatefulSet", "DaemonSet", "Job", "ReplicaSet", "LeaderWorkerSet"):
            return f"{kind.lower()}/{clean(name)}"
    return None


def pod_facts(
    pod: dict[str, Any], events: dict[str, Any] | None, container: str | None
) -> ContainerFacts:
    """The facts of one container of a pod (``container`` or the first) and its events."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    chosen = next((c for c in containers if c.get("name") == container), None)
    if chosen is None:
        chosen = containers[0] if containers else {}
    name = str(chosen.get("name") or container or "")
    labels = metadata.get("labels") or {}
    deployment = Deployment(
        kind="kubernetes",
        orchestrator=_orchestrator({**labels, **(metadata.get("annotations") or {})}),
        name=clean(metadata.get("name", "")) or None,
        namespace=clean(metadata.get("namespace", "")) or None,
        container=clean(name) or None,
        workload=_owner(metadata),
        evidence=["the pod's record (kubectl get pod -o json)"],
    )
    args, command = chosen.get("args") or [], chosen.get("command") or []
    flags_in_args = any(str(a).startswith("-") for a in args) or not command
    facts = ContainerFacts(
        deployment=deployment,
        source="pod.json",
        command=[clean(a) for a in command],
        args=[clean(a) for a in args],
        args_key="args" if flags_in_args else "command",
        shm_bytes=DOCKER_DEFAULT_SHM,
        ipc_host=bool(spec.get("hostIPC")),
    )
    resources = chosen.get("resources") or {}
    limits = resources.get("limits") or {}
    gpus = limits.get("nvidia.com/gpu") or (resources.get("requests") or {}).get("nvidia.com/gpu")
    facts.gpus = int(str(gpus)) if str(gpus or "").isdigit() else None
    facts.memory_limit = clean(limits["memory"]) if limits.get("memory") else None
    volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
    for mount in chosen.get("volumeMounts") or []:
        path = clean(mount.get("mountPath", ""))
        facts.mounts.append(path)
        volume = volumes.get(mount.get("name")) or {}
        if path == "/dev/shm" and isinstance(volume.get("emptyDir"), dict):
            limit = volume["emptyDir"].get("sizeLimit")
            facts.shm_bytes = _quantity_bytes(str(limit)) if limit else 1 << 40
    security = chosen.get("securityContext") or {}
    facts.read_only_root = bool(security.get("readOnlyRootFilesystem"))
    facts.probes = [
        p
        for kind in ("startup", "liveness", "readiness")
        if (p := _probe(kind, chosen.get(f"{kind}Probe"))) is not None
    ]
    status = next(
        (
            s
            for s in (pod.get("status") or {}).get("containerStatuses") or []
            if isinstance(s, dict) and s.get("name") == name
        ),
        {},
    )
    facts.restarts = _int(status.get("restartCount"), 0)
    ended = (status.get("lastState") or {}).get("terminated") or (status.get("state") or {}).get(
        "terminated"
    )
    if isinstance(ended, dict):
        facts.exit_code = ended.get("exitCode") if isinstance(ended.get("exitCode"), int) else None
        facts.exit_reason = clean(ended.get("reason", "")) or None
        facts.started_at, facts.finished_at = (
            _time(ended.get("startedAt")),
            _time(ended.get("finishedAt")),
        )
    uid, pod_name = metadata.get("uid"), metadata.get("name")
    for item in (events or {}).get("items") or []:
        involved = item.get("involvedObject") or {} if isinstance(item, dict) else {}
        if involved.get("uid") != uid and involved.get("name") != pod_name:
            continue
        field_path = str(involved.get("fieldPath") or "")
        if field_path and name and f"{{{name}}}" not in field_path:
            continue  # another container's
        facts.events.append(
            Event(
                reason=clean(item.get("reason", "")),
                message=clean(item.get("message", "")),
                at=_time(item.get("lastTimestamp") or item.get("eventTime")),
                count=_int(item.get("count"), 1),
            )
        )
    return facts


def _words(value: Any) -> list[str]:
    """Docker's ``Entrypoint`` or ``Cmd``: a list, a string (API 1.1x wrote ``""``), or null."""
    if isinstance(value, str):
        return [value] if value else []
    return [str(word) for word in value] if isinstance(value, list) else []


def docker_facts(inspect: Any) -> ContainerFacts:
    """The facts of a container from ``docker inspect`` (an array of one, or the object)."""
    record = inspect[0] if isinstance(inspect, list) and inspect else inspect
    if not isinstance(record, dict):
        record = {}
    config = record.get("Config") or {}
    host = record.get("HostConfig") or {}
    state = record.get("State") or {}
    labels = config.get("Labels") or {}
    name = clean(str(record.get("Name", "")).lstrip("/")) or None
    service = labels.get("com.docker.compose.service")
    deployment = Deployment(
        kind="docker",
        orchestrator=_orchestrator(labels) or ("Compose" if service else None),
        name=name,
        container=clean(service) if service else name,
        evidence=["the container's record (docker inspect)"],
    )
    facts = ContainerFacts(
        deployment=deployment,
        source="inspect.json",
        command=[clean(a) for a in _words(config.get("Entrypoint"))],
        args=[clean(a) for a in _words(config.get("Cmd"))],
        restarts=_int(record.get("RestartCount"), 0),
        shm_bytes=_int(host.get("ShmSize"), DOCKER_DEFAULT_SHM) or DOCKER_DEFAULT_SHM,
        ipc_host=host.get("IpcMode") == "host",
        read_only_root=bool(host.get("ReadonlyRootfs")),
    )
    if facts.command and not any(a.startswith("-") for a in facts.args):
        facts.args_key = "command"  # the flags are in the entrypoint
    memory = _int(host.get("Memory"), 0)
    facts.memory_limit = f"{memory >> 20}Mi" if memory else None
    for request in host.get("DeviceRequests") or []:
        if isinstance(request, dict) and ["gpu"] in (request.get("Capabilities") or []):
            count = _int(request.get("Count"), 0)
            facts.gpus = -1 if count == -1 else count or len(request.get("DeviceIDs") or [])
    facts.mounts = [
        clean(m.get("Destination", "")) for m in record.get("Mounts") or [] if isinstance(m, dict)
    ]
    if not state.get("Running", False) and _time(state.get("FinishedAt")):
        facts.exit_code = state.get("ExitCode") if isinstance(state.get("ExitCode"), int) else None
        facts.exit_reason = (
            "OOMKilled" if state.get("OOMKilled") else clean(state.get("Error", "")) or None
        )
        facts.started_at, facts.finished_at = (
            _time(state.get("StartedAt")),
            _time(state.get("FinishedAt")),
        )
    elif state.get("OOMKilled"):
        facts.exit_reason = "OOMKilled"
    return facts


# -- the launch command ---------------------------------------------------------------------

_TP = ("--tensor-parallel-size", "--tp-size", "--tp", "-tp")
_PP = ("--pipeline-parallel-size", "--pp-size", "--pp", "-pp")
_MODEL = ("--model", "--model-path")


def flag_value(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of ``names`` on a command line (``--x V`` or ``--x=V``)."""
    value = None
    words = [w for word in argv for w in (word.split() if " " in word else [word])]
    for i, word in enumerate(words):
        key, eq, inline = word.partition("=")
        if key in names:
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else None)
    return value


def parallel_size(argv: list[str]) -> int:
    """GPUs the command line needs: tensor- times pipeline-parallel size."""
    sizes = [flag_value(argv, names) for names in (_TP, _PP)]
    return math.prod(int(s) for s in sizes if s and s.isdigit()) or 1


def model_path(argv: list[str]) -> str | None:
    """The model the command serves when it is a local absolute path."""
    value = flag_value(argv, _MODEL)
    if value is None:
        words = [w for word in argv for w in word.split()]
        value = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "serve"), None)
    return value if value and value.startswith("/") else None


def model_dir(path: str) -> str:
    """The directory to mount for a model path (its parent)."""
    return path.rstrip("/").rsplit("/", 1)[0] or "/"


# -- findings --------------------------------------------------------------------------------


def _finding(
    signature: str,
    category: str,
    title: str,
    explanation: str,
    evidence: list[Evidence],
    patch: Patch | None,
    severity: Severity = Severity.CRITICAL,
    **extra: Any,
) -> Finding:
    return Finding(
        id="c",
        signature=signature,
        category=category,
        severity=severity,
        role=Role.ROOT_CAUSE if severity.rank >= Severity.ERROR.rank else Role.ADVISORY,
        title=title,
        explanation=explanation,
        confidence=Confidence.HIGH,
        evidence=evidence,
        patch=patch,
        **extra,
    )


def _double(limit: str | None) -> str:
    size = _quantity_bytes(limit) if limit else None
    if not size:
        return "<more than the peak the server needs, e.g. 64Gi>"
    return f"{max(2 * size >> 30, 1)}Gi"


def oom_killed(facts: ContainerFacts) -> Finding | None:
    """The container's memory limit (host RAM, not GPU memory) ended the server."""
    if facts.exit_reason != "OOMKilled":
        return None
    limit = facts.memory_limit
    said = f" (its limit is {limit})" if limit else ""
    return _finding(
        "container-oom-killed",
        "host_oom",
        "The container was killed for its memory limit (host RAM, not GPU memory)",
        f"The container's record says it ended OOMKilled with exit code {facts.exit_code or 137}"
        f"{said}: the kernel killed it when the processes in it used more host memory than the "
        "container may. Loading weights reads every shard through host memory on each rank at "
        "once; GPU memory is not what ran out.",
        [facts.evidence(f"lastState.terminated: reason OOMKilled, exitCode {facts.exit_code}")],
        Patch(unit_set={"Service.MemoryMax": _double(limit)}),
        next_checks=["`kubectl top pod` or `docker stats` while it loads, against the limit."],
    )


def probe_kill(
    facts: ContainerFacts, phase_reached: str | None, start_s: float | None
) -> Finding | None:
    """A startup or liveness probe had the container killed while the server was starting."""
    failed = [e for e in facts.events if re.match(r"(?:Startup|Liveness) probe failed", e.message)]
    killed = [e for e in facts.events if re.search(r"failed (?:startup|liveness) probe", e.message)]
    if not failed or phase_reached in ("ready", "serving"):
        return None
    kinds = {e.message.split()[0].lower() for e in failed}
    probe = next((p for p in facts.probes if p.kind in kinds), None)
    allowance = (
        f"The {probe.kind} probe gives the start {probe.budget_s} s"
        if probe
        else "The probe's allowance ran out first"
    )
    needed = max(600, int(2 * start_s)) if start_s else 1200
    port = probe.port if probe and probe.port else 8000
    period = 10
    evidence = [facts.evidence(e.message, "events.json", e.at) for e in (*failed, *killed)[:3]]
    how_far = f" (the log got as far as {phase_reached})" if phase_reached else ""
    took = f" The start took at least {int(start_s)} s before it was killed." if start_s else ""
    return _finding(
        "container-probe-killed-start",
        "start_timeout",
        "A probe had the container killed while the server was still starting",
        f"The pod's events show the {' and '.join(sorted(kinds))} probe failing and the kubelet "
        f"restarting the container, while the server had not said it was ready{how_far}. "
        f"{allowance}; loading weights, torch.compile and CUDA graph capture take longer."
        f"{took} A startupProbe with room for the whole start holds the liveness "
        "probe back until the server answers.",
        evidence,
        Patch(unit_set={"Service.TimeoutStartSec": str(needed)}),
        patch_note=f"startupProbe on /health port {port}: every {period} s, "
        f"{math.ceil(needed / period)} failures allowed ({needed} s).",
    )


def shm_too_small(facts: ContainerFacts, argv: list[str]) -> Finding | None:
    """Several GPUs in one container with Docker's 64 MB /dev/shm."""
    if facts.ipc_host or (facts.shm_bytes or 0) > DOCKER_DEFAULT_SHM or parallel_size(argv) < 2:
        return None
    what = "ShmSize" if facts.source == "inspect.json" else "no memory-backed volume at /dev/shm"
    return _finding(
        "container-shm-default",
        "nccl_runtime",
        "/dev/shm is Docker's 64 MB while several GPUs share it",
        f"The container's record shows {what} (64 MB of /dev/shm) and no host IPC, while the "
        f"command runs {parallel_size(argv)} GPUs in one container; NCCL keeps its intra-node "
        "buffers there and fails with `unhandled system error`, or the engine dies later.",
        [facts.evidence(f"/dev/shm: {(facts.shm_bytes or 0) >> 20} MB, IpcMode not host")],
        Patch(),
        severity=Severity.WARNING,
        system_actions=[f"give the container {SHM_SIZE} of /dev/shm"],
    )


def fewer_gpus(facts: ContainerFacts, argv: list[str]) -> Finding | None:
    """The container is given fewer GPUs than ``--tp`` times ``--pp``."""
    need = parallel_size(argv)
    if facts.gpus is None or facts.gpus == -1 or facts.gpus >= need:
        return None
    return _finding(
        "container-gpus-fewer-than-parallel",
        "launch_args",
        f"The container gets {facts.gpus} GPU(s) but the server needs {need}",
        f"The container asks for {facts.gpus} GPU(s) while tensor- times pipeline-parallel size "
        f"on its command line is {need}: the server cannot place its ranks.",
        [facts.evidence(f"GPUs given: {facts.gpus}; command: {' '.join(argv)[:300]}")],
        None,
        patch_note=f"Give the container {need} GPUs (or lower --tp/--pp to {facts.gpus}).",
    )


def model_not_mounted(facts: ContainerFacts, argv: list[str]) -> Finding | None:
    """The model's absolute path lies under no mount of the container."""
    path = model_path(argv)
    if path is None or not facts.mounts:
        return None
    if any(path == m or path.startswith(m.rstrip("/") + "/") for m in facts.mounts):
        return None
    directory = model_dir(path)
    return _finding(
        "container-model-path-not-mounted",
        "model_access",
        f"The model path {path} is not under any of the container's mounts",
        f"The command serves {path}, but the container mounts only "
        f"{', '.join(sorted(facts.mounts))}: unless the image itself holds the model, the "
        "engine finds no files there.",
        [facts.evidence(f"model {path}; mounts: {', '.join(facts.mounts)}")],
        None,
        severity=Severity.WARNING,
        patch_note=f"Mount the volume that holds the model at {directory}.",
    )


def read_only_root(facts: ContainerFacts) -> Finding | None:
    """A read-only root file system with no writable mount for the caches."""
    if not facts.read_only_root or any(m.startswith(_CACHE_DIRS) for m in facts.mounts):
        return None
    return _finding(
        "container-read-only-root-cache",
        "unit_config",
        "The root file system is read-only and no cache directory is writable",
        "The container runs with a read-only root file system and mounts nothing writable for "
        "the caches: Hugging Face, Triton and torch.compile write under $HOME/.cache and fail "
        "(`Permission denied`, `Read-only file system`).",
        [facts.evidence("readOnlyRootFilesystem: true; no writable mount for caches")],
        Patch(
            env_set={
                "HF_HOME": "/cache/huggingface",
                "TRITON_CACHE_DIR": "/cache/triton",
                "XDG_CACHE_HOME": "/cache",
            }
        ),
        severity=Severity.WARNING,
    )


def findings(
    facts: ContainerFacts, phase: str | None, start_s: float | None
) -> list[tuple[Finding, Needs]]:
    """Every finding the container's record proves, the decisive first, each with what it
    needs of the container beyond its patch."""
    argv = facts.argv
    path = model_path(argv)
    checks = (
        (oom_killed(facts), Needs()),
        (probe_kill(facts, phase, start_s), Needs()),
        (fewer_gpus(facts, argv), Needs(gpus=parallel_size(argv))),
        (shm_too_small(facts, argv), Needs(shm=True)),
        (model_not_mounted(facts, argv), Needs(mount=model_dir(path) if path else None)),
        (read_only_root(facts), Needs(cache="/cache")),
    )
    return [(f, needs) for f, needs in checks if f is not None]


_GIVES_WAY = frozenset({"unknown", "restart_loop", "start_timeout", "host_oom", "dist_init_hang"})
"""Categories of a log's primary finding that a decisive container fact explains better."""


def _start_seconds(diagnosis: Diagnosis, facts: ContainerFacts) -> float | None:
    """How long the last start ran before it ended: the log's attempt, else the record's."""
    attempts = diagnosis.timeline.attempts if diagnosis.timeline else []
    last = attempts[-1] if attempts else None
    if last and last.started_at and last.ended_at:
        return (last.ended_at - last.started_at).total_seconds()
    if facts.started_at and facts.finished_at:
        return (facts.finished_at - facts.started_at).total_seconds()
    return None


def with_container(
    diagnosis: Diagnosis,
    facts: ContainerFacts,
    from_log: Deployment,
    launch: LaunchCommand | None = None,
) -> Diagnosis:
    """The diagnosis with what the container's record proves: its findings (a decisive one
    becomes the primary when the log's own primary is only a consequence), the deployment
    named, and every fix in the deployment's form (its flags edited in the record's command,
    else in ``launch``, the one the log shows)."""
    found = findings(facts, diagnosis.phase_reached, _start_seconds(diagnosis, facts))
    primary = diagnosis.finding(diagnosis.primary)
    number = len(diagnosis.findings)
    added: list[Finding] = []
    needs: dict[str, Needs] = {}
    new_primary = diagnosis.primary
    for finding, need in found:
        number += 1
        fid = f"f{number}"
        decisive = finding.severity is Severity.CRITICAL and new_primary == diagnosis.primary
        takes_over = decisive and (
            primary is None or primary.tier != "signature" or primary.category in _GIVES_WAY
        )
        if takes_over:
            new_primary = fid
        added.append(finding.model_copy(update={"id": fid}))
        needs[fid] = need
    kept = list(diagnosis.findings)
    if new_primary != diagnosis.primary and primary is not None:
        kept = [
            f.model_copy(update={"role": Role.SYMPTOM, "caused_by": new_primary})
            if f.id == primary.id
            else f
            for f in kept
        ]
    deployment = facts.deployment.model_copy(
        update={
            "orchestrator": facts.deployment.orchestrator or from_log.orchestrator,
            "evidence": [*facts.deployment.evidence, *from_log.evidence],
        }
    )
    ordered = (
        [f for f in added if f.id == new_primary] + kept + [f for f in added if f.id != new_primary]
    )
    updated = diagnosis.model_copy(update={"findings": ordered, "primary": new_primary})
    return contextualize(updated, deployment, facts.target(launch), needs)
