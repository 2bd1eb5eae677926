"""The report of ``diagnose verify`` (an extension): did the fix work? Kept apart from the
report schema (``core.models``), which every diagnosis loads and none of them needs this."""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation
# from a string at every start.

from pydantic import BaseModel, ConfigDict, Field

from diagnose.core.models import SCHEMA_VERSION, Timestamp, ToolInfo, empty_list


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class AttemptSummary(_Frozen):
    """One start attempt as ``diagnose verify`` compares it (or a saved report's)."""

    invocation: str | None = Field(default=None, description="systemd's invocation ID.")
    started_at: Timestamp | None = None
    ended_at: Timestamp | None = None
    result: str | None = Field(
        default=None, description="systemd's result ('exit-code', 'success', ...), when seen."
    )
    signature: str | None = Field(default=None, description="The primary finding's signature.")
    category: str | None = None
    title: str | None = None
    phase_reached: str | None = None
    report: str | None = Field(
        default=None, description="The saved report it was read from (--compare)."
    )


class Verification(_Frozen):
    """Did the fix work: the previous failure's primary finding against the newest attempt."""

    schema_version: int = SCHEMA_VERSION
    tool: ToolInfo = Field(default_factory=ToolInfo)
    unit: str
    previous: AttemptSummary
    newest: AttemptSummary
    fixed: bool = Field(description="The previous primary finding is not in the newest attempt.")
    reached_ready: bool = Field(description="The newest attempt reached the 'ready' phase.")
    new_failure: str | None = Field(
        default=None, description="The newest attempt's primary signature when it is another one."
    )
    verdict: str
    notes: list[str] = Field(default_factory=empty_list)
