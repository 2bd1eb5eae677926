"""The model's answer: its schema (what ``response_format`` asks for), reading it out of the
message text, and checking it against the digest and the release before it becomes a finding.
Nothing the model says is trusted: evidence must cite lines the digest showed, flags and
variables must be the release's, and the fix must pass preflight's reading of the flags."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from diagnose.assistant.digest import Digest
from diagnose.core.expr import distribution_name
from diagnose.core.models import (
    CATEGORIES,
    Confidence,
    Evidence,
    Finding,
    PackageAction,
    Patch,
    Role,
    Severity,
    empty_dict,
    empty_list,
)
from diagnose.knowledge import mined
from diagnose.knowledge.deferred import ReleaseFixChecks
from diagnose.knowledge.release_flags import flag_settings, flags_named_in

MAX_ANSWER_CHARS = 32_000
"""A longer message is not read (a model that rambles, or a server that sends junk)."""

Category = Literal[CATEGORIES]  # type: ignore[valid-type]

_THINKING = re.compile(r"<think>.*?</think>|^.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_LINE_REFERENCE = re.compile(r"^\s*L?(\d{1,9})(?:\s*[-\u2013]\s*L?(\d{1,9}))?(?!\d)", re.IGNORECASE)
MAX_RANGE = 40
"""The most lines one cited range (``L7-L26``) stands for."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_UNIT_KEY = re.compile(r"^(Unit|Service|Install)\.[A-Za-z][A-Za-z0-9]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PACKAGE_NAME = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?$"
)
"""A distribution's name, with extras (``vllm[audio]``)."""


