"""Deployments: what ran the server (read from the log, a pod's record, docker inspect), the
container facts that prove a failure, and every fix in the deployment's form, checked against
the Kubernetes OpenAPI schema and the Compose specification. The inputs are recorded outputs
of kubectl and docker (fixtures/containers/SOURCE.md); ``diagnose k8s`` and ``diagnose
docker`` run against fake binaries on PATH that print them."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
import textwrap
from html import escape
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from diagnose.core.container import docker_facts, pod_facts, with_container
from diagnose.core.contextfix import Target, contextualize, in_context
from diagnose.core.deployment import recognise
from diagnose.core.launch import from_command_line, from_vllm_settings
from diagnose.core.models import Deployment, Diagnosis, Finding, Patch, Role, Severity

REPO = Path(__file__).resolve().parent.parent
CONTAINERS = REPO / "fixtures" / "containers"
MINIKUBE = CONTAINERS / "k8s-minikube-1.31"
AIBRIX = CONTAINERS / "k8s-aibrix-probe"
DOCKER_18 = CONTAINERS / "docker-18.09"
DOCKER_110 = CONTAINERS / "docker-1.10"
DOCKER_2010 = CONTAINERS / "docker-20.10"
KV_TOO_SMALL = REPO / "fixtures" / "reasoning" / "engine-core-failed-kv-too-small.journal.txt"
"""A real vLLM log whose fix changes a flag and that prints vLLM's non-default args."""
CASES = REPO / "benchmarks" / "accuracy" / "cases"
COMPOSE_SCHEMA = json.loads((CONTAINERS / "compose-spec.json").read_text())
KUBERNETES_VERSION = "1.31"


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def assert_valid_kubernetes(patch: dict[str, Any]) -> None:
    """The patch's pod template is a valid pod spec (strict: no unknown field)."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "server"},
        "spec": {"selector": {"matchLabels": {"app": "server"}}, **patch["spec"]},
    }
    kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def assert_valid_compose(override: dict[str, Any]) -> None:
    jsonschema.Draft201909Validator(COMPOSE_SCHEMA).validate(override)


@pytest.mark.parametrize(
    "container",
    [
        {"name": "s", "shm": 1},  # no such field
        {"name": "s", "startupProbe": {"periodSeconds": "10s"}},  # not an integer
        {"env": [{"name": "A", "value": "1"}]},  # a container has a name
    ],
)
def test_the_kubernetes_check_rejects_what_kubectl_would(container: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        assert_valid_kubernetes({"spec": {"template": {"spec": {"containers": [container]}}}})


def test_the_compose_check_rejects_an_unknown_key() -> None:
    with pytest.raises(jsonschema.ValidationError):
        assert_valid_compose({"services": {"vllm": {"shm-size": "16gb"}}})


def run(args: list[str], path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def fake(directory: Path, name: str, body: str) -> str:
    """A fake ``name`` executable in ``directory``; the PATH that finds it (and no other)."""
    script = directory / name
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return str(directory)


# -- recorded outputs read ------------------------------------------------------------------


def test_a_recorded_pod_and_its_events_are_read() -> None:
    facts = pod_facts(_json(MINIKUBE / "pod.json"), _json(MINIKUBE / "events.json"), None)
    assert facts.deployment.kind == "kubernetes"
    assert (facts.deployment.name, facts.deployment.namespace) == (
        "kube-apiserver-minikube",
        "kube-system",
    )
    assert facts.deployment.container == "kube-apiserver"
    startup = next(p for p in facts.probes if p.kind == "startup")
    assert (startup.initial_delay_s, startup.period_s, startup.failure_threshold) == (10, 10, 24)
    assert startup.budget_s == 250
    messages = [e.message for e in facts.events]
    assert "Startup probe failed: HTTP probe failed with statuscode: 500" in messages
    assert all("coredns" not in m for m in messages)  # another pod's events are not its


def test_a_restarted_containers_last_exit_is_read() -> None:
    facts = pod_facts(_json(MINIKUBE / "storage-provisioner.pod.json"), None, None)
    assert (facts.exit_code, facts.exit_reason, facts.restarts) == (1, "Error", 1)
    assert facts.deployment.workload is None  # a bare pod: nothing owns it


def test_a_pod_owned_by_a_replicaset_is_patched_through_its_deployment() -> None:
    facts = pod_facts(_json(AIBRIX / "pod.json"), _json(AIBRIX / "events.json"), None)
    assert facts.deployment.workload == "deployment/deepseek-r1-distill-llama-8b"
    assert facts.deployment.orchestrator == "AIBrix"
    assert facts.args_key == "command" and "--max-model-len" in facts.command
    assert facts.gpus == 1 and facts.exit_code == 137


@pytest.mark.parametrize(
    ("directory", "name", "ipc"), [(DOCKER_18, "cen", False), (DOCKER_110, "hehe2", False)]
)
def test_docker_inspect_of_two_docker_versions_is_read(
    directory: Path, name: str, ipc: bool
) -> None:
    facts = docker_facts(_json(directory / "inspect.json"))
    assert facts.deployment.kind == "docker"
    assert facts.deployment.name == name
    assert facts.shm_bytes == 64 << 20
    assert facts.ipc_host is ipc
    assert facts.exit_code is None  # running: no exit to read
    assert facts.mounts == []


def test_docker_2010_records_of_real_runs_are_read() -> None:
    """docker inspect of containers Docker 20.10 ran (SOURCE.md): an OOM kill under a memory
    limit with host IPC, a read-only root with 16 GB of /dev/shm, and an entrypoint."""
    oom = docker_facts(_json(DOCKER_2010 / "oomkilled-ipc-host.inspect.json"))
    assert (oom.exit_code, oom.exit_reason, oom.ipc_host) == (137, "OOMKilled", True)
    assert oom.memory_limit == "64Mi"
    sglang = docker_facts(_json(DOCKER_2010 / "sglang-shm-read-only.inspect.json"))
    assert sglang.shm_bytes == 16 << 30 and sglang.read_only_root
    assert sglang.mounts == ["/models"] and sglang.command == []
    assert sglang.args == [
        "python3", "-m", "sglang.launch_server", "--model-path", "/models/llama", "--tp", "2"
    ]  # fmt: skip
    plain = docker_facts(_json(DOCKER_2010 / "vllm-entrypoint.inspect.json"))
    assert plain.command == ["vllm"] and plain.args[0] == "serve"
    assert plain.deployment.orchestrator is None and plain.shm_bytes == 64 << 20
    compose = docker_facts(_json(DOCKER_2010 / "compose-vllm.inspect.json"))
    assert compose.deployment.orchestrator == "Compose"
    assert compose.deployment.container == "vllm" and compose.deployment.name == "serving_vllm_1"
    assert compose.command == ["vllm", "serve"] and compose.args_key == "args"
    assert compose.shm_bytes == 1 << 30


# -- the launch command read from the log -----------------------------------------------------


def test_vllms_non_default_args_are_the_command() -> None:
    line = next(
        line for line in KV_TOO_SMALL.read_text().splitlines() if "non-default args: {" in line
    )
    launch = from_vllm_settings(line.split("non-default args: ", 1)[1])
    assert launch is not None and launch.program == ["vllm", "serve"]
    assert launch.flags == [
        "/srv/models/Qwen2.5-14B-Instruct-AWQ", "--host", "0.0.0.0", "--max-model-len",
        "131072", "--quantization", "awq_marlin", "--gpu-memory-utilization", "0.92",
    ]  # fmt: skip
    assert from_vllm_settings("{'compilation_config': CompilationConfig(level=3)}") is None
    assert from_vllm_settings("{'model': None}") is None


@pytest.mark.parametrize(
    ("program", "rest", "expected"),
    [
        ("vllm serve", " /models/m --tp 2", ["vllm", "serve"]),
        (
            "/opt/venv/bin/python -m sglang.launch_server",
            " --model-path /m",
            ["/opt/venv/bin/python", "-m", "sglang.launch_server"],
        ),
        (
            "openai.api_server",
            " --model m",
            ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        ),
        ("vllm serve", " [model_tag] [options]", None),  # its usage text
        ("vllm serve", " <model> --tp 2", None),
        ("vllm serve", " m --tp 2 \\", None),  # goes on in a line the log cut
    ],
)
def test_a_command_line_in_the_log_is_the_command(
    program: str, rest: str, expected: list[str] | None
) -> None:
    launch = from_command_line(program, rest)
    assert (launch.program if launch else None) == expected


def test_a_package_change_in_a_container_is_said_to_belong_in_the_image(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "ValueError: The checkpoint you are trying to load has model type `gemma3` but "
        "Transformers does not recognize this architecture.\n"
    )
    for kind, said in (("docker", True), ("kubernetes", True), ("systemd", False)):
        shown = run(["file", str(log), "--deployment", kind])
        assert shown.returncode == 1, shown.stderr
        assert ("that install belongs in the image" in " ".join(shown.stdout.split())) is said


def test_flags_are_written_from_the_logs_command_when_there_is_no_record() -> None:
    kube = run(["file", str(KV_TOO_SMALL), "--deployment", "kubernetes", "--patch-only"])
    assert kube.returncode == 1, kube.stderr
    patch = yaml.safe_load(kube.stdout)
    container = patch["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"][-2:] == ["--max-model-len", "56896"]
    assert "131072" not in container["args"]
    assert_valid_kubernetes(patch)
    as_json = run(["file", str(KV_TOO_SMALL), "--deployment", "kubernetes", "--patch-only", "-f", "json"])  # fmt: skip
    assert json.loads(as_json.stdout) == patch
    compose = run(["file", str(KV_TOO_SMALL), "--deployment", "docker", "-f", "json"])
    primary = json.loads(compose.stdout)["findings"][0]["patch"]
    service = primary["compose"]["services"]["SERVICE"]  # the name the user fills in
    assert service["entrypoint"] == ["vllm", "serve"] and service["command"] == container["args"]
    assert_valid_compose(primary["compose"])
    assert primary["docker_run"][:2] == ["--entrypoint=vllm", "<image>"]
    assert "vLLM's non-default args" in primary["context_note"]
    assert "replace SERVICE with the name of the server's service" in primary["context_note"]


def test_a_named_service_is_the_compose_key_and_needs_no_note() -> None:
    service = Deployment(kind="docker", container="vllm")
    done = in_context(_finding(Patch(env_set={"X": "1"})), service, Target()).patch
    assert done is not None and done.compose == {"services": {"vllm": {"environment": {"X": "1"}}}}
    assert done.context_note is None


def test_flags_inside_a_shell_string_are_said_not_edited() -> None:
    target = Target(command=["/bin/sh", "-c"], args=["vllm serve /m --dtype auto"])
    done = in_context(_finding(Patch(args_add=["--dtype", "half"])), KUBE, target).patch
    assert done is not None and done.kubernetes is None
    assert "add --dtype half" in (done.context_note or "")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ("compose-vllm", "services:\n  vllm:\n    command:\n    - /models/llama\n"),
        ("vllm-entrypoint", "--entrypoint=vllm <image> serve /models/llama "),
    ],
)
def test_patch_only_prints_the_containers_form(tmp_path: Path, record: str, expected: str) -> None:
    (tmp_path / "inspect.json").write_text((DOCKER_2010 / f"{record}.inspect.json").read_text())
    (tmp_path / "logs.txt").write_text(KV_TOO_SMALL.read_text())
    done = run(["docker", "--from", str(tmp_path), "--patch-only"])
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(expected)
    assert "--max-model-len 56896" in done.stdout or "'56896'" in done.stdout
    if record == "compose-vllm":
        assert_valid_compose(yaml.safe_load(done.stdout))


def test_patch_only_of_a_record_alone(tmp_path: Path) -> None:
    """The OOM kill Docker 20.10 recorded: the docker run option; a healthy record: nothing."""
    (tmp_path / "inspect.json").write_text(
        (DOCKER_2010 / "oomkilled-ipc-host.inspect.json").read_text()
    )
    done = run(["docker", "--from", str(tmp_path), "--patch-only"])
    assert (done.returncode, done.stdout) == (1, "--memory=1g\n")
    healthy = run(["docker", "--from", str(DOCKER_110), "--patch-only"])
    assert (healthy.returncode, healthy.stdout) == (0, "")
    assert "no container patch to print: no failure found" in healthy.stderr


# -- the deployment read from the log -------------------------------------------------------


def _case_log(stem: str) -> list[str]:
    return yaml.safe_load((CASES / f"{stem}.yaml").read_text())["log"].splitlines()


@pytest.mark.parametrize(
    ("stem", "kind"),
    [
        ("vllm-005-docker-image-needs-newer-driver", "docker"),
        ("vllm-116-lmcache-image-vllm-not-on-path", "docker"),
        ("vllm-029-ray-object-store-shm-too-small", "docker"),
        ("vllm-080-enginecore-dies-serving-docker-shm-64mb", "docker"),
        ("sglang-028-nextn-draft-memory-unbalanced-check", "docker"),
        ("vllm-032-systemd-sandbox-blocks-ipc", "systemd"),
        ("vllm-039-bf16-on-t4-states-dtype-half", "unknown"),
    ],
)
def test_the_log_says_what_ran_the_server(stem: str, kind: str) -> None:
    assert recognise(_case_log(stem)).kind == kind


def test_an_orchestrator_named_in_the_log_is_kept() -> None:
    lines = yaml.safe_load(
        (REPO / "benchmarks/accuracy/healthy/vllm-h12-kserve-v0-engine-cutoff.yaml").read_text()
    )["log"].splitlines()
    seen = recognise(lines)
    assert (seen.kind, seen.orchestrator) == ("kubernetes", "KServe")


def test_kubernetes_outranks_the_images_paths() -> None:
    lines = [
        '  File "/sgl-workspace/sglang/python/sglang/srt/server.py", line 1, in <module>',
        "Warning  BackOff  kubelet  Back-off restarting failed container sglang",
    ]
    assert recognise(lines).kind == "kubernetes"


def test_a_service_links_variable_is_kubernetes() -> None:
    """Only Kubernetes sets `<SERVICE>_PORT=tcp://IP:PORT` in a container's environment."""
    line = "ValueError: VLLM_PORT 'tcp://10.96.44.7:8000' appears to be a URI."
    assert recognise([line]).kind == "kubernetes"
    assert recognise(["VLLM_PORT=8000"]).kind == "unknown"


