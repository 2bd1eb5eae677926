"""Preflight: the launch configuration judged against the signature library before the start.

Pure: a :class:`LaunchConfig` (argv, environment, and the facts the command layer gathered:
the model's ``config.json`` and weight size, a GPU snapshot, whether the port is free) in,
configuration values and a ranked :class:`Diagnosis` out. No I/O, no clock.

>>> command = parse_command(["/opt/venv/bin/python3", "-m", "sglang.launch_server",
...                          "--model-path", "/m", "--tp", "4", "--disable-radix-cache"])
>>> command.engine, command.args["tp_size"], command.args["disable_radix_cache"]
('sglang', '4', True)
>>> parse_command(["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"]).args["model_path"]
'Qwen/Qwen3-8B'
>>> expand_argv(["x", "$OPTS", "--a=${B}"], {"OPTS": "--p 1", "B": "two words"})
(['x', '--p', '1', '--a=two words'], [])
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from diagnose.core import expr
from diagnose.core.changes import with_plan
from diagnose.core.models import (
    Confidence,
    Diagnosis,
    Evidence,
    Finding,
    InputSummary,
    Role,
    Severity,
)
from diagnose.core.ranking import Draft, derive, primary_of, rank, version_check
from diagnose.core.signature import PreflightRule, Signature
from diagnose.engines import profile, profiles
from diagnose.engines.phases import PHASE_ORDER
from diagnose.inputs.gpu import GpuSnapshot
from diagnose.knowledge.mined import flag_table
from diagnose.library import load_architectures
from diagnose.preflight import sizing
from diagnose.preflight.flags import EngineVersion, problems, read_command

COMMAND_LINE = "<command line>"
GPU_SOURCE = "nvidia-smi"
PORT_SOURCE = "<port check>"
FOREIGN_MIB = 1024
"""Used memory on a GPU with no process rows that counts as held (an idle H200 shows 0 MiB)."""

_SPEC_FLAGS = re.compile(r"^--(?:speculative[-_]|num[-_]speculative[-_]tokens)")
_DOCKER_VALUE_OPTIONS = {
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--name", "--gpus", "--network",
    "--net", "--shm-size", "--env-file", "-w", "--workdir", "--entrypoint", "--runtime",
    "--device", "--ulimit", "--mount", "-u", "--user", "-l", "--label", "--restart", "--cpus",
    "-m", "--memory", "--log-driver", "--log-opt", "--add-host", "-h", "--hostname", "--ipc",
    "--cap-add", "--security-opt", "--pid", "--platform", "--pull", "--stop-timeout",
}  # fmt: skip


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a unit file line, the command line, nvidia-smi, a check."""

    source: str
    line: int | None
    text: str


@dataclass
class Command:
    """The server command inside argv: which engine, and its flags as values."""

    engine: str | None
    args: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    """Flags as written (``--tp-size``), in order."""
    environment: dict[str, str] = field(default_factory=dict)
    """``docker run -e`` assignments."""
    published: dict[int, int] = field(default_factory=dict)
    """``docker run -p HOST:CONTAINER``: container port -> host port."""
    words: list[str] = field(default_factory=list)
    """The engine's own arguments (after ``serve`` or the module name)."""
    resolved: dict[str, str] = field(default_factory=dict)
    """Each flag as written -> the long option the engine's parser reads it as."""
    image: str | None = None
    """``docker run``: the image."""
    note: str | None = None


@dataclass
class ModelFacts:
    path: str
    """Where the model was read (a local directory)."""
    config: dict[str, Any] | None = None
    weights_bytes: int | None = None


@dataclass
class PortFacts:
    host: str
    port: int
    in_use: bool | None
    holder: str | None = None