class _Schema(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AnswerPackage(_Schema):
    name: str = Field(description="The Python package: sglang, vllm, torch, flashinfer-python...")
    spec: str = Field(description="A PEP 440 specifier: '>=0.5.10', '==2.5.1'.")
    action: Literal["upgrade", "downgrade", "pin", "install", "reinstall"]


class AnswerFix(_Schema):
    """The change, in the same parts as diagnose's own patches."""

    env_set: dict[str, str] = Field(default_factory=empty_dict, description="Environment to set.")
    env_unset: list[str] = Field(default_factory=empty_list, description="Environment to unset.")
    args_add: list[str] = Field(
        default_factory=empty_list,
        description="Launch flags to add, as tokens on the command line: ['--tp-size', '2'].",
    )
    args_remove: list[str] = Field(default_factory=empty_list, description="Launch flags to drop.")
    unit_set: dict[str, str] = Field(
        default_factory=empty_dict,
        description="systemd unit settings as 'Section.Key': value ('Service.TimeoutStartSec').",
    )
    package: AnswerPackage | None = None
    system: list[str] = Field(
        default_factory=empty_list, description="Actions on the host outside the unit (commands)."
    )

    @field_validator("env_set", "unit_set", "args_add", "args_remove", mode="before")
    @classmethod
    def _numbers_as_words(cls, value: object) -> object:
        """``{"NCCL_P2P_DISABLE": 1}`` and ``["--tp-size", 2]`` as the words they stand for."""
        if isinstance(value, dict):
            return {key: _word(item) for key, item in value.items()}
        if isinstance(value, list):
            return [_word(item) for item in value]
        return value


def _word(value: object) -> object:
    """A number or a switch as a command line or an environment writes it."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value) if isinstance(value, int | float) else value


class Answer(_Schema):
    """What the model is asked to return, and all that is read of it."""

    category: Category = Field(description="The category of the root cause.")
    cause: str = Field(description="The root cause in two or three sentences.", max_length=4000)
    evidence: list[int] = Field(
        description="The numbers of the digest's log lines that show the cause (L12 is 12)."
    )
    fix: AnswerFix | None = Field(description="null when no configuration change helps.")
    checks: list[str] = Field(
        default_factory=empty_list, description="Commands or steps that confirm the cause."
    )
    confidence: Literal["high", "medium", "low"]

    @field_validator("evidence", mode="before")
    @classmethod
    def _line_numbers(cls, value: object) -> object:
        """``"L12"``, ``"12"`` and ``"L12: text"`` as 12, ``"L7-L9"`` as 7, 8, 9; anything
        else is left for validation to refuse."""
        if not isinstance(value, list):
            return value
        read: list[object] = []
        for item in value:
            match = _LINE_REFERENCE.match(item) if isinstance(item, str) else None
            if match is None:
                read.append(item)
                continue
            first = int(match.group(1))
            last = int(match.group(2) or first)
            read += range(first, min(last, first + MAX_RANGE - 1) + 1) if last >= first else [first]
        return read


class Rejected(Exception):
    """The answer cannot be used; the message says why, in one line."""


def answer_schema() -> dict[str, object]:
    """The JSON schema ``response_format`` sends (guided decoding in vLLM and SGLang)."""
    return Answer.model_json_schema()


def read_answer(content: str) -> Answer:
    """The answer in a message: JSON, possibly after ``<think>`` reasoning or in a fence."""
    if len(content) > MAX_ANSWER_CHARS:
        raise Rejected(f"the answer is too large ({len(content)} characters)")
    text = _THINKING.sub("", content).strip()
    candidates = [text, *_FENCE.findall(text)]
    if "{" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    error = "no JSON object in it"
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        try:
            return Answer.model_validate(data)
        except ValidationError as invalid:
            first = invalid.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the answer"
            error = f"{where}: {first['msg']}"
    raise Rejected(f"the answer is not the asked JSON ({error})")


@dataclass
class Checked:
    """A finding made from a checked answer, and what checking changed."""

    finding: Finding | None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Release:
    """The engine and version the log shows (the tables the answer is checked against)."""

    engine: str | None
    version: str | None

    @property
    def table(self) -> str | None:
        if self.engine not in mined.ENGINES:
            return None
        return mined.nearest_version(self.engine, self.version)


def check_answer(
    answer: Answer, digest: Digest, release: Release, model: str, finding_id: str
) -> Checked:
    """The answer as a finding of tier ``assistant``, or None when nothing of it stands."""
    notes: list[str] = []
    if answer.category == "unknown" and not (answer.cause.strip() and answer.fix):
        return Checked(None, ["the model named no cause"])
    evidence = []
    for number in dict.fromkeys(answer.evidence):
        if number in digest.lines:
            evidence.append(
                Evidence(
                    source=digest.source or "journal",
                    line=number if digest.source else None,
                    text=digest.lines[number],
                )
            )
        else:
            notes.append(f"Evidence L{number} is not a line the digest showed: dropped.")
    confidence = Confidence(answer.confidence)
    if not evidence:
        notes.append("No evidence line stands: confidence lowered to low.")
        confidence = Confidence.LOW
    fix = answer.fix or AnswerFix()
    patch, package = _checked_fix(fix, release, notes, flags_named_in(digest.lines.values()))
    category = answer.category
    if category == "unknown":
        category = _category_of_fix(patch, package)
        if category is None:
            return Checked(None, ["the model named no cause it could fix"])
        notes.append(
            f"The model named a cause outside the shared categories: read as {category} "
            "from its fix."
        )
    cause = " ".join(answer.cause.split())
    first, _, rest = cause.partition(". ")
    title = _clean(first)[:160]
    finding = Finding(
        id=finding_id,
        signature="assistant",
        category=category,
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title=title,
        # the rest of the cause below its first sentence, or all of it when the title cut it
        explanation=_clean(rest) if rest and title == _clean(first) else _clean(cause),
        confidence=confidence,
        evidence=evidence,
        patch=patch,
        patch_note=" ".join(notes) or None,
        next_checks=[_clean(c) for c in answer.checks[:8] if _clean(c)],
        tier="assistant",
        package=package,
        system_actions=[_clean(s) for s in fix.system[:8] if _clean(s)],
        model=model,
    )
    # the release's spellings of flags and variables, and a package change made exact (the
    # engine's pin of a library, the release past the one shown), as for a finding of its own
    finding = ReleaseFixChecks()(finding, release.engine, release.version)
    return Checked(finding, notes)


def _category_of_fix(patch: Patch | None, package: PackageAction | None) -> str | None:
    """The category a cause outside the shared ones takes from what fixes it: another release
    of a package (an engine bug, a broken install) is the environment's packages; a flag is a
    launch argument; a variable or unit setting is the unit's configuration."""
    if package is not None:
        return "kernel_build"
    if patch is None:
        return None
    if patch.args_add or patch.args_remove:
        return "launch_args"
    if patch.env_set or patch.env_unset or patch.unit_set:
        return "unit_config"
    return None


def _clean(text: str) -> str:
    """Model text on one line, with no control characters."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _checked_fix(
    fix: AnswerFix, release: Release, notes: list[str], in_log: frozenset[str] = frozenset()
) -> tuple[Patch | None, PackageAction | None]:
    """The fix with flags and variables the release does not know rewritten or dropped (not
    the flags the log names), unit settings outside systemd's sections dropped, and what
    preflight refuses dropped."""
    args_add = _checked_flags(fix.args_add, release, notes, in_log)
    env_set = {}
    for written, value in fix.env_set.items():
        name = _checked_env(written, release, notes)
        if name is not None and not _CONTROL.search(value):
            env_set[name] = value
    env_unset = [name for name in fix.env_unset if _ENV_NAME.match(name)]
    unit_set = {}
    for key, value in fix.unit_set.items():
        if _UNIT_KEY.match(key) and not _CONTROL.search(value):
            unit_set[key] = value
        else:
            notes.append(f"Unit setting {key!r} is not Section.Key of a unit: dropped.")
    args_remove = [word for word in fix.args_remove if word and not _CONTROL.search(word)]
    args_add = _passing_preflight(args_add, env_set, release, notes, in_log)
    patch = Patch(
        env_set=env_set,
        env_unset=env_unset,
        args_add=args_add,
        args_remove=args_remove,
        unit_set=unit_set,
    )
    return (None if patch.is_empty() else patch), _checked_package(fix.package, notes)


def _checked_package(package: AnswerPackage | None, notes: list[str]) -> PackageAction | None:
    """The package change when its name is a distribution's and its spec PEP 440's."""
    if package is None:
        return None
    if not _PACKAGE_NAME.match(package.name):
        notes.append(f"`{_clean(package.name)[:40]}` is not a package name: left out.")
        return None
    spec = _specifier(package)
    if spec is None:
        notes.append(f"`{_clean(package.spec)[:40]}` is not a version specifier: no version given.")
    return PackageAction(name=package.name, spec=spec or "", action=package.action)


def _specifier(package: AnswerPackage) -> str | None:
    """The answer's spec as PEP 440 writes it, forgiving how models write one: with the
    package's name before it (``pyzmq>=25.1``, ``vllm==0.6.2``), a bare version (``0.6.2``: at
    least it for an upgrade or install, exactly it otherwise), or no version at all (``latest``,
    the name alone); None when it is none of these."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    spec = package.spec.strip()
    name = distribution_name(package.name.partition("[")[0])
    if spec.lower() in ("latest", "newest", "any", "*") or (
        _PACKAGE_NAME.match(spec) and distribution_name(spec.partition("[")[0]) == name
    ):
        return ""  # no version named: the release's requirements may give one
    named = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?=[<>=!~])", spec)
    if named and distribution_name(named.group(1)) == name:
        spec = spec[named.end() :]
    try:
        Version(spec)
    except InvalidVersion:
        pass
    else:
        spec = f">={spec}" if package.action in ("upgrade", "install") else f"=={spec}"
    try:
        return str(SpecifierSet(spec)) if spec else ""
    except InvalidSpecifier:
        return None