def test_a_pod_sandbox_event_is_kubernetes_and_docker_ps_is_docker() -> None:
    """The kubelet's sandbox failure comes before any container runs; `docker ps` lists one."""
    sandbox = (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = "
        'RuntimeHandler "nvidia" not supported'
    )
    assert recognise([sandbox]).kind == "kubernetes"
    listing = [
        "CONTAINER ID   IMAGE                      COMMAND                  CREATED",
        '33b5de2f3716   vllm/vllm-openai:v0.19.0   "vllm serve tail -f …"   6 seconds ago',
    ]
    assert recognise(listing).kind == "docker"
    assert recognise(["the container id is printed below"]).kind == "unknown"


def test_a_kubelet_container_log_file_is_kubernetes() -> None:
    """A log copied from /var/log/pods (the CRI format: stamp, stream, full or partial tag) was
    written by the kubelet's runtime; `docker logs -t` stamps alone do not say which."""
    line = (
        "(APIServer pid=1) INFO 06-08 18:01:24 [api_server.py:1880] vLLM API server version 0.11.0"
    )
    cri = [f"2026-06-08T18:01:24.332338885Z stdout F {line}"]
    assert recognise(cri).kind == "kubernetes"
    assert recognise([f"2026-06-08T18:01:24.332338885Z {line}"]).kind != "kubernetes"


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("(APIServer pid=1) INFO 06-08 18:01:24 [api_server.py:1880] vLLM API server", "docker"),
        (
            "(APIServer pid=4187) INFO 06-08 18:01:24 [api_server.py:1880] vLLM API server",
            "unknown",
        ),
        ("(EngineCore_DP0 pid=1) ERROR 06-08 18:01:30 [core.py:708] EngineCore failed", "unknown"),
        (
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 9',
            "docker",
        ),
        (
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/arg_utils.py", line 9',
            "unknown",
        ),
        (
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 9',
            "unknown",
        ),
    ],
)
def test_an_images_process_and_paths_say_container(line: str, kind: str) -> None:
    """The API server as pid 1 is a container's entrypoint (a host's pid 1 is its init), and
    Python 3.12's packages under /usr/local/lib/.../dist-packages are where the engines' images
    install them (a host's own Python 3.12 refuses a pip install there); Python 3.10's could be
    a host's `sudo pip install`, and a venv says nothing."""
    assert recognise([line]).kind == kind


