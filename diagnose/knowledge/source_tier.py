"""The engine-source tier: the decisive message matched against the error templates of the
engine release that printed it (and of the libraries under it), its category from
``knowledge/engine-source-rules.yaml`` and ``knowledge/overrides.yaml``, its holes bound to the
log's values, and a fix only when the version's flag and environment tables confirm it.

It is asked after the known-issue tier: a record from a resolved thread knows the fix the
thread settled on, a template only knows where the message is raised.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import regex
import yaml
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, field_validator

from diagnose.core.explain import Candidate, IncidentView, lead
from diagnose.core.expr import DISTRIBUTIONS, distribution_name, nearest_choice
from diagnose.core.incident import clipped
from diagnose.core.models import (
    Confidence,
    Finding,
    PackageAction,
    Patch,
    Role,
    Severity,
    known_category,
)
from diagnose.core.optionlink import flag_values
from diagnose.core.versions import at_least
from diagnose.knowledge import mined
from diagnose.knowledge.code_fault import (
    calling_program,
    engine_place,
    module_category,
    platform_plugin_fault,
    program_source,
)
from diagnose.knowledge.location import defined_by_some_release, knowledge_dir
from diagnose.knowledge.package_api import cut_import, frame_module
from diagnose.knowledge.platform_plugins import plugin_of
from diagnose.knowledge.source_index import (
    ELSEWHERE_KEPT,
    SourceTemplate,
    TemplateHit,
    builtin_index,
    fixed_runs,
    match_message,
)

RULES_NAME = "engine-source-rules.yaml"
OVERRIDES_NAME = "overrides.yaml"
_PROGS = {"sglang": "launch_server", "vllm": "api_server"}
"""The program name argparse prints for an engine's server, besides the engine's own name."""
_FLAG = r"--[a-z0-9][a-z0-9_.-]*[a-z0-9]"
_VALUE = r"[A-Za-z0-9_][^\s`'\",;)\]]*"
_NOT_A_VALUE = (
    r"(?!(?:when|if|and|or|to|for|in|with|the|a|an|instead|than|above|below|over|under)\b)"
)
_SET_FLAG = re.compile(
    r"\b(?P<verb>set|use|add|pass|specify|enable|try|lower|reduce|decrease|increase|raise"
    r"|for example:|e\.g\.,?)\s+"
    rf"(?:the\s+)?(?:flag\s+)?[`'\"]?(?P<flag>{_FLAG})(?:(?:\s*=\s*|\s+(?:to\s+)?"
    rf"(?:(?P<bound>above|below|over|under)\s+)?)[`'\"]?{_NOT_A_VALUE}(?P<value>{_VALUE}))?",
    re.IGNORECASE,
)
_USE_QUOTED_VALUE = re.compile(
    rf"\b(?P<verb>update|set|change)\s+(?:the\s+)?[`'\"]?(?P<flag>{_FLAG})\b[^.]{{0,200}}?"
    r"\bor use [`'\"](?P<value>[\w.-]+)[`'\"]",
    re.IGNORECASE,
)
"""A message that offers one value outright for the flag it asks to change (``Please update
--lora-target-modules to include all required modules: [...], or use 'all' to enable all
supported modules``): the value it offers is the fix."""
_DIRECTION = {
    "rais": "higher",
    "increas": "higher",
    "lower": "lower",
    "reduc": "lower",
    "decreas": "lower",
}
"""Stems of the verbs that ask for a value on one side of the current one, and that side."""
_ADJUST_DEST = re.compile(
    r"\b(?P<verb>(?:increas|decreas|rais|reduc)\w*|lower(?:ing)?)\s+(?:the\s+)?[`'\"]?"
    r"(?P<dest>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b",
    re.IGNORECASE,
)
"""An option named by its Python name (``Try increasing `gpu_memory_utilization```)."""
_EXCEEDS_OPTION = re.compile(
    r"\{(?P<need>\w+)(?::\w+)?\}\)? (?:is |are )?(?:greater|larger|more|higher|bigger) than "
    r"(?:the )?[`'\"]?(?P<dest>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)[`'\"]?:? \(?\{(?P=dest)(?::\w+)?\}"
)
"""A value beside the option it exceeds, both as holes (``{rank} is greater than max_lora_rank
{max_lora_rank}``)."""
_REQUIRED_FEATURE = re.compile(
    r"(?:^|[,.:;]\s*|\b(?:failed|error),?\s+)(?P<feature>[A-Za-z][a-z]+(?: [a-z]+){0,3}) "
    r"(?:is|are|must be) (?:required|needed|enabled)\b"
)
"""A feature the message says must be on, in words (``Chunked prefill is required for mamba
cache mode 'align'``): the boolean option that turns it on, ``enable_<words>``."""
_REFUSAL = re.compile(
    r"\b(?:not supported|only supported|unsupported|does not support|doesn't support|"
    r"not compatible|incompatible|use a different|use another)\b",
    re.IGNORECASE,
)
_VAGUE_CHOICES = frozenset({"auto", "none", "default", "true", "false", "disable", "enable"})
"""Option values too common as words to say which option a message means."""
_VAGUE_OPTION_WORDS = frozenset({"model", "draft", "speculative", "max", "min", "num", "size"})
"""Words of option names too common in messages to say which option one means (``model`` in
``GGUF model with architecture ...`` is no ``--speculative-draft-model-quantization``)."""
_REMOVE_FLAG = re.compile(
    r"\b(?:(?:remove|removing|drop|dropping|disable|disabling|unset|omit|omitting)\s+(?:the\s+)?"
    r"|instead\s+of\s+(?:via\s+|using\s+|passing\s+|with\s+)?(?:the\s+)?)"
    rf"(?:flag\s+)?[`'\"]?(?P<flag>{_FLAG})",
    re.IGNORECASE,
)
"""A flag the message says to remove, or that it says to do without (``... as a positional
argument instead of via the `--model` option``)."""
_NO_VALUE_ACTIONS = frozenset(
    {
        "store_true",
        "_StoreTrueAction",
        "BooleanOptionalAction",
        "EnableDisableAction",
        "DeprecatedStoreTrueAction",
    }
)
_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]{2,}\b")
_SET_ENV = re.compile(
    r"\b(?:set|export|use|try|setting)\s+(?:the\s+)?(?:environment\s+variable\s+|env\s+var\s+)?"
    rf"[`'\"]?(?P<name>[A-Z][A-Z0-9]*_[A-Z0-9_]{{2,}})(?:(?:\s*=\s*|\s+to\s+)[`'\"]?"
    rf"(?P<value>{_VALUE}))?"
)
_BOOL_VALUES = {"0", "1", "true", "false", "True", "False"}
_SHOWN_OPTION = re.compile(r"\b(?P<dest>[a-z][a-z0-9_]*)=\{(?P<hole>[a-z_][a-z0-9_]*)(?::\w+)?\}")
_OPTION_VALUE = re.compile(
    r"(?<![\w.])(?:self\.)?(?P<dest>[a-z][a-z0-9]*_[a-z0-9_]*)(?:\s*[=:]\s*|\s+)['\"]?"
    r"\{[a-z_][a-z0-9_]*(?::\w+)?\}"
)
"""An option's name with its value's hole beside it (``Unsupported tool_call_parser: {x}``,
``Unknown load_format={x}``). Only names with an underscore: a one-word name (``dtype``,
``device``) is as often a tensor's or a layer's as the launch option's."""
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")
_ARGPARSE_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: (?P<args>.+)$")
_ARGPARSE_AMBIGUOUS = re.compile(
    r"error: ambiguous option: (?P<flag>--[\w.-]+)(?:=\S*)? could match (?P<options>.+)$"
)


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class SourceRule(_Schema):
    """A category for messages whose words, module and exception fit."""

    category: str
    words: str | None = None
    modules: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()

    @field_validator("category")
    @classmethod
    def _known(cls, category: str) -> str:
        return known_category(category)

    @field_validator("words")
    @classmethod
    def _compiles(cls, words: str | None) -> str | None:
        if words is not None:
            regex.compile(words)
        return words


class SourceRules(_Schema):
    schema_: int = 1
    rules: tuple[SourceRule, ...]

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class TemplateOverride(_Schema):
    id: str | None = None
    text: str | None = None
    category: str | None = None
    ignore: bool = False


class Overrides(_Schema):
    wrappers: tuple[str, ...] = ()
    consequences: tuple[str, ...] = ()
    templates: tuple[TemplateOverride, ...] = ()


@dataclass(frozen=True)
class Judgement:
    """What the rules and overrides make of a matched template."""

    category: str | None
    role: str  # "cause", "wrapper", "consequence", "ignored"


@dataclass
class Knowledge:
    rules: list[tuple[SourceRule, regex.Pattern[str] | None]]
    wrappers: regex.Pattern[str] | None
    consequences: regex.Pattern[str] | None
    by_id: dict[str, TemplateOverride] = field(default_factory=dict)
    by_text: dict[str, TemplateOverride] = field(default_factory=dict)

    def judge(self, hit: TemplateHit) -> Judgement:
        template = hit.template
        override = self.by_id.get(template.id) or self.by_text.get(template.text)
        if override is not None and override.ignore:
            return Judgement(None, "ignored")
        if self.wrappers is not None and self.wrappers.search(template.text):
            return Judgement(None, "wrapper")
        if self.consequences is not None and self.consequences.search(template.text):
            return Judgement(None, "consequence")
        if override is not None and override.category:
            return Judgement(override.category, "cause")
        for rule, words in self.rules:
            if words is not None and not words.search(hit.message):
                continue
            if rule.modules and not any(
                template.module == m or template.module.startswith(m + ".") for m in rule.modules
            ):
                continue
            if rule.exceptions and template.exception not in rule.exceptions:
                continue
            return Judgement(rule.category, "cause")
        return Judgement(None, "cause")


def _either(patterns: Sequence[str]) -> regex.Pattern[str] | None:
    return regex.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def _yaml(path: Path) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)


@cache
def builtin_knowledge() -> Knowledge:
    """The shipped rules and overrides, read on first use."""
    rules_data = _yaml(knowledge_dir() / RULES_NAME) or {}
    rules = SourceRules.model_validate({"rules": rules_data.get("rules", [])})
    data = _yaml(knowledge_dir() / OVERRIDES_NAME) or {}
    overrides = Overrides.model_validate({k: v for k, v in data.items() if k != "schema"})
    return Knowledge(
        rules=[
            (rule, regex.compile(rule.words, regex.IGNORECASE) if rule.words else None)
            for rule in rules.rules
        ],
        wrappers=_either(overrides.wrappers),
        consequences=_either(overrides.consequences),
        by_id={o.id: o for o in overrides.templates if o.id},
        by_text={o.text: o for o in overrides.templates if o.text},
    )


@dataclass(frozen=True)
class ReleaseContext:
    """The engine and the mined release its tables are read from."""

    engine: str
    version: str | None
    """The mined release nearest to the log's version (None when no release is mined)."""
    shown: str | None
    """The version the log or the user gave, as given."""
    guessed: bool = False
    """The log does not say which engine ran: this is one of several read alike."""
    also: tuple[str, ...] = ()
    """Where guessed: the other engines whose source writes the matched message as well."""

    @property
    def name(self) -> str:
        return mined.ENGINE_NAMES.get(self.engine, self.engine)

    def table(self) -> mined.FlagTable | None:
        return mined.flag_table(self.engine, self.version) if self.version else None

    def in_release(self, versions: Sequence[str]) -> bool:
        """Whether a template of ``versions`` is one of this release's; with no version
        shown, every mined release counts."""
        return self.shown is None or self.version in versions


def engine_source_findings(
    incident: IncidentView, other_spellings: Path | None = None
) -> list[Finding]:
    """The decisive message's finding: the earliest candidate an argparse error or an error
    template of the engine (or a library under it) explains, wrappers and consequences left
    out. ``other_spellings`` maps each engine's flags to the other engine's (``_flags.yaml``)."""
    engines = mined.engines_to_read(incident.engine)
    knowledge = builtin_knowledge()
    for candidate in incident.candidates:
        found = _argparse_for(
            candidate, engines, incident.engine_version, other_spellings
        ) or _engine_code_typo(candidate, incident.engine_version)
        if found is not None:
            return [found]
        best = _best_hit(candidate, engines, incident.engine_version, knowledge)
        if best is not None:
            hit, judgement, context, last_raised = best
            return [_finding(hit, judgement, context, candidate, last_raised)]
        mismatch = platform_plugin_fault(candidate)
        misfit = _OWN_CODE_MISMATCH.search(candidate.text)
        if mismatch is None and misfit is not None:  # whose class or module it is: a plugin's,
            # the engine's, a library's
            mismatch = (
                _plugin_mismatch(misfit, candidate, engines, incident.engine_version)
                or _own_code_mismatch(misfit, candidate, engines, incident.engine_version)
                or _library_code_mismatch(misfit, candidate, incident.engine)
            )
        mismatch = mismatch or _engine_function_called_otherwise(candidate, engines)
        mismatch = mismatch or _import_cut_short(candidate, incident.engine_version)
        mismatch = mismatch or _check_changed_later(
            candidate, engines, knowledge, incident.engine_version
        )
        if mismatch is not None:
            return [mismatch]
    return []


_OWN_CODE_MISMATCH = re.compile(
    r"(?:\bTypeError: |^\s*(?:[45]\d\d )?|'message': ['\"])"
    r"(?P<owner>[A-Z]\w*)\.(?P<member>\w+)\(\) (?P<how>"
    r"takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given"
    r"|missing \d+ required (?:positional |keyword-only )?arguments?: [^\n]{1,120}"
    r"|got an unexpected keyword argument '\w+'|got multiple values for argument '\w+')"
    r"|(?:\bAttributeError: |^\s*|(?P<relayed>\b[Ee]rror '))"
    r"(?P<type_object>type object )?'(?P<object>_?[A-Z]\w*)'"
    r"(?(type_object)| object) has no attribute '(?P<attribute>\w+)'"
    r"|\bAttributeError: module '(?P<module>(?P<engine>vllm|sglang)\.\w+\.\w+(?:\.\w+)*)' "
    r"has no attribute '(?P<module_attribute>\w+)'"
    r"|\bAttributeError: '(?P<snake_object>[a-z][a-z0-9]*_\w+)' object has no attribute "
    r"'(?P<snake_attribute>\w+)'"
)
"""A call that does not fit the callee's signature (also pasted without its exception class,
or relayed as an HTTP error's body: after its status code, or as the JSON's ``'message'``),
or an attribute its object (or the class itself: ``type object 'X' has no attribute``) lacks,
named by the class (``Builder.get_inputs() takes 3 positional arguments but 4 were given``; also
quoted by the error that relays it, ``Worker failed with error ''X' object has no ...'``), or
a name an inner module of the engine lacks (``module 'sglang.srt.layers.x' has no attribute
'y'``). A class spelled in snake case (Triton's ``'runtime_knobs' object``) is read only as
a library's."""


