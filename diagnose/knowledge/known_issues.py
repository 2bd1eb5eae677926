"""The schema of a known-issue record (``knowledge/known-issues/<component>/<id>.yaml``).

A record is what a resolved public thread established about one failure: the decisive message
as a template with typed holes, the conditions that must hold, the cause in our own words and a
structured fix. The exact error string is a fact and is kept; everything else is written anew.

Holes in ``message.template`` (and ``message.also``): ``{name}`` any text within the line,
``{name:int}``, ``{name:float}``, ``{name:word}`` (no spaces), ``{name:path}``, ``{name:hex}``.
Literal braces are doubled (``{{`` and ``}}``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from diagnose.core.expr import Arithmetic
from diagnose.core.models import empty_dict, known_category

COMPONENTS = (
    "sglang",
    "vllm",
    "sgl-kernel",
    "flashinfer",
    "triton",
    "nccl",
    "pytorch",
    "transformers",
    "nvidia-driver",
    "cuda",
    "systemd",
    "huggingface-hub",
    "ray",
    "other",
)
HOLE_TYPES = ("int", "float", "word", "path", "hex", "any")
_HOLE = re.compile(r"\{\{|\}\}|\{(?P<name>[a-z_][a-z0-9_]*)(?::(?P<type>[a-z]+))?\}")
THREAD_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+$")
# A template shorter than this in fixed text is too generic to match part of a line.
MIN_FIXED_CHARS = 15


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Thread(_Schema):
    url: str
    resolution: Literal["maintainer-confirmed", "reporter-confirmed", "error-text", "fix-merged"]

    @field_validator("url")
    @classmethod
    def _github_thread(cls, url: str) -> str:
        if not THREAD_URL.match(url):
            raise ValueError(f"not a GitHub issue, pull request or discussion URL: {url!r}")
        return url


class Message(_Schema):
    template: str
    also: tuple[str, ...] = ()
    exception: str | None = None
    engine_template: str | None = None  # "module:function" of the mined engine template
    generic: bool = False
    """The message is printed for many causes (a CUDA fault such as an illegal memory
    access): the record counts only where the log shows a release it affects."""

    @field_validator("template", "also")
    @classmethod
    def _holes_typed(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for text in (value,) if isinstance(value, str) else value:
            fixed = 0
            position = 0
            for hole in _HOLE.finditer(text):
                fixed += len(text[position : hole.start()].strip())
                position = hole.end()
                if hole.group("name") and (hole.group("type") or "any") not in HOLE_TYPES:
                    raise ValueError(f"unknown hole type in {hole.group(0)!r}")
            fixed += len(text[position:].strip())
            if fixed < MIN_FIXED_CHARS:
                raise ValueError(f"template {text!r} has under {MIN_FIXED_CHARS} fixed characters")
        return value


class Condition(_Schema):
    kind: Literal[
        "gpu_arch",
        "driver",
        "cuda",
        "flag",
        "env",
        "container",
        "multi_node",
        "package",
        "model",
        "os",
    ]
    value: str
    check: str  # what the user runs or looks at to confirm it


class PackageChange(_Schema):
    name: str
    spec: str  # PEP 440 specifier: ">=0.4.9", "==2.5.1"
    action: Literal["upgrade", "downgrade", "pin", "install", "reinstall"]

    @model_validator(mode="after")
    def _reinstall_keeps_the_release(self) -> PackageChange:
        if self.action == "reinstall" and self.spec.lstrip().startswith(">"):
            raise ValueError(
                f"a reinstall keeps the release; {self.spec!r} asks for a newer one: "
                "use action: upgrade"
            )
        return self


class Fix(_Schema):
    env_set: dict[str, str] = Field(default_factory=empty_dict)
    env_unset: tuple[str, ...] = ()
    args_add: tuple[str, ...] = ()
    """Settings as written on a command line, one per item: ``--dtype half``."""
    args_remove: tuple[str, ...] = ()
    """The settings to take out, one per item; only the flag (the first word) counts."""
    unit_set: dict[str, str] = Field(default_factory=empty_dict)
    package: PackageChange | None = None
    system: tuple[str, ...] = ()  # host actions: "systemctl enable --now nvidia-fabricmanager"
    note: str | None = None
    derive: dict[str, str] = Field(default_factory=empty_dict)
    """Values computed from the message's holes, as a signature's ``derive:`` (``fit:
    "nearest_divisor(heads, tp)"``), for the settings above to name as ``{fit}``."""

    @field_validator("derive")
    @classmethod
    def _derive_parses(cls, value: dict[str, str]) -> dict[str, str]:
        for expression in value.values():
            Arithmetic(expression)  # raises ExpressionError, a ValueError, naming it
        return value

    @model_validator(mode="after")
    def _not_prose_only(self) -> Fix:
        if not (
            self.env_set
            or self.env_unset
            or self.args_add
            or self.args_remove
            or self.unit_set
            or self.package
            or self.system
        ):
            raise ValueError("a fix needs a structured change, not only a note")
        return self


class Versions(_Schema):
    package: str
    affected: str | None = None  # PEP 440 specifier of `package`, e.g. ">=0.4.6,<0.4.9"
    fixed_in: str | None = None


class Example(_Schema):
    log: str


class KnownIssue(_Schema):
    id: str
    title: str
    threads: tuple[Thread, ...] = Field(min_length=1)
    engine: Literal["sglang", "vllm", "any"]
    component: Literal[COMPONENTS]  # type: ignore[valid-type]
    category: str
    covered_by: str | None = None
    """A hand signature, an engine's release tables (``sglang-release-tables``) or its flag
    table's reading of an argparse error (``argparse-vllm-flags``), that already explains this
    failure (it wins; the record adds its threads and versions)."""
    versions: Versions | None = None
    message: Message
    conditions: tuple[Condition, ...] = ()
    cause: str
    fix: Fix
    example: Example

    @field_validator("category")
    @classmethod
    def _known_category(cls, category: str) -> str:
        return known_category(category)


def load_record(path: Path) -> KnownIssue:
    """One record; its ``id`` must equal the file stem."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    record = KnownIssue.model_validate(data)
    if record.id != path.stem:
        raise ValueError(f"{path}: id {record.id!r} differs from the file stem {path.stem!r}")
    return record
