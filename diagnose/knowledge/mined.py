"""What the engines' own releases say, as mined by ``scripts/mine_knowledge.py``.

Files under ``knowledge/mined/``: per engine, the launch-flag table of each release
(``<engine>/flags/<version>.json``), the flags added and removed between releases
(``flag_changes.json``), environment variables (``env_vars.json``), the names each release
registers (``registries.json``: model architectures, tool-call and reasoning parsers,
quantization methods, attention backends), the modules each release ships and the names they bind
(``module_api.jsonl.gz``), the versions of the packages each release requires
(``requires.json``) and message templates (``templates.jsonl.gz``); ``libraries/`` and
``native/`` hold the messages and result codes of the libraries under the engines, and
``libraries/transformers-model-types.json`` the first transformers release that knows each
model type, ``libraries/module_api/`` the modules and names of the libraries whose API moves
(outlines, xgrammar, pydantic, transformers, huggingface_hub, torchao, flashinfer,
compressed_tensors, mistral_common, triton). Everything loads on first use and is cached.
"""

from __future__ import annotations

import difflib
import gzip
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from diagnose.core.expr import distribution_name
from diagnose.core.versions import at_least, release
from diagnose.knowledge.location import knowledge_dir

ENGINES = ("sglang", "vllm")
ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
"""How each mined engine is written in prose."""
ARGPARSE_READINGS = frozenset(f"argparse-{engine}-flags" for engine in ENGINES)
"""The signature names of the engine-source tier's readings of argparse errors."""
RELEASE_TABLES = frozenset(f"{engine}-release-tables" for engine in ENGINES)
"""The signature names of the release-tables tier's findings."""
_FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9_.-]*[a-z0-9]", re.I)


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class FlagOption(_Data):
    """One option of a launch parser, as the parser itself defines it."""

    flags: tuple[str, ...]
    dest: str
    action: str
    type: str | None = None
    choices: tuple[Any, ...] | None = None
    nargs: Any = None
    required: bool = False
    default: Any = None
    deprecated: bool = False
    successor: str | None = None
    help: str | None = None


class ParserFacts(_Data):
    parser_class: str = Field(alias="class")
    allow_abbrev: bool
    prefix_chars: str
    underscores_as_dashes: bool
    note: str


@dataclass(frozen=True)
class FlagLookup:
    """How a parser reads one command-line option."""

    given: str
    outcome: Literal["exact", "abbreviation", "ambiguous", "unknown"]
    option: FlagOption | None = None
    candidates: tuple[str, ...] = ()


class FlagTable(_Data):
    """The launch options of one engine release."""

    engine: str
    version: str
    parser: ParserFacts
    options: tuple[FlagOption, ...]

    def _by_flag(self) -> dict[str, FlagOption]:
        return {flag: option for option in self.options for flag in option.flags}

    def lookup(self, given: str) -> FlagLookup:
        """Resolve ``--name`` (or ``--name=value``) the way this release's parser does:
        underscores per engine, then an exact match, then a unique prefix when abbreviations
        are allowed."""
        name = given.split("=", 1)[0]
        if self.parser.underscores_as_dashes and name.startswith("--"):
            head, dot, rest = name[2:].partition(".")
            name = "--" + head.replace("_", "-") + dot + rest
        by_flag = self._by_flag()
        if name in by_flag:
            return FlagLookup(given, "exact", by_flag[name])
        if self.parser.allow_abbrev and name.startswith("--"):
            candidates = tuple(sorted(flag for flag in by_flag if flag.startswith(name)))
            if len(candidates) == 1:
                return FlagLookup(given, "abbreviation", by_flag[candidates[0]], candidates)
            if candidates:
                return FlagLookup(given, "ambiguous", None, candidates)
        return FlagLookup(given, "unknown")

    def mentioned(self, text: str) -> list[FlagLookup]:
        """Each ``--flag`` a message names, looked up in this release: a message that tells
        the user to set a flag the release no longer has is stale."""
        return [self.lookup(flag) for flag in dict.fromkeys(_FLAG_IN_TEXT.findall(text))]

    def setting(self, dest: str) -> FlagOption | None:
        """The option with a flag that sets ``dest`` (``max_lora_rank``), if there is one."""
        return next((o for o in self.options if o.dest == dest and o.flags), None)

    def with_choices(self, dest: str) -> FlagOption | None:
        """The option that sets ``dest`` from a fixed list of values, if there is one."""
        return next((o for o in self.options if o.dest == dest and o.choices), None)

    def close_flags(self, given: str, limit: int = 3) -> list[str]:
        """This release's flags nearest to an unknown one ("did you mean")."""
        name = given.split("=", 1)[0]
        flags = [flag for flag in self._by_flag() if flag.startswith("--")]
        return difflib.get_close_matches(name.replace("_", "-"), flags, n=limit, cutoff=0.75)