def _checked_flags(
    words: list[str], release: Release, notes: list[str], in_log: frozenset[str]
) -> list[str]:
    """Each added flag as the release spells it: unknown ones rewritten to the closest real
    spelling, or dropped (with their values) when there is none; a flag the log names stays."""
    words = [w for w in words if w and not _CONTROL.search(w)]
    if release.table is None or release.engine is None:
        return words
    table = mined.flag_table(release.engine, release.table)
    name = f"{mined.ENGINE_NAMES[release.engine]} {release.table}"
    kept: list[str] = []
    for flag, values in flag_settings(words):
        written, equals, inline = flag.partition("=")
        if (
            not written.startswith("--")
            or written in in_log
            or table.lookup(written).outcome == "exact"
        ):
            kept += [flag, *values]
            continue
        if mined.flag_history(release.engine, written, release.table) is not None:
            kept += [flag, *values]  # renamed or removed: checked_flags writes it as it is now
            continue
        close = table.close_flags(written, limit=1)
        if close:
            notes.append(f"{name} has no `{written}`: written as `{close[0]}`.")
            kept += [close[0] + equals + inline, *values]
        else:
            notes.append(f"{name} has no `{written}` and nothing close: left out.")
    return kept


def _checked_env(name: str, release: Release, notes: list[str]) -> str | None:
    """A variable of the engine's own prefix must be one it reads; others pass as they are."""
    if not _ENV_NAME.match(name):
        notes.append(f"{name!r} is not a variable name: left out.")
        return None
    engine = release.engine
    if engine not in mined.ENGINES or not name.startswith(engine.upper() + "_"):
        return name
    declared = mined.env_vars(engine)
    if name in declared:
        return name
    close = mined.close_env_vars(engine, name, limit=1)
    label = mined.ENGINE_NAMES[engine]
    if close:
        notes.append(f"{label} reads no `{name}`: written as `{close[0]}`.")
        return close[0]
    notes.append(f"{label} reads no `{name}` and nothing close: left out.")
    return None


def _passing_preflight(
    words: list[str],
    environment: dict[str, str],
    release: Release,
    notes: list[str],
    in_log: frozenset[str],
) -> list[str]:
    """The added flags less those preflight's reading of the release refuses (a value not
    among a flag's choices, an ambiguous abbreviation), but for a flag the log names."""
    if release.engine is None or release.table is None or not words:
        return words
    from diagnose.preflight.flags import EngineVersion, problems

    version = EngineVersion(
        release.engine, release.version, "given" if release.version else "newest"
    )
    found = problems(release.engine, words, environment, version, {}, ())
    refused = {
        problem["flag"]: problem
        for kind in ("unknown_flags", "ambiguous_flags", "bad_flag_values")
        for problem in found[kind]
    }
    kept: list[str] = []
    for flag, values in flag_settings(words):
        written = flag.partition("=")[0]
        if written not in in_log and (written in refused or flag in refused):
            notes.append(f"preflight refuses `{' '.join([flag, *values])}`: left out.")
            continue
        kept += [flag, *values]
    return kept
