"""One structured fix in the form the server is deployed with: a Kubernetes strategic-merge
patch of the workload, a Compose override and ``docker run`` options, beside the systemd
drop-in. What a fix means nowhere in the context is said in ``context_note``, never written
as a drop-in."""

from __future__ import annotations

import math
import re
import shlex
from typing import Any, NamedTuple

from diagnose.core.launch import LaunchCommand
from diagnose.core.models import Deployment, Diagnosis, Finding, Patch

SHM_SIZE = "16Gi"
"""What the fixes give /dev/shm: NCCL needs a few hundred MB per GPU pair, Ray more."""
SHM_SIGNATURES = frozenset(
    {"nccl-shm-too-small", "container-shm-default", "dev-shm-too-small-for-tp"}
)
"""Signatures whose real fix, in a container, is more /dev/shm."""
SHM_WORKAROUNDS = frozenset({"NCCL_SHM_DISABLE", "RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE"})
"""Variables that only work around a small /dev/shm: not set where it is made larger."""
PROBE_PERIOD_S = 10
SERVICE_PLACEHOLDER = "SERVICE"
"""The Compose service key when the input does not name the service: a name the Compose
schema accepts (``<service>`` it does not), which the context note says to replace."""
_DIRECTORIES = {
    "Service.CacheDirectory": ("/var/cache", "cache-directory"),
    "Service.StateDirectory": ("/var/lib", "state-directory"),
    "Service.RuntimeDirectory": ("/run", "runtime-directory"),
}
"""The writable directories systemd makes for a unit: in a container, an emptyDir (tmpfs)."""


_UNIT_COMMAND = re.compile(r"(?:the unit's |its )?\bExecStart\b=?")
"""How a signature's text names the server's command line in a unit."""
_UNIT_VARIABLE = re.compile(r"in the unit as `Environment=NAME=VALUE`")


def container_words(text: str) -> str:
    """A finding's text in a container's words: the container's command, not ExecStart."""
    if "ExecStart" not in text and "Environment=" not in text:
        return text
    text = _UNIT_VARIABLE.sub("in the container's environment (`-e NAME=VALUE`, `env:`)", text)
    return _UNIT_COMMAND.sub("the container's command", text)


class Needs(NamedTuple):
    """What a finding needs of its container beyond its patch."""

    shm: bool = False
    gpus: int | None = None
    mount: str | None = None  # a directory to mount (the model's)
    cache: str | None = None  # a writable directory for the caches


class Target(NamedTuple):
    """The container a patch is for, as far as its record is known: its ``command`` and
    ``args`` (a pod's; docker's ``Entrypoint`` and ``Cmd``), ``args_key`` the one of the two
    that holds the engine's flags; ``launch``, the command the log shows, when the record
    has none."""

    container: str = "<container>"
    command: list[str] | None = None
    args: list[str] | None = None
    args_key: str = "args"
    port: int | str = 8000
    launch: LaunchCommand | None = None

    def flags_at(self) -> tuple[list[str], list[str], str, str] | None:
        """Where the flags are: (command, args, the key that holds them, where it was read);
        None when neither the record nor the log says, or when the flags sit inside one shell
        string (``sh -c "vllm serve ..."``), which a patch of words cannot edit."""
        command, args = self.command or [], self.args or []
        if not command and not args:
            if self.launch is None:
                return None
            return self.launch.program, self.launch.flags, "both", self.launch.source
        if any(" -" in word for word in [*command, *args]):
            return None
        return command, args, self.args_key, "the container's record"


class _Forms:
    def __init__(self) -> None:
        self.container: dict[str, Any] = {}
        self.volumes: list[dict[str, Any]] = []
        self.service: dict[str, Any] = {}
        self.flags: list[str] = []
        self.notes: list[str] = []

    def mount(self, name: str, path: str, volume: dict[str, Any], service: str) -> None:
        self.container.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})
        self.volumes.append({"name": name, **volume})
        self.service.setdefault("volumes" if ":" in service else "tmpfs", []).append(service)


def needs_of(finding: Finding) -> Needs:
    """What a finding of the log needs of a container: more /dev/shm for the shm failures."""
    words = " ".join(finding.system_actions).lower()
    return Needs(
        shm=finding.signature in SHM_SIGNATURES or "/dev/shm" in words or "shm-size" in words
    )