@dataclass
class LaunchConfig:
    """Everything preflight judges; the command layer fills it, nothing here reads a file."""

    argv: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    unit: str | None = None
    exec_origin: Origin | None = None
    env_origins: dict[str, Origin] = field(default_factory=dict)
    model: ModelFacts | None = None
    gpus: GpuSnapshot | None = None
    gpu_uuids: dict[str, int] = field(default_factory=dict)
    own_pids: frozenset[int] = frozenset()
    """Processes of the unit itself (a restart replaces them): never foreign."""
    port: PortFacts | None = None
    parsers: Mapping[str, Any] = field(default_factory=dict)
    """``_parsers.yaml``: per engine, valid tool-call and reasoning parser names."""
    flags: Mapping[str, Any] = field(default_factory=dict)
    """``_flags.yaml``: per engine, flags of the other engine."""
    engine_version: EngineVersion | None = None
    """The engine release the command runs, when known (its flag table is used)."""
    unit_problems: list[dict[str, Any]] = field(default_factory=list)
    """What systemd would refuse in the unit itself (no ExecStart=, a missing required
    EnvironmentFile= or WorkingDirectory=, an unknown User=), with where it is written."""
    sandbox_problems: list[dict[str, Any]] = field(default_factory=list)
    """What the unit's hardening takes away from the server (GPU devices, sockets, writable
    caches), with where it is written."""

    def version_for(self, engine: str) -> EngineVersion:
        """The release to check ``engine``'s flags against: the known one, else the newest."""
        known = self.engine_version
        if known is not None and known.engine == engine:
            return known
        return EngineVersion(engine, None, "newest")


# -- the command line ----------------------------------------------------------------------