_PUBLIC_API = frozenset(
    {
        "LLM", "LLMEngine", "AsyncLLMEngine", "AsyncLLM", "EngineArgs", "AsyncEngineArgs",
        "SamplingParams", "PoolingParams", "LoRARequest", "RequestOutput", "ServerArgs", "Engine",
        "Runtime",
    }
)  # fmt: skip
"""Classes the engines offer to other programs: a call of one that does not fit comes from a
program written for another release (which way is not known), not from the engine itself."""


_GIVEN = re.compile(
    r"takes (?:from )?(?P<takes>\d+) (?:to \d+ )?positional arguments? but (?P<given>\d+)"
)


def _plugin_mismatch(
    found: re.Match[str], candidate: Candidate, engines: Sequence[str], shown: str | None
) -> Finding | None:
    """A call or attribute of a platform plugin's class (``found``, a match of
    ``_OWN_CODE_MISMATCH``) that does not fit: the plugin and the engine are out of step.
    Which side is older follows from the refusal: more arguments than the class takes, or a
    keyword or attribute it lacks, is an engine newer than the plugin; a required argument the
    engine does not pass is a plugin newer than the engine."""
    owner = found.group("owner") or found.group("object")
    if owner is None:
        return None
    found_plugin = next(
        (
            (engine, plugin)
            for engine in engines
            if (plugin := plugin_of(owner, candidate, engine, shown)) is not None
        ),
        None,
    )
    if found_plugin is None:
        return None
    engine, plugin = found_plugin
    if found.group("owner"):
        call, how = f"`{owner}.{found.group('member')}()`", found.group("how")
    else:
        call = f"The class `{owner}`" if found.group("type_object") else f"A `{owner}` object"
        how = f"has no attribute '{found.group('attribute')}'"
    name = mined.ENGINE_NAMES.get(engine, engine)
    given = _GIVEN.search(how)
    plugin_newer = how.startswith("missing") or (
        given is not None and int(given.group("given")) < int(given.group("takes"))
    )
    release = f"{name} {shown}" if shown else f"the installed {name}"
    if plugin_newer:
        older = f"{release} is older than the {plugin.package} release installed"
        change = PackageAction(name=engine, spec="", action="upgrade")
        way = (
            f"Install the {name} release this {plugin.package} was made for, or the "
            f"{plugin.package} release made for {release}."
        )
    else:
        older = f"the {plugin.package} installed is older than {release}"
        change = PackageAction(name=plugin.package, spec="", action="upgrade")
        way = (
            f"Install the {plugin.package} release made for {release} (the plugin's release "
            f"notes name the {name} release each one pairs with), or the {name} release the "
            f"installed {plugin.package} was made for."
        )
    return _code_mismatch(
        candidate,
        signature=f"{engine}-platform-plugin-mismatch",
        title=f"The {plugin.package} plugin and {name} are out of step (`{owner}`)",
        explanation=(
            f"{call} {how}. `{owner}` is the platform class of the {plugin.package} plugin "
            f"(`{plugin.module}`), which {name} calls through its platform interface; a plugin "
            f"release is made for one {name} release, and here the two do not fit: {older}. "
            f"{way}"
        ),
        patch_note="No setting makes a plugin fit another engine release: the pair does.",
        next_check=(
            f"`pip show {engine} {plugin.package}`: the two versions, against the pairing the "
            "plugin's release notes give."
        ),
        raised_in=f"{plugin.package}, {plugin.module} ({owner})",
        package=change,
        confidence=Confidence.MEDIUM,
    )


def _own_code_mismatch(
    found: re.Match[str], candidate: Candidate, engines: Sequence[str], shown: str | None
) -> Finding | None:
    """A call or attribute of one of the engine's own classes that the class does not have
    (``found``, a match of ``_OWN_CODE_MISMATCH``): two parts of the installed engine that do
    not fit together (a nightly or source build, a plugin written for another release), or a
    bug a later release fixed."""
    owner = found.group("owner") or found.group("object") or found.group("module")
    if owner is None or owner in _PUBLIC_API:
        return None
    engine, module = (
        (found.group("engine"), owner)
        if found.group("module")
        else _engine_class(owner, engines) or (None, None)
    )
    if engine is None or engine not in engines:
        return None
    place = engine_place(candidate)
    # the innermost frame of the engine asked, unless another error relays the message
    relayed = found.group("relayed") is not None
    asking = place[1] if place is not None and place[0] == engine and not relayed else None
    if not found.group("module") and asking in mined.modules_naming(engine, owner):
        module = asking  # of the modules that bind the name, the one whose code asks
    name = mined.ENGINE_NAMES.get(engine, engine)
    kind = "module" if found.group("module") else "class"
    attribute = found.group("attribute")
    if found.group("module"):
        what = f"`{owner}` is asked for `{found.group('module_attribute')}`, which it lacks"
        own = f"`{owner}` is {name}'s own module"
    elif found.group("owner"):
        call, how = f"{owner}.{found.group('member')}()", found.group("how")
        what = f"`{call}` is called in a way it does not take ({how})"
        own = f"`{owner}` is {name}'s own class (`{module}`)"
    else:
        what = (
            f"the class `{owner}` is asked for `{attribute}`, which it lacks"
            if found.group("type_object")
            else f"a `{owner}` object is read for `{attribute}`, which it never set: the code "
            f"that reads it expects the attribute, and `{owner}` does not give it (the class "
            "changed without the code that uses it, or the other way round)"
        )
        own = f"`{owner}` is {name}'s own class (`{module}`)"
    raising = _raising_module(candidate)
    caller = calling_program(raising)
    if caller is not None:  # a program built on the engine, written for another release of it
        distribution = distribution_name(DISTRIBUTIONS.get(caller, caller))
        release = f"{name} {shown}" if shown else f"the installed {name}"
        return _code_mismatch(
            candidate,
            signature=f"{engine}-caller-written-for-another-release",
            title=f"`{caller}` uses {name}'s `{owner}` as another {name} release defines it",
            explanation=(
                f"{what[0].upper()}{what[1:]}. {own}, and the code that uses it is "
                f"`{caller}`'s (`{raising}`, the traceback's innermost "
                f"frame): a program built on {name} and written for another {name} release "
                f"than {release}. Install the `{distribution}` release written for {release} "
                f"(its release notes or `pip show {distribution}` name the {name} it needs), "
                f"or the {name} release this `{distribution}` was written for."
            ),
            patch_note=f"No setting changes the call: `{distribution}` and {name} as a pair do.",
            next_check=(
                f"`pip show {distribution} {engine}` and `pip check`: the {name} the installed "
                f"`{distribution}` declares against the one installed."
            ),
            raised_in=f"{name}, {module} ({owner})",
            package=PackageAction(name=distribution, spec="", action="upgrade"),
            confidence=Confidence.MEDIUM,  # the engine's class, the program's frame: both seen
        )
    program_file = _program_file(candidate) if asking is None and raising is None else None
    if program_file is not None:  # a program's own source file, not an installed package
        return _code_mismatch(
            candidate,
            signature=f"{engine}-caller-written-for-another-release",
            title=f"A program's code uses {name}'s `{owner}` as another {name} release defines it",
            explanation=(
                f"{what[0].upper()}{what[1:]}. {own}, and the code that uses it is "
                f"`{program_file}`, the traceback's innermost frame: a program's own source, "
                f"not {name}'s and not an installed package. It was written for another {name} "
                f"release than the installed one, which renamed, moved or removed that part of "
                f"its API (or added it later). Install the {name} release the program was "
                "written for (its requirements or README name it), or update the program to "
                f"the installed {name}'s API."
            ),
            patch_note=f"No setting changes the call: the program and {name} as a pair do.",
            next_check=(
                f"The program's requirements or README: the {name} release it was written for, "
                f"against `pip show {engine}`."
            ),
            raised_in=f"{name}, {module} ({owner})",
            package=None,
            confidence=Confidence.MEDIUM,
        )
    spec = mined.upgrade_spec(engine, shown)
    newer = f" than {shown}" if shown else f" ({spec})" if spec else ""
    if asking is not None:
        explanation = (
            f"{what[0].upper()}{what[1:]}. {own}, and the code that asks is {name}'s own too "
            f"(`{asking}`, the traceback's innermost frame in the engine): the two do not fit "
            f"together on this path. That is most often a bug of this "
            f"{name} release in the code for this model or for an option in use (a parallel "
            "layout, a quantization, speculative decoding), which a later release fixes; less "
            "often, parts of two builds (a nightly or source build where one module changed "
            f"before another). Install a newer {name} release{newer} (or the latest commit of a "
            "source build), and search its issues for the model's name and the message; until "
            "then, start without the option that leads into that code."
        )
    else:
        explanation = (
            f"{what[0].upper()}{what[1:]}. {own}: the code that uses it (the engine's, or a "
            f"library such as transformers that {name} hands it to) and the {kind} come from "
            f"code that does not fit together. That is a bug of this {name} build (a nightly or "
            "main-branch build above all, where one module changed before another), or a "
            "plugin, platform port or model file written for another release. Install a newer "
            f"{name} release{newer} (or the latest commit of a source build), and search its "
            "issues for the message; a port or plugin needs the release it was written for."
        )
    return _code_mismatch(
        candidate,
        signature=f"{engine}-own-code-mismatch",
        title=(
            f"{name}'s own class `{owner}` lacks `{attribute}`, which the code that uses it reads"
            if attribute and not found.group("type_object")
            else f"{name}'s own {kind} `{owner}` does not fit the code that uses it"
        ),
        explanation=explanation,
        patch_note=f"No setting makes {name}'s code consistent: a newer (or matching) build does.",
        next_check=(
            f"`pip show {engine}` (a version with `dev`, `rc` or `+g<commit>` is a nightly or "
            "source build) and `pip list | grep -i plugin` for platform ports."
        ),
        raised_in=f"{name}, {module}" if found.group("module") else f"{name}, {module} ({owner})",
        package=PackageAction(name=engine, spec=spec, action="upgrade"),
        category=module_category(asking) if asking else "kernel_build",
    )


def _engine_class(owner: str, engines: Sequence[str]) -> tuple[str, str] | None:
    """The engine whose own class ``owner`` is, with its module: one that raises messages of
    its own (the template index knows it), else one whose modules bind it at their top level
    and no mined library does (a plain data class, such as an attention backend's metadata)."""
    for engine in engines:
        index = builtin_index(engine)
        if index is not None and owner in index.classes:
            return engine, index.classes[owner]
    if any(mined.modules_naming(library, owner) for library in mined.library_apis()):
        return None  # a library's class that the engine imports
    for engine in engines:
        if modules := mined.modules_naming(engine, owner):
            return engine, modules[0]
    return None


_PYTHON_TYPES = frozenset(("NoneType", "Ellipsis", "NotImplementedType", "EllipsisType"))
"""Python's own types that a library's module may bind too (``NoneType = type(None)``): an
object of one is no library's."""


def _library_code_mismatch(
    found: re.Match[str], candidate: Candidate, engine: str | None
) -> Finding | None:
    """A call or attribute of a class that one mined library under the engine defines
    (FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper``, a torchao config), as ``found``
    matched it: the calling code, the engine's or a program's, was written for another
    release of that library."""
    owner = found.group("owner") or found.group("object") or found.group("snake_object")
    if not owner or owner in _PUBLIC_API or owner in _PYTHON_TYPES:
        return None
    apis = mined.library_apis()
    defining = {
        library: modules for library in apis if (modules := mined.modules_naming(library, owner))
    }
    if len(defining) != 1:
        return None
    ((library, modules),) = defining.items()
    engines = mined.engines_to_read(engine)
    engine_binds = any(mined.modules_naming(str(e), owner) for e in engines)
    if engine_binds and not set(modules) & set(apis[library].modules):
        return None  # the engine's own class of that name, not one its package exports
    if found.group("owner"):
        keyword = "got an unexpected keyword argument" in found.group("how")
        what = f"`{owner}.{found.group('member')}()` is called in a way it does not take"
        what += f" ({found.group('how')})"
    else:
        keyword = False
        attribute = found.group("attribute") or found.group("snake_attribute")
        what = f"a `{owner}` object is asked for `{attribute}`, which it lacks"
    caller = mined.ENGINE_NAMES.get(engine or "", "the engine")
    direction = (
        f"a keyword the installed `{library}` does not take is most often one a newer "
        f"`{library}` added: upgrade it to the release the caller was built against"
        if keyword
        else f"install the `{library}` release the caller declares (`pip check` names it)"
    )
    return _code_mismatch(
        candidate,
        signature=f"{library}-called-as-another-release-defines-it",
        title=f"`{owner}` of {library} is used as another {library} release defines it",
        explanation=(
            f"{what[0].upper()}{what[1:]}. `{owner}` is {library}'s class (`{modules[0]}`), "
            f"and the code that uses it ({caller}'s, or a program's) was written for another "
            f"{library} release: the installed pair does not fit. No setting changes that; "
            f"{direction}, or the caller's release written for the installed {library}."
        ),
        patch_note=f"No setting changes the call: the {library} release (or the caller's) does.",
        next_check=(
            f"`pip show {library}` against the release the engine build was made with "
            f"(`pip check`; a container image's own pins)."
        ),
        raised_in=f"{library}, {modules[0]} ({owner})",
        package=PackageAction(name=library, spec="", action="upgrade" if keyword else "pin"),
    )


def _code_mismatch(
    candidate: Candidate,
    *,
    signature: str,
    title: str,
    explanation: str,
    patch_note: str,
    next_check: str,
    raised_in: str | None,
    package: PackageAction | None = None,
    confidence: Confidence = Confidence.LOW,
    category: str = "kernel_build",
) -> Finding:
    """A lead of the engine-source tier: code of the engine and the code that uses it come
    from releases that do not fit together, which no setting changes."""
    return lead(
        candidate,
        signature=signature,
        category=category,
        title=title,
        explanation=explanation,
        tier="engine_source",
        confidence=confidence,
        patch=None,
        patch_note=patch_note,
        package=package,
        next_checks=[next_check],
        raised_in=raised_in,
    )


_FUNCTION_CALL_MISMATCH = re.compile(
    r"(?:\bTypeError: |: |^\s*)(?P<function>[a-z]\w*)(?:\.<locals>\.(?P<inner>\w+))?\(\) "
    r"(?P<how>"
    r"missing \d+ required (?:positional |keyword-only )?arguments?: [^\n]{1,120}"
    r"|got an unexpected keyword argument '\w+'"
    r"|takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given)"
)
"""A call that does not fit a plain function's signature (``resolve_hf_chat_template()
missing 1 required keyword-only argument: 'model_config'``), or that of a function another one
builds (``npu_wrapper_preprocess.<locals>._preprocess() missing ...``); a server that reports
the error of a request quotes it without its class (``Error in request: f() missing ...``)."""


