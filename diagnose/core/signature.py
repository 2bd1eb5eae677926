"""The signature schema: one YAML file describes one failure, how to see it and how to fix it."""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation
# from a string at every start.

import pickle
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

import regex
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from diagnose.core.expr import Arithmetic, Condition, ExpressionError, template_fields
from diagnose.core.models import (
    Confidence,
    Role,
    Severity,
    empty_dict,
    empty_list,
    known_category,
)
from diagnose.core.versions import is_version

_DURATION = r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*$"  # compiled when first used
_UNIT_SECONDS = {None: 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from ``300``, ``"90s"``, ``"5m"``, ``"5min"`` or ``"1h"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = re.match(_DURATION, str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 5m, 1h)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


Duration = Annotated[float, BeforeValidator(parse_duration)]
Engine = Literal["sglang", "vllm", "any"]


class _Schema(BaseModel):
    """Schemas build when first used: a run whose library comes from the cache never
    validates a signature."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled (the library cache) without the private attributes, which are compiled
        regexes and parsed conditions: rebuilt on first use, not at every load (a pickled
        regex is made as it is read; a parsed condition holds lambdas). A pattern keeps its
        regex's compiled code, not read until used (:attr:`Pattern._compiled_pickle`)."""
        private = {
            name: attr.get_default(call_default_factory=True)
            for name, attr in self.__private_attributes__.items()
        }
        return {**super().__getstate__(), "__pydantic_private__": private or None}


class Pattern(_Schema):
    """Literal needles (any one must occur) as a cheap pre-check, then a precise regex."""

    needles: list[str] = Field(
        default_factory=empty_list, description="Literal substrings; a line must hold one of them."
    )
    regex: str = Field(description="Regex (Python `regex` syntax) with named groups to capture.")
    where: list[str] = Field(
        default_factory=empty_list, description="Conditions on captures, e.g. 'avail_mem_gb < 2'."
    )
    ignore_case: bool = False

    _compiled: Any = PrivateAttr(default=None)
    _compiled_pickle: bytes | None = PrivateAttr(default=None)
    """The compiled regex, pickled: what the library cache keeps of it. ``regex`` pickles a
    pattern with its compiled code, so reading it back costs a hundredth of compiling it
    (which is a tenth of a small run); it is read only when a line needs the pattern."""
    _conditions: list[Condition] | None = PrivateAttr(default=None)

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        kept = self._compiled_pickle
        if self._compiled is not None:
            kept = pickle.dumps(self._compiled, protocol=pickle.HIGHEST_PROTOCOL)
        return {
            **state,
            "__pydantic_private__": {**state["__pydantic_private__"], "_compiled_pickle": kept},
        }

    @model_validator(mode="after")
    def _compile(self) -> "Pattern":
        try:
            self._compiled = regex.compile(self.regex, self._flags())
        except regex.error as error:
            raise ValueError(f"regex does not compile: {error}") from None
        self._conditions = [Condition(text) for text in self.where]
        return self

    def _flags(self) -> int:
        return regex.MULTILINE | (regex.IGNORECASE if self.ignore_case else 0)

    @property
    def compiled(self) -> Any:
        if self._compiled is None:
            kept = self._compiled_pickle
            self._compiled = (
                pickle.loads(kept) if kept is not None else regex.compile(self.regex, self._flags())
            )
        return self._compiled

    @property
    def conditions(self) -> list[Condition]:
        if self._conditions is None:
            self._conditions = [Condition(text) for text in self.where]
        return self._conditions


class LineMatch(Pattern):
    """One event (a line, or a whole traceback) matches."""

    type: Literal["line"]


class SequenceMatch(_Schema):
    """Each step matches, in order, the whole sequence within ``within``."""

    type: Literal["sequence"]
    steps: list[Pattern] = Field(min_length=2)
    within: Duration


class CountMatch(Pattern):
    """At least ``min_count`` matching events within ``within`` (a restart loop)."""

    type: Literal["count"]
    min_count: int = Field(ge=2)
    within: Duration


class AbsenceMatch(_Schema):
    """``after`` was seen, then none of ``expect`` for at least ``within``.

    The quiet span ends at an ``until`` event (the operator stopped it, the process died),
    at the next start attempt, or at the end of observation: the last timestamp of a saved
    log, or the clock a live caller passes in.
    """

    type: Literal["absence"]
    after: Pattern
    expect: list[Pattern] = Field(min_length=1, description="Progress markers: any one cancels.")
    until: list[Pattern] = Field(
        default_factory=empty_list,
        description="Events that end the quiet span (it is judged then).",
    )
    within: Duration


Match = Annotated[
    LineMatch | SequenceMatch | CountMatch | AbsenceMatch, Field(discriminator="type")
]


class ConditionalText(_Schema):
    text: str
    when: list[str] = Field(default_factory=empty_list)


def _as_conditional(value: Any) -> Any:
    return {"text": value} if isinstance(value, str) else value


Text = Annotated[ConditionalText, BeforeValidator(_as_conditional)]


class HypothesisSpec(_Schema):
    cause: str
    check: str
    when: list[str] = Field(default_factory=empty_list)


class PatchSpec(_Schema):
    """A config change; values may hold ``{capture}`` fields. Used when ``when`` holds."""

    when: list[str] = Field(default_factory=empty_list)
    note: str | None = Field(
        default=None, description="Replaces the signature's patch_note when this patch is chosen."
    )
    env_set: dict[str, str] = Field(default_factory=empty_dict)
    env_unset: list[str] = Field(default_factory=empty_list)
    args_add: list[str] = Field(default_factory=empty_list)
    args_remove: list[str] = Field(default_factory=empty_list)
    unit_set: dict[str, str] = Field(default_factory=empty_dict)

    @field_validator("unit_set")
    @classmethod
    def _section_key(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.fullmatch(r"[A-Z][A-Za-z]+\.[A-Z][A-Za-z]+", key):
                raise ValueError(
                    f"unit_set key {key!r} must be Section.Key, e.g. Service.TimeoutStartSec"
                )
        return value


Phase = Literal[
    "launch", "dist_init", "load_weights", "kv_cache", "cuda_graph", "http_server", "warmup"
]


class PackageSpec(_Schema):
    """A package change that fixes the failure, used when ``when`` holds; ``name`` and
    ``spec`` may hold ``{capture}`` fields."""

    when: list[str] = Field(default_factory=empty_list)
    name: str
    spec: str = ""
    action: Literal["upgrade", "downgrade", "pin", "install", "reinstall"]


class CategorySpec(_Schema):
    """A category the evidence decides (which part of the engine a fault is in), used when
    ``when`` holds."""

    when: list[str] = Field(min_length=1)
    category: str

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        return known_category(value)


class PreflightRule(_Schema):
    """When the launch configuration alone shows the failure (``diagnose preflight``).

    Conditions read configuration values: flags (``tp_size``), environment variables by their
    own names, model facts (``model_is_hybrid``), GPU and port facts. The rules of a
    signature are alternatives: the first that holds reports it.
    """

    when: list[str] = Field(min_length=1, description="Conditions on the configuration (all).")
    evidence: str | None = Field(
        default=None,
        description="What in the configuration shows it, e.g. '--tp-size {tp_size} on "
        "{visible_gpus} GPUs'; becomes the first evidence entry.",
    )
    phase: Phase = Field(
        default="launch", description="The startup phase the server would fail in."
    )
    values: dict[str, str] = Field(
        default_factory=empty_dict,
        description="Names the signature's texts and patches use (its captures), as templates "
        "over configuration values: {value: '{tool_call_parser}'}.",
    )
    explanation: list[Text] = Field(
        default_factory=empty_list,
        description="Replaces the signature's explanation (which tells of a failed start).",
    )
    patches: list[PatchSpec] = Field(
        default_factory=empty_list, description="Tried before the signature's own patches."
    )
    each: str | None = Field(
        default=None,
        description="A configuration value that lists problems (unknown_flags, ambiguous_flags, "
        "bad_flag_values, unknown_env_vars): the rule reports each as its own finding, with the "
        "problem's fields as values. Such a rule is not an alternative to the others.",
    )
    claims: list[str] = Field(
        default_factory=empty_list,
        description="Flags this rule explains, as templates ('--enable-reasoning', "
        "'{other_engine_spec_flags}'): per-flag findings (each:) for them are left out.",
    )

    @field_validator("explanation", mode="before")
    @classmethod
    def _explanation_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class Versions(_Schema):
    """The engine versions a signature applies to (bounds inclusive, compared by release
    numbers: 0.5.10 > 0.5.9; a bound takes in its sub-releases, so max 0.5.10 includes
    0.5.10.post1). When the log shows a version outside them the finding is kept, at low
    confidence, with a note."""

    engine: Literal["sglang", "vllm"] | None = Field(
        default=None, description="Whose version; default: the engine the log is from."
    )
    min: str | None = Field(default=None, description="First version that fails this way.")
    max: str | None = Field(default=None, description="Last version that fails this way.")
    fixed_in: str | None = Field(
        default=None, description="The release that fixed it upstream: upgrading also fixes it."
    )

    @field_validator("min", "max", "fixed_in", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # an unquoted 0.5 in YAML
        if value is not None and not (isinstance(value, str) and is_version(value)):
            raise ValueError(f"not a version: {value!r} (use e.g. 0.5.10)")
        return value


def _patch_templates(patch: PatchSpec) -> list[str]:
    """The templates of a patch: its values, the variables it names and its note."""
    texts = [*patch.env_set, *patch.env_set.values(), *patch.env_unset, *patch.args_add]
    texts += [*patch.args_remove, *patch.unit_set.values()]
    return texts + ([patch.note] if patch.note else [])


class Signature(_Schema):
    """What the engine reads of a signature file: all of it but the examples (see
    :mod:`diagnose.core.signature_file`)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    engines: list[Engine] = Field(default_factory=lambda: list[Engine](["any"]))
    category: str
    categories: list[CategorySpec] = Field(
        default_factory=empty_list,
        description="Categories by evidence; the first whose conditions hold replaces `category`.",
    )
    severity: Severity
    confidence: Confidence = Confidence.HIGH
    role: Role = Field(
        default=Role.ROOT_CAUSE,
        description="symptom: follows from another failure; primary only when nothing explains it.",
    )
    generic: bool = Field(
        default=False, description="A catch-all: reported only when no specific failure is found."
    )
    broad: bool = Field(
        default=False,
        description=(
            "A class of failure (any unknown flag, any NCCL error): a known issue or an engine "
            "message that names the specific cause on the same line takes its place."
        ),
    )
    supersedes: list[str] = Field(
        default_factory=empty_list, description="Signatures this one explains more precisely."
    )
    consequence_of: list[str] = Field(
        default_factory=empty_list,
        description="Signatures whose failure causes this one: when one of them fired too, "
        "this finding is reported as caused by it, never as the primary.",
    )
    wrapper: bool = Field(
        default=False,
        description="It only wraps the error before it (vLLM's empty `Failed core proc(s)`): "
        "left out of the report unless it is the primary finding.",
    )
    healthy_too: bool = Field(
        default=False,
        description="Healthy starts print it too (an optional module skipped, a probe that "
        "falls back): a failure only when the start failed and no other specific failure fired.",
    )
    waits_for_peers: bool = Field(
        default=False,
        description="It only says a rank waited for others (a store or rendezvous timeout, a "
        "collective that never completed): an earlier error of the same start explains it.",
    )
    hangs_before: Phase | None = Field(
        default=None,
        description="A warning healthy starts print too, whose trouble makes a start hang "
        "before this phase rather than fail (Ray's object store in /tmp for want of /dev/shm): "
        "a failure only when the input ends in the last start attempt before the start reached "
        "this phase, never ready, with no error after the line, no stop, and no other specific "
        "failure but its consequences.",
    )
    versions: Versions | None = Field(
        default=None, description="Engine versions it applies to, and the one that fixed it."
    )
    match: Match
    context: list[Pattern] = Field(
        default_factory=empty_list, description="Values captured from anywhere in the input."
    )
    supporting: list[Pattern] = Field(
        default_factory=empty_list,
        description="Corroborating lines: when seen they join the evidence and raise confidence.",
    )
    derive: dict[str, str] = Field(
        default_factory=empty_dict, description="Computed values: name -> arithmetic over captures."
    )
    explanation: list[Text] = Field(min_length=1)
    patches: list[PatchSpec] = Field(
        default_factory=empty_list,
        description="Candidate patches; the first whose conditions hold is used.",
    )
    patch_note: str | None = Field(
        default=None, description="Why no config change helps, or what the patch cannot express."
    )
    packages: list[PackageSpec] = Field(
        default_factory=empty_list,
        description="Candidate package changes; the first whose conditions hold is used.",
    )
    system_actions: list[Text] = Field(
        default_factory=empty_list,
        description="Host actions that fix it (stop a process, start a service), one per item.",
    )
    next_checks: list[Text] = Field(default_factory=empty_list)
    hypotheses: list[HypothesisSpec] = Field(default_factory=empty_list)
    alternatives: list[Text] = Field(default_factory=empty_list)
    references: list[str] = Field(default_factory=empty_list)
    preflight: list[PreflightRule] = Field(
        default_factory=empty_list,
        description="Launch configurations that fail this way, caught before the start "
        "(alternatives: any one rule reports it).",
    )

    _derived: dict[str, Arithmetic] | None = PrivateAttr(default=None)
    _conditions: dict[str, Condition] = PrivateAttr(default_factory=dict)

    @field_validator("explanation", mode="before")
    @classmethod
    def _explanation_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        return known_category(value)

    @model_validator(mode="after")
    def _prepare(self) -> "Signature":
        try:
            self._derived = self._arithmetic()
            every_when = [c for t in self._conditional_items() for c in t]
            self._conditions = {text: Condition(text) for text in every_when}
            for template in self._templates():
                template_fields(template)
        except ExpressionError as error:
            raise ValueError(str(error)) from None
        return self

    def _arithmetic(self) -> dict[str, Arithmetic]:
        return {name: Arithmetic(source) for name, source in self.derive.items()}

    def _said(self) -> list[ConditionalText]:
        """Every conditional text the signature can say."""
        return [*self.explanation, *self.next_checks, *self.alternatives, *self.system_actions]

    def _conditional_items(self) -> list[list[str]]:
        items = [t.when for t in self._said()]
        items += [h.when for h in self.hypotheses] + [p.when for p in self.patches]
        items += [p.when for p in self.packages] + [c.when for c in self.categories]
        for rule in self.preflight:
            items += [rule.when, *(t.when for t in rule.explanation)]
            items += [p.when for p in rule.patches]
        return items

    def reported_templates(self) -> list[str]:
        """Every template a finding of the log fills from the match's values: the texts, the
        packages and the patches (a variable's name too)."""
        texts = [t.text for t in self._said()]
        texts += [h.cause for h in self.hypotheses] + [h.check for h in self.hypotheses]
        texts += [t for p in self.packages for t in (p.name, p.spec)]
        texts += [self.patch_note] if self.patch_note else []
        for patch in self.patches:
            texts += _patch_templates(patch)
        return texts

    def _templates(self) -> list[str]:
        texts = self.reported_templates()
        for rule in self.preflight:
            texts += [t for patch in rule.patches for t in _patch_templates(patch)]
            texts += [*rule.values.values(), *(t.text for t in rule.explanation)]
            texts += [rule.evidence] if rule.evidence else []
        return texts

    @property
    def derived(self) -> dict[str, Arithmetic]:
        if self._derived is None:
            self._derived = self._arithmetic()
        return self._derived

    def condition(self, text: str) -> Condition:
        found = self._conditions.get(text)
        if found is None:
            found = self._conditions[text] = Condition(text)
        return found

    def holds(self, when: Iterable[str], values: Mapping[str, Any]) -> bool:
        """Whether every condition of a ``when`` list holds for ``values``."""
        return all(self.condition(text).holds(values) for text in when)

    def patterns(self) -> list[Pattern]:
        """Every pattern the engine has to look for, match and context alike."""
        match = self.match
        if isinstance(match, SequenceMatch):
            own: list[Pattern] = list(match.steps)
        elif isinstance(match, AbsenceMatch):
            own = [match.after, *match.expect, *match.until]
        else:
            own = [match]
        return [*own, *self.context, *self.supporting]


class Relations(_Schema):
    """Which finding wins when several signatures fire (``_relations.yaml``)."""

    supersedes: dict[str, list[str]] = Field(
        default_factory=empty_dict,
        description="signature id -> the ones it explains more precisely (they are dropped).",
    )
    consequence_of: dict[str, list[str]] = Field(
        default_factory=empty_dict,
        description="signature id -> the signatures whose failure causes it (it is kept, as "
        "caused by them).",
    )
    waits_for_peers: list[str] = Field(
        default_factory=empty_list,
        description="Signatures that only say a rank waited for the others: an earlier error "
        "of another rank or process in the same start attempt is the cause.",
    )


class HybridArchitectures(_Schema):
    """Models that mix attention with Mamba / linear-attention layers."""

    architectures: list[str] = Field(description="Prefixes of config.json `architectures`.")
    layer_types: list[str] = Field(description="`layer_types` entries of such layers.")
    config_keys: list[str] = Field(description="Prefixes of config keys only they have.")


class Architectures(_Schema):
    """Facts about model architectures (``_architectures.yaml``)."""

    hybrid: HybridArchitectures
