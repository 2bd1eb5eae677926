"""Wording shared by the human-readable renderers."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import NamedTuple

from diagnose.core.changes import package_line
from diagnose.core.models import Diagnosis, Evidence, Finding, Patch
from diagnose.core.units import is_unit_name
from diagnose.engines.base import SERVING

PHASE_WORDS = {
    "launch": "argument parsing and launch",
    "dist_init": "distributed (NCCL) initialisation",
    "load_weights": "loading weights",
    "kv_cache": "sizing the KV cache",
    "cuda_graph": "capturing CUDA graphs",
    "http_server": "starting the HTTP server",
    "warmup": "the warmup request",
    "ready": "ready and serving",
    "serving": "serving, after the server was ready",
}
TIER_WORDS = {
    "known_issue": "known issue from resolved public threads",
    "engine_source": "derived from the engine's source",
    "generic": "generic analysis",
    "assistant": "second opinion of your model (--ask), checked by diagnose",
}
"""How a finding's source is named when it is not a hand-written signature."""


def tier_words(finding: Finding) -> str | None:
    """Where the finding's knowledge came from, in words; for the engine-source tier with the
    release and module (``derived from the engine's source, SGLang 0.5.23, sglang.srt...``)."""
    words = TIER_WORDS.get(finding.tier)
    if words and finding.model:
        return f"{words}: {finding.model}"
    if words and finding.raised_in:
        return f"{words}, {finding.raised_in}"
    return words


SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
"""The rich style of each severity, on the terminal report and the live display."""


def when(stamp: datetime | None) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M:%S") if stamp else "-"


def where(evidence: Evidence) -> str:
    if evidence.line is not None:
        return f"{evidence.source}:{evidence.line}"
    return evidence.source


def seen(finding: Finding) -> str:
    parts = []
    if finding.count > 1:
        parts.append(f"seen {finding.count}x")
    if finding.attempts > 1:
        parts.append(f"in {finding.attempts} start attempts")
    return " ".join(parts)


def versions(finding: Finding) -> str:
    """``applies to SGLang 0.5.10; fixed in SGLang 0.5.23``, or nothing."""
    parts = []
    if finding.applies_to:
        parts.append(f"applies to {finding.applies_to}")
    if finding.fixed_in:
        parts.append(f"fixed in {finding.fixed_in}")
    return "; ".join(parts)


def summary(diagnosis: Diagnosis) -> str:
    """One sentence on what the input was and how far the server got."""
    subject = diagnosis.unit or ", ".join(i.name for i in diagnosis.inputs) or "input"
    records = sum(i.records for i in diagnosis.inputs)
    parts = [f"{subject}: {records} lines"]
    if diagnosis.engine:
        parts.append(diagnosis.engine)
    if diagnosis.attempts > 1:
        parts.append(f"{diagnosis.attempts} start attempts")
    if diagnosis.phase_reached:
        parts.append(
            f"got as far as {PHASE_WORDS.get(diagnosis.phase_reached, diagnosis.phase_reached)}"
        )
    return ", ".join(parts)


def no_failure_sentence(diagnosis: Diagnosis) -> str:
    """What a report with no failure says: a log that ends in a start step is not called
    healthy, only free of errors."""
    phase = diagnosis.phase_reached
    if phase is None or phase in ("ready", SERVING):
        return "No failure found: nothing in the input matches a known failure."
    return (
        "No failure found, but the log ends before the server said it was ready (last step: "
        f"{PHASE_WORDS.get(phase, phase)}). If the start stopped there, `diagnose journal -u "
        "UNIT` times the silence with the journal's clock."
    )


def in_unit(diagnosis: Diagnosis) -> bool:
    """Whether the server may run as a systemd unit (not in a container)."""
    return diagnosis.deployment.kind not in ("docker", "kubernetes")