def _edited(words: list[str], patch: Patch) -> list[str]:
    """A command line with the patch's flags removed (with their values) and added."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            if not word.startswith("-"):
                continue
        key = word.split("=", 1)[0]
        if key in patch.args_remove:
            skip = "=" not in word
            continue
        out.append(word)
    adding = [w for w in patch.args_add if w.startswith("-")]
    for flag in adding:  # a flag given again replaces its old value
        if flag in out and "=" not in flag:
            at = out.index(flag)
            del out[at : at + 2 if at + 1 < len(out) and not out[at + 1].startswith("-") else 1]
    return out + patch.args_add


def _forms(patch: Patch | None, needs: Needs, target: Target) -> _Forms:
    forms = _Forms()
    patch = patch or Patch()
    env = {k: v for k, v in patch.env_set.items() if not (needs.shm and k in SHM_WORKAROUNDS)}
    if env:
        forms.container["env"] = [{"name": k, "value": v} for k, v in env.items()]
        forms.service["environment"] = env
        forms.flags += [f"-e {k}={v}" for k, v in env.items()]
    for name in patch.env_unset:
        forms.notes.append(f"remove {name} from the container's environment")
    if patch.args_add or patch.args_remove:
        _command(forms, patch, target)
    for key, value in patch.unit_set.items():
        _unit_key(forms, key, value, target)
    if needs.shm:
        forms.container.setdefault("volumeMounts", []).append(
            {"name": "dshm", "mountPath": "/dev/shm"}
        )
        forms.volumes.append(
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}
        )
        forms.service["shm_size"] = "16gb"
        forms.flags.append("--shm-size=16g")
    if needs.gpus:
        resources = forms.container.setdefault("resources", {})
        resources.setdefault("limits", {})["nvidia.com/gpu"] = str(needs.gpus)
        resources.setdefault("requests", {})["nvidia.com/gpu"] = str(needs.gpus)
        device = {"driver": "nvidia", "count": needs.gpus, "capabilities": ["gpu"]}
        forms.service["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
        forms.flags.append(f"--gpus={needs.gpus}")
    if needs.mount:
        claim = {"persistentVolumeClaim": {"claimName": "<the claim that holds the model>"}}
        forms.mount("model", needs.mount, claim, f"<host directory with the model>:{needs.mount}")
        forms.flags.append(f"-v <host directory with the model>:{needs.mount}")
    if needs.cache:
        forms.mount("cache", needs.cache, {"emptyDir": {}}, needs.cache)
        forms.flags.append(f"--tmpfs={needs.cache}")
    return forms


def _command(forms: _Forms, patch: Patch, target: Target) -> None:
    """The flags' change as the whole command in each form (Kubernetes ``command``/``args``,
    Compose ``entrypoint``/``command``, ``docker run --entrypoint IMAGE COMMAND``), or in
    words when the command is not known."""
    found = target.flags_at()
    if found is None:
        again = {w for w in patch.args_add if w.startswith("-")}
        removed = [f"remove {w}" for w in patch.args_remove if w not in again]
        added = [f"add {' '.join(patch.args_add)}"] if patch.args_add else []
        forms.notes.append(
            f"the server's flags: {', '.join(removed + added)} (a patch replaces the whole "
            "command, and neither the log nor a record shows it: diagnose k8s POD or diagnose "
            "docker CONTAINER writes it from the record)"
        )
        return
    command, args, key, source = found
    if key == "command":
        command = _edited(command, patch)
    else:
        args = _edited(args, patch)
    if key == "both":
        forms.container |= {"command": command, "args": args}
        forms.service |= {"entrypoint": command, "command": args}
        forms.notes.append(f"the command is written from {source}: check it is the whole command")
    elif key == "command":
        forms.container["command"] = command
        forms.service["entrypoint"] = command
    else:
        forms.container["args"] = args
        forms.service["command"] = args
    entry = [f"--entrypoint={command[0]}"] if command else []  # the record's may be the image's
    forms.flags += [*entry, "<image>", shlex.join([*command[1:], *args])]


def _unit_key(forms: _Forms, key: str, value: str, target: Target) -> None:
    """A unit setting in the container's terms, or a note that it has none."""
    if key == "Service.MemoryMax":
        if value == "infinity":
            forms.notes.append("remove the container's memory limit (or raise it above the peak)")
            return
        size = value
        forms.container.setdefault("resources", {}).setdefault("limits", {})["memory"] = size
        forms.service["mem_limit"] = size.replace("Gi", "g").replace("Mi", "m")
        forms.flags.append(f"--memory={forms.service['mem_limit']}")
    elif key in _DIRECTORIES:
        root, name = _DIRECTORIES[key]
        path = f"{root}/{value.split()[0]}"
        forms.mount(name, path, {"emptyDir": {}}, path)
        forms.flags.append(f"--tmpfs={path}")
    elif key == "Service.TimeoutStartSec" and value.isdigit():
        forms.container["startupProbe"] = {
            "httpGet": {"path": "/health", "port": target.port},
            "periodSeconds": PROBE_PERIOD_S,
            "failureThreshold": math.ceil(int(value) / PROBE_PERIOD_S),
        }
        forms.notes.append(
            "Docker does not stop a container that is slow to start: no start timeout to raise"
        )
    else:
        forms.notes.append(f"{key}={value} is a systemd setting with no meaning in a container")