_VAR = re.compile(r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")


def expand_argv(argv: list[str], environment: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """systemd's ``$VAR`` / ``${VAR}`` expansion of ExecStart words: a word that is exactly
    ``$VAR`` splits into words at whitespace, ``${VAR}`` is one word; ``$$`` is a literal ``$``.
    Returns the words and the names that had no value (they expand to nothing)."""
    out: list[str] = []
    missing: list[str] = []
    for word in argv:
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            name = whole.group(1)
            if name not in environment:
                missing.append(name)
            out += environment.get(name, "").split()
            continue
        parts = word.split("$$")

        def substitute(match: re.Match[str]) -> str:
            name = match.group("braced") or ""
            if not name:
                return match.group(0)  # braceless inside a word: systemd leaves it
            if name not in environment:
                missing.append(name)
            return environment.get(name, "")

        out.append("$".join(_VAR.sub(substitute, part) for part in parts))
    return out, missing


def _engine_at(argv: list[str]) -> tuple[str | None, int]:
    """The engine and the index of its first argument, or (None, 0)."""
    for i in range(len(argv)):
        for engine in profiles():
            start = engine.launch_start(argv, i)
            if start is not None:
                return engine.name, start
    return None, 0


def _docker(argv: list[str], command: Command) -> tuple[str | None, int]:
    """``docker run [OPTIONS] IMAGE [ARGS]``: options, then the image names the engine."""
    i = 2
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            break
        option, _, inline = word.partition("=")
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
        takes = option in _DOCKER_VALUE_OPTIONS and not inline
        if option in ("-e", "--env") and "=" in value:
            key, val = value.split("=", 1)
            command.environment[key] = val
        if option in ("-p", "--publish"):
            ports = value.rsplit(":", 2)
            inside, outside = ports[-1].split("/")[0], ports[-2] if len(ports) >= 2 else ""
            if inside.isdigit() and outside.isdigit() and max(len(inside), len(outside)) <= 5:
                command.published[int(ports[-1].split("/")[0])] = int(ports[-2])
        i += 2 if takes else 1
    if i >= len(argv):
        return None, 0
    image = argv[i].lower()
    command.image = argv[i]
    inner, start = _engine_at(argv[i + 1 :])
    if inner:
        return inner, i + 1 + start
    named = next((engine.name for engine in profiles() if engine.named_by_image(image)), None)
    return named, i + 1


def parse_command(argv: list[str], version: EngineVersion | None = None) -> Command:
    """The engine and its flags: ``--tp-size 4`` -> ``tp_size='4'``, a flag with no value
    -> True, aliases (``--tp``, ``-tp``, ``--tensor-parallel-size``) under one name too.

    Flags are read with the engine release's parser (``version``, else the newest mined):
    an abbreviation is the option it abbreviates, a switch takes no value."""
    command = Command(engine=None)
    if argv and PurePosixPath(argv[0]).name in ("docker", "podman") and argv[1:2] == ["run"]:
        engine, start = _docker(argv, command)
    else:
        engine, start = _engine_at(argv)
    command.engine = engine
    if engine is None:
        return command
    aliases = profile(engine).flag_aliases
    words = argv[start:]
    command.words = list(words)
    if version is None or version.engine != engine:
        version = EngineVersion(engine, None, "newest")
    table_version = version.table_version
    if table_version is None:
        return _parse_plain(command, words, aliases)
    table = flag_table(engine, table_version)
    options, positional = read_command(words, table)
    for word in options:
        command.flags.append(word.written)
        command.resolved[word.written] = word.flag
        value: Any = word.value if word.value is not None else True
        if len(word.values) > 1:
            value = " ".join(word.values)
        nested = "." in word.written  # vLLM: one key of a JSON option
        name = re.sub(r"\W", "_", (word.written if nested else word.flag).lstrip("-"))
        command.args[name] = value
        if name in aliases:
            command.args[aliases[name]] = value
    positional_flag = profile(engine).positional_flag()
    if positional_flag and positional and positional_flag not in command.args:
        command.args[positional_flag] = positional[0]
    return command


def _parse_plain(command: Command, words: list[str], aliases: Mapping[str, str]) -> Command:
    """Flags without a table: a word after a flag is its value."""
    i = 0
    positional: list[str] = []
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word in ("-", "--") or _is_number(word):
            positional.append(word)
            i += 1
            continue
        flag, has_value, inline = word.partition("=")
        command.flags.append(flag)
        value: Any
        if has_value:
            value = inline
        elif i + 1 < len(words) and (not words[i + 1].startswith("-") or _is_number(words[i + 1])):
            value = words[i + 1]
            i += 1
        else:
            value = True
        i += 1
        name = re.sub(r"\W", "_", flag.lstrip("-"))
        command.args[name] = value
        if name in aliases:
            command.args[aliases[name]] = value
    positional_flag = profile(command.engine or "generic").positional_flag()
    if positional_flag and positional and positional_flag not in command.args:
        command.args[positional_flag] = positional[0]
    return command


def _is_number(word: str) -> bool:
    return expr.as_number(word) is not None


# -- values ---------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    return expr.as_number(value)


def _text_config(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    nested = [config.get(k) for k in ("text_config", "llm_config", "language_config")]
    return [config, *(c for c in nested if isinstance(c, Mapping))]


def model_values(facts: ModelFacts) -> dict[str, Any]:
    """``model_arch``, ``model_is_hybrid``, ``model_weights_gb``, ``model_max_context``."""
    values: dict[str, Any] = {"model_dir": facts.path}
    config = facts.config or {}
    architectures = config.get("architectures") or []
    if architectures and isinstance(architectures, list):
        values["model_arch"] = str(architectures[0])
    parts = _text_config(config)
    known = load_architectures().hybrid
    hybrid = any(str(a).startswith(tuple(known.architectures)) for a in architectures)
    for part in parts:
        layer_types = part.get("layer_types") or []
        if isinstance(layer_types, list) and any(
            str(t).lower() in known.layer_types for t in layer_types
        ):
            hybrid = True
        if any(str(key).startswith(tuple(known.config_keys)) for key in part):
            hybrid = True
        if "max_position_embeddings" in part and "model_max_context" not in values:
            values["model_max_context"] = part["max_position_embeddings"]
    if facts.config is not None:
        values["model_is_hybrid"] = hybrid
    if facts.weights_bytes:
        values["model_weights_gb"] = round(facts.weights_bytes / 1e9, 1)
    return values


def _visible(config: LaunchConfig, environment: Mapping[str, str]) -> tuple[list[int] | None, str]:
    """Indexes (nvidia-smi's) of the GPUs the server sees, or None when unknown."""
    listed = environment.get("CUDA_VISIBLE_DEVICES")
    shot = config.gpus if config.gpus is not None and config.gpus.gpus else None
    if listed is None:
        return ([g.index for g in shot.gpus] if shot else None), "nvidia-smi"
    indexes: list[int] = []
    for entry in (e.strip() for e in listed.split(",")):
        if entry.isdigit() and len(entry) <= 9:
            indexes.append(int(entry))
        elif entry.startswith(("GPU-", "MIG-")) and entry in config.gpu_uuids:
            indexes.append(config.gpu_uuids[entry])
        elif entry.startswith(("GPU-", "MIG-")) and not shot:
            indexes.append(len(indexes))
        else:
            break  # CUDA stops at the first entry it cannot use
    if shot:
        present = {g.index for g in shot.gpus}
        indexes = [i for i in indexes if i in present]
    return indexes, "CUDA_VISIBLE_DEVICES"


def _gpu_values(config: LaunchConfig, values: dict[str, Any]) -> None:
    visible, how = _visible(config, values)
    if visible is None:
        return
    values["visible_gpus"] = len(visible)
    values["visible_gpus_from"] = how
    values["visible_gpu_indexes"] = list(visible)
    shot = config.gpus
    if not shot or not shot.gpus:
        return
    values["gpu_count"] = len(shot.gpus)
    by_index = {g.index: g for g in shot.gpus}
    if visible:
        values["gpu_total_gb"] = round(min(by_index[i].total_mib for i in visible) * 2**20 / 1e9, 1)
        values["gpu_name"] = by_index[visible[0]].name
    base = int(_number(values.get("base_gpu_id")) or 0)
    needed = int(_number(values.get("gpus_needed")) or 1)
    targets = visible[base : base + needed]
    values["target_gpus"] = targets
    foreign: list[int] = []
    pids: list[int] = []
    largest: tuple[int, int, int, str] | None = None  # (mib, pid, gpu, name)
    uuid_known = bool(config.gpu_uuids)
    for index in targets:
        rows = [
            p
            for p in shot.processes
            if config.gpu_uuids.get(p.gpu_uuid) == index and p.pid not in config.own_pids
        ]
        if not uuid_known and len(shot.gpus) == 1:
            rows = [p for p in shot.processes if p.pid not in config.own_pids]
        if rows:
            foreign.append(index)
            for row in rows:
                pids.append(row.pid)
                mib = row.used_mib or 0
                if largest is None or mib > largest[0]:
                    largest = (mib, row.pid, index, row.name)
        elif not shot.processes and by_index[index].used_mib >= FOREIGN_MIB:
            foreign.append(index)
    if foreign:
        values["gpus_with_foreign_memory"] = foreign
        values["foreign_gpu"] = foreign[0]
        values["foreign_used_gib"] = round(by_index[foreign[0]].used_mib / 1024, 2)
    if pids:
        values["foreign_pids"] = sorted(set(pids))
        values["foreign_pid_count"] = len(values["foreign_pids"])
    if largest:
        values["foreign_pid"] = largest[1]
        values["foreign_gpu"] = largest[2]
        values["foreign_process"] = largest[3]
        values["foreign_gib"] = round(largest[0] / 1024, 2)


FRACTION = {"vllm": ("gpu_memory_utilization", 0.9), "sglang": ("mem_fraction_static", 0.85)}
"""The option that sets the share of each GPU the server takes, and the share assumed when it
is not given (SGLang's default depends on the GPU; 0.85 is below it for large GPUs)."""
_LONG_CONTEXT_ALLOWED = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
)


def model_config(config: LaunchConfig, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model's ``config.json`` as the engine sees it: with ``--hf-overrides`` (vLLM) or
    ``--json-model-override-args`` (SGLang) laid over it."""
    if config.model is None or config.model.config is None:
        return None
    merged = dict(config.model.config)
    for name in ("hf_overrides", "json_model_override_args"):
        text = values.get(name)
        if not isinstance(text, str):
            continue
        try:
            override = json.loads(text)
        except ValueError:
            continue
        if isinstance(override, dict):
            merged.update(override)
    return merged


def _tokens(value: Any) -> int | None:
    """``131072``, ``128k``, ``1M`` (vLLM reads the suffixes; as powers of two ``K``/``M``)."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text)
    if not match:
        return None
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1_000_000, "M": 1024 * 1024}[match.group(2)]
    return int(float(match.group(1)) * scale)


def _model_fit(config: LaunchConfig, values: dict[str, Any], engine: str, tp: int, pp: int) -> None:
    """What the model's shape says about this launch: its heads against the tensor-parallel
    size, the context asked for against the one the engine derives, and (when a change is
    needed) the tensor-parallel size that works, computed from the weights, the GPUs and the
    memory fraction (:func:`sizing.choose_tp`)."""
    merged = model_config(config, values)
    if merged is None:
        return
    shape = sizing.model_shape(merged, bool(values.get("model_is_hybrid")))
    if shape.heads:
        values["model_attention_heads"] = shape.heads
    if shape.kv_heads:
        values["model_kv_heads"] = shape.kv_heads
    limit = sizing.context_limit(merged, engine)
    knob = "context_length" if engine == "sglang" else "max_model_len"
    requested = _tokens(values.get(knob))
    if limit is not None:
        values["model_context_limit"] = limit.tokens
        values["model_context_from"] = limit.how
    if requested is not None:
        values["context_requested"] = requested
        values["context_knob"] = knob
    environment = {**config.environment}
    if any(environment.get(n, "").strip().lower() in ("1", "true") for n in _LONG_CONTEXT_ALLOWED):
        values["context_override_allowed"] = True
    attention_tp = max(tp, 1)
    if values.get("enable_dp_attention"):  # SGLang: attention is split over tp / dp ranks
        attention_tp = max(1, int(attention_tp // (_number(values.get("dp_size")) or 1)))
    indivisible = shape.tp_problems(attention_tp)
    if indivisible:
        values["tp_indivisible"] = " and ".join(indivisible)
    fraction_name, fraction_default = FRACTION.get(engine, ("", 0.9))
    fraction = _number(values.get(fraction_name)) or fraction_default
    values["memory_fraction"] = fraction
    weights = _number(values.get("model_weights_gb"))
    total = _number(values.get("gpu_total_gb"))
    context = requested or (limit.tokens if limit else None)
    fits = True
    if weights and total:
        budget = total * fraction
        kv = shape.kv_gb_per_gpu(max(tp, 1), context or 4096) or 0.0
        fits = weights / (tp * pp) + kv / pp <= budget
        if not fits:
            values["tp_does_not_fit"] = True
            values["memory_budget_gb"] = round(budget, 1)
    if fits and not indivisible:
        return
    visible = values.get("visible_gpu_indexes")
    count = _number(values.get("gpu_count"))
    choice = sizing.choose_tp(
        shape,
        current=max(tp, 1),
        pp=max(pp, 1),
        weights_gb=weights,
        gpu_total_gb=total,
        fraction=fraction,
        context=context,
        visible=visible if isinstance(visible, list) else None,
        gpu_count=int(count) if count else None,
    )
    if choice.numbers:
        values["fit_numbers"] = choice.numbers
    if choice.missing:
        values["fit_missing"] = choice.missing
    if choice.tp is not None and choice.tp != tp and not choice.missing:
        values["fit_tp"] = values["suggested_tp"] = choice.tp
        if choice.cuda_visible_devices:
            values["fit_cuda_visible_devices"] = choice.cuda_visible_devices


def config_values(config: LaunchConfig) -> dict[str, Any]:
    """Every value a preflight condition can read (names as the runtime side uses them)."""
    command = parse_command(config.argv, config.engine_version)
    engine = command.engine
    environment = {**config.environment, **command.environment}
    values: dict[str, Any] = {**environment}
    values["unit_problems"] = list(config.unit_problems)
    values["sandbox_problems"] = list(config.sandbox_problems)
    if config.unit:
        values["unit"] = config.unit
    if engine is None:
        return values
    values.update(profile(engine).defaults)
    values.update(command.args)
    values["engine"] = engine
    known = config.engine_version
    if known is not None and known.engine == engine and known.version is not None:
        values["engine_version"] = values[f"{engine}_version"] = known.version
    values["engine_prog"] = profile(engine).prog
    values["spec_v2_enabled"] = environment.get("SGLANG_ENABLE_SPEC_V2", "").strip().lower() in {
        "1",
        "true",
        "yes",
        "on",
    }
    spec = values.get("speculative_config")
    if isinstance(spec, str):
        try:
            parsed = json.loads(spec)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            if parsed.get("method"):
                values.setdefault("speculative_method", str(parsed["method"]))
            if parsed.get("num_speculative_tokens") is not None:
                values.setdefault("num_speculative_tokens", parsed["num_speculative_tokens"])
    if (
        engine == "vllm"
        and values.get("speculative_method")
        and not values.get("speculative_algorithm")
    ):
        values["speculative_algorithm"] = values["speculative_method"]
    tp = _number(values.get("tp_size")) or 1
    pp = _number(values.get("pp_size")) or 1
    nnodes = _number(values.get("nnodes")) or 1
    values["gpus_needed"] = max(1, int(tp * pp // max(nnodes, 1)))
    if config.model is not None:
        values.update(model_values(config.model))
    _gpu_values(config, values)
    weights = _number(values.get("model_weights_gb"))
    if weights:
        values["weights_per_gpu_gb"] = round(weights / (tp * pp), 1)
    _model_fit(config, values, engine, int(tp), int(pp))
    needed = int(values["gpus_needed"])
    count = int(_number(values.get("gpu_count")) or 0)
    if "CUDA_VISIBLE_DEVICES" in environment and count >= needed:
        values["suggested_cuda_visible_devices"] = ",".join(str(i) for i in range(needed))
    if config.port is not None:
        values["port_in_use"] = bool(config.port.in_use)
        values["port_checked"] = f"{config.port.host}:{config.port.port}"
        if config.port.holder:
            values["port_holder"] = config.port.holder
    _foreign_flags(config, command, values)
    foreign: Mapping[str, str] = (config.flags.get(engine) or {}).get("foreign") or {}
    values.update(
        problems(
            engine,
            command.words,
            environment,
            config.version_for(engine),
            foreign,
            profile(engine).env_prefixes,
            config.flags.get(engine) or {},
        )
    )
    values["unknown_flag_names"] = [item["flag"] for item in values.get("unknown_flags") or []]
    family = model_family(str(values.get("model_path") or ""), str(values.get("model_arch") or ""))
    if family:
        values["model_family"] = family
    parsers = config.parsers.get(engine) or {}
    for kind in ("tool_call_parsers", "reasoning_parsers"):
        if parsers.get(kind):
            values[f"valid_{kind}"] = list(parsers[kind])
    return values


_FAMILIES = (
    ("qwen3_coder", re.compile(r"qwen3-?coder", re.I)),
    ("deepseek_r1", re.compile(r"deepseek-?r1", re.I)),
    ("qwen", re.compile(r"qwen|qwq", re.I)),
    ("llama3", re.compile(r"llama-?3", re.I)),
)


def model_family(model: str, arch: str = "") -> str | None:
    """The family whose tool-call and reasoning parsers a model uses, from its name.

    >>> model_family("/models/Qwen3-Coder-30B-A3B"), model_family("meta-llama/Llama-3.3-70B")
    ('qwen3_coder', 'llama3')
    """
    name = model.rstrip("/").rsplit("/", 1)[-1] or arch
    return next((family for family, pattern in _FAMILIES if pattern.search(name)), None)


def _foreign_flags(config: LaunchConfig, command: Command, values: dict[str, Any]) -> None:
    """The other engine's speculative-decoding flags (one finding rewrites them all); other
    flags of the other engine are unknown flags, found with the flag table."""
    engine = command.engine
    if engine is None:
        return
    foreign: Mapping[str, str] = (config.flags.get(engine) or {}).get("foreign") or {}
    spec = [
        written
        for written in dict.fromkeys(command.flags)
        if written.startswith("--")
        and _SPEC_FLAGS.match(written)
        and (written in foreign or "--" + written[2:].replace("_", "-") in foreign)
    ]
    if spec:
        values["other_engine_spec_flag"] = spec[0]
        values["other_engine_spec_flags"] = spec


# -- findings -------------------------------------------------------------------------------


def _applies(signature: Signature, engine: str | None) -> bool:
    if "any" in signature.engines:
        return True
    return engine is not None and engine in signature.engines


def _origins(config: LaunchConfig, names: Iterable[str], values: Mapping[str, Any]) -> list[Origin]:
    """Where the named values came from, the command line first."""
    command = parse_command(config.argv, config.engine_version)
    out: list[Origin] = []
    flag_names = set(command.args) | {"engine", "engine_prog"}
    gpu_names = {"visible_gpus", "gpu_total_gb", "gpu_count", "target_gpus"}
    for name in names:
        origin: Origin | None = None
        if name in ("visible_gpus", "visible_gpus_from") and (
            values.get("visible_gpus_from") == "CUDA_VISIBLE_DEVICES"
        ):
            name = "CUDA_VISIBLE_DEVICES"
            cvd = f"CUDA_VISIBLE_DEVICES={values.get(name)}"
            out.append(config.env_origins.get(name) or Origin("<environment>", None, cvd))
            continue
        if name in flag_names or name.startswith("other_engine"):
            origin = config.exec_origin
        elif name in config.env_origins:
            origin = config.env_origins[name]
        elif name in config.environment or name in command.environment:
            origin = config.exec_origin
        elif name.startswith("model_") and config.model is not None:
            origin = Origin(f"{config.model.path}/config.json", None, _model_line(values))
        elif name.startswith(("gpus_with_foreign", "foreign_")) or name in gpu_names:
            out += _gpu_origins(config, values, foreign=name not in gpu_names)
            continue
        elif name.startswith("port_") and config.port is not None:
            holder = f" (held by {config.port.holder})" if config.port.holder else ""
            state = "already in use" if config.port.in_use else "free"
            text = f"{config.port.host}:{config.port.port} is {state}{holder}"
            origin = Origin(PORT_SOURCE, None, text)
        if origin is not None:
            out.append(origin)
    if config.exec_origin is not None:
        out.insert(0, config.exec_origin)
    unique: list[Origin] = []
    for origin in out:
        if origin not in unique:
            unique.append(origin)
    return unique


def _model_line(values: Mapping[str, Any]) -> str:
    parts = []
    if values.get("model_arch"):
        parts.append(f'"architectures": ["{values["model_arch"]}"]')
    if values.get("model_is_hybrid"):
        parts.append("hybrid (Mamba / linear-attention layers)")
    if values.get("model_weights_gb"):
        parts.append(f"{values['model_weights_gb']} GB of weights")
    return ", ".join(parts) or "config.json"


def _gpu_origins(config: LaunchConfig, values: Mapping[str, Any], foreign: bool) -> list[Origin]:
    shot = config.gpus
    if shot is None:
        return []
    targets = set(values.get("gpus_with_foreign_memory" if foreign else "target_gpus") or [])
    out = [
        Origin(GPU_SOURCE, None, f"{g.index}, {g.name}, {g.used_mib} MiB, {g.total_mib} MiB")
        for g in shot.gpus
        if g.index in targets or not targets
    ]
    if foreign:
        pids = set(values.get("foreign_pids") or [])
        out += [
            Origin(GPU_SOURCE, None, f"{p.pid}, {p.name}, {p.gpu_uuid}, {p.used_mib} MiB")
            for p in shot.processes
            if p.pid in pids
        ]
    return out


def _evidence(
    signature: Signature,
    rule: PreflightRule,
    config: LaunchConfig,
    values: Mapping[str, Any],
    extra: Iterable[str] = (),
) -> list[Evidence]:
    names: list[str] = list(extra)
    for text in rule.when:
        names += sorted(signature.condition(text).names)
    if rule.evidence:
        names += sorted(expr.template_fields(rule.evidence))
    origins = _origins(config, dict.fromkeys(names), values)
    message = expr.fill(rule.evidence, values) if rule.evidence else None
    evidence = []
    for i, origin in enumerate(origins):
        evidence.append(
            Evidence(
                source=origin.source,
                line=origin.line,
                unit=config.unit,
                text=origin.text,
                message=message if i == 0 else None,
            )
        )
    if not evidence and message:
        evidence.append(Evidence(source=COMMAND_LINE, unit=config.unit, text=message))
    return evidence


def _view(
    signature: Signature, rule: PreflightRule, per_item: set[str], certain: bool = True
) -> Signature:
    """The signature as preflight reports it: the rule's explanation and patches first.
    (``model_copy`` keeps the parsed conditions, which already hold the rule's.) It does not
    supersede per-problem signatures: those leave out the flags another finding claims.
    A problem found against a release other than the one in use is a warning."""
    update: dict[str, Any] = {
        "explanation": rule.explanation or signature.explanation,
        "patches": [*rule.patches, *signature.patches],
        "generic": False,  # a rule is precise: it is never a catch-all
        "supersedes": [s for s in signature.supersedes if s not in per_item],
    }
    if not certain:
        update["severity"] = Severity.WARNING
    return signature.model_copy(update=update)


def _draft(
    signature: Signature,
    rule: PreflightRule,
    config: LaunchConfig,
    values: dict[str, Any],
    per_item: set[str],
    item: Mapping[str, Any] | None = None,
) -> Draft:
    own = dict(values)
    if item is not None:
        own.update(item)
    for name, template in rule.values.items():
        filled = expr.fill(template, own)
        if filled is not None:
            own[name] = filled
    own.update(phase=rule.phase, count=1, attempts=1, ranks=1)
    derive(signature, own)
    certain = bool(item.get("certain", True)) if item is not None else True
    versions = version_check(signature, own, seen="the version in use is")
    if versions.outside:  # the installed release is not one this failure is known in
        certain = False
    extra = [str(item["variable"])] if item is not None and item.get("variable") else []
    evidence = _evidence(signature, rule, config, own, extra)
    if item is not None and item.get("at_source"):
        message = expr.fill(rule.evidence, own) if rule.evidence else None
        evidence = [
            Evidence(
                source=str(item["at_source"]),
                line=item.get("at_line"),
                unit=config.unit,
                text=str(item.get("at_text") or ""),
                message=message,
            )
        ]
    return Draft(
        signature=_view(signature, rule, per_item, certain),
        seq=PHASE_ORDER[rule.phase],
        values=own,
        evidence=evidence,
        count=1,
        attempts=1,
        phase=rule.phase,
        confidence=Confidence.LOW if versions.outside else signature.confidence,
        unit=config.unit,
        versions=versions,
    )


def _claimed(rule: PreflightRule, values: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    for template in rule.claims:
        filled = expr.fill(template, values)
        if filled:
            out.update(part.strip() for part in filled.split(","))
    return out


def drafts(config: LaunchConfig, signatures: Iterable[Signature]) -> list[Draft]:
    """One draft per signature whose preflight rule holds for this configuration, and one per
    problem for rules that report each problem of a list (``each:``)."""
    values = config_values(config)
    engine = values.get("engine")
    applicable = [s for s in signatures if s.preflight and _applies(s, engine)]
    per_item = {s.id for s in applicable if any(r.each for r in s.preflight)}
    out: list[Draft] = []
    claimed: set[str] = set()
    for signature in applicable:
        for rule in signature.preflight:
            if rule.each or not signature.holds(rule.when, values):
                continue
            out.append(_draft(signature, rule, config, values, per_item))
            claimed |= _claimed(rule, out[-1].values)
            break
    for signature in applicable:
        for rule in signature.preflight:
            items = values.get(rule.each or "") if rule.each else None
            for item in items if isinstance(items, list) else []:
                if {item.get("flag"), item.get("written")} & claimed:
                    continue
                own = {**values, **item}
                if signature.holds(rule.when, own):
                    out.append(_draft(signature, rule, config, values, per_item, item))
    return out


def _independent(finding: Finding) -> Finding:
    """Before the start nothing follows from anything: each failure is a problem of its own,
    with its own fix (the primary is the one the server would hit first)."""
    if finding.role is Role.SYMPTOM:
        return finding.model_copy(update={"role": Role.ROOT_CAUSE, "caused_by": None})
    return finding


def _as_written(finding: Finding, resolved: Mapping[str, str]) -> Finding:
    """A patch that changes an option also removes it where the command line abbreviates it
    (``--mamba-sched`` for ``--mamba-scheduler-strategy``), so it is not given twice."""
    patch = finding.patch
    if patch is None:
        return finding
    changed = set(patch.args_remove) | {word for word in patch.args_add if word.startswith("--")}
    extra = [w for w, flag in resolved.items() if flag in changed and w not in changed]
    if not extra:
        return finding
    update = {"args_remove": [*patch.args_remove, *extra]}
    return finding.model_copy(update={"patch": patch.model_copy(update=update)})


def check(
    config: LaunchConfig,
    signatures: Iterable[Signature],
    inputs: list[InputSummary] | None = None,
    notes: Iterable[str] = (),
) -> Diagnosis:
    """The launch configuration against the library: a diagnosis as ``diagnose`` reports one
    (no start attempts; evidence points at the unit file's lines)."""
    command = parse_command(config.argv, config.engine_version)
    findings = [
        _as_written(_independent(f), command.resolved) for f in rank(drafts(config, signatures))
    ]
    values_engine = command.engine
    diagnosis = Diagnosis(
        inputs=inputs or [],
        primary=primary_of(findings),
        findings=findings,
        unit=config.unit,
        engine=values_engine,
        phase_reached=None,
        attempts=0,
        notes=list(notes),
    )
    return with_plan(diagnosis)
