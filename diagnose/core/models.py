"""The report schema: what a diagnosis is, as the JSON contract fixes it.

Keys and meanings follow ``contract.md`` (schema_version 1). Extensions (``count``,
``attempts``, ``hypotheses``, ``alternatives``, ``phase``, ``references``, ``timeline``) are
additive.
"""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation
# from a string at every start.

import re
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from diagnose import __version__

SCHEMA_VERSION = 1

Timestamp = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), when_used="json")]


class Severity(str, Enum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe."""
        return {"info": 0, "warning": 1, "error": 2, "critical": 3}[self.value]


class Confidence(str, Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {"low": 0, "medium": 1, "high": 2}[self.value]


class Role(str, Enum):
    ROOT_CAUSE = "root_cause"
    SYMPTOM = "symptom"
    ADVISORY = "advisory"


CATEGORIES: tuple[str, ...] = (
    "spec_decode_config",
    "dist_init_hang",
    "nccl_runtime",
    "gpu_oom",
    "host_oom",
    "gpu_busy",
    "port_in_use",
    "restart_loop",
    "start_timeout",
    "unit_config",
    "launch_args",
    "model_access",
    "model_unsupported",
    "chat_template",
    "context_length",
    "gpu_arch_support",
    "cuda_driver",
    "kernel_build",
    "gpu_hardware",
    "network_config",
    "unknown",
)


def known_category(category: str) -> str:
    """``category`` when it is one of the contract's; else ValueError naming them (for the
    validators of signatures, known issues and the engine-source rules)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; use one of: {', '.join(CATEGORIES)}")
    return category


def empty_list() -> list[Any]:
    """A field's empty-list default. Not ``list`` itself: pydantic reads the signature of each
    default factory as it builds a model, and a builtin's is parsed from text with the
    tokenizer (3% of a small diagnosis, at every start)."""
    return []


def empty_dict() -> dict[str, Any]:
    """A field's empty-mapping default; why not ``dict``: see :func:`empty_list`."""
    return {}


