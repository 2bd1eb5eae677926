"""``diagnose preflight``: refuse a known-bad launch configuration before the (slow) start.

This module does the reading: the unit (file, drop-ins, environment files), the model's
``config.json`` and weight size, an ``nvidia-smi`` snapshot, whether the port is free. The
judging is :mod:`diagnose.preflight.checks`'s; patches are rendered against the unit exactly as
``diagnose journal`` renders them.
"""

from __future__ import annotations

import errno
import grp
import json
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from diagnose.core import expr
from diagnose.core.changes import all_fixes, incident_of, new_fixes
from diagnose.core.dropin import Fix, flag_groups, secret_names
from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis, Finding, InputSummary, Patch, Role, Severity
from diagnose.core.units import unit_name
from diagnose.core.versions import is_version
from diagnose.engines import profile
from diagnose.inputs import gpu
from diagnose.inputs.gpu import GpuSnapshot
from diagnose.library import builtin_dir, load_library
from diagnose.preflight.checks import (
    COMMAND_LINE,
    Command,
    LaunchConfig,
    ModelFacts,
    Origin,
    PortFacts,
    check,
    expand_argv,
    parse_command,
)
from diagnose.preflight.flags import EngineVersion
from diagnose.systemd.patching import earlier_fixes, fix_against_unit, patched_against_unit
from diagnose.systemd.sandbox import is_true, sandbox_problems
from diagnose.systemd.unit import (
    UnitConfig,
    find_unit,
    load_unit_file,
    parse_environment_assignments,
    patched_argv,
    systemctl_unit,
    under_root,
)

Say = Callable[[str], None]


@dataclass
class PreflightOptions:
    unit: str | None = None
    unit_file: Path | None = None
    command: list[str] = field(default_factory=list)
    root: Path | None = None
    """Read unit files, environment files and local model directories under this root."""
    gpu: bool = True
    port: bool = True
    snapshot: Callable[[], GpuSnapshot] | None = None
    """How to look at the GPUs (tests pass their own); default :func:`gpu.snapshot`."""
    engine_version: tuple[str, str] | None = None
    """``--engine-version``: used when the unit's interpreter does not say."""


@dataclass
class PreflightResult:
    diagnosis: Diagnosis
    config: LaunchConfig
    unit: UnitConfig | None
    notes: list[str]


def _load_unit(options: PreflightOptions, without_fixes: bool = False) -> UnitConfig | None:
    name = unit_name(options.unit) if options.unit else None
    if options.unit_file is not None:
        if not options.unit_file.is_file():
            raise UserError(f"--unit-file {options.unit_file}: no such file")
        return load_unit_file(options.unit_file, name, options.root, without_fixes=without_fixes)
    assert name is not None
    if options.root is not None:
        return find_unit(name, options.root, without_fixes=without_fixes)
    return systemctl_unit(name, without_fixes=without_fixes)


def _data(name: str) -> dict[str, Any]:
    path = builtin_dir() / name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise UserError(f"{path}: cannot read: {error}") from None
    return data if isinstance(data, dict) else {}


def _exec_origin(unit: UnitConfig) -> Origin | None:
    settings = [s for s in unit.settings if s.section == "Service" and s.key == "ExecStart"]
    settings = [s for s in settings if s.value]
    if not settings:
        return None
    last = settings[-1]
    return Origin(last.path, last.line, f"ExecStart={last.value}")


def _env_origins(unit: UnitConfig) -> dict[str, Origin]:
    origins: dict[str, Origin] = {}
    for setting in unit.settings:
        if setting.section == "Service" and setting.key == "Environment" and setting.value:
            for name, _ in parse_environment_assignments(setting.value):
                origins[name] = Origin(setting.path, setting.line, f"Environment={setting.value}")
    for env_file in unit.environment_files:
        for name, value in env_file.values.items():
            origins[name] = Origin(env_file.path, None, f"{name}={value}")
    return origins


# -- what systemd itself would refuse -------------------------------------------------------


def _setting_origin(
    unit: UnitConfig, key: str, value: str | None = None
) -> tuple[str | None, int | None, str]:
    """Where ``key=`` is set last (the one set to ``value``, when given)."""
    found = [s for s in unit.settings if s.section == "Service" and s.key == key and s.value]
    if value is not None:
        found = [s for s in found if s.value.lstrip("-").strip() == value] or found
    if not found:
        return unit.fragment, None, f"[Service] has no {key}="
    return found[-1].path, found[-1].line, f"{key}={found[-1].value}"