# -- fixes in the deployment's form ---------------------------------------------------------


def _finding(
    patch: Patch | None, signature: str = "s", actions: list[str] | None = None
) -> Finding:
    return Finding(
        id="f1",
        signature=signature,
        category="launch_args",
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title="t",
        explanation="e",
        confidence="high",
        evidence=[],
        patch=patch,
        system_actions=actions or [],
    )


KUBE = Deployment(kind="kubernetes")
DOCKER = Deployment(kind="docker", container="vllm")


def test_flags_are_edited_in_the_containers_own_command_line() -> None:
    patch = Patch(args_add=["--max-model-len", "8192"], args_remove=["--enforce-eager"])
    target = Target(
        container="server",
        command=["vllm", "serve"],
        args=["/models/m", "--enforce-eager", "--max-model-len", "131072", "--tp", "2"],
    )
    done = in_context(_finding(patch), KUBE, target).patch
    assert done is not None and done.kubernetes is not None
    container = done.kubernetes["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["/models/m", "--tp", "2", "--max-model-len", "8192"]
    assert_valid_kubernetes(done.kubernetes)
    compose = in_context(_finding(patch), DOCKER, target).patch
    assert compose is not None and compose.compose is not None
    assert compose.compose["services"]["vllm"]["command"] == container["args"]
    assert_valid_compose(compose.compose)


def test_a_signatures_unit_words_are_the_containers_in_a_container() -> None:
    """A signature written for a unit says ExecStart and Environment=: a container's report
    names the container's command and environment instead; a unit's report keeps them."""
    finding = _finding(None).model_copy(
        update={
            "explanation": "Set `--max-model-len 8192` in ExecStart, as the message asks.",
            "patch_note": "a variable goes in the unit as `Environment=NAME=VALUE`",
            "alternatives": ["Point ExecStart at the environment's own interpreter."],
        }
    )
    for deployment in (KUBE, DOCKER):
        done = in_context(finding, deployment, Target())
        said = " ".join([done.explanation, done.patch_note or "", *done.alternatives])
        assert "ExecStart" not in said and "Environment=" not in said
        assert "Set `--max-model-len 8192` in the container's command" in done.explanation
        assert done.alternatives == [
            "Point the container's command at the environment's own interpreter."
        ]
    assert in_context(finding, Deployment(kind="systemd"), Target()) is finding


def test_flags_without_the_record_are_said_not_guessed() -> None:
    done = in_context(_finding(Patch(args_add=["--dtype", "half"])), KUBE, Target()).patch
    assert done is not None and done.kubernetes is None
    assert "add --dtype half" in (done.context_note or "")
    again = Patch(
        args_add=["--gpu-memory-utilization", "0.8"], args_remove=["--gpu-memory-utilization"]
    )
    note = in_context(_finding(again), KUBE, Target()).patch
    assert note is not None and "remove" not in (note.context_note or "")


def test_more_shared_memory_replaces_the_workaround_in_a_container() -> None:
    finding = _finding(Patch(env_set={"NCCL_SHM_DISABLE": "1"}), "nccl-shm-too-small")
    done = in_context(finding, KUBE, Target(container="server")).patch
    assert done is not None and done.kubernetes is not None
    spec = done.kubernetes["spec"]["template"]["spec"]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    ]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert "env" not in spec["containers"][0]
    assert done.env_set == {"NCCL_SHM_DISABLE": "1"}  # the drop-in's form is kept beside
    assert_valid_kubernetes(done.kubernetes)
    docker = in_context(finding, DOCKER, Target()).patch
    assert docker is not None and docker.compose == {"services": {"vllm": {"shm_size": "16gb"}}}
    assert docker.docker_run == ["--shm-size=16g"]
    assert_valid_compose(docker.compose)