def patch_lines(patch: Patch, unit: bool = True) -> list[str]:
    """The patch as a list of changes, for reports without a unit to write a drop-in for
    (``unit=False``: in a container, whose form of the unit's settings is shown apart)."""
    lines = [f"set environment {key}={value}" for key, value in patch.env_set.items()]
    lines += [f"unset environment {key}" for key in patch.env_unset]
    if patch.args_remove:
        lines.append("remove flags: " + " ".join(patch.args_remove))
    if patch.args_add:
        lines.append("add flags: " + " ".join(patch.args_add))
    if unit:
        lines += [f"set {key}={value} in the unit" for key, value in patch.unit_set.items()]
    return lines


_IN_AN_IMAGE = (
    "in a container, that install belongs in the image: build one `FROM` the image the server "
    "runs with that `RUN pip install ...`, or take an image tag that ships the release; an "
    "install inside the running container is gone when it restarts"
)


def action_lines(finding: Finding, deployment: str | None = None) -> list[str]:
    """What to change outside the unit: a package change (in a container's ``deployment``,
    where it belongs) and host actions."""
    package = package_line(finding)
    lines = [package] if package else []
    if package and deployment in ("docker", "kubernetes"):
        lines.append(_IN_AN_IMAGE)
    lines += [f"on the host: {action}" for action in finding.system_actions]
    return lines


def primary_dropin(diagnosis: Diagnosis) -> str | None:
    """The unit's one drop-in (every finding's change merged: what ``--patch-only`` prints),
    or None when there is none or installing it would change nothing."""
    fix = diagnosis.fix
    if fix is None or not fix.dropin or not fix.changes_behaviour:
        return None
    if fix.passes_preflight is False:
        return None  # not offered as a fix: the report says what else it needs
    return fix.dropin.rstrip("\n") + "\n"


def no_dropin_reason(diagnosis: Diagnosis) -> str:
    """Why ``--patch-only`` has nothing to print, in words that say what to do instead."""
    primary = diagnosis.finding(diagnosis.primary)
    fix = diagnosis.fix
    if primary is None and (fix is None or not fix.changes):
        if fix is not None and fix.left_out:
            return "no failure found; " + "; ".join(f"not in a drop-in: {i}" for i in fix.left_out)
        return "no failure found"
    host = (
        f"; on the host: {'; '.join(fix.host_actions)}"
        if fix is not None and fix.host_actions
        else ""
    )
    if fix is not None and fix.passes_preflight is False and fix.checked:
        return fix.checked
    if fix is not None and fix.reason and fix.dropin:
        return f"installing the drop-in would change nothing in the unit: {fix.reason}{host}"
    if fix is not None and fix.reason and fix.changes:
        return (
            f"{fix.reason}; run without --patch-only to see the changes, or use diagnose "
            f"journal -u UNIT{host}"
        )
    if fix is not None and fix.reason:
        return f"{fix.reason}{host}"
    if primary is not None and primary.patch is None:
        return primary.patch_note or "no configuration change fixes this failure"
    return (
        "the unit is not known, so the changes cannot be a drop-in; "
        "run without --patch-only to see them, or use diagnose journal -u UNIT"
    )


def container_patch(diagnosis: Diagnosis, as_json: bool = False) -> str | None:
    """The root cause's fix in its container's form, as ``--patch-only`` prints it: the
    Kubernetes strategic-merge patch, the compose.override.yaml, or for a container a record
    shows was started by ``docker run`` (no Compose labels) the ``docker run`` options; YAML,
    or JSON when asked; None when the fix has no such form."""
    finding = diagnosis.finding(diagnosis.primary)
    patch = finding.patch if finding is not None else None
    if patch is None:
        return None
    deployment = diagnosis.deployment
    if deployment.kind == "docker" and deployment.name and deployment.orchestrator != "Compose":
        return " ".join(patch.docker_run) + "\n" if patch.docker_run else None
    form = patch.kubernetes if deployment.kind == "kubernetes" else patch.compose
    if form is None:
        return None
    if as_json:
        return json.dumps(form, indent=2) + "\n"
    import yaml  # only here: a report without a container fix never loads it

    text: str = yaml.safe_dump(form, sort_keys=False)
    return text