class RemovedFlag(_Data):
    flag: str
    kind: Literal["renamed", "split", "removed"]
    successors: tuple[str, ...]
    gone_in: str | None = None
    """The first mined release without the flag (set by ``flag_history``)."""


class FlagChange(_Data):
    """What changed in the launch options from one release to the next."""

    from_version: str = Field(alias="from")
    to_version: str = Field(alias="to")
    added: tuple[str, ...]
    removed: tuple[RemovedFlag, ...]


class EnvVar(_Data):
    """An environment variable an engine declares or reads."""

    name: str
    type: str
    default: Any = None
    choices: tuple[str, ...] | None = None
    versions: tuple[str, ...]
    declared_in: tuple[str, ...]
    modules: tuple[str, ...]
    validated_by: tuple[str, ...]


class MinedTemplate(_Data):
    """A message as the source writes it; holes are ``{name}``, ``{name:int}``, ``{name:float}``."""

    id: str
    text: str
    holes: tuple[str, ...]
    kind: str
    level: str
    exception: str | None = None
    module: str
    function: str
    startup: bool
    versions: tuple[str, ...]
    engine: str | None = None
    library: str | None = None


def mined_dir() -> Path:
    return knowledge_dir() / "mined"


def _json(relative: str) -> Any:
    return json.loads((mined_dir() / relative).read_text(encoding="utf-8"))


@cache
def versions(engine: str) -> tuple[str, ...]:
    """The releases mined for ``engine``, oldest first."""
    found = [path.stem for path in (mined_dir() / engine / "flags").glob("*.json")]
    return tuple(sorted(found, key=lambda version: release(version) or ()))


def upgrade_spec(engine: str, shown: str | None) -> str:
    """Where an upgrade of ``engine`` that no release names should go: past the release the
    log shows (its public part; for a nightly or a release candidate, the first mined release
    after it), else to the newest mined release (a bare ``pip install -U``
    may keep what a pin, a lock file or a cached image holds); "" when neither is known."""
    releases = versions(engine)
    if shown:
        try:
            running = Version(shown)
        except InvalidVersion:
            return ""
        if running.is_prerelease:  # a nightly or a release candidate: the release it became
            later = next((r for r in releases if Version(r) > running), None)
            if later is not None:
                return f">={later}"
        return f">{running.public}"
    return f">={releases[-1]}" if releases else ""


def engines_to_read(engine: str | None) -> tuple[str, ...]:
    """The mined engine the log shows, else every mined engine."""
    return (engine,) if engine in ENGINES else ENGINES


def nearest_version(engine: str, version: str | None) -> str | None:
    """The mined release to use for ``version``: itself, else the newest mined release not
    after it, else the oldest; the newest when the version is unknown."""
    known = versions(engine)
    if not known:
        return None
    wanted = release(version) if version else None
    if wanted is None:
        return known[-1]
    if version in known:
        return version
    not_after = [candidate for candidate in known if (release(candidate) or ()) <= wanted]
    return not_after[-1] if not_after else known[0]


@cache
def flag_table(engine: str, version: str) -> FlagTable:
    return FlagTable.model_validate(_json(f"{engine}/flags/{version}.json"))


@cache
def flag_changes(engine: str) -> tuple[FlagChange, ...]:
    return tuple(
        FlagChange.model_validate(change) for change in _json(f"{engine}/flag_changes.json")
    )