def test_unit_settings_take_their_container_form_or_say_they_have_none() -> None:
    patch = Patch(
        unit_set={
            "Service.MemoryMax": "64Gi",
            "Service.TimeoutStartSec": "900",
            "Service.LimitMEMLOCK": "infinity",
        }
    )
    kube = in_context(_finding(patch), KUBE, Target(container="s", port=30000)).patch
    assert kube is not None and kube.kubernetes is not None
    container = kube.kubernetes["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"memory": "64Gi"}}
    probe = container["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 900
    assert probe["httpGet"]["port"] == 30000
    assert "LimitMEMLOCK" in (kube.context_note or "")
    assert "Docker does not" not in (kube.context_note or "")
    assert_valid_kubernetes(kube.kubernetes)
    docker = in_context(_finding(patch), DOCKER, Target()).patch
    assert docker is not None and docker.compose is not None
    assert docker.compose["services"]["vllm"] == {"mem_limit": "64g"}
    assert "no start timeout" in (docker.context_note or "")
    assert_valid_compose(docker.compose)


def test_a_units_cache_directory_becomes_a_writable_volume() -> None:
    patch = Patch(
        env_set={"TRITON_CACHE_DIR": "/var/cache/llm/triton"},
        unit_set={"Service.CacheDirectory": "llm"},
    )
    kube = in_context(_finding(patch), KUBE, Target(container="s")).patch
    assert kube is not None and kube.kubernetes is not None and kube.context_note is None
    spec = kube.kubernetes["spec"]["template"]["spec"]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "cache-directory", "mountPath": "/var/cache/llm"}
    ]
    assert spec["volumes"] == [{"name": "cache-directory", "emptyDir": {}}]
    assert_valid_kubernetes(kube.kubernetes)
    docker = in_context(_finding(patch), DOCKER, Target()).patch
    assert docker is not None and docker.compose is not None
    assert docker.compose["services"]["vllm"]["tmpfs"] == ["/var/cache/llm"]
    assert "--tmpfs=/var/cache/llm" in docker.docker_run
    assert_valid_compose(docker.compose)