def patch_only_text(diagnosis: Diagnosis, as_json: bool = False) -> str | None:
    """What ``--patch-only`` prints: the unit's one drop-in, or in a container the root
    cause's fix in the container's form; None when there is none."""
    if in_unit(diagnosis):
        return primary_dropin(diagnosis)
    return container_patch(diagnosis, as_json)


def no_container_patch_reason(diagnosis: Diagnosis) -> str:
    """Why ``--patch-only`` has no container form to print."""
    finding = diagnosis.finding(diagnosis.primary)
    if finding is None:
        return "no failure found"
    if finding.patch is not None and finding.patch.context_note:
        return finding.patch.context_note
    return finding.patch_note or "no configuration change fixes this failure"


def render_patch_only(diagnosis: Diagnosis, **_: object) -> str:
    """``--patch-only``: the unit's one drop-in (or the container's form of the root cause's
    fix) and nothing else, ready for ``systemctl edit --stdin UNIT``, ``tee`` or a file;
    empty when there is none."""
    return patch_only_text(diagnosis) or ""


def render_patch_only_json(diagnosis: Diagnosis, **_: object) -> str:
    """``--patch-only -f json`` in a container: the form as JSON (``kubectl patch -p``)."""
    return patch_only_text(diagnosis, as_json=True) or ""


def unit_fix_lines(diagnosis: Diagnosis) -> tuple[str | None, list[str], list[str]]:
    """The one drop-in as reports show it: its text (or None), what to say beside it
    (conflicts, what is left out, what to do on the host, or why it changes nothing), and
    the commands that install it (none when it changes nothing: no restart helps then)."""
    fix = diagnosis.fix
    if fix is None or (not fix.dropin and not fix.conflicts and not fix.left_out):
        return None, [], []
    if diagnosis.deployment.kind in ("docker", "kubernetes"):
        return None, [], []  # no unit: each fix is shown in the container's form
    said = [f"conflict: {c}" for c in fix.conflicts]
    said += [f"not in the drop-in: {item}" for item in fix.left_out]
    said += [f"on the host first: {action}" for action in fix.host_actions]
    if fix.checked:
        said.append(fix.checked)
    if fix.dropin and not fix.changes_behaviour:
        said.append(
            f"Installing it changes nothing: {fix.reason}. A restart would fail the same way."
        )
        return fix.dropin, said, []
    return fix.dropin, said, apply_commands(diagnosis.unit) if fix.dropin and fix.complete else []


def apply_commands(unit: str | None) -> list[str]:
    """The commands that make systemd use a drop-in once it is written."""
    if not unit or not is_unit_name(unit):
        return []  # (a name from the log that is not a unit name is never part of a command)
    return ["systemctl daemon-reload", f"systemctl restart {shlex.quote(unit)}"]


def evidence_groups(evidence: list[Evidence]) -> list[list[Evidence]]:
    """The evidence with the same line (other ranks, other attempts) grouped, in order."""
    groups: dict[str, list[Evidence]] = {}
    for item in evidence:
        groups.setdefault(item.message or item.text, []).append(item)
    return list(groups.values())


def places(evidence: list[Evidence]) -> str:
    """Where repeats of a line are: line numbers in a file, times in the journal."""

    def place(e: Evidence) -> str:
        at = str(e.line) if e.line is not None else when(e.timestamp)
        return f"{at} [{e.rank}]" if e.rank else at

    lines = all(e.line is not None for e in evidence)
    return ("lines " if lines else "") + ", ".join(place(e) for e in evidence)


def host_rows(diagnosis: Diagnosis) -> list[tuple[str, str, str, str]]:
    """One row per host of a fleet report: host, state, root cause, fix."""
    fleet = diagnosis.fleet
    by_id = {f.id: f for f in fleet.findings} if fleet else {}
    rows = []
    for host in diagnosis.hosts or []:
        finding = next((f for f in host.findings if f.id == host.primary), None)
        if finding is None:
            rows.append((host.host, "healthy", "", ""))
            continue
        shared = next((f for f in by_id.values() if host.host in f.hosts), None)
        cause = finding.title
        state = "failed"
        if shared is not None and shared.caused_by in by_id:
            upstream = by_id[shared.caused_by]
            cause = f"{finding.title}: waited for {', '.join(upstream.hosts)} ({upstream.title})"
            state = "symptom"
            rows.append((host.host, state, cause, f"fix {', '.join(upstream.hosts)} first"))
            continue
        fix = "; ".join(
            [*action_lines(finding), *(patch_lines(finding.patch) if finding.patch else [])]
        )
        rows.append((host.host, state, cause, fix or finding.patch_note or ""))
    return rows


