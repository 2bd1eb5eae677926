"""Ranking: which finding is the root cause, and what each finding says.

Drafts (one occurrence of a signature, from the engine or preflight) come in; findings with
roles, texts and patches come out. Which signature wins over which is data: each signature's
``supersedes`` (the library adds ``_relations.yaml`` to it); a generic signature is kept only
when no specific one explains a failure; the earliest specific failure is the primary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from diagnose.core import expr
from diagnose.core.dropin import UnsafeDropin, render_dropin
from diagnose.core.models import (
    Confidence,
    Evidence,
    Finding,
    Hypothesis,
    PackageAction,
    Patch,
    Role,
    Severity,
)
from diagnose.core.signature import Signature
from diagnose.core.versions import at_least, at_most
from diagnose.engines import display_name


def with_primary(findings: list[Finding], cause: Finding) -> list[Finding]:
    """``cause`` first, as the root cause; what was primary before follows from it."""
    renumbered = {f.id: f"f{i}" for i, f in enumerate(findings, 2)}
    out = [cause.model_copy(update={"id": "f1"})]
    for finding in findings:
        update: dict[str, Any] = {"id": renumbered[finding.id]}
        if finding.role is Role.ROOT_CAUSE or (
            finding.role is Role.SYMPTOM and finding.caused_by in (None, findings[0].id)
        ):
            update.update(role=Role.SYMPTOM, caused_by="f1")
        elif finding.caused_by is not None:
            update["caused_by"] = renumbered.get(finding.caused_by, finding.caused_by)
        out.append(finding.model_copy(update=update))
    return out


class VersionCheck(NamedTuple):
    """A signature's ``versions:`` against the version the log shows."""

    applies_to: str | None = None
    fixed_in: str | None = None
    shown: str | None = None
    outside: bool = False
    seen: str = "the log shows"
    """How the version is known (preflight: "the installed version is")."""

    def notes(self) -> list[str]:
        out = []
        if self.outside and self.applies_to:
            out.append(f"This applies to {self.applies_to}; {self.seen} {self.shown}.")
        elif self.outside and self.fixed_in:
            out.append(f"This was fixed in {self.fixed_in}; {self.seen} {self.shown}.")
        if self.fixed_in and not self.outside:
            out.append(f"Fixed in {self.fixed_in}: upgrading also fixes it.")
        return out


def version_check(
    signature: Signature, values: Mapping[str, Any], seen: str = "the log shows"
) -> VersionCheck:
    spec = signature.versions
    if spec is None:
        return VersionCheck()
    engine = spec.engine or values.get("engine")
    name = display_name(str(engine) if engine else None)
    upper = (
        f"up to {spec.max}" if spec.max else (f"before {spec.fixed_in}" if spec.fixed_in else "")
    )
    if spec.min and spec.max:
        span = spec.min if spec.min == spec.max else f"{spec.min}\u2013{spec.max}"
    elif spec.min:
        span = f"{spec.min} {upper}" if upper else f"{spec.min} and later"
    else:
        span = upper
    shown = values.get(f"{engine}_version") if engine else None
    if shown is None and (spec.engine is None or spec.engine == values.get("engine")):
        shown = values.get("engine_version")
    outside = shown is not None and bool(
        (spec.min and not at_least(str(shown), spec.min))
        or (spec.max and not at_most(str(shown), spec.max))
        or (spec.fixed_in and at_least(str(shown), spec.fixed_in))
    )
    return VersionCheck(
        applies_to=f"{name} {span}" if span else None,
        fixed_in=f"{name} {spec.fixed_in}" if spec.fixed_in else None,
        shown=f"{name} {shown}" if shown is not None else None,
        outside=outside,
        seen=seen,
    )


def derive(signature: Signature, values: dict[str, Any]) -> None:
    """Add the signature's derived values (``derive:``) to ``values``."""
    for name, arithmetic in signature.derived.items():
        value = arithmetic.value(values)
        if value is not None:
            values[name] = value if isinstance(value, str) else round(value, 4)


def primary_of(findings: list[Finding]) -> str | None:
    """The id of the root cause: the first root-cause finding of severity error or above."""
    return next(
        (
            f.id
            for f in findings
            if f.role is Role.ROOT_CAUSE and f.severity.rank >= Severity.ERROR.rank
        ),
        None,
    )


@dataclass
class Draft:
    """One occurrence of a signature, before ranking (the engine's, or preflight's)."""

    signature: Signature
    seq: int
    values: dict[str, Any]
    evidence: list[Evidence]
    count: int
    attempts: int
    phase: str | None
    confidence: Confidence
    unit: str | None
    versions: VersionCheck = field(default_factory=VersionCheck)