class _Frozen(BaseModel):
    """Validators build when a model is first used: a command pays only for the models it
    makes."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Evidence(_Frozen):
    source: str
    line: int | None = None
    cursor: str | None = None
    timestamp: Timestamp | None = None
    host: str | None = None
    unit: str | None = None
    rank: str | None = Field(
        default=None, description="Rank tag such as 'TP2' when the line has one."
    )
    text: str
    message: str | None = Field(
        default=None, description="The line without its journal and application prefixes."
    )


PLACEHOLDER = re.compile(r"<[^<>\n]{2,}>")
"""A value the user must fill in: ``<your Hugging Face token>``."""


RENDERED_FORMS = {"dropin", "kubernetes", "compose", "docker_run", "context_note"}
"""The keys of a patch rendered from its structured change."""


class Patch(_Frozen):
    env_set: dict[str, str] = Field(default_factory=empty_dict)
    env_unset: list[str] = Field(default_factory=empty_list)
    args_add: list[str] = Field(default_factory=empty_list)
    args_remove: list[str] = Field(default_factory=empty_list)
    unit_set: dict[str, str] = Field(default_factory=empty_dict)
    dropin: str | None = None
    kubernetes: dict[str, Any] | None = Field(
        default=None,
        description="In a Kubernetes deployment: the change as a strategic-merge patch of the "
        "workload (`kubectl patch --type strategic`).",
    )
    compose: dict[str, Any] | None = Field(
        default=None, description="In a Docker deployment: the change as a compose.override.yaml."
    )
    docker_run: list[str] = Field(
        default_factory=empty_list,
        description="In a Docker deployment: the `docker run` options that make the change "
        "(ending with `<image>` and the whole command when the flags change).",
    )
    context_note: str | None = Field(
        default=None,
        description="What of the change has no meaning in the deployment, or what the "
        "deployment's form cannot say.",
    )

    def record(self) -> dict[str, Any]:
        """The structured change as a drop-in records it: without its rendered forms (the
        drop-in itself, the container forms), so drop-ins written before those forms read
        the same."""
        return self.model_dump(exclude=RENDERED_FORMS)

    def is_empty(self) -> bool:
        return not (
            self.env_set or self.env_unset or self.args_add or self.args_remove or self.unit_set
        )

    def placeholders(self) -> list[str]:
        """The values only the user can give, written ``<...>`` (a token, a template's path):
        such a patch is shown, never applied, until they are filled in."""
        values = [*self.env_set.values(), *self.args_add, *self.unit_set.values()]
        return list(dict.fromkeys(m for v in values for m in PLACEHOLDER.findall(v)))


class Hypothesis(_Frozen):
    cause: str
    check: str


class ErrorTemplate(_Frozen):
    """Error lines that no signature explains, grouped: numbers, ids, paths and addresses
    masked (``<NUM>``, ``<ID>``, ``<PATH>``, ``<ADDR>``)."""

    template: str
    count: int
    first_line: int | None = None
    first_ts: Timestamp | None = None


PackageChange = Literal["upgrade", "downgrade", "pin", "install", "reinstall"]


class PackageAction(_Frozen):
    """A package change that fixes the failure: ``upgrade`` ``sglang`` to ``>=0.4.9``."""

    name: str
    spec: str
    action: PackageChange


TIERS = ("signature", "known_issue", "engine_source", "generic", "assistant")
"""Where a finding's knowledge came from: a hand-written signature, a known issue distilled
from resolved public threads, the engine's own message templates, the generic analysis of a
failure nothing explains, or the operator's own model asked with ``--ask`` (checked)."""


class Finding(_Frozen):
    id: str
    signature: str
    category: str
    severity: Severity
    role: Role
    caused_by: str | None = None
    title: str
    explanation: str
    confidence: Confidence
    evidence: list[Evidence]
    patch: Patch | None
    patch_note: str | None = Field(
        default=None, description="Why there is no patch, or what the patch cannot express."
    )
    next_checks: list[str] = Field(default_factory=empty_list)
    hypotheses: list[Hypothesis] = Field(default_factory=empty_list)
    alternatives: list[str] = Field(default_factory=empty_list)
    references: list[str] = Field(default_factory=empty_list)
    count: int = Field(
        default=1, description="How many times the failure was seen (ranks, attempts)."
    )
    attempts: int = Field(default=1, description="In how many start attempts it was seen.")
    phase: str | None = Field(default=None, description="Startup phase the server was in.")
    applies_to: str | None = Field(
        default=None,
        description="The engine versions the signature applies to, e.g. 'SGLang 0.5.10-0.5.19'.",
    )
    fixed_in: str | None = Field(
        default=None, description="The engine release that fixed it upstream, e.g. 'SGLang 0.5.23'."
    )
    templates: list[ErrorTemplate] = Field(
        default_factory=empty_list,
        description="Unexplained error lines grouped into templates, most frequent first (top 10).",
    )
    tier: Literal["signature", "known_issue", "engine_source", "generic", "assistant"] = Field(
        default="signature", description="Where the knowledge behind this finding came from."
    )
    package: PackageAction | None = Field(
        default=None, description="A package upgrade, downgrade or pin that fixes it."
    )
    system_actions: list[str] = Field(
        default_factory=empty_list,
        description="Actions on the host outside the unit's configuration.",
    )
    raised_in: str | None = Field(
        default=None,
        description=(
            "For a finding derived from the engine's source: the release and the module (and "
            "function) that write the decisive message, e.g. 'SGLang 0.5.23, "
            "sglang.srt.server_args (ServerArgs.check)'."
        ),
    )
    model: str | None = Field(
        default=None,
        description="For a finding of tier 'assistant': the model that gave it, as its server "
        "names it.",
    )


DeploymentKind = Literal["systemd", "docker", "kubernetes", "unknown"]


class Deployment(_Frozen):
    """*Extension*: what ran the server: systemd, Docker (Podman, Compose) or Kubernetes, and
    the orchestrator on top when the input says (KServe, KAITO, AIBrix, llm-d, GPUStack;
    Compose, from a container's labels)."""

    kind: DeploymentKind = "unknown"
    orchestrator: str | None = None
    name: str | None = Field(default=None, description="The pod, container or unit.")
    namespace: str | None = None
    container: str | None = Field(
        default=None, description="The pod's container, or the Compose service."
    )
    workload: str | None = Field(
        default=None, description="What owns the pod and takes the patch: 'deployment/NAME'."
    )
    evidence: list[str] = Field(
        default_factory=empty_list, description="What in the input said so."
    )


class InputSummary(_Frozen):
    kind: Literal["file", "stdin", "journal"]
    name: str
    records: int
    first_ts: Timestamp | None = None
    last_ts: Timestamp | None = None


class PhaseSpan(_Frozen):
    """A startup phase a start attempt reached, and when it began."""

    phase: str
    started_at: Timestamp | None = None


class AttemptTimeline(_Frozen):
    """One start attempt: when it began and stopped, and the phases it passed through (the
    last one is where it stopped)."""

    number: int = Field(description="1 for the first start attempt in the input.")
    started_at: Timestamp | None = None
    ended_at: Timestamp | None = Field(
        default=None, description="Its last line (systemd's restart wait not counted)."
    )
    phases: list[PhaseSpan] = Field(default_factory=empty_list)


class ToolInfo(_Frozen):
    name: str = "diagnose"
    version: str = __version__


class PhaseTime(_Frozen):
    """When a start attempt first reached a phase (any rank)."""

    phase: str
    at: Timestamp | None = None


class RankTime(_Frozen):
    """How far one rank (or process) got, and when it last spoke."""

    rank: str
    phase: str | None = None
    last_line_at: Timestamp | None = None


class Timeline(_Frozen):
    """When things happened in the incident's last start attempt, and how long it was
    watched: what a stall or a stop is judged against."""

    observed_until: Timestamp | None = Field(
        default=None,
        description="The latest evidence of any kind: a journal line, an nvidia-smi capture's "
        "clock, the caller's clock for live input.",
    )
    last_engine_line_at: Timestamp | None = Field(
        default=None, description="The engine's last line before any stop request."
    )
    ready_at: Timestamp | None = Field(default=None, description="When it said it was ready.")
    stop_requested_at: Timestamp | None = Field(
        default=None, description="When a stop was requested (systemd's `Stopping`)."
    )
    stopped_by: Literal["operator"] | None = Field(
        default=None,
        description="'operator' when a stop was requested that no failure before it explains.",
    )
    stopped_by_user: str | None = Field(
        default=None, description="Who ran `systemctl stop`, when sudo logged it."
    )
    phases: list[PhaseTime] = Field(
        default_factory=empty_list, description="Each phase the attempt reached, with when."
    )
    ranks: list[RankTime] = Field(
        default_factory=empty_list,
        description="Per rank tag (TP0, EngineCore_DP0): its furthest phase and its last line.",
    )
    stalled_for_s: float | None = Field(
        default=None,
        description="How long the engine was silent before it was stopped or observed, when "
        "the primary finding is that silence.",
    )
    attempts: list[AttemptTimeline] = Field(
        default_factory=empty_list,
        description="Every start attempt with its phases and times: the first and the last 19.",
    )


class HostReport(_Frozen):
    """One host's own diagnosis in a report over several hosts."""

    host: str
    state: Literal["failed", "healthy"]
    primary: str | None = None
    findings: list[Finding] = Field(default_factory=empty_list)
    engine: str | None = None
    phase_reached: str | None = None
    attempts: int = 0
    deployment: str | None = Field(
        default=None, description="The multi-node rendezvous address its launch names, if any."
    )
    first_failure: Timestamp | None = Field(
        default=None, description="When the host's primary finding was first seen."
    )


class FleetFinding(_Frozen):
    """One root cause across hosts: hosts sharing it are named together."""

    id: str
    signature: str
    category: str
    title: str
    role: Role
    caused_by: str | None = None
    hosts: list[str]
    first_seen: Timestamp | None = None


class Fleet(_Frozen):
    """The summary over every host: the decisive finding and the healthy hosts."""

    primary: str | None = None
    primary_host: str | None = None
    findings: list[FleetFinding] = Field(default_factory=empty_list)
    healthy: list[str] = Field(default_factory=empty_list)
    skew_tolerance_s: float = Field(
        default=30.0, description="Clock skew between hosts allowed for when ordering failures."
    )


class PlannedChange(_Frozen):
    """One finding's share of the unit's one drop-in (what a higher-ranked finding already
    decides is left out of it)."""

    finding: str = Field(description="The finding's id.")
    signature: str
    reason: str = Field(description="Why: the finding's title.")
    patch: Patch


class FixPlan(_Frozen):
    """*Extension*: the one drop-in for the unit: every finding's change merged (and what
    earlier ``--apply`` runs wrote), each block with its reason, conflicts resolved by rank."""

    unit: str | None = None
    changes: list[PlannedChange] = Field(default_factory=empty_list)
    earlier: list[str] = Field(
        default_factory=empty_list,
        description="Fixes already in the unit's diagnose drop-in, kept (by id).",
    )
    conflicts: list[str] = Field(
        default_factory=empty_list,
        description="Where two findings wanted different values: which won (by rank), which not.",
    )
    left_out: list[str] = Field(
        default_factory=empty_list, description="Findings whose change is not in the drop-in, why."
    )
    host_actions: list[str] = Field(
        default_factory=empty_list,
        description="What to do outside the unit (packages, processes), before a restart.",
    )
    changes_behaviour: bool = Field(
        default=False,
        description="Whether installing the drop-in changes what the unit does (not only "
        "comments); False: no restart would help, see `reason`.",
    )
    reason: str | None = Field(
        default=None, description="Why the drop-in would change nothing, when it would not."
    )
    complete: bool = Field(
        default=False,
        description="Whether every change is in effect once it is installed (False: some are "
        "comments only, such as flags when the unit's command line is not known): only then "
        "is a restart advised.",
    )
    checked: str | None = Field(
        default=None,
        description="What preflight said of the unit with the drop-in applied in memory.",
    )
    passes_preflight: bool | None = Field(
        default=None,
        description="Whether preflight passes the unit with the drop-in applied (None: not "
        "checked: the unit or its command line is not known here).",
    )
    dropin: str | None = Field(default=None, description="The drop-in text, or null.")


class Diagnosis(_Frozen):
    schema_version: int = SCHEMA_VERSION
    tool: ToolInfo = Field(default_factory=ToolInfo)
    inputs: list[InputSummary] = Field(default_factory=empty_list)
    primary: str | None = None
    findings: list[Finding] = Field(default_factory=empty_list)
    unit: str | None = Field(
        default=None, description="The systemd unit the input is about, when known."
    )
    engine: str | None = Field(default=None, description="'sglang' or 'vllm' when recognised.")
    phase_reached: str | None = Field(default=None, description="Last startup phase seen.")
    attempts: int = Field(default=0, description="Start attempts seen in the input.")
    notes: list[str] = Field(
        default_factory=empty_list,
        description="What the input could not show: missing evidence, suppressed or cut lines.",
    )
    redactions: dict[str, int] = Field(
        default_factory=empty_dict,
        description="Kinds of secrets redacted from this report, with counts.",
    )
    timeline: Timeline | None = Field(
        default=None, description="When the last start attempt did what, and how long it was seen."
    )
    units: list["Diagnosis"] = Field(
        default_factory=empty_list,
        description="When the input holds several units: one diagnosis per unit (the report's "
        "own fields then describe the first unit with a failure). Empty for one unit.",
    )
    hosts: list[HostReport] | None = Field(
        default=None, description="Per-host diagnoses; only when the input holds several hosts."
    )
    fleet: Fleet | None = Field(
        default=None, description="Findings across hosts; only when the input holds several hosts."
    )
    fix: FixPlan | None = Field(
        default=None,
        description="*Extension*: the one drop-in for the unit, every finding's change merged.",
    )
    deployment: Deployment = Field(
        default_factory=Deployment,
        description="*Extension*: what ran the server (systemd, docker, kubernetes, unknown).",
    )

    def finding(self, finding_id: str | None) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)