KIND_WORDS = {
    "systemd": "a systemd unit",
    "docker": "a Docker container",
    "kubernetes": "a Kubernetes pod",
}
ORCHESTRATOR_OWNS = {
    "KServe": "KServe owns this pod: make the change in the InferenceService's predictor (or its "
    "ServingRuntime), or KServe undoes it",
    "KAITO": "KAITO owns this pod: make the change in the Workspace, or KAITO undoes it",
    "llm-d": "llm-d deploys this pod from its Helm values: make the change there too",
    "GPUStack": "GPUStack starts this container: make the change in the model's backend "
    "parameters and environment",
}
"""Where a fix must go when an orchestrator writes the pod or container."""


def deployment_sentence(diagnosis: Diagnosis) -> str:
    """What ran the server, as every report says it."""
    deployment = diagnosis.deployment
    if deployment.kind == "unknown":
        return (
            "Deployment: unknown (the input does not say what ran the server; "
            "--deployment names it)"
        )
    what = KIND_WORDS[deployment.kind]
    if deployment.name:
        place = f"{deployment.namespace}/" if deployment.namespace else ""
        what += f" {place}{deployment.name}"
    if deployment.orchestrator:
        what += f", under {deployment.orchestrator}"
    said = f" ({'; '.join(deployment.evidence)})" if deployment.evidence else ""
    return f"Deployment: {what}{said}"


DOCKER_RUN_WORDS = "With `docker run`, these options:"
"""What stands before a container fix's ``docker run`` options."""


class ContextFix(NamedTuple):
    """A finding's fix in its deployment's form, as reports show it."""

    heading: str
    saved: str | None  # the text to save (YAML)
    commands: list[str]  # the commands that apply it
    said: list[str]  # what to say beside it
    docker_run: str | None  # the docker run options, printed whole like a command
    forms: str  # what the fix is written as, in words


def context_fix(finding: Finding, diagnosis: Diagnosis) -> ContextFix | None:
    """A finding's fix in its deployment's form; None for systemd and unknown."""
    patch = finding.patch
    deployment = diagnosis.deployment
    if patch is None or deployment.kind not in ("docker", "kubernetes"):
        return None
    import yaml  # only here: a report without a container fix never loads it

    said = [patch.context_note] if patch.context_note else []
    if deployment.orchestrator in ORCHESTRATOR_OWNS:
        said.append(ORCHESTRATOR_OWNS[deployment.orchestrator])
    if deployment.kind == "kubernetes":
        workload = deployment.workload or "deployment/<name>"
        where = f" -n {shlex.quote(deployment.namespace)}" if deployment.namespace else ""
        text = yaml.safe_dump(patch.kubernetes, sort_keys=False) if patch.kubernetes else None
        commands = (
            [f"kubectl patch {shlex.quote(workload)}{where} --type strategic --patch-file fix.yaml"]
            if text
            else []
        )
        if text and deployment.workload is None and deployment.name:
            said.append("a bare pod's spec cannot be changed: apply this to its manifest")
        heading = f"Kubernetes patch for {workload} (fix.yaml)"
        forms = "the Kubernetes patch" if text else ""
        return ContextFix(heading, text, commands, said, None, forms)
    text = yaml.safe_dump(patch.compose, sort_keys=False) if patch.compose else None
    docker_run = " ".join(patch.docker_run) if patch.docker_run else None
    commands = ["docker compose -f compose.yaml -f compose.override.yaml up -d"] if text else []
    written = (("the Compose override", text), ("the docker run options", docker_run))
    forms = " or ".join(form for form, present in written if present)
    heading = "Compose override (compose.override.yaml)"
    return ContextFix(heading, text, commands, said, docker_run, forms)
