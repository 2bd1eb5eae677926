"""The seam for the tiers below the hand signatures.

When no hand-written signature names the failure, the engine hands an :class:`IncidentView`
(the error messages nothing explained, earliest first, with the engine and its version) to
each explainer in turn; the first that returns findings decides. Explainers live outside the
core (``diagnose.knowledge``) and are injected by whoever builds the engine, so the core stays
free of files and data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from diagnose.core.incident import announces_next
from diagnose.core.models import Confidence, Evidence, Finding, Role, Severity
from diagnose.core.tracebacks import stops_in_frame


@dataclass(frozen=True)
class Candidate:
    """A message that may decide the incident, with its evidence and the phase it came in."""

    text: str
    evidence: Evidence
    phase: str | None = None
    frame: str | None = None
    """The innermost frame of its traceback, with the code line under it (one per line), when
    the message ends one: where it was raised, or the line a traceback cut short stopped at."""
    engine_frame: str | None = None
    """The innermost frame of its traceback in an engine's own files, with its code line,
    where that is not the innermost frame (the engine's call into torch that raised)."""
    stack: tuple[str, ...] = ()
    """Every frame of its traceback, outermost first, each with its code line where shown."""

    @property
    def cut_short(self) -> bool:
        """The message is a line of a traceback the log cut short (its last frame, or the code
        under it): code, not a message, so its words say nothing of the cause."""
        return stops_in_frame(self.text, self.frame)


@dataclass(frozen=True)
class IncidentView:
    candidates: tuple[Candidate, ...]
    """Error messages no signature explained, earliest first."""
    engine: str | None
    engine_version: str | None
    unit: str | None

    def readable(self) -> list[Candidate]:
        """The candidates that say something themselves, earliest first: not a wrapper that
        announces its error on the next line (``backend='inductor' raised:``)."""
        return [c for c in self.candidates if not announces_next(c.text)]


class Explainer(Protocol):
    @property
    def needles(self) -> frozenset[str]:
        """Literals of the messages it knows: a line holding one is worth keeping for it even
        when it reads like no error."""
        ...

    def __call__(self, incident: IncidentView) -> list[Finding]: ...


class PackagePins(Protocol):
    """Makes a finding's package change exact where the engine release says which version it
    needs (``transformers`` becomes ``transformers==4.48.3``); lives outside the core."""

    def __call__(
        self, finding: Finding, engine: str | None, engine_version: str | None
    ) -> Finding: ...


def lead(
    candidate: Candidate,
    *,
    signature: str,
    category: str,
    title: str,
    explanation: str,
    tier: Literal["generic", "engine_source"] = "generic",
    confidence: Confidence = Confidence.LOW,
    evidence: list[Evidence] | None = None,
    **fields: Any,
) -> Finding:
    """A tier's reading of one error (``candidate``): a root cause, at low confidence unless
    said, with that error as its evidence; the generic tiers' leads, and the engine-source
    tier's readings of code that does not fit together."""
    return Finding(
        id="f0",
        signature=signature,
        category=category,
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title=title,
        explanation=explanation,
        confidence=confidence,
        evidence=evidence or [candidate.evidence],
        phase=candidate.phase,
        tier=tier,
        **fields,
    )