def _engine_function_called_otherwise(
    candidate: Candidate, engines: Sequence[str]
) -> Finding | None:
    """A function of the engine's own modules called as another release defines it: the
    caller (a program that drives the engine through its Python API, most often) was written
    for another engine release."""
    found = _FUNCTION_CALL_MISMATCH.search(candidate.text)
    if found is None:
        return None
    function, how = found.group("function"), found.group("how")
    named = [(e, m) for e in engines for m in mined.modules_naming(e, function)]
    if not named or len({e for e, _ in named}) > 1:
        return None
    engine = named[0][0]
    modules = ", ".join(f"`{m}`" for _, m in named[:2])
    name = mined.ENGINE_NAMES.get(engine, engine)
    if found.group("inner"):
        return _engine_wrapper_called_otherwise(candidate, found, engine, named[0][1])
    caller = _raising_module(candidate)
    if caller is not None and caller.partition(".")[0] == engine and "models" in caller.split("."):
        return _model_file_behind(candidate, engine, function, how, modules, caller)
    return _code_mismatch(
        candidate,
        signature=f"{engine}-function-called-by-another-release",
        title=f"{name}'s function `{function}()` is called as another {name} release defines it",
        explanation=(
            f"`{function}()` is {name}'s own function ({modules}), and the call does not fit it "
            f"({how}): the calling code was written for another {name} release, one in which "
            f"`{function}` took other arguments. Most often the caller is a program that drives "
            f"{name} through its Python API (an evaluation harness such as lm-eval, a trainer, a "
            "server wrapper): its release written for the installed engine fixes it, or the "
            f"{name} release that program declares. When the caller is {name}'s own code, the "
            f"install mixes two releases: reinstall {name}."
        ),
        patch_note=(
            "No setting changes the call: upgrade the program whose frame calls it (the frame "
            f"above the error), or install the {name} release that program declares."
        ),
        next_check=(
            "The frame above the error names the caller; `pip show <that program>` gives the "
            f"{name} releases it was written for."
        ),
        raised_in=f"{name}, {named[0][1]}",
    )


def _model_file_behind(
    candidate: Candidate, engine: str, function: str, how: str, modules: str, caller: str
) -> Finding:
    """The engine's own file for a model calls one of the engine's shared functions as an
    earlier release defined it: that release's support for the model is broken, and the
    next release (or the one before) loads it."""
    name = mined.ENGINE_NAMES.get(engine, engine)
    model = caller.rpartition(".")[2]
    return _code_mismatch(
        candidate,
        signature=f"{engine}-model-file-behind-its-release",
        title=f"{name}'s code for the `{model}` model calls `{function}()` as its own release "
        "no longer defines it",
        explanation=(
            f"`{function}()` is {name}'s own function ({modules}), and the call that does not fit "
            f"it ({how}) is in {name}'s own file for this model, `{caller}`: a change to the "
            f"shared function in this release left the model's file behind. That is a bug of the "
            f"installed {name} release for this model, not a setting and not a mixed install: "
            f"the next {name} release (its file fixed), or the release before the change, loads "
            "the model."
        ),
        patch_note=(
            f"No setting changes the call: upgrade {name} to a release whose `{model}` file "
            "is fixed, or go back to the release before the change."
        ),
        next_check=(
            f"`pip show {engine}` for the release; the engine's issues and pull requests for "
            f"`{model}` and `{function}`: the fix names the release that has it."
        ),
        raised_in=f"{name}, {caller}",
        package=PackageAction(name=engine, spec="", action="upgrade"),
        category="model_unsupported",
    )


class _Wordings(NamedTuple):
    by_function: dict[str, tuple[SourceTemplate, ...]]
    """The templates by the last part of the function that raises them."""
    newest: dict[str, str]
    """For each wording, the newest release that writes it anywhere (a check that moved to
    another module keeps its words)."""


@cache
def _wordings(source: str) -> _Wordings:
    """The tables the changed-check reading asks of a source, read in one pass of its index."""
    index = builtin_index(source)
    grouped: dict[str, list[SourceTemplate]] = {}
    newest: dict[str, str] = {}
    for template in index.rows() if index is not None else []:
        grouped.setdefault(template.function.rpartition(".")[2], []).append(template)
        if template.versions and at_least(template.versions[-1], newest.get(template.text, "0")):
            newest[template.text] = template.versions[-1]
    return _Wordings({f: tuple(templates) for f, templates in grouped.items()}, newest)


def _check_changed_later(
    candidate: Candidate, engines: Sequence[str], knowledge: Knowledge, shown: str | None
) -> Finding | None:
    """A check of the engine that no category rule names, in a wording that only releases up to
    some point write, where the same function of later releases words the same check otherwise
    (begins alike, and counts another value or says other words between its values) or, still
    making its other checks, no longer makes this one: the wording dates the installed release,
    and the check itself changed after it, most often to fix the case it refused."""
    for engine in engines:
        index = builtin_index(engine)
        if index is None or not index.versions:
            continue
        hits = [
            hit
            for hit in match_message(index, candidate.text)
            if not (hit.template.generic or _mostly_holes(hit))
            and knowledge.judge(hit).role == "cause"
        ]
        if not hits:
            continue
        wordings = _wordings(engine)  # the whole index, read only for a message it holds
        written = wordings.newest
        if any(written.get(hit.template.text) == index.versions[-1] for hit in hits):
            continue
        old = hits[0].template
        last = written.get(old.text, old.versions[-1])
        measured = _what_a_check_measures(old.text)
        if len(measured[0]) < MIN_CHECK_HEAD:
            continue
        siblings = wordings.by_function.get(old.function.rpartition(".")[2], ())
        later = [
            template
            for template in siblings
            if template.versions
            and not at_least(last, template.versions[0])
            and (other := _what_a_check_measures(template.text))[0] == measured[0]
            and other != measured
        ]
        same_place = [
            template
            for template in siblings
            if template.module == old.module and template.function == old.function
        ]
        # dropped: the function still makes its other checks and gained no wording after the
        # installed release (a new one may be this check reworded beyond recognition)
        kept = any(index.versions[-1] in template.versions for template in same_place) and not any(
            template.versions and not at_least(last, template.versions[0])
            for template in same_place
        )
        if later:
            new = min(later, key=lambda template: Version(template.versions[0]))
            since = new.versions[0]
            changed = (
                f"In {since} and later the same check reads `{new.text}`: it was changed after "
                "the installed release"
            )
        elif kept:
            since = next(v for v in index.versions if not at_least(last, v))
            changed = (
                f"From {since} on, `{old.function}` no longer makes this check (its other checks "
                "remain): it was dropped after the installed release"
            )
        else:
            continue
        if shown is not None and at_least(shown, since):
            continue  # the log's own release is past the change: a fork, or another check
        name = mined.ENGINE_NAMES.get(engine, engine)
        worded = (
            f"release {last}" if len(old.versions) == 1 else f"releases {old.versions[0]} to {last}"
        )
        return _code_mismatch(
            candidate,
            signature=f"{engine}-check-changed-after-this-release",
            title=f"{name}'s check in `{old.function}` was changed after the release in this log",
            explanation=(
                f"The error is {name}'s own check (`{old.module}`, `{old.function}`) in the "
                f"words of {worded} (of the releases the tool knows), so the installed release "
                f"is one of that age. {changed}, most often to fix a case it refused wrongly. "
                f"Upgrade {name} to {since} or later; until then, what the check refuses is the "
                "setting to change. No signature or known issue knows this message, so treat it "
                "as a lead."
            ),
            patch_note=f"No setting comes from the check: the {name} release that changed it does.",
            next_check=(
                f"`pip show {engine}`: a release before {since} (the message's wording says so); "
                f"the {name} release notes from {since} for `{old.function}`."
            ),
            raised_in=f"{name}, {old.module} ({old.function})",
            package=PackageAction(name=engine, spec=f">={since}", action="upgrade"),
        )
    return None