def fill_texts(signature: Signature, items: Iterable[Any], values: Mapping[str, Any]) -> list[str]:
    out = []
    for item in items:
        if signature.holds(item.when, values):
            filled = expr.fill(item.text, values)
            if filled is not None:
                out.append(filled)
    return out


def _package(signature: Signature, values: Mapping[str, Any]) -> PackageAction | None:
    """The first package change whose conditions hold and whose fields all have values."""
    for spec in signature.packages:
        if signature.holds(spec.when, values):
            name, filled = expr.fill(spec.name, values), expr.fill(spec.spec, values)
            if name and filled is not None:
                return PackageAction(name=name, spec=filled, action=spec.action)
    return None


def _category(signature: Signature, values: Mapping[str, Any]) -> str:
    """The first category whose conditions hold, else the signature's own."""
    for spec in signature.categories:
        if signature.holds(spec.when, values):
            return spec.category
    return signature.category


def choose_patch(signature: Signature, values: Mapping[str, Any]) -> int | None:
    """Index of the first patch whose conditions hold and whose fields all have values."""
    for index, spec in enumerate(signature.patches):
        if not signature.holds(spec.when, values):
            continue
        templates = [*spec.env_set, *spec.env_set.values(), *spec.args_add, *spec.unit_set.values()]
        if all(expr.fill(t, values) is not None for t in templates):
            return index
    return None


def _patch(
    signature: Signature, values: Mapping[str, Any], unit: str | None
) -> tuple[Patch | None, str | None]:
    """The chosen patch, filled in, and its note. A chosen patch with no changes in it
    means "no config change helps here"."""
    default_note = expr.fill(signature.patch_note, values) if signature.patch_note else None
    index = choose_patch(signature, values)
    if index is None:
        return None, default_note
    spec = signature.patches[index]
    note = expr.fill(spec.note, values) if spec.note else default_note
    patch = Patch(
        env_set={
            expr.fill(k, values) or k: expr.fill(v, values) or v for k, v in spec.env_set.items()
        },
        env_unset=[expr.fill(name, values) or name for name in spec.env_unset],
        args_add=[expr.fill(a, values) or a for a in spec.args_add],
        args_remove=[  # an item may name several flags (``{args:flags}``)
            flag for a in spec.args_remove for flag in (expr.fill(a, values) or a).split()
        ],
        unit_set={k: expr.fill(v, values) or v for k, v in spec.unit_set.items()},
    )
    if patch.is_empty():
        return None, note
    try:
        dropin = render_dropin(patch, unit)
    except UnsafeDropin:  # a value taken from the log would start a line of its own
        return None, "No fix is shown: a value it would write holds a control character."
    return patch.model_copy(update={"dropin": dropin}), note


def is_failure(signature: Signature) -> bool:
    return signature.role is Role.ROOT_CAUSE and signature.severity.rank >= Severity.ERROR.rank


def is_catch_all(signature: Signature) -> bool:
    """The catch-all for exceptions no signature explains."""
    return signature.generic and signature.category == "unknown"


def catch_all_failures(drafts: list[Draft]) -> list[Draft]:
    """The failures only the catch-all saw (an exception no signature explains)."""
    return [d for d in drafts if is_failure(d.signature) and is_catch_all(d.signature)]


def no_signature_decided(drafts: list[Draft]) -> bool:
    """No hand-written signature names a failure: nothing fired, or only the catch-all.
    The one place where a later tier (mined templates, known issues) may decide instead."""
    return all(is_catch_all(d.signature) for d in drafts if is_failure(d.signature))


SHARED_EVIDENCE = {
    "port": "port",
    "master_port": "port",
    "gpu": "GPU",
    "pci": "GPU",
    "device": "GPU",
}
"""Captures that name a thing two services can share: a link between their findings needs
one of them with the same value in both."""


def _services(draft: Draft) -> set[tuple[str | None, str]]:
    """The (host, unit) pairs the draft's evidence names."""
    return {(e.host, e.unit) for e in draft.evidence if e.unit}


def shared_evidence(draft: Draft, cause: Draft) -> str | None:
    """Whether ``draft`` may follow from ``cause``: None when both are of one service (or
    either names none); else what they share (``the same port 30000``), or ``""`` for nothing,
    which keeps them apart."""
    mine, theirs = _services(draft), _services(cause)
    if not mine or not theirs or mine & theirs:
        return None
    for key, what in SHARED_EVIDENCE.items():
        value = draft.values.get(key)
        if value not in (None, "") and any(
            cause.values.get(other) == value
            for other, kind in SHARED_EVIDENCE.items()
            if kind == what
        ):
            return f"the same {what} {value}"
    return ""


