"""``diagnose k8s`` and ``diagnose docker``: a pod's or a container's logs through the same
pipeline as ``diagnose file``, with what its record proves and every fix in its form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnose.core.container import docker_facts, pod_facts, with_container
from diagnose.core.deployment import recognise
from diagnose.core.errors import UserError
from diagnose.core.launch import read_launch
from diagnose.core.models import Diagnosis
from diagnose.inputs import containers
from diagnose.inputs.containers import Gathered


def gather_pod(
    pod: str | None,
    namespace: str | None,
    context: str | None,
    container: str | None,
    saved: Path | None,
) -> Gathered:
    """The pod's record, events and logs: saved files, or the real ``kubectl``."""
    if saved is not None:
        return containers.kubernetes_saved(saved)
    if not pod:
        raise UserError("name a pod, or --from DIR", help="diagnose k8s POD -n NAMESPACE")
    return containers.kubernetes(pod, namespace, context, container)


def gather_container(container: str | None, saved: Path | None) -> Gathered:
    """The container's record and log: saved files, or the real ``docker``."""
    if saved is not None:
        return containers.docker_saved(saved)
    if not container:
        raise UserError("name a container, or --from DIR", help="diagnose docker CONTAINER")
    return containers.docker(container)


def finish(
    diagnosis: Diagnosis,
    gathered: Gathered,
    kind: str,
    container: str | None,
    log_lines: list[str],
    log_facts: dict[str, Any],
) -> Diagnosis:
    """The diagnosis with the record's findings and its fixes in the deployment's form
    (``log_facts``: the launch facts of the log, for a record without the command)."""
    if kind == "kubernetes":
        facts = pod_facts(gathered.record, gathered.events, container)
    else:
        facts = docker_facts(gathered.record)
    done = with_container(diagnosis, facts, recognise(log_lines), read_launch(log_facts))
    return done.model_copy(update={"notes": [*gathered.notes, *done.notes]})