def _what_a_check_measures(text: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """A check's wording up to its last value: the words before its first value, the words
    between its values, and the names of the values. Advice appended after the last value
    (``... or decrease DP/TP/PP.``) changes none of them; a value counted otherwise does."""
    runs = [" ".join(run.split()) for run in fixed_runs(text)]
    return runs[0], tuple(runs[1:-1]), tuple(_HOLE_NAME.findall(text))


_HOLE_NAME = re.compile(r"(?<!\{)\{(\w+)")


MIN_CHECK_HEAD = 12
"""Letters the check's wording keeps before its first value, so that two wordings that begin
alike are one check (``Not enough allowed NUMA nodes to bind threads of``), not two messages
that share a word."""


def _engine_wrapper_called_otherwise(
    candidate: Candidate, found: re.Match[str], engine: str, module: str
) -> Finding:
    """A function that one of the engine's functions builds (a wrapper it puts in place of a
    library's function: a platform's patch of an image processor) called with arguments it
    does not take: the library calls it as its own release defines the function it replaced."""
    outer, inner, how = found.group("function"), found.group("inner"), found.group("how")
    name = mined.ENGINE_NAMES.get(engine, engine)
    return _code_mismatch(
        candidate,
        signature=f"{engine}-wrapper-called-by-another-library-release",
        title=f"A wrapper {name} builds in `{outer}()` is called as another library calls it",
        explanation=(
            f"`{outer}.<locals>.{inner}()` is a function that {name}'s `{outer}()` (`{module}`) "
            "builds, most often to stand in for a library's function it patches (a platform's "
            f"version of a model processor or kernel), and the call does not fit it ({how}). "
            "The caller is the patched library, which calls the function as its own release "
            f"defines it: that library is newer (or older) than the one this {name} release's "
            f"patch was written for. Install the library release this {name} release pins "
            f"(`pip check`, the image's own pins), or the {name} release whose patch follows the "
            "installed library."
        ),
        patch_note=(
            f"No setting changes the call: the library's release (the one {name} pins) or a "
            f"{name} release written for the installed library does."
        ),
        next_check=(
            f"`pip check` and `pip show {engine}`: the library {name} pins against the installed "
            f"one; the traceback's frame that calls `{inner}` names the library."
        ),
        raised_in=f"{name}, {module} ({outer})",
    )


_FRAME_FILE = re.compile(r'File "(?P<file>[^"\n]+?)(?:/__init__)?\.py", line \d+')


def _innermost_file(candidate: Candidate) -> str | None:
    """The file (without ``.py``) of the candidate's innermost frame, or of the last frame a
    message pasted on one line carries before it."""
    frames = list(_FRAME_FILE.finditer(candidate.frame or candidate.text))
    return frames[-1].group("file") if frames else None


def _program_file(candidate: Candidate) -> str | None:
    """The traceback's innermost frame when its file is a program's own source."""
    file = _innermost_file(candidate)
    return f"{file}.py" if file is not None and program_source(file) else None


def _raising_module(candidate: Candidate) -> str | None:
    """The module whose code raised the candidate's message: its traceback's innermost frame,
    or the last frame a message pasted on one line carries before it; None when neither shows
    one under site-packages or an engine's source tree."""
    file = _innermost_file(candidate)
    return frame_module(file) if file is not None else None


_SUGGESTED_NAME = re.compile(
    r"\b(?:AttributeError: (?:'(?P<owner>\w+)' object|module '(?P<module>[\w.]+)'|type object "
    r"'(?P<type>\w+)') has no attribute '(?P<attribute>\w+)'|NameError: name '(?P<name>\w+)' is "
    r"not defined)\. Did you mean: '(?P<meant>\w+)'\?"
)
"""Python's own hint (3.10 and later) that a name in the code is a near miss of one that
exists (``'Logger' object has no attribute 'warning_one'. Did you mean: 'warning_once'?``)."""
_TYPO_LIKENESS = 0.85
"""How alike (difflib's ratio) the name asked for and the one Python suggests must be for a
slip of the keyboard (``warning_one``, ``warning_once``: 0.96); a renamed attribute differs
more (``rope_theta``, ``rope_scaling``)."""


def _misspelt(found: re.Match[str], engine: str) -> bool:
    """Whether Python's hint reads as a slip in the engine's own code, not as another
    package's release that lacks the name: a module of another package, or a model config
    (transformers' release, or the checkpoint's), is not the engine's to misspell."""
    module, owner = found.group("module"), found.group("owner") or found.group("type") or ""
    if module is not None and module.partition(".")[0] != engine:
        return False
    if owner.endswith("Config"):
        return False
    wrong = found.group("attribute") or found.group("name")
    return SequenceMatcher(None, wrong, found.group("meant")).ratio() >= _TYPO_LIKENESS


def _engine_code_typo(candidate: Candidate, shown: str | None) -> Finding | None:
    """A name the engine's own module misspells, by Python's hint, raised there: a bug of that
    release, on a path few runs take, which a later release fixes."""
    found = _SUGGESTED_NAME.search(candidate.text)
    module = _raising_module(candidate) if found is not None else None
    engine = module.partition(".")[0] if module else None
    if found is None or module is None or engine not in mined.ENGINES:
        return None
    if not _misspelt(found, engine):
        return None
    name = mined.ENGINE_NAMES[engine]
    wrong, meant = found.group("attribute") or found.group("name"), found.group("meant")
    spec = mined.upgrade_spec(engine, shown)
    return _code_mismatch(
        candidate,
        signature=f"{engine}-code-misspells-a-name",
        title=f"{name}'s own code asks for `{wrong}`, a near miss of `{meant}`: a bug",
        explanation=(
            f"The error is raised in {name}'s own module `{module}`, whose code asks for "
            f"`{wrong}`, which does not exist; Python suggests `{meant}`. That is a bug of this "
            f"{name} build on a code path few runs take (a quantization, a model, an option "
            "that leads there), not a setting or a package of this machine. Install a later "
            "release with the fix (the engine's issues and release notes name the message); "
            "until then, the option that leads to that path avoids it."
        ),
        patch_note=f"No setting corrects {name}'s code: a release with the fix does.",
        next_check=f"`pip show {engine}`; the engine's issues and release notes for `{wrong}`.",
        raised_in=f"{name}, {module}",
        package=PackageAction(name=engine, spec=spec, action="upgrade"),
        confidence=Confidence.MEDIUM,
    )


def _import_cut_short(candidate: Candidate, engine_version: str | None) -> Finding | None:
    """A traceback cut short at an import statement (the incident keeps its frame with it)
    that asks for a name the mined releases of its package do not all have: that import is
    the likely error the cut left out."""
    frame = candidate.frame
    if frame is None or frame.rpartition("\n")[2] != candidate.text.strip():
        return None  # the traceback went on past the frame's code line
    cut = cut_import(frame, engine_version)
    if cut is None:
        return None
    package, failed = cut.change.name, cut.failed
    library = mined.api_package(failed.module)
    in_none = package in mined.ENGINES and library != package  # fails on every library release
    lacking = f"no {library} release has" if in_none else "not every release has"
    error = (
        f"ImportError: cannot import name '{failed.name}'"
        if failed.name
        else f"ModuleNotFoundError: No module named '{failed.module}'"
    )
    statement = clipped(candidate.text.strip(), 160)
    where = f"`{cut.importer}`" if cut.importer else "the innermost frame"
    title = mined.ENGINE_NAMES.get(package, package)
    return _code_mismatch(
        candidate,
        signature="import-of-a-name-some-releases-lack",
        title=f"The traceback stops at importing {failed.words()}, which {lacking}",
        explanation=(
            f"The traceback ends at {where} importing `{statement}`, with no exception after "
            "it: the log (or the paste) was cut before the error. The releases' module tables "
            f"say that import fails on some of them. {cut.note} The missing line is most "
            f"likely `{error}`; the whole traceback confirms it."
        ),
        patch_note=f"No setting changes what a release ships: install the {title} release named.",
        next_check=f"`pip show {package}` and the traceback's last line, which the log cut off.",
        raised_in=cut.importer,
        package=cut.change,
        confidence=Confidence.MEDIUM if in_none else Confidence.LOW,
    )


_AREAS = {
    "gpu_oom": "GPU memory (how much the server reserves, or what else holds the GPU)",
    "port_in_use": "a port another process holds",
    "host_oom": "host or shared memory (/dev/shm)",
    "context_length": "the context length (--max-model-len / --context-length)",
    "spec_decode_config": "the speculative-decoding settings",
    "chat_template": "the chat template",
    "gpu_arch_support": "what this GPU's architecture supports",
    "cuda_driver": "the NVIDIA driver and CUDA runtime",
    "kernel_build": "building or loading GPU kernels and the packages that ship them",
    "nccl_runtime": "NCCL, the communication between the GPUs",
    "dist_init_hang": "setting up the process group between the ranks",
    "network_config": "the network: interfaces, addresses, proxies",
    "model_access": "reaching the model: its path, the Hub, a token or a revision",
    "model_unsupported": "what the installed release supports of this model or checkpoint",
    "launch_args": "a launch option",
}
"""What each category is about, for the area a message's words point at."""


MESSAGE_WORDS_CHARS = 1000
"""How much of the first error its words are read in: a longer line is no message."""

REASON_WINDOW_LINES = 8
"""How far below the first error a line that gives its reason may come (CANN, NCCL and
other C++ layers print ``error code is 11`` first and the reason a line or two later)."""


def message_words_findings(incident: IncidentView) -> list[Finding]:
    """When no tier explains the first error, the area its own words point at (the category
    rules read on the message itself, or on a line just below it that gives its reason): a
    lead, with no setting to change (a refusal of a Blackwell-generation GPU gets the engine's
    upgrade to try)."""
    knowledge = builtin_knowledge()
    readable = incident.readable()
    if not readable or _wraps_or_follows(readable[0], knowledge) or readable[0].cut_short:
        return []
    first = readable[0]
    read = next(
        (
            (candidate, category)
            for candidate in _reason_block(first, readable)
            if not _wraps_or_follows(candidate, knowledge)
            for category in [_category_of_words(candidate, knowledge)]
            if category is not None
        ),
        None,
    )
    if read is None:
        return []
    reason, category = read
    area = _AREAS.get(category, category)
    quoted = f"`{first.text.strip()[:300]}`"
    if reason is not first:
        quoted += f", and the line below it that gives its reason, `{reason.text.strip()[:300]}`"
    reading = _READINGS.get(category)
    words = f"{first.text} {reason.text}"
    said = reading(words) if reading is not None else None
    checks = [
        'The innermost `File "..."` frames above the error: the package and function that '
        "raised it; search the project's issues for the message."
    ]
    upgrade_reason = _reason_to_upgrade(category, words)
    package = _engine_upgrade(incident) if upgrade_reason is not None else None
    if said is None:
        title = f"An error no signature explains; its words point at {area}"
        explanation = (
            "No signature, known issue or engine message explains the first error, "
            f"{quoted}. Its own words point at {area}: read it as a lead, not a diagnosis, and "
            "check that setting first."
        )
    else:
        title, sentence, check = said
        explanation = (
            f"{sentence} Read from the error's own words, {quoted}: no signature, known issue "
            "or engine message knows it, so the mechanism behind them is not confirmed."
        )
        checks.insert(0, check)
    asked = _ASKED_VARIABLE.search(first.text)
    patch = None
    if asked is not None:  # the message names the variable that it lacks
        example = (asked.group("example") or "").rstrip(".,;")
        value = f"<{asked.group('what').strip()}{f', e.g. {example}' if example else ''}>"
        patch = Patch(env_set={asked.group("name"): value})
        explanation += (
            f" The message asks for the environment variable `{asked.group('name')}`: set it "
            "where the server starts (a placeholder below, shown and never applied until you "
            "fill it in)."
        )
    if package is not None and upgrade_reason is not None:
        explanation += " " + upgrade_reason.format(engine=package.name)
    return [
        lead(
            first,
            signature="message-words",
            category=category,
            title=title,
            explanation=explanation,
            evidence=[first.evidence] + ([reason.evidence] if reason is not first else []),
            patch=patch,
            patch_note=(
                "No setting is derived from an error the tool does not know; the upgrade is a "
                "test, and a backend that avoids the code path the alternative."
                if package is not None
                else "The variable is the one the message names; its value is yours to give."
                if patch is not None
                else "No change can be derived from an error the tool does not know."
            ),
            package=package,
            next_checks=checks,
        )
    ]


_ASKED_VARIABLE = re.compile(
    r"\b[Pp]lease (?:set|export|define) (?:the )?(?:environment variable )?`?"
    r"(?P<name>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`?(?: (?:to|=) ?(?P<what>[^.;\n]{1,80}?))?"
    r"(?:,? e\.g\.,? (?P<example>\S{1,120}))?(?:[.;]|$)"
)
"""An error that names the environment variable it lacks (``Please set HF_MODEL to a
HuggingFace name e.g. meta-llama/Llama-3.1-8B-Instruct``): the change is that variable, with
the value it describes for the user to give."""

_NEWER_FAMILY_GPU = re.compile(r"\bsm_?1[0-2]\d[af]?\b", re.IGNORECASE)
"""An architecture of the Blackwell generation (SM 10.x to 12.x), whose later parts releases
admitted code path by code path."""


def _reason_to_upgrade(category: str, text: str) -> str | None:
    """Why the engine's upgrade is the change to try first, where the words give a reason (a
    refusal of a Blackwell-generation architecture; one that says the support is not there
    yet), with ``{engine}`` for the package's name; None when they give none."""
    if category == "gpu_arch_support":
        if not _NEWER_FAMILY_GPU.search(text):
            return None
        return (
            "Releases open such checks to a family's newer GPUs (SM 10.3, 11.0, 12.x after the "
            "first Blackwell parts) one code path at a time: upgrading {engine} is the change to "
            "try first."
        )
    if not _NOT_YET.search(text):
        return None
    return (
        "The message says the support is not there yet: a later {engine} release may have "
        "added it, so upgrading is the change to try first."
    )


def _engine_upgrade(incident: IncidentView) -> PackageAction | None:
    """The upgrade of the engine the log shows, past the release it shows; None when the log
    shows no engine the mined releases know."""
    if incident.engine not in mined.ENGINES:
        return None
    spec = mined.upgrade_spec(incident.engine, incident.engine_version)
    return PackageAction(name=incident.engine, spec=spec, action="upgrade")


_PORT_NAMED = re.compile(
    r"\bport\W{0,3}(\d{2,5})\b|(?:\d{1,3}\.){3}\d{1,3}:(\d{2,5})\b|'[\w.:-]+', (\d{2,5})\)",
    re.IGNORECASE,
)
"""A port as messages name it: ``port 30000``, ``port[60000]``, ``127.0.0.1:50000``,
``('0.0.0.0', 30000)``."""
_ARCH_NAMED = re.compile(
    r"\bgfx\d{3,4}[a-z]?\b|\bsm_?\d{2,3}[a-z]?\b|\bcdna ?\d\b"
    r"|\b(?:compute|cuda|device) capability\D{0,24}\d+\.\d+",
    re.IGNORECASE,
)


def _port_reading(text: str) -> tuple[str, str, str]:
    """A port the message says is taken: who holds it, and how to see."""
    ports = list(dict.fromkeys(next(p for p in found if p) for found in _PORT_NAMED.findall(text)))
    port = ports[0] if ports else None
    which = f"port {port}" if port else "an address the server binds"
    ephemeral = (
        f" Port {port} lies in Linux's default range for the local ports of outgoing "
        f"connections ({_EPHEMERAL[0]}-{_EPHEMERAL[1]}, `net.ipv4.ip_local_port_range`): any "
        "process's client socket (Ray's, NCCL's, a download) can hold it for a while, so it "
        "can be taken with no second server running. Give the component ports below "
        f"{_EPHEMERAL[0]}, or reserve its range (`net.ipv4.ip_local_reserved_ports`)."
        if port and _EPHEMERAL[0] <= int(port) <= _EPHEMERAL[1]
        else ""
    )
    return (
        f"{which[0].upper()}{which[1:]} is already taken on this host",
        f"The error says {which} is already taken: another process on this host holds it, most "
        "often a second instance of the server (two engines on one machine derive the same "
        "default ports) or a process left from an earlier start. Stop that process, or give "
        f"this instance other ports (the setting of the component that binds this one).{ephemeral}",
        f"`ss -tanp | grep ':{port}'` names the process that holds port {port} (a listener, or "
        "the local end of a connection)."
        if port
        else "`ss -ltnp` lists the listening ports and the processes that hold them.",
    )


_EPHEMERAL = (32768, 60999)
"""Linux's default range for the local ports of outgoing connections."""


def _architecture_reading(text: str) -> tuple[str, str, str] | None:
    """The GPU architecture a kernel or check refuses, as the message names it."""
    named = list(dict.fromkeys(" ".join(m.split()) for m in _ARCH_NAMED.findall(text)))
    if not named:
        return None
    listed = ", ".join(f"`{n}`" for n in named[:4])
    return (
        "The code path that failed does not support this GPU's architecture",
        f"The error compares the GPU's architecture with what the code path needs ({listed}) "
        "and refuses this GPU: no setting makes that kernel run on it. Turn off the feature or "
        "backend that needs it (its flag or environment variable) so that another path runs, "
        "move to a GPU it supports, or take a release whose check admits this GPU.",
        "`nvidia-smi --query-gpu=name,compute_cap --format=csv` (on AMD, `rocminfo | grep gfx`): "
        "the architecture the message compares.",
    )


_CAPTURE = re.compile(
    r"\b(?:(?:cuda|hip) )?graph capture|stream capture|capture stream|stream is capturing"
    r"|ErrorStreamCapture",
    re.IGNORECASE,
)


def _capture_reading(text: str) -> tuple[str, str, str] | None:
    """A kernel that fails while CUDA (HIP) graphs are captured, as the message says."""
    if not _CAPTURE.search(text):
        return None
    return (
        "A kernel fails while the engine captures CUDA (HIP) graphs",
        "The error says the failing kernel runs under graph capture, where it may not allocate "
        "or set up its workspace as it does when run directly: a bug of the kernel or of how "
        "this release warms it up before capturing. Start once without graph capture (vLLM "
        "`--enforce-eager`, SGLang `--disable-cuda-graph`) to confirm; keep that, or capture "
        "fewer batch sizes (`--max-num-seqs` lower, SGLang `--cuda-graph-max-bs`), until a "
        "release of the engine or the kernel package fixes the path.",
        "Start once with graph capture off: if the server then starts, the capture is the cause.",
    )


_PARALLEL_NAMED = re.compile(r"\b(tensor|pipeline|expert|data|context|sequence)[-_ ]parallel", re.I)
_REFUSED = re.compile(
    r"(?:\bnot|n't) (?:been )?(?:yet )?support|\bunsupported\b|\bnot (?:yet )?implemented", re.I
)


def _combination_reading(text: str) -> tuple[str, str, str] | None:
    """A parallel size that the model's format or a feature in use does not support (yet);
    None for any other launch setting's message (a size that does not divide a count)."""
    named = _PARALLEL_NAMED.search(text)
    if named is None or not _REFUSED.search(text):
        return None
    kind = named.group(1).lower()
    return (
        f"This release does not support {kind} parallelism with the model or feature in use",
        f"The engine refuses {kind} parallelism for the model format or feature the message "
        f"names: no value of another setting makes the two work together. Start with a {kind} "
        "parallel size of 1 (one GPU, or another way to split the model), serve the model in a "
        "format that supports it, or take a release that adds the support"
        + (" (the message says it is not there yet)." if _NOT_YET.search(text) else "."),
        f"The engine's release notes after the installed version, for {kind} parallelism with "
        "the format or feature the message names.",
    )


_MODEL_REFUSED = (
    "The engine refuses the model itself (its architecture, its checkpoint's format or a part "
    "of it), not a setting of the host: the supported-models list of the installed and newer "
    "releases says whether any release runs it, and a model whose maker ships its own fork or "
    "plugin of the engine names it on its model card."
)
"""What a refusal of the model, read from the engine's source, says of the way out."""

_READINGS = {
    "port_in_use": _port_reading,
    "gpu_arch_support": _architecture_reading,
    "kernel_build": _capture_reading,
    "launch_args": _combination_reading,
}
"""What the words of a category say of the mechanism: a title, the sentence and the check
that confirms it, with the values the message names (a port reading without its number names
none; an architecture reading needs the architectures, a kernel-build reading the words of
graph capture, a launch-setting reading a parallel size refused, else it is None)."""


def past_wrappers(incident: IncidentView) -> IncidentView:
    """The incident from its first readable error that is not a wrapper: vLLM's
    ``EngineCore failed to start.`` is logged before the traceback whose exception it reports,
    and the tiers that read the first error read that exception."""
    wrappers = builtin_knowledge().wrappers
    readable = incident.readable()
    skipped = 0
    while (
        wrappers is not None
        and skipped < len(readable) - 1
        and wrappers.search(readable[skipped].text[:MESSAGE_WORDS_CHARS])
    ):
        skipped += 1
    if not skipped:
        return incident
    dropped = {id(candidate) for candidate in readable[:skipped]}
    return replace(
        incident, candidates=tuple(c for c in incident.candidates if id(c) not in dropped)
    )


def _wraps_or_follows(candidate: Candidate, knowledge: Knowledge) -> bool:
    """The message wraps another error or is the consequence of one."""
    text = candidate.text[:MESSAGE_WORDS_CHARS]
    return any(
        pattern is not None and pattern.search(text)
        for pattern in (knowledge.wrappers, knowledge.consequences)
    )


def _category_of_words(candidate: Candidate, knowledge: Knowledge) -> str | None:
    """The category a rule's words give the message; a rule that holds only for some modules
    or exceptions says nothing of a message no template places."""
    text = candidate.text[:MESSAGE_WORDS_CHARS]
    return next(
        (
            rule.category
            for rule, words in knowledge.rules
            if words and not rule.modules and not rule.exceptions and words.search(text)
        ),
        None,
    )


def _reason_block(first: Candidate, readable: Sequence[Candidate]) -> list[Candidate]:
    """The first error, then the errors just below it from the same source and rank."""
    line = first.evidence.line
    if line is None:
        return [first]
    return [first] + [
        c
        for c in readable[1:]
        if c.evidence.line is not None
        and 0 < c.evidence.line - line <= REASON_WINDOW_LINES
        and (c.evidence.source, c.evidence.rank) == (first.evidence.source, first.evidence.rank)
    ]


def _argparse_for(
    candidate: Candidate, engines: Sequence[str], shown: str | None, other_spellings: Path | None
) -> Finding | None:
    """argparse's error read against the engine's flags. When the log does not say which
    engine it is, the program name in the error does (``launch_server.py``, ``vllm``); else
    only a flag that exactly one engine renamed or removed is read."""
    if len(engines) > 1:
        prog = candidate.text.split(": error:", 1)[0].lower()
        named = [e for e in engines if e in prog or _PROGS[e] in prog]
        engines = named or engines
    found = [
        f
        for f in (
            _argparse_finding(candidate, _context(e, shown), _foreign(other_spellings, e))
            for e in engines
        )
        if f is not None
    ]
    if len(engines) > 1:
        found = [f for f in found if f.patch is not None]
    return found[0] if len(found) == 1 else None


@cache
def _foreign_maps(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        engine: {str(k): str(v or "") for k, v in (entry or {}).get("foreign", {}).items()}
        for engine, entry in data.items()
        if isinstance(entry, dict)
    }


def _foreign(path: Path | None, engine: str) -> dict[str, str]:
    """The other engine's flags and this engine's spelling of each ('' where it has none)."""
    return _foreign_maps(path).get(engine, {}) if path is not None else {}


def _context(engine: str, shown: str | None) -> ReleaseContext:
    return ReleaseContext(engine, mined.nearest_version(engine, shown), shown)


def _best_hit(
    candidate: Candidate, engines: Sequence[str], shown: str | None, knowledge: Knowledge
) -> tuple[TemplateHit, Judgement, ReleaseContext, str | None] | None:
    """The most specific template ``candidate`` is an instance of that names a cause: the
    engine's own before a library's, one of the log's release before an older or newer one;
    with it, the newest release of its source that writes any message the line is an instance
    of (a later wording that renamed only a hole still writes it)."""
    ranked = []
    last_raised: dict[str, str] = {}
    raised_by = (_raising_module(candidate) or "").partition(".")[0]
    asked = _MODULE_ASKED.search(candidate.text)
    if asked and asked.group("package") in sys.stdlib_module_names:
        return None  # Python's own words for a standard-library module: no source's template
    for order, source in enumerate([*engines, "libraries"]):
        index = builtin_index(source)
        if index is None:
            continue
        context = replace(
            _context(source if source in mined.ENGINES else engines[0], shown),
            guessed=len(engines) > 1,
        )
        for hit in match_message(index, candidate.text):
            if _mostly_holes(hit):
                continue
            if source == "libraries" and raised_by not in ("", hit.template.module.split(".")[0]):
                continue  # a library's words, raised by another package's code
            newest = hit.template.versions[-1] if hit.template.versions else None
            if newest and not at_least(last_raised.get(source, "0"), newest):
                last_raised[source] = newest
            hit_context = _raising_release(context, hit) if source != "libraries" else context
            judgement = knowledge.judge(hit)
            if judgement.role == "cause" and judgement.category is None:
                # the raising release's tables first, then the newest's (an option may have
                # gained its fixed values since)
                judgement, hit_context = next(
                    (
                        (read, tables)
                        for tables in dict.fromkeys([hit_context, context])
                        if (read := _option_judgement(hit.template.text, tables)).category
                    ),
                    (judgement, hit_context),
                )
            if judgement.role == "cause" and judgement.category is None:
                judgement = _own_check(hit, source)
            if judgement.role != "cause" or judgement.category is None:
                continue
            in_release = source == "libraries" or context.in_release(hit.template.versions)
            key = (
                hit.cut_short or hit.reworded,
                -hit.template.fixed_chars,
                not in_release,
                _releases_apart(hit.template.versions, index.versions, shown),
                order,
                hit.template.id,
            )
            ranked.append((key, hit, judgement, hit_context))
    if not ranked:
        return None
    key, hit, judgement, context = min(ranked, key=lambda item: item[0])
    if context.guessed:  # the log names no engine: another's source may write these words too
        also = {
            other.template.source
            for other_key, other, _, _ in ranked
            if other_key[:4] == key[:4] and other.template.source in mined.ENGINES
        } - {hit.template.source}
        context = replace(context, also=tuple(sorted(also)))
    return hit, judgement, context, last_raised.get(hit.template.source)


_MODULE_ASKED = re.compile(r"\bmodule '(?P<package>\w+)(?:\.\w+)*' has no attribute '")
"""Python's refusal of a name a standard-library module lacks (``module 'os' has no attribute
'sched_getaffinity'``): a source's template of these words (a module's own ``__getattr__``)
does not explain it."""


_OWN_CHECKS = frozenset(
    ("ValueError", "NotImplementedError", "AssertionError", "RuntimeError", "KeyError")
)
"""Exceptions an engine raises from its own checks of what it was asked to run."""


_POINTS_ELSEWHERE = re.compile(
    r"\bsee (?:the )?(?:stack ?trace|root cause|above|below|logs?|errors?)\b|failed to start"
    r"|initiali[sz]ation failed|\bfailed\.?$",
    re.IGNORECASE,
)
"""A message that reports another one (``Engine core initialization failed. See root cause
above.``): a wrapper, never the cause."""


def _own_check(hit: TemplateHit, source: str) -> Judgement:
    """A sentence the engine raises on its start-up path that no rule names a category for:
    the category of the code that raises it (a model's file, speculative decoding, the rest of
    the build), as a lead. A library's message, a log line, a few words, stay unread."""
    template = hit.template
    if (
        source not in mined.ENGINES
        or not template.startup
        or template.exception not in _OWN_CHECKS
        or len(fixed_text(template.text).split()) < 5
        or _POINTS_ELSEWHERE.search(template.text)
    ):
        return Judgement(None, "cause")
    return Judgement(module_category(template.module), "cause")


def _releases_apart(versions: Sequence[str], known: Sequence[str], shown: str | None) -> int:
    """How many mined releases lie between the log's release and the nearest that raises the
    message (0 when no release is shown): of two wordings alike, the nearer one's."""
    if shown is None:
        return 0
    place = sum(1 for version in known if at_least(shown, version))
    return min((abs(known.index(v) + 1 - place) for v in versions if v in known), default=0)


def _raising_release(context: ReleaseContext, hit: TemplateHit) -> ReleaseContext:
    """With no release shown, the newest mined release that raises the matched message, not
    the newest of all: its tables read the message's options (the log came from one of the
    releases that raise it)."""
    versions = hit.template.versions
    if context.shown is not None or not versions or context.version in versions:
        return context
    return replace(context, version=versions[-1])


def _mostly_holes(hit: TemplateHit) -> bool:
    """The template's holes hold more than half of the message, one of them several words: its
    few fixed words ("{a} is not supported for {b}") met by chance in a longer line."""
    held = [value for value in hit.values.values() if value]
    spoken = sum(len(value) for value in held)
    return any(
        len(value.split()) > 2 and not _COLLECTION.match(value) for value in held
    ) and 2 * spoken > len(hit.message)


_COLLECTION = re.compile(r"\s*(?:\[[^\]]*\]|\([^)]*\)|\{[^}]*\})[.,;]?\s*$")
"""A hole that holds one value printed as a list, a tuple or a set (``['a', 'b', 'c']``): a
value, however many words, not a sentence the template's few words met by chance."""


def _option_judgement(template: str, context: ReleaseContext) -> Judgement:
    """A template no rule gives a category, that shows the value of a launch option with a
    fixed set of values (``Unsupported tool_call_parser: {tool_call_parser}``), or asks to
    raise or lower a launch option by its Python name (``Please increase
    max_num_batched_tokens.``): a launch argument to change."""
    table = context.table()
    if table is None:
        return Judgement(None, "cause")
    shows_option = any(
        table.with_choices(shown.group("dest")) for shown in _OPTION_VALUE.finditer(template)
    )
    asks_to_adjust = any(
        table.setting(asked.group("dest")) for asked in _ADJUST_DEST.finditer(fixed_text(template))
    )
    names_the_value = _only_supported(template, table) is not None
    return Judgement(
        "launch_args" if shows_option or asks_to_adjust or names_the_value else None, "cause"
    )


_ONLY_SUPPORTS = re.compile(
    r"\bonly supports? (?P<want>[\w.-]+)\b[^{}]{0,40}?,? (?:but )?got "
    r"\{(?P<hole>[a-z_][a-z0-9_]*)\}"
)
"""A check that names the one value it takes and shows the option's (``only supports fp8
kv-cache, got {kv_cache_dtype}``)."""


def _only_supported(template: str, table: mined.FlagTable) -> tuple[str, str, str] | None:
    """The flag, the value a template says is the only one supported and the hole that shows
    the option's, where the hole is an option with choices and the value is one of them."""
    found = _ONLY_SUPPORTS.search(template)
    option = _option_of_hole(found.group("hole"), table) if found else None
    if found is None or option is None:
        return None
    want = _as_choice(found.group("want"), [str(c) for c in option.choices or ()])
    return (option.flags[0], str(want), found.group("hole")) if want is not None else None


# -- findings -----------------------------------------------------------------------------


def _where(hit: TemplateHit, context: ReleaseContext, raised_by: str | None = None) -> str:
    """``SGLang 0.5.23, sglang.srt.server_args (ServerArgs.check)``, and the other modules that
    write the same message (a check each model's file repeats); ``raised_by``, the module the
    log's traceback names, when it is one of those."""
    template = hit.template
    if template.source == "libraries":
        library = template.id.rsplit("-", 1)[0]
        release = f"{library} {template.versions[0]}" if template.versions else library
    else:
        release = f"{context.name} {_release_words(template.versions, context)}"
    if raised_by in template.elsewhere:  # the log's traceback names another that writes it
        others = sorted({template.module, *template.elsewhere} - {raised_by})
        return f"{release}, {raised_by}; the same words are in {_places(others)} too"
    where = f"{release}, {template.module} ({template.function})"
    if template.elsewhere:  # the index names one place per text: the log's may be another
        where += f"; the same words are in {_places(template.elsewhere)} too"
    return where


def _places(modules: Sequence[str]) -> str:
    named = ", ".join(modules[:-1]) + f" and {modules[-1]}" if len(modules) > 1 else modules[0]
    return named if len(modules) < ELSEWHERE_KEPT else f"{named} (and perhaps more)"


def _release_words(versions: Sequence[str], context: ReleaseContext) -> str:
    if context.shown is not None and context.version in versions:
        return context.version or ""
    if not versions:
        return "(no release)"
    span = versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"
    return span


def _finding(
    hit: TemplateHit,
    judgement: Judgement,
    context: ReleaseContext,
    candidate: Candidate,
    last_raised: str | None,
) -> Finding:
    template = hit.template
    where = _where(hit, context, _raising_module(candidate))
    fix = derive_fix(
        hit.message,
        hit.values,
        context,
        template.text,
        hit.cut_short or hit.reworded,
        raised_until=last_raised if template.source != "libraries" else None,
    )
    if judgement.category == "model_unsupported" and template.source != "libraries":
        _upgrade_for_refused_value(fix, hit, context)
    raised = f"raised as {template.exception}" if template.exception else "logged as an error"
    explanation = [
        f"Derived from the engine's source, {where}: the decisive message matches a message "
        f"this code writes ({raised}" + (", on the start-up path)." if template.startup else ")."),
        f"The message: `{_raised_part(candidate.text, template.exception)[:300]}`.",
    ]
    if hit.cut_short:
        explanation.append(
            "The log shows only the start of this message (its first line, or a copy cut "
            "short); the source continues: "
            f"`{template.text[:300]}`."
        )
    if hit.reworded:
        explanation.append(
            "The log words it otherwise than every mined release (a release between or after "
            f"them): the closest mined wording is `{template.text[:300]}`."
        )
    if template.source != "libraries" and not context.in_release(template.versions):
        explanation.append(_version_sentence(template.versions, context))
    if context.also:
        others = " and ".join(mined.ENGINE_NAMES.get(e, e) for e in context.also)
        explanation.append(
            f"The log does not say which engine ran, and {others} writes the same message: "
            "what follows holds for either."
        )
    bound = {k: v for k, v in hit.values.items() if v and len(v) <= 120}
    if bound:
        explanation.append(
            "Values in it: " + ", ".join(f"{k} = `{v}`" for k, v in bound.items()) + "."
        )
    explanation += fix.sentences
    if judgement.category == "model_unsupported" and template.source != "libraries":
        explanation.append(_MODEL_REFUSED)
    notes = fix.notes
    backend = _backend_reading(template.module, context) if fix.patch is None else None
    if backend is not None and fix.package is None:
        explanation.append(backend[0])
        notes = [backend[1]]
    explanation.append(
        "The cause is read from the engine's source alone, not from a hand-written signature: "
        "treat it as a lead."
    )
    return Finding(
        id="f0",
        signature=template.id,
        # the message lists what a launch option may be here, or names a feature a launch
        # option turns on: that option is what to change
        category="launch_args" if fix.names_launch_option else judgement.category or "unknown",
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title=_title(template.exception, hit.message, context, template.source),
        explanation=" ".join(explanation),
        confidence=Confidence.LOW,
        evidence=[candidate.evidence],
        patch=fix.patch,
        patch_note=" ".join(notes) or None,
        next_checks=fix.checks,
        package=fix.package if template.source != "libraries" else None,
        phase=candidate.phase,
        applies_to=_applies_to(template.versions, context, template.source),
        tier="engine_source",
        raised_in=where,
    )


_ATTENTION_BACKENDS = {
    "vllm": (("vllm.v1.attention.backends.", "vllm.attention.backends."), "TRITON_ATTN"),
    "sglang": (("sglang.srt.layers.attention.",), "triton"),
}
"""Where each engine's attention backends live, and the backend that runs wherever the engine
does (Triton's kernels, on CUDA and ROCm alike)."""


def _backend_reading(module: str, context: ReleaseContext) -> tuple[str, str] | None:
    """An attention backend's own check that it cannot run (its kernels missing, a shape or a
    platform it lacks): the sentence that says so, and the note naming another backend, by
    the launch option the release has (vLLM's variable before it had one)."""
    places, portable = _ATTENTION_BACKENDS.get(context.engine, ((), ""))
    if not module.startswith(places):
        return None
    backend = module.rsplit(".", 1)[-1]
    table = context.table()
    if table is not None and table.lookup("--attention-backend").outcome == "exact":
        setting = f"`--attention-backend {portable}`"
    elif context.engine == "vllm":
        setting = f"`VLLM_ATTENTION_BACKEND={portable}`"
    else:
        return None
    sentence = (
        f"The check is the `{backend}` attention backend's own: that backend cannot run in this "
        "installation (its kernels are missing, or it lacks this platform, model shape or "
        "option), and the engine stops instead of choosing another."
    )
    note = (
        f"Choose another attention backend, e.g. {setting}; where a speculative draft model "
        "uses the backend, set `attention_backend` in `--speculative-config` instead. Or "
        "install the build of the engine whose kernels this backend needs."
    )
    return sentence, note


def _version_sentence(versions: Sequence[str], context: ReleaseContext) -> str:
    shown = context.shown or "not shown in the log"
    return (
        f"The log's {context.name} version ({shown}) does not write this message as mined; "
        f"releases {_release_words(versions, context)} do: the match is weaker."
    )


def _applies_to(versions: Sequence[str], context: ReleaseContext, source: str) -> str | None:
    if source == "libraries" or not versions:
        return None
    first, last = versions[0], versions[-1]
    return f"{context.name} {first}" if first == last else f"{context.name} {first} to {last}"


def _raised_part(text: str, exception: str | None) -> str:
    """The message from its exception class on: a page that wrapped the log joins the lines
    before it (other processes' frames) into the same line."""
    spaced = " ".join(text.split())
    start = spaced.rfind(f"{exception}: ") if exception else -1
    return spaced[start:] if start > 0 else spaced


def _title(exception: str | None, message: str, context: ReleaseContext, source: str) -> str:
    text = _raised_part(message, exception)
    text = re.sub(r"^(?:[\w.]+(?:Error|Exception): )+", "", text)
    short = clipped(text, 110)
    who = "A library under the engine" if source == "libraries" else context.name
    if context.also:
        who = "The engine"
    return f"{who} stopped: {short}"


# -- fixes ---------------------------------------------------------------------------------


@dataclass
class DerivedFix:
    """What a message tells the user to change, checked against the release's tables."""

    patch: Patch | None = None
    sentences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    names_launch_option: bool = False
    """The message says which launch option to change (it lists the values the option may
    take here, or names a feature the option turns on), and the fix changes it."""
    package: PackageAction | None = None


def derive_fix(
    message: str,
    values: dict[str, str],
    context: ReleaseContext,
    template: str = "",
    cut_short: bool = False,
    raised_until: str | None = None,
) -> DerivedFix:
    """The settings ``message`` names (and, when the log cut it short or words it as another
    release does, its mined ``template``'s), each checked against ``context``'s release: a
    flag the release no longer has is replaced by its successor (or left out), a value must
    be one the option accepts, a variable must be one the engine reads."""
    fix = DerivedFix()
    args_add: list[str] = []
    args_remove: list[str] = []
    env_set: dict[str, str] = {}
    not_a_choice: list[str] = []  # options shown with a value they do not accept
    table = context.table()
    not_yet = _NOT_YET.search(message) is not None
    model_newer = None if not_yet else _model_newer_than_listed(message)
    if model_newer:  # a model version the message shows is judged by its numbers
        later = _newer_release(context, None)
        if later is None and context.shown is None and not context.guessed:
            later = PackageAction(
                name=context.engine, spec=mined.upgrade_spec(context.engine, None), action="upgrade"
            )
    elif not_yet or model_newer is None or raised_until:
        later = _newer_release(context, raised_until)
    else:
        later = None
    if table is not None:
        said = [message, template] if cut_short else [message]
        settings = (
            found
            for text in said
            for pattern in (_SET_FLAG, _USE_QUOTED_VALUE)
            for found in pattern.finditer(text)
        )
        for setting in settings:
            if setting.group("flag") not in args_add:
                args_add += _flag_setting(setting, values, table, context, fix)
        if not args_add:
            args_add += _adjusted_option(said, values, table, fix)
        if not args_add:
            args_add += _option_below_need(template, values, table, fix)
        if not args_add:
            required = _required_feature(message, table, fix)  # its on form, then its --no- form
            args_add += required[:1]
            args_remove += required[1:]
        if not args_add:
            args_remove += _only_with_another(message, table, fix)
        for removal in _REMOVE_FLAG.finditer(message):
            flag = removal.group("flag")
            if table.lookup(flag).outcome == "exact" and flag not in args_remove:
                fix.sentences.append(f"The fix it names: remove `{flag}`.")
                args_remove.append(flag)
        not_a_choice += [
            flag
            for hole, bound in values.items()
            if (flag := _bound_choice(hole, bound, template, table, fix))
        ]
        only = _only_supported(template, table) if not args_add else None
        if only is not None and values.get(only[2]) != only[1]:
            flag, want = only[0], only[1]
            fix.sentences.append(
                f"The check takes only `{want}` here: the fix sets `{flag} {want}`."
            )
            fix.names_launch_option = True
            args_add += [flag, want]
            args_remove.append(flag)
        if not args_add:
            allowed = _allowed_value(template, values, table, fix)
            if not (allowed or args_remove or not_a_choice or later):
                allowed = _refused_choice(message, table, fix) or _unknown_name(message, table, fix)
            if allowed:
                args_add += allowed
                args_remove.append(allowed[0])
    for name, value in _env_settings(message):
        checked = _env_setting(name, value, context, fix)
        if checked is not None:
            env_set[name] = checked
    env_unset = _refused_variable_value(message, context, env_set, fix)
    if args_add or env_set or args_remove or env_unset:
        fix.patch = Patch(
            args_add=args_add, env_set=env_set, args_remove=args_remove, env_unset=env_unset
        )
    elif not_a_choice:
        fix.notes.append(
            f"Set `{not_a_choice[0]}` to one of the values it accepts (listed above): the log "
            "does not say which one this model needs."
        )
    elif later is not None and not_yet:
        fix.package = later
        first_without = " is the first mined one without this message" if raised_until else ""
        fix.sentences.append(
            f"The message says {context.name} does not support this *yet*: the support is "
            f"planned, and a newer release ({later.spec}{first_without}) may have it. Upgrade, "
            "and read the newer releases' notes for it; where the newest still refuses it, "
            "change the option or model that asks for it."
        )
    elif later is not None and model_newer is not False:
        fix.package = later
        shown = (
            "the checkpoint's version is above every version it lists"
            if model_newer
            else "later releases changed this check (this wording was last raised by "
            f"{mined.ENGINE_NAMES.get(context.engine, context.engine)} {raised_until})"
        )
        fix.sentences.append(
            f"The model's code in this release takes only the model versions it lists, and "
            f"{shown}: the checkpoint is a newer version of the model than this release "
            f"supports. Upgrade to a release that supports it ({later.spec or 'the newest'}), "
            "or serve a checkpoint of a version the message lists."
        )
    elif later is not None:  # no later mined release writes the message
        fix.package = later
        fix.sentences.append(
            f"No mined release after {context.name} {raised_until} writes this message: the "
            f"check was changed or removed there. Where the settings it names are what was "
            f"meant, a release {later.spec} may start where this one refuses; read its notes "
            "for the check before upgrading."
        )
    elif not fix.notes and (refused := _REFUSED_PAIR.search(message)) is not None:
        subject, feature = refused.group("subject"), refused.group("feature").strip()
        source = (
            ", from a checkpoint in another format (the model's original weights, or a "
            "quantization this release supports for it)"
            if "quantiz" in feature.lower()
            else ""
        )
        fix.notes.append(
            f"This release refuses `{subject}` with {feature}: start it without {feature}"
            f"{source}, or serve a model that supports {feature}."
        )
    elif not fix.notes:
        fix.notes.append(_NO_SETTING_NAMED)
    return fix


_NO_SETTING_NAMED = (
    "The message names no setting this release accepts: no configuration change is derived from it."
)


_REFUSED_VALUE = re.compile(
    r"\b(?:unsupported|not (?:yet )?supported|(?:does|do)(?:n't| not) (?:yet )?support|"
    r"unrecogni[sz]ed|not recogni[sz]ed|unknown)\b",
    re.IGNORECASE,
)
"""The words of a check that refuses what it was given (not of one that found it missing)."""


def _upgrade_for_refused_value(fix: DerivedFix, hit: TemplateHit, context: ReleaseContext) -> None:
    """An engine's check that refuses a model by a value it does not list (``Unsupported
    architecture: Qwen2ForCausalLM``) where the log does not show the release: every mined
    release still writes the message, but the values such a check takes grow with the
    releases (new families, backbones, variants), so the newest release is the fix to try."""
    refused = [value for value in hit.values.values() if value and len(value) <= 120]
    if fix.patch is not None or fix.package is not None or context.guessed or not refused:
        return
    if context.shown is not None or _REFUSED_VALUE.search(hit.template.text) is None:
        return
    spec = mined.upgrade_spec(context.engine, None)
    fix.package = PackageAction(name=context.engine, spec=spec, action="upgrade")
    fix.sentences.append(
        f"The check refuses `{refused[0]}`, a value this release does not list, and the log "
        f"does not show which {context.name} release runs. Every mined release still writes "
        "the message, but the values such a check takes grow from release to release (newer "
        f"model families, backbones and variants): upgrade ({spec or 'the newest'}), and where "
        "the newest still refuses it, serve a model the check takes."
    )
    fix.notes = [note for note in fix.notes if note != _NO_SETTING_NAMED]


_REFUSED_VARIABLE = re.compile(
    r"Invalid value '(?P<value>[^'\n]*)' (?:for|in) (?P<name>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b"
)
"""The engine's check of a variable's value (vLLM's ``Invalid value '' for
VLLM_NVFP4_GEMM_BACKEND. Valid options: [...]``)."""


def _refused_variable_value(
    message: str, context: ReleaseContext, env_set: dict[str, str], fix: DerivedFix
) -> list[str]:
    """A variable the engine refused the value of: an empty one is unset (an empty string is a
    value, not the default, to the check), another set to the choice nearest it, or to one the
    user picks."""
    refused = _REFUSED_VARIABLE.search(message)
    declared = mined.env_vars(context.engine).get(refused.group("name")) if refused else None
    if refused is None or declared is None:
        return []
    name, value = refused.group("name"), refused.group("value")
    choices = ", ".join(f"`{c}`" for c in declared.choices or ())
    if not value:
        fix.sentences.append(
            f"`{name}` is set to the empty string, which the check reads as a value and refuses"
            f"{f' (it takes {choices})' if choices else ''}: a service or compose file that "
            "passes an optional variable on empty does this. Remove it from the environment so "
            "the default applies, or give it one of its values."
        )
        return [name]
    near = mined.near_value(value, declared.choices or ())
    if near is not None:
        env_set[name] = near
        fix.sentences.append(f"`{name}={value}` is no value it takes; the nearest is `{near}`.")
    elif choices:
        fix.notes.append(f"Set `{name}` to one of {choices}, or remove it for the default.")
    return []


_REFUSED_PAIR = re.compile(
    r"(?:^|: |\. )(?:[Mm]odel )?`?(?P<subject>[\w./-]{2,80}(?: [\w./-]{1,40}){0,3}?)`? "
    r"does(?:n't| not) (?:yet )?support "
    r"(?P<feature>[\w][\w ./-]{2,60}?)(?: yet)?(?:[.:;,]|$)"
)
"""A refusal of a pair (``Model GptOssForCausalLM does not support BitsAndBytes quantization
yet.``): what the message names and the feature it refuses."""


_NOT_YET = re.compile(
    r"\b(?:not (?:yet )?(?:supported|implemented) yet|not yet (?:supported|implemented)|"
    r"(?:does|has|is)(?:n't| not) (?:yet )?support(?:ed)?\b.{1,80}\byet)\b",
    re.IGNORECASE,
)
"""A refusal the engine says is temporary (``... does not support BitsAndBytes quantization
yet``, ``GGUF quantization hasn't supported tensor parallelism yet``): a later release is where
the support lands."""


_VERSION_LIST_REFUSAL = re.compile(
    r"\bonly supports? (?:\w+ )?versions? (?P<listed>\d[\d.]*(?:,? (?:and )?\d[\d.]*)*)"
    r"(?:\.? ?Got (?:\w+ )?version:? \(?(?P<got>\d+(?:[., ]+\d+)*)\)?)?",
    re.IGNORECASE,
)
"""A model's code that takes only the model versions it lists (``MiniCPMV only supports versions
2.0, 2.5, 2.6, 4.0. Got version: (4, 5)``)."""


def _model_newer_than_listed(message: str) -> bool | None:
    """For a refusal that lists the model versions it takes: whether the version it shows is
    above all of them (True), not above (False), or not shown (None); False for any other
    message."""
    found = _VERSION_LIST_REFUSAL.search(message)
    if found is None:
        return False
    if found.group("got") is None:
        return None
    listed = re.findall(r"\d+(?:\.\d+)?", found.group("listed"))
    got = ".".join(re.findall(r"\d+", found.group("got")))
    try:
        return Version(got) > max(Version(value) for value in listed)
    except InvalidVersion:
        return False


def _newer_release(context: ReleaseContext, raised_until: str | None) -> PackageAction | None:
    """The first mined release after the newest that still raises the message (``raised_until``),
    else one after the release the log shows; None when the engine is a guess, the log shows
    that release or a later one, or the newest mined release still raises it."""
    index = builtin_index(context.engine) if context.engine in mined.ENGINES else None
    known = index.versions if index is not None else ()  # the releases its messages were read from
    shown = context.shown
    if context.guessed or not known or raised_until == known[-1]:
        return None
    after = [v for v in known if raised_until is not None and not at_least(raised_until, v)]
    if after:
        target = after[0]
        if shown is not None and at_least(shown, target):
            return None
        return PackageAction(name=context.engine, spec=f">={target}", action="upgrade")
    if shown is None or at_least(shown, known[-1]):
        return None
    return PackageAction(
        name=context.engine, spec=mined.upgrade_spec(context.engine, shown), action="upgrade"
    )


def _flag_setting(
    setting: re.Match[str],
    values: dict[str, str],
    table: mined.FlagTable,
    context: ReleaseContext,
    fix: DerivedFix,
) -> list[str]:
    flag, value, verb = setting.group("flag"), setting.group("value"), setting.group("verb")
    lookup = table.lookup(flag)
    release = f"{context.name} {context.version}"
    if lookup.outcome not in ("exact",):
        history = mined.flag_history(context.engine, flag, context.version or "")
        successors = list(history.successors) if history else list(lookup.candidates)
        if len(successors) == 1 and table.lookup(successors[0]).outcome == "exact":
            fix.sentences.append(
                f"The message names `{flag}`, which {release} no longer has: it became "
                f"`{successors[0]}`."
            )
            flag, lookup = successors[0], table.lookup(successors[0])
        elif successors:
            fix.sentences.append(
                f"The message names `{flag}`, which {release} no longer has (a stale message): "
                f"its successors are {', '.join(f'`{s}`' for s in successors)}; set the one "
                "that fits by hand."
            )
            return []
        else:
            close = table.close_flags(flag)
            hint = f" (did you mean {', '.join(f'`{c}`' for c in close)}?)" if close else ""
            fix.sentences.append(
                f"The message names `{flag}`, which {release} does not have{hint}: it is left out "
                "of the fix."
            )
            return []
    option = lookup.option
    assert option is not None
    if value is None or option.nargs == 0 or option.action in _NO_VALUE_ACTIONS:
        if option.nargs == 0 or option.action in _NO_VALUE_ACTIONS:
            fix.sentences.append(f"The fix it names: add `{flag}`.")
            return [flag]
        return _directed_setting(flag, verb, values.get(option.dest), option, fix)
    value = value.rstrip(".")
    bound = setting.groupdict().get("bound")  # only _SET_FLAG reads a bound
    if bound:
        fix.sentences.append(f"The fix it names: `{flag}` {bound} {value}.")
        return [flag, f"<{bound.lower()} {value}>"]
    if option.choices and value not in {str(c) for c in option.choices}:
        fix.notes.append(
            f"The message suggests `{flag} {value}`, which is not one of its values in "
            f"{release} ({', '.join(str(c) for c in option.choices)}): set it by hand."
        )
        return []
    if not _fits_type(value, option.type):
        return []
    fix.sentences.append(f"The fix it names, checked against {release}'s flags: `{flag} {value}`.")
    return [flag, value]


_ONLY_WITH = re.compile(
    r"\b(?P<dest>[a-z][a-z0-9]*(?:_[a-z0-9]+)+) (?:can|may|must) only be (?:set|used|enabled|"
    r"specified|given|true)(?: to \w+)? (?:when|if|with) (?P<other>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)"
    r"(?P<condition>[^.\n]{0,40})"
)
"""A check that allows one option only with another's value (vLLM's ``data_parallel_external_lb
can only be set when data_parallel_size > 1``)."""


def _only_with_another(message: str, table: mined.FlagTable, fix: DerivedFix) -> list[str]:
    """The flags to drop where a check allows an option only with another's value: the
    option's own flag and the options whose help says they turn it on (``--data-parallel-rank``:
    "When set, enables external load balancer mode"), with the other way named in words."""
    found = _ONLY_WITH.search(message)
    if found is None:
        return []
    option, other = table.setting(found.group("dest")), table.setting(found.group("other"))
    if option is None or other is None or not option.flags[0].startswith("--"):
        return []
    own_words = set(found.group("dest").split("_")) - set(found.group("other").split("_"))
    distinctive = [word for word in own_words if len(word) >= 4]
    setters = [
        o.flags[0]
        for o in table.options
        if o is not option
        and o.flags
        and o.flags[0].startswith("--")
        and distinctive
        and "enables" in (help_text := (o.help or "").lower())
        and all(word in help_text for word in distinctive)
    ]
    flags = [option.flags[0], *setters]
    turned_on = f" (which {', '.join(f'`{s}`' for s in setters)} also turns on)" if setters else ""
    fix.sentences.append(
        f"The check allows `{option.flags[0]}`{turned_on} only when `{other.flags[0]}`"
        f"{found.group('condition').rstrip()}: drop it, or set `{other.flags[0]}` so that the "
        "condition holds."
    )
    return flags


def _adjusted_option(
    said: Sequence[str], values: dict[str, str], table: mined.FlagTable, fix: DerivedFix
) -> list[str]:
    """The first option a message asks to raise or lower by its Python name, as its flag with
    a placeholder on that side (one only: such messages offer alternatives, ``... or ...``)."""
    for text in said:
        for asked in _ADJUST_DEST.finditer(text):
            dest = asked.group("dest")
            option = table.setting(dest)
            if option is not None and option.flags[0].startswith("--"):
                verb = asked.group("verb")
                return _directed_setting(option.flags[0], verb, values.get(dest), option, fix)
    return []


def _option_below_need(
    template: str, values: dict[str, str], table: mined.FlagTable, fix: DerivedFix
) -> list[str]:
    """A message that says a value exceeds an option's (``LoRA rank {rank} is greater than
    max_lora_rank {max_lora_rank}``): the option raised to that value (to the smallest of
    its fixed values that holds it, where it has them)."""
    for stated in _EXCEEDS_OPTION.finditer(template):
        dest, need = stated.group("dest"), values.get(stated.group("need"), "")
        option = table.setting(dest)
        if option is None or not option.flags[0].startswith("--") or not _small(need):
            continue
        value = need
        if option.choices:
            fitting = sorted(
                int(c) for c in option.choices if _small(str(c)) and int(c) >= int(need)
            )
            if not fitting:
                continue
            value = str(fitting[0])
        fix.sentences.append(
            f"The fix it implies: `{option.flags[0]} {value}`, at least the {need} it needs."
        )
        return [option.flags[0], value]
    return []


def _required_feature(message: str, table: mined.FlagTable, fix: DerivedFix) -> tuple[str, ...]:
    """The flags of the boolean option that turns on a feature the message says is required,
    named in words: the one to add, then its ``--no-`` form, which a launch may have given."""
    for said in _REQUIRED_FEATURE.finditer(message):
        words = said.group("feature").lower().split()
        option = table.setting("enable_" + "_".join(words)) or table.setting("_".join(words))
        if option is None or option.action != "BooleanOptionalAction":
            continue
        flag, negated = option.flags[0], option.flags[1:]
        fix.sentences.append(
            f"The message says {said.group('feature').lower()} is required: start with `{flag}`"
            + (f" (and without `{negated[0]}`)" if negated else "")
            + ", or without the setting that needs it."
        )
        fix.names_launch_option = True
        return option.flags
    return ()


def _directed_setting(
    flag: str, verb: str, current: str | None, option: mined.FlagOption, fix: DerivedFix
) -> list[str]:
    """``raise --flag`` with no value: the flag with a placeholder on the side the message
    asks for (the patch is shown, and applied only once the user fills it in)."""
    direction = next(
        (side for stem, side in _DIRECTION.items() if verb.lower().startswith(stem)), None
    )
    than = current if current is not None else option.default
    if direction is None:
        default = f" (default {option.default})" if option.default is not None else ""
        fix.notes.append(f"Set by hand: {verb.lower()} `{flag}`{default}.")
        return []
    fix.sentences.append(
        f"The fix it names: a {direction} `{flag}`"
        + (f" (now {than})." if than is not None else ".")
    )
    return [flag, f"<{direction} than {than}>" if than is not None else f"<a {direction} value>"]


def _refused_choice(message: str, table: mined.FlagTable, fix: DerivedFix) -> list[str]:
    """A message that refuses a value an option accepts (``TRTLLM MHA backend is only
    supported on ...``, ``... use a different backend``): that option, with a placeholder
    for another of its values. The option must be named in the message by a word of its
    own (``backend``); of several, the one with the shortest flag, the general one."""
    if not _REFUSAL.search(message):
        return []
    tokens = [t.replace("-", "_") for t in re.findall(r"[a-z0-9][a-z0-9_-]*", message.lower())]
    spoken, words = f" {' '.join(tokens)} ", {w for t in tokens for w in t.split("_")}
    refused = []
    for option in table.options:
        own = set(option.dest.split("_")) - _VAGUE_OPTION_WORDS
        if not option.choices or option.deprecated or not own & words:
            continue
        for choice in map(str, option.choices):
            key = choice.lower().replace("-", "_")
            said = f" {key} " in spoken or f" {key.replace('_', ' ')} " in spoken
            if len(key) >= 4 and key not in _VAGUE_CHOICES and said:
                refused.append((len(option.flags[0]), option.flags[0], choice, option))
    if not refused:
        return []
    _, flag, choice, option = min(refused)
    others = [str(c) for c in option.choices or () if str(c) != choice]
    fix.sentences.append(
        f"The message refuses `{choice}`, a value of `{flag}`: choose another one that this GPU "
        f"and model support ({', '.join(f'`{c}`' for c in others[:12])})."
    )
    return [flag, f"<a value other than {choice}>"]


_NOT_FOUND_NAME = re.compile(
    r"\b(?P<what>[A-Za-z][A-Za-z ]{2,40}?) '(?P<name>[\w./:-]{1,80})' (?:was )?(?:not found|is not "
    r"registered|is not (?:a )?(?:known|valid|supported))"
    r"(?:\. Available \w+: (?P<available>[^\n]{1,400}))?"
)
"""A name looked up in a registry and missing (``Reasoning parser 'telechat' not found.
Available parsers: [...]``)."""


def _unknown_name(message: str, table: mined.FlagTable, fix: DerivedFix) -> list[str]:
    """A name the release does not register, given to the option whose own words the message
    names (``Reasoning parser`` is ``--reasoning-parser``): that option, with one of the
    registered names for the user to pick, or the plugin option that registers more."""
    found = _NOT_FOUND_NAME.search(message)
    if found is None:
        return []
    what = set(found.group("what").lower().split()) - _VAGUE_OPTION_WORDS - {"the", "a", "an"}
    options = [
        option
        for option in table.options
        if len(what) >= 2 and what <= set(option.dest.split("_")) and not option.deprecated
    ]
    if not options:
        return []
    option = min(options, key=lambda o: len(o.flags[0]))
    flag, name = option.flags[0], found.group("name")
    plugins = [o.flags[0] for o in options if o is not option and "plugin" in o.dest]
    available = _string_collection((found.group("available") or "").rstrip("\"'"))
    listed = ", ".join(f"`{a}`" for a in available[:12])
    fix.sentences.append(
        f"`{flag} {name}` names none of the {found.group('what').strip().lower()}s this release "
        f"registers{f' ({listed})' if listed else ''}: give one it has"
        + (
            f", or load the file that registers `{name}` with `{plugins[0]}` (on every node that "
            "starts the engine)."
            if plugins
            else "."
        )
    )
    return [flag, f"<one of the registered names{f', e.g. {available[0]}' if available else ''}>"]


def _small(text: str) -> bool:
    """Digits ``int`` reads at once (a number of hundreds of digits is no setting)."""
    return text.isdigit() and len(text) <= 18


def _fits_type(value: str, kind: str | None) -> bool:
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
    except ValueError:
        return False
    return True


def _bound_choice(
    name: str, value: str, template: str, table: mined.FlagTable, fix: DerivedFix
) -> str | None:
    """A hole named after an option with choices, in a template that names the option too,
    holding a value the option does not accept: the valid values, and the nearest when one is
    close (a hole that only shares a name, such as a tensor's ``{dtype}``, says nothing).
    The option's flag when it said so."""
    option = _option_of_hole(name, table)
    if option is None or not value:
        return None
    mentioned = option.dest in fixed_text(template) or any(f in template for f in option.flags)
    choices = [str(c) for c in option.choices or ()]
    if not mentioned or _as_choice(value, choices) is not None:
        return None
    close = nearest_choice(value, choices, cutoff=0.6)
    fix.sentences.append(
        f"`{value}` is not a value of `{option.flags[0]}` in {table.engine} {table.version}: it "
        f"accepts {', '.join(f'`{c}`' for c in choices[:30])}"
        + (f"; the nearest is `{close}`." if close else ".")
    )
    return option.flags[0]


def _option_of_hole(name: str, table: mined.FlagTable) -> mined.FlagOption | None:
    """The option with choices a hole is named after. A hole named after an attribute path
    (``{server_args_kv_cache_dtype}``, from ``server_args.kv_cache_dtype``) is the option its
    name ends with, when that name has an underscore of its own."""
    parts = name.split("_")
    dests = [name, *("_".join(parts[i:]) for i in range(1, len(parts) - 1))]
    return next((o for dest in dests if (o := table.with_choices(dest))), None)


def _as_choice(value: str, choices: Sequence[str]) -> str | None:
    """``value`` as the option writes it: itself, or without the ``torch.`` a message prints
    a dtype with (``torch.float16`` is ``--dtype float16``); None when it is no choice."""
    for written in (value, value.removeprefix("torch.")):
        if written in choices:
            return written
    return None


def _allowed_value(
    template: str, values: dict[str, str], table: mined.FlagTable, fix: DerivedFix
) -> list[str]:
    """A message that shows an option's value (``attention_backend={got}``, or a hole named
    after the option: ``{dtype} is not supported ...``) beside the values allowed here
    (``Only {allowed} backends ...``, ``Supported dtypes: {supported}``): the option set to
    the first allowed one, when every allowed value is one the option accepts."""
    shown = [(m.group("dest"), m.group("hole")) for m in _SHOWN_OPTION.finditer(template)]
    shown += [(hole, hole) for hole in values]
    for dest, shown_hole in shown:
        option = _option_of_hole(dest, table)
        got = values.get(shown_hole)
        if option is None or got is None:
            continue
        choices = [str(c) for c in option.choices or ()]
        for hole, bound in values.items():
            printed = _string_collection(bound) if hole != shown_hole else []
            allowed = [_as_choice(item, choices) for item in printed]
            if printed and None not in allowed and _as_choice(got, choices) not in allowed:
                flag, chosen = option.flags[0], _portable_choice([str(a) for a in allowed])
                why = (
                    ""
                    if chosen == allowed[0]
                    else " (a Triton kernel runs on every GPU the engine runs on)"
                    if "triton" in chosen.lower()
                    else " (the first not bound to one platform or GPU generation)"
                )
                fix.sentences.append(
                    f"The message allows {', '.join(f'`{a}`' for a in printed)} for `{flag}` "
                    f"here, not `{got}`: the fix sets `{flag} {chosen}`{why}."
                )
                fix.names_launch_option = True
                return [flag, chosen]
    return []


_BOUND_TO_HARDWARE = re.compile(
    r"ascend|npu|aiter|rocm|hpu|xpu|tpu|pallas|^cpu$|^fa[34]$|trtllm|cutlass|flashmla|^ck_"
)
"""Values of a kernel option that run on one platform (Ascend, ROCm, Gaudi, Intel, TPU, CPU)
or one NVIDIA generation (FlashAttention 3 and 4, TensorRT-LLM's and CUTLASS's kernels)."""


def _portable_choice(allowed: Sequence[str]) -> str:
    """Of the values a message allows, the one that runs wherever the engine does: a Triton
    kernel first (each engine's portable one), else the first not bound to a platform or a GPU
    generation, else the first."""
    portable = [value for value in allowed if not _BOUND_TO_HARDWARE.search(value.lower())]
    return next((v for v in portable if "triton" in v.lower()), (portable or list(allowed))[0])


def _string_collection(text: str) -> list[str]:
    """The items of a printed Python list, set or tuple (``{'a', 'b'}``,
    ``[torch.float16]``), quoted strings or dotted names, in printed order; none for anything
    else."""
    inner = text.strip()
    if len(inner) < 2 or inner[0] + inner[-1] not in ("[]", "{}", "()"):
        return []
    items = [item.strip() for item in inner[1:-1].split(",") if item.strip()]
    quoted = [item[1:-1] for item in items if len(item) > 1 and item[0] == item[-1] in "'\""]
    if len(quoted) == len(items):
        return quoted
    return items if all(_DOTTED_NAME.fullmatch(item) for item in items) else []


def fixed_text(template: str) -> str:
    return " ".join(fixed_runs(template))


def _env_settings(message: str) -> list[tuple[str, str | None]]:
    found: dict[str, str | None] = {}
    for setting in _SET_ENV.finditer(message):
        value = setting.group("value")
        found[setting.group("name")] = value.rstrip(".") if value else None
    for name in _ENV_NAME.findall(message):
        found.setdefault(name, None)
    return list(found.items())


def _env_setting(
    name: str, value: str | None, context: ReleaseContext, fix: DerivedFix
) -> str | None:
    declared = mined.env_vars(context.engine).get(name)
    if declared is None:
        return None
    facts = f"`{name}` ({declared.type}" + (
        f", default `{declared.default}`)" if declared.default is not None else ")"
    )
    if declared.choices:
        facts += f", one of {', '.join(f'`{c}`' for c in declared.choices)}"
    if value is None:
        fix.sentences.append(f"The message names the environment variable {facts}.")
        return None
    valid = (
        (declared.type != "bool" or value in _BOOL_VALUES)
        and (not declared.choices or value in declared.choices)
        and _fits_type(value, declared.type)
    )
    if not valid:
        fix.notes.append(f"The message suggests `{name}={value}`, which {facts} does not accept.")
        return None
    fix.sentences.append(f"The fix it names: set {facts} to `{value}`.")
    return value


# -- argparse ------------------------------------------------------------------------------


def _argparse_finding(
    candidate: Candidate, context: ReleaseContext, foreign: dict[str, str]
) -> Finding | None:
    """argparse's own errors read against the release's flag table: a removed or renamed flag
    with its successor, an ambiguous prefix with its candidates, a near miss's "did you mean".
    (A bad choice needs nothing more: argparse prints the valid ones, and the signature for it
    says so.)"""
    table = context.table()
    if table is None:
        return None
    text = candidate.text.strip()
    unrecognized = _ARGPARSE_UNRECOGNIZED.search(text)
    ambiguous = _ARGPARSE_AMBIGUOUS.search(text)
    if unrecognized:
        tokens = unrecognized.group("args").split()
        fix = _command_given_twice(tokens, context) or _unrecognized_fix(
            tokens, table, context, foreign
        )
    elif ambiguous:
        fix = _ambiguous_fix(ambiguous.group("flag"), table, context)
    else:
        return None
    if fix is None:
        return None
    title, sentences, patch, package = fix
    where = f"{context.name} {context.version}, launch flags ({table.parser.parser_class})"
    explanation = [
        f"Derived from the engine's source, {where}: argparse stopped the server before "
        "anything loaded (status 2; under Restart= every attempt fails the same way).",
        *sentences,
    ]
    if context.shown is None:
        explanation.append(
            f"The log shows no {context.name} version: the flags are read from {context.version}, "
            "the newest release mined; `--engine-version` names the installed one."
        )
    elif context.shown != context.version:
        explanation.append(
            f"The log shows {context.name} {context.shown}; the nearest release mined is "
            f"{context.version}."
        )
    return Finding(
        id="f0",
        signature=f"argparse-{context.engine}-flags",  # one of mined.ARGPARSE_READINGS
        category="launch_args",
        severity=Severity.CRITICAL,
        role=Role.ROOT_CAUSE,
        title=title,
        explanation=" ".join(explanation),
        confidence=Confidence.MEDIUM,
        evidence=[candidate.evidence],
        patch=patch,
        patch_note=(None if patch or package else "Change the command line by hand (see above)."),
        package=package,
        next_checks=[
            f"`{'python -m sglang.launch_server' if context.engine == 'sglang' else 'vllm serve'}"
            " --help` with the installed version lists its flags."
        ],
        phase=candidate.phase,
        tier="engine_source",
        raised_in=where,
    )


_Fix = tuple[str, list[str], Patch | None, PackageAction | None]
_SUBCOMMANDS = {"vllm": "vllm serve"}
"""The command whose subcommand word a doubled command line leaves over: ``vllm serve vllm
serve MODEL`` reads the second ``vllm`` as the model and refuses ``serve MODEL``."""


def _command_given_twice(tokens: list[str], context: ReleaseContext) -> _Fix | None:
    """argparse refusing the subcommand word and the model: the command was written twice,
    most often after an image whose entrypoint already runs it."""
    command = _SUBCOMMANDS.get(context.engine)
    if command is None or len(tokens) < 2 or tokens[0] != command.split()[-1]:
        return None
    model = tokens[1]
    return (
        f"`{command}` is given twice: the image's entrypoint already runs it",
        [
            f"argparse refused `serve {model}`: the command line holds `{command}` twice, and "
            f"the repeated `vllm` was read as the model. The vLLM images (`vllm/vllm-openai`) "
            f"start `{command}` themselves, so what follows the image name in `docker run` (a "
            "Compose `command:`, a pod's `args:`) are its arguments and start with the model: "
            f"drop `{command}` there and give `{model}` first, or set the entrypoint (`docker "
            "run --entrypoint`, the pod's `command:`) when the whole command is written out.",
        ],
        None,
        None,
    )


def _unrecognized_fix(
    tokens: list[str], table: mined.FlagTable, context: ReleaseContext, foreign: dict[str, str]
) -> _Fix | None:
    release_name = f"{context.name} {context.version}"
    other = next(
        (name for engine, name in mined.ENGINE_NAMES.items() if engine != context.engine),
        "the other engine",
    )
    sentences: list[str] = []
    remove: list[str] = []
    add: list[str] = []
    named: list[str] = []
    hints: dict[str, str] = {}
    upgrade_to: str | None = None

    def replaced(word: str, words: list[str], said: str, hint: str) -> None:
        """``word`` of the command line gives way to ``words`` (a flag and its value)."""
        sentences.append(said)
        remove.append(word)
        add.extend(words)
        hints.setdefault(word, hint)

    for token, flag, value in _keyword_tokens(tokens, table):
        named.append(token)
        replaced(
            token,
            [flag, value] if value else [flag],
            f"`{token}` is the Python keyword spelling of `{flag}`: on the command line it is "
            "an option, and a word without dashes is read as an argument.",
            f"spelled `{flag}` on the command line",
        )
    for flag, value in flag_values(tokens):
        known_here = table.lookup(flag).outcome in ("exact", "abbreviation")
        history = mined.flag_history(context.engine, flag, context.version or "")
        added_in = _added_in(flag, context) if history is None else None
        if known_here and added_in is None:
            continue
        named.append(flag)
        dashed = "--" + flag[2:].replace("_", "-")
        if dashed in foreign and not known_here:
            spelled = foreign[dashed]
            if spelled and table.lookup(spelled).outcome == "exact":
                replaced(
                    flag,
                    [] if spelled in add else [spelled, value] if value else [spelled],
                    f"`{flag}` is {other}'s flag; {release_name} spells the same setting "
                    f"`{spelled}`.",
                    f"{other}'s spelling of `{spelled}`",
                )
            else:
                sentences.append(
                    f"`{flag}` is {other}'s flag; {context.name} has no flag for it (or sets it "
                    "another way): drop it."
                )
                remove.append(flag)
                hints.setdefault(flag, f"a flag of {other}")
        elif added_in is not None:
            sentences.append(
                f"`{flag}` came with {context.name} {added_in} (the first mined release with it): "
                "the installed release is older. Upgrade, or drop the flag."
            )
            hints.setdefault(flag, f"added in {context.name} {added_in}")
            if upgrade_to is None or at_least(added_in, upgrade_to):
                upgrade_to = added_in
        elif dashed != flag and table.lookup(dashed).outcome == "exact":
            replaced(
                flag,
                [dashed, value] if value else [dashed],
                f"`{flag}` is spelled with underscores; {release_name}'s flag is `{dashed}` "
                "(this parser does not read `_` as `-`).",
                f"spelled `{dashed}`",
            )
        elif history is not None and history.kind == "renamed" and len(history.successors) == 1:
            successor = history.successors[0]
            replaced(
                flag,
                [successor, value] if value else [successor],
                f"`{flag}` was renamed to `{successor}` ({_gone(history, context)}).",
                f"renamed to `{successor}`",
            )
        elif history is not None and history.successors:
            listed = ", ".join(f"`{s}`" for s in history.successors)
            sentences.append(
                f"`{flag}` was split into {listed} ({_gone(history, context)}): set the one "
                "that fits by hand."
            )
        elif history is not None:
            sentences.append(f"`{flag}` was removed ({_gone(history, context)}): drop it.")
            remove.append(flag)
        else:
            close = table.close_flags(flag)
            taking = _taking_value(close, value, table)
            by_path = _path_option(flag, value, table) if taking is None else None
            if by_path is not None:
                taking, written = by_path
                replaced(
                    flag,
                    [taking, written],
                    f"`{flag}` is not a flag of {release_name}; the flag of the same subject "
                    f'that takes a path is `{taking}` (its help: "{_help_of(taking, table)}").',
                    f"`{taking}` takes the path",
                )
            elif taking is not None:
                replaced(
                    flag,
                    [taking, value],
                    f"`{flag}` is not a flag of {release_name}; of the near spellings "
                    f"({', '.join(f'`{c}`' for c in close)}), `{taking}` is the nearest that "
                    f"accepts `{value}`.",
                    f"`{taking}` takes `{value}`",
                )
            else:
                listed = ", ".join(f"`{c}`" for c in close)
                if value and close:
                    sentences.append(
                        f"`{flag}` is not a flag of {release_name}; did you mean {listed}?"
                    )
                elif value:  # no release has it, and nothing is spelled near it: it goes
                    sentences.append(
                        f"`{flag}` is not a flag of {release_name}, nor of the releases before: "
                        f"drop it with its value.{_sampling_default(flag, value, table)}"
                        + _in_no_release(flag, context, hints)
                    )
                    remove.append(flag)
                else:  # a switch that sets nothing here: the start needs it gone
                    sentences.append(
                        f"`{flag}` is not a flag of {release_name}, so it sets nothing there: "
                        f"drop it{f' (or, if you meant one, set {listed})' if close else ''}."
                    )
                    remove.append(flag)
    if not sentences or not named:
        return None
    installed = context.name if context.shown is None else release_name
    title = f"`{named[0]}` is not a flag of the installed {installed}" + (
        f" ({hints[named[0]]})" if named[0] in hints else ""
    )
    patch = Patch(args_remove=remove, args_add=add) if remove else None
    package = (
        PackageAction(name=context.engine, spec=f">={upgrade_to}", action="upgrade")
        if upgrade_to
        else None
    )
    return title, sentences, patch, package


def _in_no_release(flag: str, context: ReleaseContext, hints: dict[str, str]) -> str:
    """What a flag that no mined release of either engine defines says of the command: it was
    written for another build of the engine (or a plugin)."""
    if flag[2:] in _SAMPLING or any(defined_by_some_release(e, flag) for e in mined.ENGINES):
        return ""  # a release has it, or the other engine does
    newest = mined.versions(context.engine)[-1] if mined.versions(context.engine) else ""
    hints.setdefault(flag, f"in no {context.name} release")
    return (
        f" No {context.name} release up to {newest} has it: the command (a recipe, an image's "
        "default arguments) was written for a fork or a custom build of the engine, or a "
        "plugin that adds the flag. Run the build it was written for, or drop the flag."
    )


_SAMPLING = {"temperature", "top-p", "top-k", "min-p", "repetition-penalty", "repeat-penalty",
             "presence-penalty", "frequency-penalty"}  # fmt: skip
"""Sampling settings that other servers (llama.cpp, RamaLama, Ollama) take at launch; vLLM and
SGLang take them per request."""


def _sampling_default(flag: str, value: str, table: mined.FlagTable) -> str:
    """Where the release takes a sampling setting given as a launch flag: per request, and as
    the server's default through its generation-config override when it has one."""
    name = flag[2:].replace("_", "-")
    if name not in _SAMPLING:
        return ""
    said = f" `{name}` is a sampling setting: this engine takes it per request"
    key = "repetition_penalty" if name == "repeat-penalty" else name.replace("-", "_")
    if table.lookup("--override-generation-config").outcome == "exact":
        return (
            f"{said}, or as the server's default with "
            f"`--override-generation-config '{{\"{key}\": {value}}}'`."
        )
    return f"{said}."


_KEYWORD_TOKEN = re.compile(r"(?P<dest>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)=(?P<value>\S+)")


def _keyword_tokens(tokens: Sequence[str], table: mined.FlagTable) -> list[tuple[str, str, str]]:
    """Words written as a Python keyword (``trust_remote_code=True``) whose name is an option
    of the release: each with its flag and the value to give it ('' for a switch set true)."""
    found = []
    for token in tokens:
        written = _KEYWORD_TOKEN.fullmatch(token)
        option = table.setting(written.group("dest")) if written else None
        if written is None or option is None or not option.flags[0].startswith("--"):
            continue
        value = written.group("value")
        switch = option.nargs == 0 or option.action in _NO_VALUE_ACTIONS
        if switch and value.lower() not in ("true", "1"):
            continue
        found.append((token, option.flags[0], "" if switch else value))
    return found


def _taking_value(close: Sequence[str], value: str, table: mined.FlagTable) -> str | None:
    """Of the flags spelled like an unknown one (nearest first), the one its value confirms:
    the only one whose fixed values include it, or the nearest when its values do
    (``--fp8-gemm-runner-backend cutlass``: ``--fp8-gemm-backend``)."""
    if not value:
        return None
    taking = [
        flag
        for flag in close
        if (option := table.lookup(flag).option) is not None
        and option.choices is not None
        and value in {str(c) for c in option.choices}
    ]
    return taking[0] if len(taking) == 1 or (taking and taking[0] == close[0]) else None


_PATH_FLAG = re.compile(r"^--(?P<subject>[a-z0-9]+)[-_](?:[a-z0-9]+[-_])*(?:path|dir|file)$")
_NAME_EQUALS_PATH = re.compile(r"\bname=path\b")


def _path_option(flag: str, value: str, table: mined.FlagTable) -> tuple[str, str] | None:
    """For an unknown ``--<subject>-path`` (or ``-dir``, ``-file``) given a value, the one
    flag of the release whose name has that subject as a word and whose help says it takes a
    path, with the value as it expects it (``name=path`` where its help asks for that form):
    ``--lora-path x/y`` is ``--lora-modules y=x/y``."""
    spelled = _PATH_FLAG.match(flag.replace("_", "-"))
    if spelled is None or not value:
        return None
    subject = spelled.group("subject")
    found = [
        option
        for option in table.options
        if option.flags
        and option.flags[0].startswith("--")
        and subject in option.flags[0][2:].split("-")
        and option.nargs != 0
        and option.action not in _NO_VALUE_ACTIONS
        and "path" in (option.help or "").lower()
    ]
    if len(found) > 1:  # the subject's own path flag (``--model-path`` for ``--model-dir``)
        found = [
            o for o in found if _PATH_FLAG.match(o.flags[0]) and o.flags[0][2:].startswith(subject)
        ]
    if len(found) != 1:
        return None
    option = found[0]
    if _NAME_EQUALS_PATH.search(option.help or ""):
        return option.flags[0], f"{value.rstrip('/').rsplit('/', 1)[-1]}={value}"
    return option.flags[0], value


def _help_of(flag: str, table: mined.FlagTable) -> str:
    option = table.lookup(flag).option
    help_text = " ".join((option.help or "").split()) if option is not None else ""
    return clipped(help_text, 120)


def _added_in(flag: str, context: ReleaseContext) -> str | None:
    """The release that added ``flag``, when it is newer than the installed one: with no
    version shown, any release after the oldest mined (the installed one refused it)."""
    installed = context.version if context.shown is not None else None
    return mined.added_after(context.engine, flag, installed)


def _gone(history: mined.RemovedFlag, context: ReleaseContext) -> str:
    """``gone in vLLM 0.6.6.post1, the first mined release without it``."""
    release = history.gone_in or context.version
    return f"gone in {context.name} {release}, the first mined release without it"


def _ambiguous_fix(flag: str, table: mined.FlagTable, context: ReleaseContext) -> _Fix | None:
    """Only a prefix that was a whole flag before adds to what the log says (its candidates
    are in the message, and the signature for it reads them from there)."""
    lookup = table.lookup(flag)
    history = mined.flag_history(context.engine, flag, context.version or "")
    if lookup.outcome != "ambiguous" or history is None:
        return None
    release_name = f"{context.name} {context.version}"
    listed = ", ".join(f"`{c}`" for c in lookup.candidates)
    sentences = [
        f"`{flag}` is not a whole flag of {release_name}: argparse reads it as an abbreviation of "
        f"{listed} and cannot choose.",
        f"`{flag}` was a flag before; {release_name} {history.kind} it.",
        "Spell out the one you mean.",
    ]
    return f"`{flag}` is ambiguous in {release_name}", sentences, None, None