def test_systemd_and_unknown_keep_the_fix_as_it_is() -> None:
    finding = _finding(Patch(env_set={"A": "1"}))
    for kind in ("systemd", "unknown"):
        assert in_context(finding, Deployment(kind=kind), Target()) == finding  # type: ignore[arg-type]


def test_a_fix_with_nothing_for_a_pod_says_so() -> None:
    finding = _finding(Patch(unit_set={"Service.User": "vllm"}))
    done = in_context(finding, KUBE, Target()).patch
    assert done is not None and done.kubernetes is None
    assert "no meaning in a container" in (done.context_note or "")


# -- what the record proves -----------------------------------------------------------------


def _pod() -> dict[str, Any]:
    return copy.deepcopy(_json(AIBRIX / "pod.json"))


def _with_record(pod: dict[str, Any], events: dict[str, Any] | None = None) -> Diagnosis:
    facts = pod_facts(pod, events, None)
    return with_container(Diagnosis(), facts, Deployment())


def test_a_probe_that_kills_a_starting_server_is_the_root_cause() -> None:
    diagnosis = with_container(
        Diagnosis(phase_reached="load_weights"),
        pod_facts(_pod(), _json(AIBRIX / "events.json"), None),
        Deployment(),
    )
    primary = diagnosis.finding(diagnosis.primary)
    assert primary is not None and primary.signature == "container-probe-killed-start"
    assert "Startup probe failed" in primary.evidence[0].text
    assert primary.patch is not None and primary.patch.kubernetes is not None
    probe = primary.patch.kubernetes["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 600
    assert_valid_kubernetes(primary.patch.kubernetes)


def test_a_ready_server_is_not_said_to_be_killed_by_its_probe() -> None:
    facts = pod_facts(_pod(), _json(AIBRIX / "events.json"), None)
    diagnosis = with_container(Diagnosis(phase_reached="ready"), facts, Deployment())
    assert all(f.signature != "container-probe-killed-start" for f in diagnosis.findings)


def test_oomkilled_is_host_memory_and_raises_the_limit() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "32Gi"
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] = "OOMKilled"
    diagnosis = _with_record(pod)
    primary = diagnosis.finding(diagnosis.primary)
    assert primary is not None and primary.signature == "container-oom-killed"
    assert primary.category == "host_oom" and "not GPU memory" in primary.title
    assert primary.patch is not None and primary.patch.kubernetes is not None
    container = primary.patch.kubernetes["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "64Gi"
    assert_valid_kubernetes(primary.patch.kubernetes)


def test_fewer_gpus_than_tensor_parallel_is_found_and_asked_for() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["command"] += ["--tensor-parallel-size", "2"]
    diagnosis = _with_record(pod)
    finding = next(f for f in diagnosis.findings if f.signature.startswith("container-gpus"))
    assert finding.patch is not None and finding.patch.kubernetes is not None
    container = finding.patch.kubernetes["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    shm = next(f for f in diagnosis.findings if f.signature == "container-shm-default")
    assert shm.patch is not None and shm.patch.kubernetes is not None
    assert_valid_kubernetes(finding.patch.kubernetes)
    assert_valid_kubernetes(shm.patch.kubernetes)


def test_a_model_path_outside_the_mounts_is_found() -> None:
    pod = _pod()
    container = pod["spec"]["containers"][0]
    container["command"] = [
        w if "DeepSeek" not in w else "/models/ds-8b" for w in container["command"]
    ]
    container["volumeMounts"] = [{"name": "cache", "mountPath": "/root/.cache"}]
    pod["spec"]["volumes"] = [{"name": "cache", "emptyDir": {}}]
    diagnosis = _with_record(pod)
    finding = next(f for f in diagnosis.findings if "not-mounted" in f.signature)
    assert finding.patch is not None and finding.patch.kubernetes is not None
    mounts = finding.patch.kubernetes["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [{"name": "model", "mountPath": "/models"}]
    assert_valid_kubernetes(finding.patch.kubernetes)
    container["volumeMounts"].append({"name": "models", "mountPath": "/models"})
    assert not any("not-mounted" in f.signature for f in _with_record(pod).findings)


def test_a_read_only_root_gets_a_writable_cache() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["securityContext"] = {"readOnlyRootFilesystem": True}
    finding = next(f for f in _with_record(pod).findings if "read-only" in f.signature)
    assert finding.patch is not None and finding.patch.kubernetes is not None
    container = finding.patch.kubernetes["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "HF_HOME", "value": "/cache/huggingface"} in container["env"]
    assert container["volumeMounts"] == [{"name": "cache", "mountPath": "/cache"}]
    assert_valid_kubernetes(finding.patch.kubernetes)


def test_docker_records_give_compose_overrides_that_validate() -> None:
    record = _json(DOCKER_18 / "inspect.json")
    record[0]["Config"]["Cmd"] = ["--model", "/models/llama", "--tensor-parallel-size", "4"]
    record[0]["HostConfig"]["DeviceRequests"] = [
        {"Driver": "nvidia", "Count": 2, "DeviceIDs": None, "Capabilities": [["gpu"]]}
    ]
    record[0]["Mounts"] = [{"Type": "bind", "Source": "/data", "Destination": "/data"}]
    diagnosis = with_container(Diagnosis(), docker_facts(record), Deployment())
    signatures = {f.signature for f in diagnosis.findings}
    assert signatures == {
        "container-gpus-fewer-than-parallel",
        "container-shm-default",
        "container-model-path-not-mounted",
    }
    for finding in diagnosis.findings:
        assert finding.patch is not None and finding.patch.compose is not None
        assert_valid_compose(finding.patch.compose)
    gpus = next(f for f in diagnosis.findings if "gpus" in f.signature).patch
    assert gpus is not None and gpus.docker_run == ["--gpus=4"]


@functools.cache
def container_cases() -> list[tuple[str, str, Diagnosis]]:
    """The benchmark's real container incidents (their threads say Docker or Kubernetes): the
    case's name, its deployment and the diagnosis of its log."""
    from diagnose.commands.file import diagnose_logs
    from diagnose.inputs.files import LogInput

    cases = []
    for path in sorted(CASES.glob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        if case.get("deployment") in ("docker", "kubernetes"):
            log = LogInput.from_text(case["log"], name=path.stem)
            diagnosis = diagnose_logs([log], [], None, lambda _: None)
            cases.append((path.stem, case["deployment"], diagnosis))
    return cases


def test_every_fix_of_the_container_cases_validates_in_both_forms() -> None:
    """Each container case's findings, read as Kubernetes and as Docker: every patch is a
    valid pod spec change and every override a valid Compose file."""
    checked = 0
    for _, _, diagnosis in container_cases():
        for kind in ("kubernetes", "docker"):  # no container nor service named: placeholders
            done = contextualize(diagnosis, Deployment(kind=kind))  # type: ignore[arg-type]
            for finding in done.findings:
                patch = finding.patch
                if patch is not None and patch.kubernetes is not None:
                    assert_valid_kubernetes(patch.kubernetes)
                    checked += 1
                if patch is not None and patch.compose is not None:
                    assert_valid_compose(patch.compose)
                    checked += 1
    assert checked >= 16


def test_the_real_container_incidents_get_their_own_form_of_fix() -> None:
    """Each container case run in its own deployment: every finding with a fix carries that
    deployment's form (a pod patch; a Compose override or docker run options) or says why it
    has none there, never a bare drop-in."""

    def in_its_form(patch: Patch, kind: str) -> bool:
        if patch.context_note:
            return True
        if kind == "kubernetes":
            return patch.kubernetes is not None
        return patch.compose is not None or bool(patch.docker_run)

    fixed = {"docker": 0, "kubernetes": 0}
    for stem, kind, diagnosis in container_cases():
        done = contextualize(diagnosis, Deployment(kind=kind))  # type: ignore[arg-type]
        assert done.deployment.kind == kind
        patches = [f.patch for f in done.findings if f.patch is not None]
        assert all(in_its_form(patch, kind) for patch in patches), stem
        fixed[kind] += bool(patches)
    assert fixed["docker"] >= 40 and fixed["kubernetes"] >= 20, fixed


# -- the commands, against fake kubectl and docker -----------------------------------------


KUBECTL = """
import os, sys
here = os.environ["FAKE_RECORDS"]
args = sys.argv[1:]
def show(name):
    sys.stdout.write(open(os.path.join(here, name)).read())
if "get" in args and "pod" in args:
    show("pod.json")
elif "get" in args and "events" in args:
    show("events.json")
elif "logs" in args and "--previous" in args:
    show("previous.txt")
elif "logs" in args:
    sys.stderr.write('Error from server (BadRequest): container "vllm-openai" in pod is waiting to start: CrashLoopBackOff\\n')
    sys.exit(1)
"""


def test_k8s_runs_kubectl_and_a_waiting_container_has_no_current_log(tmp_path: Path) -> None:
    path = fake(tmp_path, "kubectl", KUBECTL)
    os.environ["FAKE_RECORDS"] = str(AIBRIX)
    try:
        live = run(["k8s", "deepseek-r1", "-n", "default", "-f", "json"], path)
    finally:
        del os.environ["FAKE_RECORDS"]
    assert live.returncode == 1, live.stderr
    report = json.loads(live.stdout)
    assert report["findings"][0]["signature"] == "container-probe-killed-start"
    assert any(
        "no current container's log" in n and "CrashLoopBackOff" in n for n in report["notes"]
    )
    assert [i["name"] for i in report["inputs"]] == ["pod/deepseek-r1 previous"]


def test_k8s_reads_the_previous_log_when_the_current_one_is_there(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    for name in ("pod.json", "events.json", "previous.txt"):
        (records / name).write_text((AIBRIX / name).read_text())
    (records / "logs.txt").write_text("")
    body = KUBECTL.replace(
        'elif "logs" in args:\n    sys.stderr',
        'elif "logs" in args:\n    sys.exit(0)\n    sys.stderr',
    )
    path = fake(tmp_path, "kubectl", body)
    os.environ["FAKE_RECORDS"] = str(records)
    try:
        live = run(["k8s", "pod", "-n", "default", "-f", "json"], path)
    finally:
        del os.environ["FAKE_RECORDS"]
    saved = run(["k8s", "--from", str(records), "-f", "json"])
    assert live.returncode == saved.returncode == 1, live.stderr + saved.stderr
    live_json, saved_json = json.loads(live.stdout), json.loads(saved.stdout)
    assert live_json["deployment"] == saved_json["deployment"]
    assert [f["signature"] for f in live_json["findings"]] == [
        f["signature"] for f in saved_json["findings"]
    ]
    assert live_json["deployment"]["kind"] == "kubernetes"
    primary = live_json["findings"][0]
    assert primary["signature"] == "container-probe-killed-start"
    assert_valid_kubernetes(primary["patch"]["kubernetes"])


@pytest.mark.parametrize(
    ("stderr", "said"),
    [
        (
            'Error from server (Forbidden): pods "vllm-0" is forbidden: User "system:serviceaccount:'
            'dev:default" cannot get resource "pods" in API group "" in the namespace "prod"',
            "not allowed",
        ),
        (
            "The connection to the server localhost:8080 was refused - did you specify the right "
            "host or port?",
            "cannot reach it",
        ),
        ('Error from server (NotFound): pods "vllm-0" not found', "not found"),
        ("error: You must be logged in to the server (Unauthorized)", "not allowed"),
    ],
)
def test_kubectl_failures_are_one_line_and_exit_2(tmp_path: Path, stderr: str, said: str) -> None:
    path = fake(
        tmp_path, "kubectl", f"import sys\nsys.stderr.write({stderr!r} + '\\n')\nsys.exit(1)\n"
    )
    result = run(["k8s", "vllm-0", "-n", "prod"], path)
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and said in result.stderr


def test_a_missing_binary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    for command in (["k8s", "vllm-0"], ["docker", "vllm"]):
        result = run(command, str(empty))
        assert result.returncode == 2
        assert "is not on PATH" in result.stderr and result.stderr.count("\n") == 1


DOCKER_BIN = """
import os, sys
here = os.environ["FAKE_RECORDS"]
if sys.argv[1] == "inspect":
    sys.stdout.write(open(os.path.join(here, "inspect.json")).read())
elif sys.argv[1] == "logs":
    sys.stderr.write(open(os.path.join(here, "logs.txt")).read())
"""


def test_docker_runs_docker_and_writes_the_fix_as_compose(tmp_path: Path) -> None:
    path = fake(tmp_path, "docker", DOCKER_BIN)
    os.environ["FAKE_RECORDS"] = str(DOCKER_18)
    try:
        live = run(["docker", "cen", "-f", "json"], path)
    finally:
        del os.environ["FAKE_RECORDS"]
    assert live.returncode == 1, live.stderr
    report = json.loads(live.stdout)
    assert report["deployment"]["kind"] == "docker"
    primary = report["findings"][0]
    assert primary["signature"] == "nccl-shm-too-small"  # the same finding as diagnose file
    assert primary["patch"]["compose"] == {"services": {"cen": {"shm_size": "16gb"}}}
    assert_valid_compose(primary["patch"]["compose"])
    text = run(["docker", "--from", str(DOCKER_18)]).stdout
    assert "compose.override.yaml" in text and "shm_size: 16gb" in text
    assert "systemctl" not in text  # no drop-in language for a container


def test_docker_daemon_down_is_one_line(tmp_path: Path) -> None:
    message = (
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker "
        "daemon running?"
    )
    path = fake(tmp_path, "docker", f"import sys\nsys.stderr.write({message!r})\nsys.exit(1)\n")
    result = run(["docker", "vllm"], path)
    assert result.returncode == 2 and "cannot reach it" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_saved_directory_without_the_record_is_a_user_error(tmp_path: Path) -> None:
    result = run(["k8s", "--from", str(tmp_path)])
    assert result.returncode == 2 and "no pod.json" in result.stderr


# -- untrusted text -------------------------------------------------------------------------


def test_pod_text_is_redacted_and_cleaned(tmp_path: Path) -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz0123456789"}
    ]
    events = _json(AIBRIX / "events.json")
    for item in events["items"]:
        if item["reason"] == "Unhealthy":
            item["message"] += " \x1b[31mtoken=hf_zyxwvutsrqponmlkjihgfedcba9876543210\x1b[0m"
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "pod.json").write_text(json.dumps(pod))
    (saved / "events.json").write_text(json.dumps(events))
    (saved / "previous.txt").write_text((AIBRIX / "previous.txt").read_text())
    for fmt in ("json", "text", "markdown", "html"):
        out = run(["k8s", "--from", str(saved), "-f", fmt]).stdout
        assert "hf_abcdefghij" not in out and "hf_zyxwvut" not in out
        assert "\x1b" not in out
    assert "<redacted:" in run(["k8s", "--from", str(saved), "-f", "json"]).stdout


# -- the fix in reports --------------------------------------------------------------------

CRASHLOOP = REPO / "fixtures" / "incidents" / "qwen-122b-crashloop.journal.txt"
"""A systemd log whose fix the report would also merge into a unit drop-in."""
KUBERNETES_FORM = "the Kubernetes patch"
DOCKER_FORMS = "the Compose override or the docker run options"


@pytest.mark.parametrize(
    ("args", "form"),
    [
        (["file", "--deployment", "kubernetes", str(CRASHLOOP)], KUBERNETES_FORM),
        (["file", "--deployment", "docker", str(CRASHLOOP)], DOCKER_FORMS),
        (["k8s", "--from", str(AIBRIX)], KUBERNETES_FORM),
        (["docker", "--from", str(DOCKER_18)], DOCKER_FORMS),
    ],
)
def test_a_containers_fix_speaks_of_its_form_never_of_a_drop_in(args: list[str], form: str) -> None:
    for fmt in ("text", "markdown", "html"):
        out = run([*args, "-f", fmt]).stdout
        assert "drop-in" not in out and "systemctl" not in out, fmt
        if fmt == "text":
            assert f"(in the container's form below: {form})" in " ".join(out.split())


def test_docker_run_options_print_whole_on_their_own_line(tmp_path: Path) -> None:
    (tmp_path / "inspect.json").write_text(
        (DOCKER_2010 / "vllm-entrypoint.inspect.json").read_text()
    )
    (tmp_path / "logs.txt").write_text(KV_TOO_SMALL.read_text())
    options = "--entrypoint=vllm <image> serve /models/llama --tensor-parallel-size 2 --max-model-len 56896"  # fmt: skip
    text = run(["docker", "--from", str(tmp_path)]).stdout.splitlines()
    assert text[text.index(options) - 1] == "  With `docker run`, these options:"
    markdown = run(["docker", "--from", str(tmp_path), "-f", "markdown"]).stdout
    assert f"With `docker run`, these options:\n\n```\n{options}\n```\n" in markdown
    html = run(["docker", "--from", str(tmp_path), "-f", "html"]).stdout
    assert f'<pre class="commands">{escape(options)}</pre>' in html


# -- postmortems ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_postmortems_name_the_deployment_and_carry_its_patch(fmt: str) -> None:
    out = run(["k8s", "--from", str(AIBRIX), "-f", fmt]).stdout
    assert "Deployment: a Kubernetes pod default/deepseek-r1-distill-llama-8b" in out
    assert "under AIBrix" in out
    assert (
        "kubectl patch deployment/deepseek-r1-distill-llama-8b -n default --type strategic" in out
    )
    assert "failureThreshold: 60" in out


def test_every_report_names_its_deployment() -> None:
    out = run(["file", str(REPO / "fixtures/incidents/host-oom.journal.txt"), "-f", "json"]).stdout
    assert json.loads(out)["deployment"]["kind"] == "systemd"
    text = run(["file", str(REPO / "fixtures/incidents/oom-kv-cache.log")]).stdout
    assert "Deployment: unknown" in text


def test_composes_log_prefix_and_docker_cp_are_docker() -> None:
    """`docker compose up` prefixes each line with the service and its replica number; `docker
    cp` reports what it copied into a container. A Markdown table's row is neither."""
    compose = "vllm-1  | ValueError: The model's max seq len (32768) is larger than the maximum"
    assert recognise([compose]).kind == "docker"
    copied = "Successfully copied 3.07kB to vllm_node:/workspace/exec-script.sh"
    assert recognise([copied]).kind == "docker"
    assert recognise(["| `VLLM_PORT` | 8000 | the API port |"]).kind == "unknown"