def _problem(
    unit: UnitConfig, key: str, kind: str, text: str, value: str | None = None
) -> dict[str, Any]:
    source, line, written = _setting_origin(unit, key, value)
    return {
        "problem": text,
        "kind": kind,
        "setting": key,
        "at_source": source or unit.name,
        "at_line": line,
        "at_text": written,
    }


def _passwd_entry(user: str, root: Path | None) -> list[str] | None:
    """``user``'s passwd fields ([] when there is no such user; None: cannot tell here)."""
    if root is None:
        try:
            return [str(field) for field in pwd.getpwnam(user)]
        except KeyError:
            return []
    try:
        text = (root / "etc/passwd").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((f for f in (line.split(":") for line in text.splitlines()) if f[0] == user), [])


def _user_exists(user: str, root: Path | None) -> bool | None:
    """Whether ``user`` exists (None: cannot tell here)."""
    if user.isdigit():
        return True
    entry = _passwd_entry(user, root)
    return None if entry is None else bool(entry)


_ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$")
"""A user or group name systemd accepts (its relaxed check: no spaces, no leading dash)."""


def _group_exists(group: str, root: Path | None) -> bool | None:
    """Whether ``group`` exists (None: cannot tell here), from ``etc/group`` under ``root``."""
    if group.isdigit():
        return True
    if root is None:
        try:
            grp.getgrnam(group)
        except KeyError:
            return False
        return True
    try:
        text = (root / "etc/group").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return any(line.split(":")[0] == group for line in text.splitlines())


def _service_home(unit: UnitConfig, root: Path | None) -> str | None:
    """The home directory of the user the service runs as (None: cannot tell)."""
    user = (unit.get("Service", "User") or "root").strip()
    if user in ("root", "0"):
        return "/root"
    if "%" in user or is_true(unit.get("Service", "DynamicUser")):
        return None
    entry = _passwd_entry(user, root)
    return entry[5] if entry and len(entry) > 5 else None


def unit_sandbox_problems(
    unit: UnitConfig, model_path: str | None, root: Path | None
) -> list[dict[str, Any]]:
    """What the unit's hardening takes away from the server, with where it is written."""
    return [
        {
            **_problem(unit, found.setting, found.kind, found.problem),
            "path": found.path,
        }
        for found in sandbox_problems(unit, model_path, _service_home(unit, root))
    ]


def unit_problems(
    unit: UnitConfig, root: Path | None, notes: list[str] | None = None
) -> list[dict[str, Any]]:
    """What systemd would refuse before the server starts: no ExecStart=, a required
    EnvironmentFile= or the WorkingDirectory= missing, a User= or Group= that does not exist
    (on this host, or in ``etc/passwd`` and ``etc/group`` under ``root``; where those files
    are missing, ``notes`` says what could not be checked)."""
    problems: list[dict[str, Any]] = []
    if not unit.exec_start and unit.get("Service", "Type") != "oneshot":
        problems.append(
            _problem(
                unit,
                "ExecStart",
                "no_exec_start",
                'the unit has no ExecStart=: systemd refuses to start it ("Service has no '
                'ExecStart=, ExecStop=, or SuccessAction=. Refusing.")',
            )
        )
    for env_file in unit.environment_files:
        if not env_file.loaded and not env_file.optional and env_file.unreadable is None:
            problem = _problem(
                unit,
                "EnvironmentFile",
                "environment_file_missing",
                f"EnvironmentFile={env_file.path} does not exist: systemd fails the start "
                '("Failed to load environment files"); create it, or write '
                f"EnvironmentFile=-{env_file.path} to make it optional",
                env_file.path,
            )
            problems.append(problem)
    for setting in unit.ignored:
        in_unit = setting.path == unit.fragment
        problems.append(
            {
                "problem": f"{setting.key}= holds bytes that are not UTF-8: systemd ignores the "
                "assignment"
                + (", and the unit fails to load" if in_unit else "")
                + ' ("String is not UTF-8 clean"); write it in UTF-8',
                "kind": "not_utf8",
                "setting": setting.key,
                "at_source": setting.path,
                "at_line": setting.line,
                "at_text": f"{setting.key}={setting.value}",
            }
        )
    directory = unit.get("Service", "WorkingDirectory") or ""
    checkable = directory.startswith("/") and "%" not in directory
    if checkable and not under_root(root, directory).is_dir():
        problems.append(
            _problem(
                unit,
                "WorkingDirectory",
                "working_directory_missing",
                f"WorkingDirectory={directory} does not exist"
                + (f" under {root}" if root is not None else "")
                + ": systemd fails the start with "
                "status=200/CHDIR",
            )
        )
    dynamic = is_true(unit.get("Service", "DynamicUser"))
    where = f"under {root}" if root is not None else "on this host"
    for key, exists, status, table in (
        ("User", _user_exists, "217/USER", "etc/passwd"),
        ("Group", _group_exists, "216/GROUP", "etc/group"),
    ):
        name = (unit.get("Service", key) or "").strip()
        if not name or "%" in name or dynamic or name in ("root", "0"):
            continue
        if not _ACCOUNT_NAME.match(name):
            if notes is not None:
                notes.append(
                    f"{key}={name} is not a valid name: systemd ignores the line (and the "
                    "service runs as root); a comment after a value is part of the value"
                )
            continue
        found = exists(name, root)
        if found is None and notes is not None:
            notes.append(f"{key}={name}: not checked, there is no {table} {where}")
        if found is False:
            problems.append(
                _problem(
                    unit,
                    key,
                    f"{key.lower()}_missing",
                    f"{key}={name} does not exist {where}: systemd fails the start with "
                    f"status={status}",
                )
            )
    return problems


