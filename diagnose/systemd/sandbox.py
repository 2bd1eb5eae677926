"""What a unit's sandboxing takes away from an inference server before it starts.

systemd's hardening options are written for services that need no devices, no local sockets
and no writable home: an LLM server needs the NVIDIA device nodes, Unix and local TCP sockets
between its own processes, netlink to list interfaces (NCCL), and writable caches (model
downloads, Triton and FlashInfer kernels). Each problem names the setting that takes it away
and the change that gives it back; reading it needs nothing but the unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from diagnose.systemd.unit import UnitConfig, split_words

TRUE_WORDS = frozenset({"yes", "true", "1", "on"})
NEEDED_FAMILIES = ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK")
"""Unix sockets between the server's processes, TCP for the API and the process group,
netlink for listing network interfaces (NCCL, Gloo)."""
LOCAL_ADDRESSES = frozenset({"localhost", "127.0.0.1", "127.0.0.0/8", "::1", "::1/128"})
DENY_ALL = frozenset({"any", "0.0.0.0/0", "::/0"})
HOME_TREES = ("/home/", "/root/", "/run/user/")
CACHE_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRITON_CACHE_DIR")


@dataclass(frozen=True)
class SandboxProblem:
    """One thing the sandbox takes away: ``kind``, the ``setting`` that does it, what
    fails, and ``path`` where a path is concerned."""

    kind: str
    setting: str
    problem: str
    path: str = ""


def is_true(value: str | None) -> bool:
    """A systemd boolean that is on."""
    return (value or "").strip().lower() in TRUE_WORDS


def _list_setting(unit: UnitConfig, key: str) -> list[str]:
    """A list setting's entries as systemd adds them up: an empty assignment resets it."""
    entries: list[str] = []
    for value in unit.values("Service", key):
        if not value.strip():
            entries = []
        else:
            entries.append(value.strip())
    return entries


def _words(entries: Iterable[str]) -> list[str]:
    return [word for entry in entries for word in split_words(entry)]


def sandbox_problems(
    unit: UnitConfig, model_path: str | None, home: str | None
) -> list[SandboxProblem]:
    """What the unit's sandboxing takes away that the server needs. ``home`` is the home
    directory of the service's user, when known (the default cache root)."""
    return [
        *_gpu_devices(unit),
        *_address_families(unit),
        *_ip_addresses(unit),
        *_home_and_system(unit, model_path, home),
    ]


def _gpu_devices(unit: UnitConfig) -> list[SandboxProblem]:
    if is_true(unit.get("Service", "PrivateDevices")):
        return [
            SandboxProblem(
                "private_devices",
                "PrivateDevices",
                "PrivateDevices=yes gives the service a private /dev without /dev/nvidia*: "
                "CUDA finds no GPU (`no CUDA-capable device is detected`)",
            )
        ]
    allowed = _list_setting(unit, "DeviceAllow")
    policy = (unit.get("Service", "DevicePolicy") or "auto").strip().lower()
    if any("nvidia" in entry for entry in allowed):
        return []
    if policy in ("closed", "strict"):
        why = f"DevicePolicy={policy} allows only the devices DeviceAllow= lists"
    elif allowed:
        why = f"DeviceAllow={allowed[0]} turns the device policy into an allow-list"
    elif is_true(unit.get("Service", "ProtectClock")):
        why = "ProtectClock=yes implies DeviceAllow=char-rtc r, an allow-list of one device"
    else:
        return []
    return [
        SandboxProblem(
            "device_allow_list",
            "DeviceAllow" if allowed else ("DevicePolicy" if policy != "auto" else "ProtectClock"),
            f"{why}, and no NVIDIA device is on it: CUDA finds no GPU "
            "(`no CUDA-capable device is detected`)",
        )
    ]


def _address_families(unit: UnitConfig) -> list[SandboxProblem]:
    entries = _words(_list_setting(unit, "RestrictAddressFamilies"))
    if not entries:
        return []
    if entries == ["none"]:
        missing = list(NEEDED_FAMILIES)
    elif entries[0].startswith("~"):  # a deny-list
        denied = {entries[0][1:], *entries[1:]}
        missing = [family for family in NEEDED_FAMILIES if family in denied]
    else:
        missing = [family for family in NEEDED_FAMILIES if family not in entries]
    if not missing:
        return []
    return [
        SandboxProblem(
            "address_families",
            "RestrictAddressFamilies",
            f"RestrictAddressFamilies= leaves out {' '.join(missing)}: the server's processes "
            "talk over Unix and local TCP sockets and NCCL lists interfaces over netlink, so "
            "they fail with `Address family not supported by protocol`",
        )
    ]