def flag_history(engine: str, flag: str, version: str) -> RemovedFlag | None:
    """The latest removal of ``flag`` at or before ``version`` (renamed, split or removed)."""
    wanted = release(version) or ()
    found = None
    for change in flag_changes(engine):
        if (release(change.to_version) or ()) > wanted:
            break
        for removed in change.removed:
            if removed.flag == flag:
                found = removed.model_copy(update={"gone_in": change.to_version})
        if flag in change.added:
            found = None
    if found is not None and found.kind == "renamed" and len(found.successors) == 1:
        # A successor renamed or removed in its turn by ``version``: the chain's end.
        later = flag_history(engine, found.successors[0], version)
        if later is not None:
            return found.model_copy(update={"kind": later.kind, "successors": later.successors})
    return found


@cache
def env_vars(engine: str) -> dict[str, EnvVar]:
    return {row["name"]: EnvVar.model_validate(row) for row in _json(f"{engine}/env_vars.json")}


def close_env_vars(engine: str, name: str, limit: int = 3) -> list[str]:
    """Declared variables nearest to an unknown one ("did you mean")."""
    declared = [var.name for var in env_vars(engine).values() if var.declared_in]
    return difflib.get_close_matches(name, declared, n=limit, cutoff=0.8)


class Registry(_Data):
    """The names one release registers at run time."""

    architectures: frozenset[str] = frozenset()
    tool_parsers: frozenset[str] = frozenset()
    reasoning_parsers: frozenset[str] = frozenset()
    quantization_methods: frozenset[str] = frozenset()
    attention_backends: frozenset[str] = frozenset()


@cache
def registries(engine: str) -> dict[str, Registry]:
    """Each mined release's registry, by version (empty when none was mined)."""
    path = mined_dir() / engine / "registries.json"
    if not path.is_file():
        return {}
    return {
        version: Registry.model_validate(row)
        for version, row in _json(f"{engine}/registries.json").items()
    }


PARSER_REGISTRIES = {
    "--tool-call-parser": "tool_parsers",
    "--reasoning-parser": "reasoning_parsers",
}
"""The flags whose values name a parser, each the registry that lists them."""
_REGISTRY_OF_FLAG = {
    **PARSER_REGISTRIES,
    "--quantization": "quantization_methods",
    "--attention-backend": "attention_backends",
    "VLLM_ATTENTION_BACKEND": "attention_backends",
}
"""The registry that lists a flag's (or variable's) values where the launch parser has no
choices for it (vLLM checks a parser name against a registry, a quantization method against a
``Literal``, an attention backend against its enum)."""


def flag_values(engine: str, version: str, flag: str) -> frozenset[str] | None:
    """The values ``version``'s ``flag`` (or environment variable) takes: its parser choices,
    else the names the release registers for it (None when neither says)."""
    option = flag_table(engine, version).lookup(flag).option if flag.startswith("-") else None
    if option is not None and option.choices:
        return frozenset(str(choice) for choice in option.choices)
    kind = _REGISTRY_OF_FLAG.get(flag)
    registry = registries(engine).get(version)
    names: frozenset[str] = getattr(registry, kind) if kind and registry else frozenset()
    return names or None


def accepts(engine: str, version: str, flag: str, value: str) -> bool | None:
    """Whether ``version``'s ``flag`` takes ``value`` (None when the release does not say)."""
    values = flag_values(engine, version, flag)
    return None if values is None else value in values


def near_value(value: str, values: Iterable[str]) -> str | None:
    """The one value of ``values`` that is ``value`` spelled another way: the same name with other
    separators or case (``deepseek_r1``, ``deepseek-r1``), or with a prefix or suffix word
    more or less (``triton`` and ``triton_attn``, ``openai_gptoss`` and ``gpt-oss``). A
    versioned name with a word added (``qwen3_coder`` for ``qwen3``) is a variant, and a
    family name with another number (``llama3`` for ``llama4``) another format: neither is."""
    wanted = _squashed_name(value)
    found = [choice for choice in values if _same_name(wanted, _squashed_name(choice))]
    return found[0] if len(found) == 1 else None


def _squashed_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _same_name(given: str, choice: str) -> bool:
    if given == choice:
        return True
    shorter, longer = sorted((given, choice), key=len)
    if len(shorter) < 4:
        return False
    if longer.startswith(shorter):
        return not any(c.isdigit() for c in shorter)
    return longer.endswith(shorter)