def analyze_verify(unit: UnitConfig) -> list[str]:
    """``systemd-analyze verify`` of the unit file, where the tool is installed: what would
    stop the start (a command that is not executable, a line of the unit's files systemd
    rejects), not what it ignores or what the host lacks (empty when it cannot run)."""
    tool = shutil.which("systemd-analyze")
    if tool is None or unit.fragment is None:
        return []
    try:
        result = subprocess.run(
            [tool, "verify", "--man=no", unit.fragment],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    text = result.stderr.decode("utf-8", "replace")
    files = tuple(f"{path}:" for path in (unit.fragment, *unit.dropins))
    return [
        line
        for line in text.splitlines()
        if "is not executable" in line or (line.startswith(files) and "ignoring" not in line)
    ]


# -- facts the checks need ----------------------------------------------------------------


def _hf_snapshot(model: str, environment: Mapping[str, str], root: Path | None) -> Path | None:
    """A Hugging Face id (``org/name``) in the unit's HF cache, when it is there."""
    if model.startswith((".", "/")) or model.count("/") != 1:
        return None
    home = environment.get("HF_HUB_CACHE") or (
        f"{environment['HF_HOME']}/hub" if environment.get("HF_HOME") else None
    )
    if not home:
        return None
    repo = under_root(root, home) / f"models--{model.replace('/', '--')}"
    ref = repo / "refs" / "main"
    try:
        if ref.is_file():
            candidate = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
            return candidate if candidate.is_dir() else None
        snapshots = sorted((repo / "snapshots").iterdir(), key=lambda p: p.stat().st_mtime)
    except OSError:
        return None
    return snapshots[-1] if snapshots else None


def _weights_bytes(directory: Path) -> int | None:
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        try:
            data = json.loads((directory / index).read_text(encoding="utf-8"))
            total = data.get("metadata", {}).get("total_size")
            if isinstance(total, (int, float)) and total > 0:
                return int(total)
        except (OSError, ValueError, AttributeError):
            continue
    for pattern in ("*.safetensors", "*.bin"):
        try:
            sizes = [p.stat().st_size for p in directory.glob(pattern)]
        except OSError:
            sizes = []
        if sizes:
            return sum(sizes)
    return None


def _model(
    model: Any, environment: Mapping[str, str], root: Path | None, notes: list[str]
) -> ModelFacts | None:
    if not isinstance(model, str) or not model or "$" in model or "%" in model:
        return None
    directory = under_root(root, model)
    if not directory.is_dir():
        directory = _hf_snapshot(model, environment, root) or directory
    if not directory.is_dir():
        if model.startswith("/"):
            notes.append(f"model {model}: no such directory here; model checks skipped")
        elif model.count("/") == 1:
            notes.append(
                f"model {model}: a Hugging Face id not in the unit's HF_HOME cache; "
                "model checks (hybrid layers, weight size) skipped"
            )
        return None
    facts = ModelFacts(path=str(directory))
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        facts.config = config if isinstance(config, dict) else None
    except OSError:
        notes.append(f"model {model}: no readable config.json")
    except ValueError as error:
        notes.append(f"model {model}: config.json is not valid JSON: {error}")
    facts.weights_bytes = _weights_bytes(directory)
    return facts


def _port_holder(port: int) -> str | None:
    """``pid NAME`` of the process listening on ``port`` (from /proc; own processes, or all
    as root), or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in targets:
                    name = (proc / "comm").read_text(encoding="utf-8").strip()
                    return f"pid {proc.name} ({name})"
        except OSError:
            continue
    return None


def check_port(host: str, port: int, own_pids: frozenset[int]) -> PortFacts:
    """Can the server bind ``host:port``? Bound as uvicorn and vLLM bind (SO_REUSEADDR on, so
    connections of a previous run in TIME_WAIT do not count), then closed at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bind_host = "" if host in ("0.0.0.0", "::") else host
    in_use: bool | None = False
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_host, port))
        except OSError as error:
            in_use = True if error.errno == errno.EADDRINUSE else None
    holder = _port_holder(port) if in_use else None
    if holder and int(holder.split()[1]) in own_pids:
        return PortFacts(host, port, False, holder)
    return PortFacts(host, port, in_use, holder)


