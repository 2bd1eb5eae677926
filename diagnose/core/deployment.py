"""What ran the server, read from the log's own words: a Kubernetes pod, a Docker (Podman,
Compose) container or a systemd unit, and the orchestrator on top when a line names it.

Kubernetes outranks Docker (a pod runs an image, so an image's paths say nothing of who ran
it), Docker outranks systemd (a unit may run ``docker run``); nothing: ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose.core.models import Deployment

Rule = tuple[str, tuple[str, ...], "re.Pattern[str] | None"]
"""A name for what a line shows, the lower-case words one of which it holds, and the
pattern that then decides (None: a word is enough). The words come first: a pattern that
starts with ``\\b`` scans a large log slowly."""

_KUBERNETES: tuple[Rule, ...] = (
    ("KUBERNETES_SERVICE_HOST", ("kubernetes_service_", "kubernetes_port_"), None),
    ("a service-account path", ("/var/run/secrets/kubernetes.io/",), None),
    ("kubectl", ("kubectl",), re.compile(r"\bkubectl[ \t]+(?:logs|describe|get|apply|patch)\b")),
    ("a pod's events", ("crashloopbackoff", "back-off restarting failed container"), None),
    ("the kubelet's pod sandbox", ("failed to create pod sandbox", "failedcreatepodsandbox"), None),
    (
        "a probe failure",
        (" probe failed",),
        re.compile(r"(?:Startup|Liveness|Readiness) probe failed"),
    ),
    (
        "a Service link's variable",
        ("appears to be a uri", "_port=tcp://"),
        re.compile(r"[A-Z][A-Z0-9_]*_PORT(?:=| ')tcp://\d"),
    ),
    ("an OpenShift security context", ("openshift", "restricted-v2"), None),
    ("nvidia.com/gpu", ("nvidia.com/gpu",), None),
    (
        "the kubelet's container log format",
        (" stdout f ", " stderr f ", " stdout p ", " stderr p "),
        re.compile(r"(?m)^\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d) std(?:out|err) [FP] "),
    ),
)
_ORCHESTRATORS: tuple[Rule, ...] = (
    ("KServe", ("kserve", "inferenceservice", "huggingfaceserver"), None),
    ("KAITO", ("kaito",), re.compile(r"\bkaito\b", re.I)),
    ("AIBrix", ("aibrix",), None),
    ("llm-d", ("llm-d",), re.compile(r"\bllm-d\b")),
    ("GPUStack", ("gpustack",), None),
)
_DOCKER: tuple[Rule, ...] = (
    (
        "docker",
        ("docker",),
        re.compile(r"\bdocker(?:-compose)?[ \t]+(?:run|compose|exec|logs|inspect|up|start)\b"),
    ),
    (
        "the Docker daemon",
        ("error response from daemon", "oci runtime create", "oci runtime exec"),
        None,
    ),
    ("the NVIDIA container runtime", ("nvidia-container-cli",), None),
    ("docker ps", ("container id",), re.compile(r"CONTAINER ID +IMAGE +COMMAND")),
    (
        "Compose",
        ("container ",),
        re.compile(r"\bContainer [\w.-]+[ \t]+(?:Created|Started|Recreated)\b"),
    ),
    (
        "Compose's log prefix (`SERVICE-1  | `)",
        ("  | ", "-1 | ", "_1 | "),
        re.compile(r"(?m)^[\w.-]+[-_]\d+ +\| "),
    ),
    (
        "docker cp",
        ("successfully copied",),
        re.compile(r"Successfully copied [\d.]+\w?B to [\w.-]+:/"),
    ),
    ("Podman", ("podman",), re.compile(r"\bpodman[ \t]+(?:run|logs|inspect)\b")),
    ("a Docker hint", ("inside a docker container", "--shm-size"), None),
    ("the SGLang image's paths", ("/sgl-workspace/",), None),
    ("the vLLM image's paths", ("/vllm-workspace/",), None),
    (
        "the server as the container's first process (pid=1)",
        ("server pid=1)",),
        re.compile(r"\((?:APIServer|api_server) pid=1\)"),
    ),
    (
        "packages in /usr/local/lib/python3.12+/dist-packages, where the engines' images put "
        "them (a host's own Python 3.12 refuses such installs)",
        ("/usr/local/lib/python3.1",),
        re.compile(r"/usr/local/lib/python3\.1[2-9]/dist-packages/"),
    ),
)
_SYSTEMD: tuple[Rule, ...] = (
    (
        "systemd's lines",
        ("systemd[1]: ", ".service: "),
        re.compile(r"systemd\[1\]: |\.service: (?:Main process|Failed with|Scheduled restart)"),
    ),
    ("a unit name", ("_systemd_unit=",), None),
)


def _first(rules: Iterable[Rule], text: str, lower: str) -> list[str]:
    """The names of the rules the text holds, in the rules' order."""
    return [
        name
        for name, words, pattern in rules
        if any(word in lower for word in words) and (pattern is None or pattern.search(text))
    ]


def recognise(lines: Iterable[str]) -> Deployment:
    """The deployment the lines show (``unknown`` when none)."""
    text = "\n".join(lines)  # one search per rule: none spans a line
    lower = text.lower()
    orchestrator = next(iter(_first(_ORCHESTRATORS, text, lower)), None)
    for kind, patterns in (("kubernetes", _KUBERNETES), ("docker", _DOCKER)):
        found = _first(patterns, text, lower)
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
    found = _first(_SYSTEMD, text, lower)
    if found:
        return Deployment(kind="systemd", evidence=[f"the log shows {name}" for name in found])
    return Deployment(orchestrator=orchestrator)