def first_release_with(engine: str, present: Callable[[str], bool | None]) -> str | None:
    """The oldest mined release from which ``present(version)`` holds through the newest one
    (None when it holds for none of them, or a newer release drops it)."""
    window = release_window(engine, present)
    return window[0] if window is not None and window[1] is None else None


def release_window(
    engine: str, present: Callable[[str], bool | None]
) -> tuple[str, str | None] | None:
    """The newest run of mined releases for which ``present(version)`` holds: its oldest
    release and the first release after it that lacks it (None when none does); None when it
    holds for none. A release for which it is None (its tables do not say) counts neither
    way."""
    known = versions(engine)
    after: str | None = None
    last = None
    for index in reversed(range(len(known))):
        said = present(known[index])
        if said:
            last = index
            break
        if said is False:
            after = known[index]
    if last is None:
        return None
    first = last
    for index in reversed(range(last)):
        said = present(known[index])
        if said is False:
            break
        first = index if said else first
    return known[first], after


def first_release_with_flag(engine: str, flag: str) -> str | None:
    """The oldest mined release from which ``engine`` has ``flag`` (exactly, through the newest
    release)."""
    return first_release_with(
        engine, lambda version: flag_table(engine, version).lookup(flag).outcome == "exact"
    )


def added_after(engine: str, flag: str, installed: str | None) -> str | None:
    """The release that added ``flag``, when ``installed`` (a mined release) is older; with no
    release known, any release after the oldest mined (the installed one refused the flag)."""
    added = first_release_with_flag(engine, flag)
    if added is None or added == versions(engine)[0]:
        return None
    return None if installed is not None and at_least(installed, added) else added