def unit_pids(unit: str) -> frozenset[int]:
    """Processes in the unit's cgroup (a running instance that a restart replaces)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            text = (proc / "cgroup").read_text(encoding="utf-8")
        except OSError:
            continue
        if any(line.rstrip().endswith(f"/{unit}") for line in text.splitlines()):
            pids.add(int(proc.name))
    return frozenset(pids)


def installed_version(argv: list[str], engine: str, root: Path | None) -> EngineVersion | None:
    """The engine release installed beside the command's interpreter: the
    ``site-packages/<engine>-X.dist-info`` of the virtual environment (or prefix) whose
    ``bin/`` holds ``argv[0]``."""
    if not argv or not argv[0].startswith("/"):
        return None
    prefix = under_root(root, argv[0]).parent.parent
    patterns = [
        f"{lib}/python3*/{packages}/{engine}-*.dist-info"
        for lib in ("lib", "lib64")
        for packages in ("site-packages", "dist-packages")
    ]
    try:
        found = sorted(path for pattern in patterns for path in prefix.glob(pattern))
    except OSError:
        return None
    for info in found:
        version = info.name[len(engine) + 1 : -len(".dist-info")]
        if is_version(version):
            inside = info.resolve().relative_to(root.resolve()) if root is not None else None
            shown = f"/{inside}" if inside is not None else str(info)
            return EngineVersion(engine, version, "installed", shown)
    return None


def _image_version(command: Command) -> EngineVersion | None:
    """``vllm/vllm-openai:v0.11.0``: the release an image tag names."""
    if command.engine is None or command.image is None or ":" not in command.image:
        return None
    tag = command.image.rsplit(":", 1)[1].lstrip("v")
    if not is_version(tag):
        return None
    return EngineVersion(command.engine, tag, "image", command.image)


def engine_version(
    options: PreflightOptions, argv: list[str], command: Command
) -> EngineVersion | None:
    """The release the command runs: installed beside its interpreter, else
    ``--engine-version``, else an image tag, else None (the newest mined release is used)."""
    engine = command.engine
    if engine is None:
        return None
    found = installed_version(argv, engine, options.root)
    if found is None and options.engine_version is not None:
        given_engine, given = options.engine_version
        found = EngineVersion(engine, given, "given") if given_engine == engine else None
    return found or _image_version(command)


# -- the command --------------------------------------------------------------------------


def gather(
    options: PreflightOptions, notes: list[str], without_fixes: bool = False
) -> tuple[LaunchConfig, UnitConfig | None]:
    """Read everything the checks need into a :class:`LaunchConfig` (``without_fixes``: the
    unit as it is without diagnose's own drop-in)."""
    unit: UnitConfig | None = None
    if options.command:
        argv = list(options.command)
        environment = dict(os.environ)
        exec_origin: Origin | None = Origin(COMMAND_LINE, None, shlex.join(argv))
        env_origins: dict[str, Origin] = {}
        name = unit_name(options.unit) if options.unit else None
    elif options.unit or options.unit_file:
        unit = _load_unit(options, without_fixes=without_fixes)
        if unit is None:
            raise UserError(
                f"{unit_name(options.unit or '')}: unit not found",
                help="pass --unit-file PATH, or --root DIR for an installed tree",
            )
        notes += unit.warnings
        command = unit.command
        environment = unit.effective_environment
        argv = command.argv if command else []
        if command is not None and command.through_shell:
            notes.append(
                f"{unit.name}: ExecStart= runs a shell script; preflight cannot see the "
                "engine's flags (check the script's command line with `diagnose preflight -- ...`)"
            )
            argv = []
        argv, missing = expand_argv(argv, environment)
        for variable in dict.fromkeys(missing):
            notes.append(
                f"{unit.name}: ExecStart= uses ${variable}, which no Environment= or "
                "EnvironmentFile= defines: systemd expands it to nothing"
            )
        exec_origin = _exec_origin(unit)
        env_origins = _env_origins(unit)
        name = unit.name
    else:
        raise UserError(
            "nothing to check",
            help="pass -u UNIT, --unit-file PATH, or the command line after --",
        )
    parsed = parse_command(argv)
    if argv and parsed.engine is None:
        notes.append("no SGLang or vLLM command found in the command line; nothing to check")
    version = engine_version(options, argv, parsed)
    given = options.engine_version
    if given is not None and parsed.engine is not None and given[0] != parsed.engine:
        notes.append(
            f"--engine-version names {given[0]}, but the command runs {parsed.engine}: ignored"
        )
    if parsed.engine is not None:
        version = version or EngineVersion(parsed.engine, None, "newest")
        notes.append(version.describe())
        parsed = parse_command(argv, version)
    environment = {**environment, **parsed.environment}
    notes += out_of_range_values(parsed.args)
    config = LaunchConfig(
        argv=argv,
        environment=environment,
        unit=name,
        exec_origin=exec_origin,
        env_origins=env_origins,
        parsers=_data("_parsers.yaml"),
        flags=_data("_flags.yaml"),
        engine_version=version,
    )
    if unit is not None:
        config.unit_problems = unit_problems(unit, options.root, notes)
        if options.root is None and options.unit_file is None:
            config.unit_problems += [
                {**_problem(unit, "ExecStart", "verify", line), "at_text": line}
                for line in analyze_verify(unit)
            ]
    if unit is not None and parsed.engine is not None:
        model_path = parsed.args.get("model_path")
        config.sandbox_problems = unit_sandbox_problems(
            unit, str(model_path) if model_path else None, options.root
        )
    if parsed.engine is None:
        return config, unit
    live = options.root is None
    if name and live:
        config.own_pids = unit_pids(name)
    config.model = _model(parsed.args.get("model_path"), environment, options.root, notes)
    if options.gpu:
        shot = (options.snapshot or gpu.snapshot)()
        if shot.missing:
            notes.append(f"missing evidence: {shot.missing}")
        else:
            config.gpus = shot
            config.gpu_uuids = gpu.uuids() if shot.processes else {}
    if options.port:
        defaults = profile(parsed.engine).defaults
        host = str(parsed.args.get("host") or defaults["host"])
        port_text = str(parsed.args.get("port", defaults["port"]))
        if port_text.isdigit() and (len(port_text) > 5 or int(port_text) > 65535):
            notes.append(f"port {_shortened(port_text)}: not a port number (0-65535); not checked")
        elif port_text.isdigit():
            port = parsed.published.get(int(port_text), int(port_text))
            config.port = check_port(host, port, config.own_pids)
            if config.port.in_use is None:
                notes.append(f"port {host}:{port}: could not check (not a local address?)")
    return config, unit


_NUMERIC = re.compile(
    r"[+-]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan|infinity)", re.I
)


def out_of_range_values(args: Mapping[str, Any]) -> list[str]:
    """A note for each flag whose value reads as a number no check can hold (``--tp-size``
    of hundreds of digits, ``1e400``, ``nan``): the checks that need it are left out.

    >>> out_of_range_values({"tp_size": "1" + "0" * 400, "port": "30000"})
    ['--tp-size 1000000000…0000000000 (401 characters): out of range for a number; not checked']
    """
    notes = []
    for name, value in args.items():
        if (
            isinstance(value, str)
            and _NUMERIC.fullmatch(value.strip())
            and expr.as_number(value) is None
        ):
            flag = "--" + name.replace("_", "-")
            notes.append(f"{flag} {_shortened(value)}: out of range for a number; not checked")
    return notes


def _shortened(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}…{text[-10:]} ({len(text)} characters)"


def _inputs(options: PreflightOptions, unit: UnitConfig | None) -> list[InputSummary]:
    if unit is None:
        return [InputSummary(kind="file", name=COMMAND_LINE, records=1)]
    files = [unit.fragment, *unit.dropins] if unit.fragment else list(unit.dropins)
    inputs = []
    for path in files:
        if path is None:
            continue
        try:
            lines = len(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            lines = 0
        inputs.append(InputSummary(kind="file", name=path, records=lines))
    return inputs


_ROUNDS = 4
"""How often preflight's own changes may be added to a fix before it must pass as it is (a
tensor-parallel size, then the GPUs it needs listed)."""


def _failures(diagnosis: Diagnosis) -> list[Finding]:
    return [
        f
        for f in diagnosis.findings
        if f.role is Role.ROOT_CAUSE and f.severity.rank >= Severity.ERROR.rank
    ]


def _applied(config: LaunchConfig, fixes: list[Fix]) -> LaunchConfig:
    """``config`` with ``fixes`` applied in memory, in order (a later fix wins)."""
    argv = list(config.argv)
    environment = dict(config.environment)
    for fix in fixes:
        argv = patched_argv(argv, fix.patch)
        for name in fix.patch.env_unset:
            environment.pop(name, None)
        environment.update(
            {k: v for k, v in fix.patch.env_set.items() if k not in secret_names(fix.patch)}
        )
    return replace(config, argv=argv, environment=environment, port=None)


def _undoes(patch: Patch, config: LaunchConfig) -> bool:
    """Whether ``patch`` sets a flag back to what the unit has now (preflight lowering the
    tensor-parallel size to the visible GPUs would undo the fix it checks)."""
    argv = config.argv
    for group in flag_groups(patch.args_add):
        if group[0] in argv:
            at = argv.index(group[0])
            if argv[at + 1 : at + len(group)] == group[1:]:
                return True
    return False


def _key(finding: Finding) -> tuple[str, str | None]:
    return finding.signature, finding.evidence[0].message if finding.evidence else None


def _what_fails(failures: list[Finding]) -> str:
    said = []
    for finding in failures:
        first = finding.evidence[0].message if finding.evidence else None
        said.append(f"{finding.signature}: {first or finding.title}")
    return "; ".join(said)


def check_fix(
    diagnosis: Diagnosis,
    options: PreflightOptions,
    signature_dirs: list[Path],
    base: UnitConfig,
    earlier: list[Fix],
    head: str,
) -> Diagnosis:
    """The merged fix applied to the unit in memory and checked by the same preflight a user
    runs. Where preflight on the fixed unit finds a failure it can fix (a tensor-parallel size
    computed from the weights and the GPUs, CUDA_VISIBLE_DEVICES widened to match), its change
    joins the fix, ranked first; where a failure remains, the fix says what else it needs and
    is not offered as a fix (no restart advice, ``--patch-only`` exits 2)."""
    fix_plan = diagnosis.fix
    if fix_plan is None:
        return diagnosis
    notes: list[str] = []
    try:
        config, _ = gather(options, notes, without_fixes=True)
    except UserError:
        return diagnosis
    if parse_command(config.argv, config.engine_version).engine is None:
        return diagnosis
    signatures = load_library(signature_dirs)
    incident = incident_of(diagnosis)
    added: list[Finding] = []
    for _ in range(_ROUNDS):
        fixes = all_fixes(earlier, new_fixes(diagnosis.fix or fix_plan, incident))
        failures = _failures(check(_applied(config, fixes), signatures))
        fixable = [
            f
            for f in failures
            if f.patch is not None and not f.patch.is_empty() and not _undoes(f.patch, config)
        ]
        if not fixable:
            break
        # preflight's changes are computed from the unit's facts: the newest rank first
        fresh = [
            f.model_copy(
                update={
                    "id": f"p{len(added) + i + 1}",
                    "title": f"{f.title} (preflight: {f.patch_note})" if f.patch_note else f.title,
                }
            )
            for i, f in enumerate(fixable)
        ]
        added = [*fresh, *added]
        ranked = diagnosis.model_copy(
            update={"findings": [*added, *diagnosis.findings], "primary": added[0].id}
        )
        diagnosis = diagnosis.model_copy(
            update={"fix": fix_against_unit(ranked, base, earlier, head)}
        )
    final = diagnosis.fix or fix_plan
    if not final.changes:
        return diagnosis  # nothing to check, and preflight has nothing to add
    # a failure the unit had before, of something this fix does not change (a missing
    # WorkingDirectory=), is said but does not hold the fix back
    before = {_key(f) for f in _failures(check(config, signatures))}
    fixed = {change.signature for change in final.changes}
    elsewhere = [f for f in failures if _key(f) in before and f.signature not in fixed]
    # unit settings (CacheDirectory=, TimeoutStartSec=) are not applied in memory: systemd
    # reads them from the drop-in, and --apply proves them in the effective configuration
    by_unit = {c.signature for c in final.changes if c.patch.unit_set}
    unproven = [f for f in failures if f.signature in by_unit and f not in elsewhere]
    failures = [f for f in failures if f not in elsewhere and f not in unproven]
    if elsewhere:  # settle it before a restart: none is advised until then
        final = final.model_copy(
            update={
                "complete": False,
                "left_out": [
                    *final.left_out,
                    f"also needed before a restart, whatever this fix does: "
                    f"{_what_fails(elsewhere)}",
                ],
            }
        )
    if failures:
        said = (
            "preflight on the unit with this drop-in still fails: "
            f"{_what_fails(failures)}; not offered as a fix until that is settled"
        )
        missing = [n for n in (f.patch_note for f in failures) if n]
        update: dict[str, object] = {"checked": said, "complete": False, "passes_preflight": False}
        if missing:
            update["left_out"] = [*final.left_out, *missing]
        return diagnosis.model_copy(update={"fix": final.model_copy(update=update)})
    checked_said = "checked: preflight passes the unit with this drop-in applied"
    if unproven:
        checked_said += (
            f" (its unit settings for {', '.join(f.signature for f in unproven)} are proven "
            "when --apply writes it)"
        )
    if elsewhere:
        checked_said = (
            "checked: with this drop-in applied, preflight finds only what is also needed above"
        )
    if added:
        names = ", ".join(dict.fromkeys(f.signature for f in added))
        checked_said += f" (with the changes of {names}, from preflight)"
    sizes = any(
        flag in ("--tp-size", "--tp", "--tensor-parallel-size", "-tp")
        for change in final.changes
        for flag in change.patch.args_add
    )
    if sizes and (config.model is None or config.gpus is None):
        checked_said += (
            "; the new tensor-parallel size is not checked against the weights and the GPUs' "
            "memory (no model directory or nvidia-smi here)"
        )
    passed = final.model_copy(update={"checked": checked_said, "passes_preflight": True})
    return diagnosis.model_copy(update={"fix": passed})


def check_unit_fix(
    diagnosis: Diagnosis,
    base: UnitConfig,
    signature_dirs: list[Path],
    root: Path | None = None,
    unit_file: Path | None = None,
    gpu_snapshot: bool = True,
    version: tuple[str, str] | None = None,
) -> Diagnosis:
    """:func:`check_fix` for a diagnosis from the unit's log (``diagnose journal``): the same
    preflight, on the unit as configured, with the merged fix applied in memory."""
    options = PreflightOptions(
        unit=base.name,
        unit_file=unit_file,
        root=root,
        gpu=gpu_snapshot,
        port=False,  # the old instance may still hold it; preflight -u checks the port
        engine_version=version,
    )
    earlier, head = earlier_fixes(base.name, root, unit_file)
    return check_fix(diagnosis, options, signature_dirs, base, earlier, head)


def run_preflight(
    options: PreflightOptions, signature_dirs: list[Path], warn: Say
) -> PreflightResult:
    """Check the launch configuration; the diagnosis has the patches rendered against the
    unit as ``diagnose journal`` renders them (without diagnose's own drop-in)."""
    notes: list[str] = []
    config, unit = gather(options, notes)
    signatures = load_library(signature_dirs)
    diagnosis = check(config, signatures, _inputs(options, unit))
    if unit is not None:
        base = _load_unit(options, without_fixes=True) or unit
        earlier, head = earlier_fixes(base.name, options.root, options.unit_file)
        diagnosis = patched_against_unit(diagnosis, base, notes, earlier, head)
        diagnosis = check_fix(diagnosis, options, signature_dirs, base, earlier, head)
    elif any(f.patch for f in diagnosis.findings):
        notes.append("no unit given (-u or --unit-file): patches name the changes, no drop-in")
    diagnosis = diagnosis.model_copy(update={"notes": [*diagnosis.notes, *notes]})
    return PreflightResult(diagnosis, config, unit, notes)