def rank(drafts: list[Draft]) -> list[Finding]:
    """One primary root cause: the first specific failure (lowest ``seq``) that is no wrapper
    of another; the rest follow from it. Findings are built here, texts and patches filled
    from each draft's values."""
    superseded = {s for d in drafts for s in d.signature.supersedes}
    drafts = [d for d in drafts if d.signature.id not in superseded]
    if any(not d.signature.generic and is_failure(d.signature) for d in drafts):
        drafts = [d for d in drafts if not d.signature.generic]  # only when nothing else fits

    def order(d: Draft) -> tuple[bool, bool, int, bool, int]:
        # a wrapper points at another error, wherever a paste put it; on one line, a signature
        # for that message before a broad one for its class
        return (
            d.signature.generic,
            d.signature.wrapper,
            d.seq,
            d.signature.broad,
            -d.signature.severity.rank,
        )

    fired = {d.signature.id: d for d in sorted(drafts, key=order)}
    # a consequence whose cause fired too: never the primary, caused by that cause
    cause_of = {
        id(d): next(fired[c] for c in d.signature.consequence_of if c in fired)
        for d in drafts
        if any(c in fired for c in d.signature.consequence_of)
    }
    causes = sorted(
        (d for d in drafts if is_failure(d.signature) and id(d) not in cause_of), key=order
    )
    if not causes:  # nothing explains the symptoms: the first symptom is the story
        causes = sorted(
            (
                d
                for d in drafts
                if d.signature.role is Role.SYMPTOM
                and d.signature.severity.rank >= Severity.ERROR.rank
            ),
            key=order,
        )[:1]
    primary = causes[0] if causes else None
    rest = sorted(
        (d for d in drafts if d is not primary),
        key=lambda d: (
            d.signature.role is Role.ADVISORY,
            d.signature.severity.rank < Severity.ERROR.rank,
            d.seq,
        ),
    )
    ordered = ([primary] if primary else []) + rest
    ids = {id(d): f"f{i}" for i, d in enumerate(ordered, 1)}
    findings = []
    for draft in ordered:
        signature = draft.signature
        cause = cause_of.get(id(draft), primary)
        shared = shared_evidence(draft, cause) if cause is not None else None
        if draft is primary:
            role, caused_by = Role.ROOT_CAUSE, None
        elif shared == "":  # another service's: nothing ties it to this one's cause
            role = Role.ADVISORY if signature.role is Role.ADVISORY else Role.SYMPTOM
            caused_by = None
        elif id(draft) in cause_of:
            role, caused_by = Role.SYMPTOM, ids[id(cause_of[id(draft)])]
        elif signature.role is Role.ADVISORY or signature.severity.rank < Severity.ERROR.rank:
            role, caused_by = Role.ADVISORY, None
        else:
            role, caused_by = Role.SYMPTOM, (ids[id(primary)] if primary else None)
        values = draft.values
        patch, patch_note = _patch(signature, values, draft.unit)
        findings.append(
            Finding(
                id=ids[id(draft)],
                signature=signature.id,
                category=_category(signature, values),
                severity=signature.severity,
                role=role,
                caused_by=caused_by,
                title=signature.title,
                explanation=" ".join(
                    [
                        *fill_texts(signature, signature.explanation, values),
                        *draft.versions.notes(),
                        *(
                            [f"It follows from another service's failure: {shared}."]
                            if shared
                            else []
                        ),
                    ]
                ),
                confidence=draft.confidence,
                evidence=draft.evidence,
                patch=patch,
                patch_note=patch_note,
                next_checks=fill_texts(signature, signature.next_checks, values),
                hypotheses=[
                    Hypothesis(cause=c, check=k)
                    for h in signature.hypotheses
                    if all(signature.condition(w).holds(values) for w in h.when)
                    and (c := expr.fill(h.cause, values)) is not None
                    and (k := expr.fill(h.check, values)) is not None
                ],
                alternatives=fill_texts(signature, signature.alternatives, values),
                references=list(signature.references),
                package=_package(signature, values),
                system_actions=fill_texts(signature, signature.system_actions, values),
                count=draft.count,
                attempts=draft.attempts,
                phase=draft.phase,
                applies_to=draft.versions.applies_to,
                fixed_in=draft.versions.fixed_in,
            )
        )
    return findings
