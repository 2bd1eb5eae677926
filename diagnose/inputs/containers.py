"""A pod's or a container's record and logs: from the real ``kubectl`` or ``docker``, or from
the files they were saved to (``--from DIR``). Every failure (no binary, an unreachable
cluster, a forbidden namespace, a missing pod) is one ``UserError`` line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.core.errors import UserError
from diagnose.inputs.files import LogInput

TIMEOUT_S = 60.0
K8S_FILES = ("pod.json", "events.json", "previous.txt", "logs.txt")
DOCKER_FILES = ("inspect.json", "logs.txt")


@dataclass
class Gathered:
    """A container's record and its logs, oldest first."""

    record: Any
    events: dict[str, Any] | None = None
    logs: list[LogInput] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _why(tool: str, stderr: str) -> str:
    """The one line that says why ``tool`` failed, in words of what to do."""
    text = " ".join(stderr.split())
    if re.search(r"forbidden|Unauthorized|must be logged in|permission denied", text, re.I):
        return f"{tool}: not allowed: {text[:300]}"
    if re.search(
        r"Unable to connect to the server|connection refused|was refused|no such host|"
        r"i/o timeout|"
        r"Cannot connect to the Docker daemon|context deadline exceeded|"
        r"no configuration has been provided|current-context is not set",
        text,
    ):
        return f"{tool}: cannot reach it: {text[:300]}"
    if re.search(r"NotFound|No such (?:object|container)|not found", text):
        return f"{tool}: not found: {text[:300]}"
    return f"{tool}: {text[:300] or 'failed with no message'}"


def _run(argv: list[str], what: str) -> str:
    """The standard output of a command; a failure is one user error line."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"{what}: no answer in {int(TIMEOUT_S)} s", help="check the connection"
        ) from None
    except OSError as error:
        raise UserError(f"{what}: cannot run {argv[0]}: {error.strerror}") from None
    if done.returncode != 0:
        raise UserError(_why(what, done.stderr))
    return done.stdout


def _json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{name}: not JSON ({error.msg}, line {error.lineno})") from None


def _binary(name: str, saved: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UserError(
            f"{name} is not on PATH",
            help=f"install it, or save the files and use --from DIR ({saved})",
        )
    return found


def kubernetes(
    pod: str, namespace: str | None, context: str | None, container: str | None
) -> Gathered:
    """A pod's record, events and logs (the previous container's first) from ``kubectl``."""
    base = [_binary("kubectl", ", ".join(K8S_FILES))]
    base += ["--context", context] if context else []
    base += ["--namespace", namespace] if namespace else []
    record = _json(_run([*base, "get", "pod", pod, "-o", "json"], "kubectl get pod"), "pod")
    if not isinstance(record, dict):
        raise UserError(f"pod {pod}: kubectl returned no pod")
    names = [c.get("name") for c in (record.get("spec") or {}).get("containers") or []]
    chosen = container or (names[0] if names else None)
    which = ["--container", chosen] if chosen else []
    selector = f"involvedObject.name={pod}"
    events = _json(
        _run(
            [*base, "get", "events", "--field-selector", selector, "-o", "json"],
            "kubectl get events",
        ),
        "events",
    )
    gathered = Gathered(record=record, events=events if isinstance(events, dict) else None)
    texts = []
    for label, extra in (("previous", ["--previous"]), ("current", [])):
        try:  # a first start has no previous container; a waiting one no current log
            texts.append(_run([*base, "logs", pod, *which, *extra], f"kubectl logs {label}"))
        except UserError as error:
            texts.append("")
            gathered.notes.append(f"no {label} container's log ({error.message[:160]})")
    previous, current = texts
    gathered.logs = _logs([(f"pod/{pod} previous", previous), (f"pod/{pod}", current)])
    return gathered


def docker(container: str) -> Gathered:
    """A container's record and log from ``docker``."""
    base = [_binary("docker", ", ".join(DOCKER_FILES))]
    record = _json(
        _run([*base, "inspect", "--type", "container", container], "docker inspect"), "inspect"
    )
    log = _run_merged([*base, "logs", container], "docker logs")
    return Gathered(record=record, logs=_logs([(f"container/{container}", log)]))


def _run_merged(argv: list[str], what: str) -> str:
    """``docker logs`` writes the container's stderr to its stderr: both, in one text."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"{what}: no answer in {int(TIMEOUT_S)} s") from None
    except OSError as error:
        raise UserError(f"{what}: cannot run {argv[0]}: {error.strerror}") from None
    if done.returncode != 0:
        raise UserError(_why(what, done.stdout[-2000:]))
    return done.stdout


def _logs(texts: list[tuple[str, str]]) -> list[LogInput]:
    return [
        LogInput(path=None, name=name, data=text.encode()) for name, text in texts if text.strip()
    ]


def _read(directory: Path, name: str) -> str | None:
    path = directory / name
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None


def _saved(directory: Path, record: str, files: tuple[str, ...]) -> dict[str, str | None]:
    if not directory.is_dir():
        raise UserError(
            f"{directory}: not a directory", help=f"a directory with {', '.join(files)}"
        )
    texts = {name: _read(directory, name) for name in files}
    if texts[record] is None:
        raise UserError(f"{directory}: no {record}", help=f"a directory with {', '.join(files)}")
    return texts


def kubernetes_saved(directory: Path) -> Gathered:
    """The same as :func:`kubernetes`, from the files the README's one-liner saves."""
    texts = _saved(directory, "pod.json", K8S_FILES)
    record = _json(texts["pod.json"] or "", str(directory / "pod.json"))
    events = (
        _json(texts["events.json"], str(directory / "events.json"))
        if texts["events.json"]
        else None
    )
    if not isinstance(record, dict) or record.get("kind", "Pod") != "Pod":
        raise UserError(f"{directory / 'pod.json'}: not a pod (kubectl get pod POD -o json)")
    logs = _logs([(str(directory / n), texts[n] or "") for n in ("previous.txt", "logs.txt")])
    return Gathered(record=record, events=events if isinstance(events, dict) else None, logs=logs)


def docker_saved(directory: Path) -> Gathered:
    """The same as :func:`docker`, from ``inspect.json`` and ``logs.txt``."""
    texts = _saved(directory, "inspect.json", DOCKER_FILES)
    record = _json(texts["inspect.json"] or "", str(directory / "inspect.json"))
    return Gathered(
        record=record, logs=_logs([(str(directory / "logs.txt"), texts["logs.txt"] or "")])
    )