def kubernetes_patch(forms: _Forms, target: Target) -> dict[str, Any] | None:
    """The strategic-merge patch of the workload's pod template, or None when empty."""
    if not forms.container and not forms.volumes:
        return None
    spec: dict[str, Any] = {"containers": [{"name": target.container, **forms.container}]}
    if forms.volumes:
        spec["volumes"] = forms.volumes
    return {"spec": {"template": {"spec": spec}}}


def compose_override(forms: _Forms, service: str) -> dict[str, Any] | None:
    """The compose.override.yaml object, or None when empty."""
    return {"services": {service: forms.service}} if forms.service else None


def in_context(
    finding: Finding, deployment: Deployment, target: Target, needs: Needs | None = None
) -> Finding:
    """The finding with its fix in the deployment's form (systemd, unknown: as it is)."""
    if deployment.kind not in ("kubernetes", "docker"):
        return finding
    finding = finding.model_copy(
        update={
            "explanation": container_words(finding.explanation),
            "patch_note": finding.patch_note and container_words(finding.patch_note),
            "alternatives": [container_words(a) for a in finding.alternatives],
        }
    )
    needs = needs or needs_of(finding)
    if finding.patch is None and needs == Needs():
        return finding
    forms = _forms(finding.patch, needs, target)
    base = finding.patch or Patch()
    if deployment.kind == "kubernetes":
        kubernetes = kubernetes_patch(forms, target)
        update: dict[str, Any] = {"kubernetes": kubernetes}
        notes = [n for n in forms.notes if not n.startswith("Docker does not")]
        if kubernetes is None and not notes:
            notes.append("nothing of this fix applies to a pod")
    else:
        service = deployment.container or SERVICE_PLACEHOLDER
        update = {"compose": compose_override(forms, service), "docker_run": forms.flags}
        notes = forms.notes
        if update["compose"] is not None and deployment.container is None:
            notes.append(
                f"replace {SERVICE_PLACEHOLDER} with the name of the server's service in "
                "compose.yaml"
            )
        if update["compose"] is None and not notes:
            notes.append("nothing of this fix applies to a container")
    update["context_note"] = "; ".join(dict.fromkeys(notes)) or None
    return finding.model_copy(update={"patch": base.model_copy(update=update)})


def contextualize(
    diagnosis: Diagnosis,
    deployment: Deployment,
    target: Target | None = None,
    needs: dict[str, Needs] | None = None,
) -> Diagnosis:
    """The diagnosis naming its deployment, each finding's fix in that deployment's form
    (``needs``: what a finding needs of its container, by finding id)."""
    target = target or Target()
    findings = [
        in_context(f, deployment, target, (needs or {}).get(f.id)) for f in diagnosis.findings
    ]
    return diagnosis.model_copy(update={"deployment": deployment, "findings": findings})
