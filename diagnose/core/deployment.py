"""What ran the server, read from the log's own words: a Kubernetes pod, a Docker (Podman,
Compose) container or a systemd unit, and the orchestrator on top when a line names it.

Kubernetes outranks Docker (a pod runs an image, so an image's paths say nothing of who ran
it), Docker outranks systemd (a unit may run ``docker run``); nothing: ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose.core.models import Deployment

_KUBERNETES = (
    ("KUBERNETES_SERVICE_HOST", re.compile(r"\bKUBERNETES_(?:SERVICE|PORT)_")),
    ("a service-account path", re.compile(r"/var/run/secrets/kubernetes\.io/")),
    ("kubectl", re.compile(r"\bkubectl\s+(?:logs|describe|get|apply|patch)\b")),
    ("a pod's events", re.compile(r"\b(?:CrashLoopBackOff|Back-off restarting failed container)")),
    ("a probe failure", re.compile(r"\b(?:Startup|Liveness|Readiness) probe failed\b")),
    ("an OpenShift security context", re.compile(r"\bOpenShift\b|\brestricted-v2\b")),
    ("nvidia.com/gpu", re.compile(r"\bnvidia\.com/gpu\b")),
)
_ORCHESTRATORS = (
    ("KServe", re.compile(r"\bkserve\b|\bInferenceService\b|\bhuggingfaceserver\b", re.I)),
    ("KAITO", re.compile(r"\bkaito\b", re.I)),
    ("AIBrix", re.compile(r"\baibrix\b", re.I)),
    ("llm-d", re.compile(r"\bllm-d\b|\bllm-d-")),
    ("GPUStack", re.compile(r"\bgpustack\b", re.I)),
)
_DOCKER = (
    ("docker", re.compile(r"\bdocker(?:-compose)?\s+(?:run|compose|exec|logs|inspect|up|start)\b")),
    ("the Docker daemon", re.compile(r"Error response from daemon|OCI runtime (?:create|exec)")),
    ("the NVIDIA container runtime", re.compile(r"\bnvidia-container-cli\b")),
    ("Compose", re.compile(r"\bContainer [\w.-]+\s+(?:Created|Started|Recreated)\b")),
    ("Podman", re.compile(r"\bpodman\s+(?:run|logs|inspect)\b")),
    ("a Docker hint", re.compile(r"inside a Docker container|--shm-size", re.I)),
    ("the SGLang image's paths", re.compile(r"/sgl-workspace/")),
    ("the vLLM image's paths", re.compile(r"/vllm-workspace/")),
)
_SYSTEMD = (
    (
        "systemd's lines",
        re.compile(r"\bsystemd\[1\]: |\.service: (?:Main process|Failed with|Scheduled restart)"),
    ),
    ("a unit name", re.compile(r"\b_SYSTEMD_UNIT=")),
)


def _first(patterns: Iterable[tuple[str, re.Pattern[str]]], lines: list[str]) -> list[str]:
    """The names of the patterns some line matches, in the patterns' order."""
    return [name for name, pattern in patterns if any(pattern.search(line) for line in lines)]


def recognise(lines: Iterable[str]) -> Deployment:
    """The deployment the lines show (``unknown`` when none)."""
    kept = list(lines)
    orchestrator = next(iter(_first(_ORCHESTRATORS, kept)), None)
    for kind, patterns in (("kubernetes", _KUBERNETES), ("docker", _DOCKER)):
        found = _first(patterns, kept)
        if found:
            said = [f"the log shows {name}" for name in found]
            if orchestrator:
                said.append(f"the log names {orchestrator}")
            return Deployment(kind=kind, orchestrator=orchestrator, evidence=said)  # type: ignore[arg-type]
    if orchestrator in ("KServe", "KAITO", "AIBrix", "llm-d"):  # these run only on Kubernetes
        return Deployment(
            kind="kubernetes",
            orchestrator=orchestrator,
            evidence=[f"the log names {orchestrator}, which runs on Kubernetes"],
        )
    found = _first(_SYSTEMD, kept)
    if found:
        return Deployment(kind="systemd", evidence=[f"the log shows {name}" for name in found])
    return Deployment(orchestrator=orchestrator)