def _ip_addresses(unit: UnitConfig) -> list[SandboxProblem]:
    denied = set(_words(_list_setting(unit, "IPAddressDeny")))
    allowed = set(_words(_list_setting(unit, "IPAddressAllow")))
    if not denied & DENY_ALL or allowed & LOCAL_ADDRESSES:
        return []
    return [
        SandboxProblem(
            "ip_address_deny",
            "IPAddressDeny",
            "IPAddressDeny= blocks every address and IPAddressAllow= does not let localhost "
            "through: the process group's rendezvous and NCCL's bootstrap on 127.0.0.1 fail "
            "with `Operation not permitted`",
        )
    ]


def _writable(unit: UnitConfig) -> list[str]:
    """The paths ProtectSystem=strict leaves writable."""
    paths = [p.lstrip("-+") for p in _words(_list_setting(unit, "ReadWritePaths"))]
    for key, base in (
        ("StateDirectory", "/var/lib/"),
        ("CacheDirectory", "/var/cache/"),
        ("LogsDirectory", "/var/log/"),
        ("RuntimeDirectory", "/run/"),
    ):
        paths += [base + name.split(":")[0] for name in _words(_list_setting(unit, key))]
    paths.append("/dev/shm")
    if is_true(unit.get("Service", "PrivateTmp")):
        paths += ["/tmp", "/var/tmp"]
    return [path.rstrip("/") or "/" for path in paths]


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _cache_dirs(unit: UnitConfig, home: str | None) -> list[str]:
    """Where the server writes downloads and compiled kernels, as the unit sets them
    (``~/.cache`` when the user's home is not known here)."""
    environment = unit.effective_environment
    home = environment.get("HOME") or home or "~"
    named = [environment[name] for name in CACHE_VARIABLES if environment.get(name)]
    found = [*named, environment.get("XDG_CACHE_HOME") or f"{home}/.cache"]
    return [path for path in found if path.startswith(("/", "~/")) and "$" not in path]


def _home_and_system(
    unit: UnitConfig, model_path: str | None, home: str | None
) -> list[SandboxProblem]:
    problems: list[SandboxProblem] = []
    protect_home = (unit.get("Service", "ProtectHome") or "no").strip().lower()
    hidden_home = protect_home in TRUE_WORDS or protect_home == "tmpfs"
    if hidden_home and model_path and _under(model_path, HOME_TREES):
        problems.append(
            SandboxProblem(
                "model_in_hidden_home",
                "ProtectHome",
                f"ProtectHome={protect_home} hides /home, /root and /run/user from the "
                f"service, and the model is at {model_path}: the server cannot find it",
                model_path,
            )
        )
    caches = _cache_dirs(unit, home)
    if hidden_home or protect_home == "read-only":
        for path in caches:
            if _under(path, HOME_TREES):
                problems.append(
                    SandboxProblem(
                        "cache_in_protected_home",
                        "ProtectHome",
                        f"ProtectHome={protect_home} leaves {path} unwritable: model downloads "
                        "and compiled kernels cannot be saved (`Read-only file system`)",
                        path,
                    )
                )
                break
    strict = (unit.get("Service", "ProtectSystem") or "").strip().lower() == "strict" or is_true(
        unit.get("Service", "DynamicUser")  # which implies ProtectSystem=strict
    )
    if strict and not any(p.kind == "cache_in_protected_home" for p in problems):
        writable = _writable(unit)
        for path in caches:
            if not _under(path, writable):
                problems.append(
                    SandboxProblem(
                        "cache_read_only",
                        "ProtectSystem",
                        f"ProtectSystem=strict makes {path} read-only and no ReadWritePaths=, "
                        "StateDirectory= or CacheDirectory= covers it: model downloads and "
                        "compiled kernels cannot be saved (`Read-only file system`)",
                        path,
                    )
                )
                break
    return problems