def _jsonl_gz(relative: str) -> list[dict[str, Any]]:
    with gzip.open(mined_dir() / relative, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def template_rows(source: str) -> list[dict[str, Any]]:
    """The raw rows of a templates file (the test suite validates them against the schema)."""
    return _jsonl_gz(f"{source}/templates.jsonl.gz")


@cache
def templates(source: str) -> tuple[MinedTemplate, ...]:
    """Templates of an engine (``sglang``, ``vllm``) or of the libraries (``libraries``).
    Built without validation (six times faster): the rows are the miner's, checked by tests."""
    return tuple(
        MinedTemplate.model_construct(
            **{**row, "holes": tuple(row["holes"]), "versions": tuple(row["versions"])}
        )
        for row in template_rows(source)
    )


@cache
def result_codes(table: str) -> dict[int, dict[str, Any]]:
    """A native result-code table by code: ``cuda_runtime_errors``, ``cuda_driver_errors``,
    ``nccl_results`` or ``errno``."""
    return {entry["code"]: entry for entry in _json(f"native/{table}.json")["codes"]}


@cache
def native_strings() -> tuple[dict[str, str], ...]:
    """Fixed strings of the native libraries, each with its library, version and file."""
    return tuple(_jsonl_gz("native/strings.jsonl.gz"))


_SAME_PACKAGE = {
    "sgl-kernel": ("sgl-kernel", "sglang-kernel"),
    "sglang-kernel": ("sglang-kernel", "sgl-kernel"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "flashinfer-python": ("flashinfer-python", "flashinfer"),
}
"""Packages published under another name in some releases (SGLang's kernels became
``sglang-kernel`` in 0.5.10; flashinfer's wheel is ``flashinfer-python``)."""


@dataclass(frozen=True)
class ReleaseRequirement:
    """The version of ``package`` that release ``release`` of ``engine`` declares; ``via`` is
    the other engine's requirement it comes through (SGLang up to 0.4 takes torch through the
    vLLM release it pins)."""

    engine: str
    release: str
    package: str
    spec: str
    via: ReleaseRequirement | None = None

    def sentence(self) -> str:
        """``SGLang 0.4.3.post2 requires transformers==4.48.3``, the chain when indirect."""
        if self.via is None:
            return f"{ENGINE_NAMES[self.engine]} {self.release} requires {self.package}{self.spec}"
        return (
            f"{self.via.sentence()}, and {ENGINE_NAMES[self.engine]} {self.release} (the newest "
            f"release it allows) requires {self.package}{self.spec}"
        )


@cache
def requirements(engine: str) -> dict[str, dict[str, str]]:
    """Each release's requirements that matter to a failure, by version, oldest first: the
    specifier of each package (torch, transformers, kernels, ...) its published metadata
    declares for a Linux x86_64 server install (empty when none was mined)."""
    path = mined_dir() / engine / "requires.json"
    if not path.is_file():
        return {}
    releases: dict[str, dict[str, Any]] = _json(f"{engine}/requires.json")["releases"]
    return {version: releases[version]["requires"] for version in sorted(releases, key=Version)}


def requirement_release(engine: str, version: str | None) -> str | None:
    """The release whose requirements stand for ``version``: itself, else the newest one
    before it (None when it is older than every one, or unreadable); the newest when None."""
    known = list(requirements(engine))
    if not known or version is None:
        return known[-1] if known else None
    if version in known:
        return version
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    before = [candidate for candidate in known if Version(candidate) <= wanted]
    return before[-1] if before else None


def required(engine: str, version: str | None, package: str) -> ReleaseRequirement | None:
    """What the release of ``engine`` standing for ``version`` (the newest when None)
    requires of ``package``, directly or through the other engine's release it pins (the
    newest that its range allows); None when neither declares a version of it."""
    chosen = requirement_release(engine, version)
    if chosen is None:
        return None
    declared = requirements(engine)[chosen]
    name = distribution_name(package)
    for candidate in _SAME_PACKAGE.get(name, (name,)):
        if candidate in declared:
            return ReleaseRequirement(engine, chosen, candidate, declared[candidate])
    for other in ENGINES:
        if other == engine or other not in declared:
            continue
        allowed = SpecifierSet(declared[other])
        fitting = [v for v in requirements(other) if allowed.contains(v, prereleases=True)]
        found = required(other, fitting[-1], package) if fitting else None
        if found is not None and found.via is None:
            via = ReleaseRequirement(engine, chosen, other, declared[other])
            return ReleaseRequirement(found.engine, found.release, found.package, found.spec, via)
    return None


@dataclass(frozen=True)
class ReleaseSpan:
    """The mined releases that have something (a model type, a module, a name): the first
    that has it and the first after that without it (None when the newest mined one still
    has it); ``first`` is None when no mined release has it."""

    first: str | None
    dropped: str | None
    releases: tuple[str, ...]
    """Every release mined, oldest first."""
    unlisted: frozenset[str] = frozenset()
    """Releases outside the span whose tables cannot say they lack it (a module that binds
    names the miner cannot list)."""

    @property
    def newest(self) -> str | None:
        return self.releases[-1] if self.releases else None

    @property
    def last_with(self) -> str | None:
        """The newest mined release that has it."""
        if self.first is None:
            return None
        if self.dropped is None:
            return self.newest
        return self.releases[self.releases.index(self.dropped) - 1]

    @property
    def everywhere(self) -> bool:
        """Whether every mined release has it (and none leaves the question open)."""
        return (
            self.first is not None
            and self.first == self.releases[0]
            and self.dropped is None
            and not self.unlisted
        )

    def covers(self, release: str) -> bool:
        """Whether the mined ``release`` is one from ``first`` up to (not) ``dropped``."""
        if self.first is None:
            return False
        end = self.releases.index(self.dropped) if self.dropped else len(self.releases)
        return self.releases.index(self.first) <= self.releases.index(release) < end

    def spec(self) -> str | None:
        """The releases that have it (``>=4.57.0``), None when none does."""
        if self.first is None:
            return None
        return f">={self.first}" + (f",<{self.dropped}" if self.dropped else "")


@dataclass(frozen=True)
class ModelTypeReleases(ReleaseSpan):
    """The transformers releases that know one ``model_type``."""

    model_type: str = ""


@cache
def _model_types() -> dict[str, Any]:
    path = mined_dir() / "libraries" / "transformers-model-types.json"
    if not path.is_file():
        return {"releases": [], "first": {}, "dropped": {}}
    data: dict[str, Any] = _json("libraries/transformers-model-types.json")
    return data


def model_types() -> tuple[str, ...]:
    """Every model type a mined transformers release knows."""
    return tuple(_model_types()["first"])


def model_type_releases(model_type: str) -> ModelTypeReleases:
    """The transformers releases that know ``model_type`` (a ``config.json`` ``model_type``,
    ``qwen3_vl``), from the keys of ``CONFIG_MAPPING_NAMES`` each mined release defines."""
    table = _model_types()
    return ModelTypeReleases(
        first=table["first"].get(model_type),
        dropped=table["dropped"].get(model_type),
        releases=tuple(table["releases"]),
        model_type=model_type,
    )


UNKNOWN_NAMES = "*"
"""Among a module's mined names: its top level binds names the miner cannot list (a star
import from outside the release, or a lazy module: a module ``__getattr__``, or one that
replaces itself in ``sys.modules``)."""


class LibraryApi(_Data):
    """A library whose modules and top-level names are mined release by release."""

    modules: tuple[str, ...]
    """The packages it installs, as imported (``huggingface_hub``)."""
    releases: tuple[str, ...]
    """The releases mined, oldest first."""


@cache
def library_apis() -> dict[str, LibraryApi]:
    """The libraries whose module API is mined, by distribution name (empty when none is)."""
    path = mined_dir() / "libraries" / "module_api.json"
    if not path.is_file():
        return {}
    return {
        name: LibraryApi.model_validate(row)
        for name, row in _json("libraries/module_api.json").items()
    }


def api_package(module: str) -> str | None:
    """The mined engine or library (as pip names it) whose releases ship ``module``'s
    top-level package; None when neither is mined."""
    top = module.partition(".")[0]
    if top in ENGINES:
        return top
    return next((name for name, api in library_apis().items() if top in api.modules), None)


def _api_path(package: str) -> Path:
    if package in ENGINES:
        return mined_dir() / package / "module_api.jsonl.gz"
    return mined_dir() / "libraries" / "module_api" / f"{package}.jsonl.gz"


def _api_releases(package: str) -> tuple[str, ...]:
    library = library_apis().get(package)
    return library.releases if library is not None else versions(package)


@cache
def module_api(package: str, module: str) -> dict[str, Any] | None:
    """The mined row of one module of an engine or a library (its release span and its
    top-level names grouped by span), None when no mined release ships it. The file is
    scanned for the one line, not parsed whole."""
    path = _api_path(package)
    if not path.is_file():
        return None
    start = '{"module": ' + json.dumps(module) + ","
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(start):
                row: dict[str, Any] = json.loads(line)
                return row
    return None


def modules_naming(package: str, name: str) -> tuple[str, ...]:
    """The modules of an engine or a library whose top level binds ``name`` in some mined
    release. The whole file is scanned (lines without the name are not parsed): asked only for
    a name an error calls."""
    path = _api_path(package)
    if not path.is_file():
        return ()
    found = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if name in line:
                row = json.loads(line)
                if any(name in names.split() for names in row["names"].values()):
                    found.append(row["module"])
    return tuple(found)


def api_span(package: str, module: str, name: str | None = None) -> ReleaseSpan | None:
    """The mined releases of an engine or a library (``outlines``) that ship ``module`` (with
    ``name`` at its top level, when given; the releases without it that bind names the miner
    cannot list are ``unlisted``); None when the tables cannot say: no module API mined, or
    no release lists the name and some bind names the miner cannot list."""
    if not _api_path(package).is_file():
        return None
    known = _api_releases(package)
    row = module_api(package, module)
    if row is None:
        return ReleaseSpan(None, None, known)
    if name is None:
        first, dropped = row["span"]
        return ReleaseSpan(first, dropped, known)
    spans = {name_: key for key, names in row["names"].items() for name_ in names.split()}
    unlisted = _releases_in(spans.get(UNKNOWN_NAMES), known)
    if name not in spans:
        return None if unlisted else ReleaseSpan(None, None, known)
    first, _, dropped = spans[name].partition(" ")
    listed = _releases_in(spans[name], known)
    return ReleaseSpan(first, dropped or None, known, frozenset(unlisted - listed))


def _releases_in(key: str | None, known: tuple[str, ...]) -> set[str]:
    """The releases of a names key (``"first"`` or ``"first dropped"``)."""
    if key is None:
        return set()
    first, _, dropped = key.partition(" ")
    span = ReleaseSpan(first, dropped or None, known)
    return {release for release in known if span.covers(release)}
