"""Many hosts, one report: per-host diagnoses summed up into fleet findings.

Hosts whose primary finding has the same signature share one fleet finding. A host that
only waited for its peers (a rendezvous or store timeout) while another host had failed
earlier on its own error is a symptom of that error (``caused_by``); clock skew between
hosts up to ``skew_tolerance_s`` is allowed for when ordering the failures."""

from __future__ import annotations

from datetime import timedelta

from diagnose.core.models import Diagnosis, Fleet, FleetFinding, HostReport, Role

WAITING_CATEGORIES = frozenset({"dist_init_hang", "start_timeout"})
"""Failures that mean 'a peer never came': on a multi-node deployment, symptoms of that peer."""

DEFAULT_SKEW_TOLERANCE_S = 30.0


def deployment_of(facts: dict[str, object]) -> str | None:
    """The deployment a host's launch arguments name, the rendezvous every node of it shares:
    SGLang's ``dist_init_addr`` or vLLM's ``master_addr``(:``master_port``) when ``nnodes`` > 1,
    else vLLM's ``data_parallel_address``; None when single-node or unsaid."""

    def said(key: str) -> str | None:
        value = facts.get(key)
        return None if value in (None, "", "None") else str(value)

    if str(facts.get("nnodes", "1")) not in ("", "1"):
        if said("dist_init_addr"):
            return said("dist_init_addr")
        if said("master_addr"):
            port = said("master_port")
            return f"{said('master_addr')}:{port}" if port else said("master_addr")
    return said("data_parallel_address")


def _host_report(host: str, diagnosis: Diagnosis, deployment: str | None) -> HostReport:
    primary = diagnosis.finding(diagnosis.primary)
    stamps = [e.timestamp for e in (primary.evidence if primary else []) if e.timestamp]
    return HostReport(
        host=host,
        state="failed" if primary else "healthy",
        primary=diagnosis.primary,
        findings=diagnosis.findings,
        engine=diagnosis.engine,
        phase_reached=diagnosis.phase_reached,
        attempts=diagnosis.attempts,
        deployment=deployment,
        first_failure=min(stamps) if stamps else None,
    )


def summarize_fleet(
    per_host: dict[str, Diagnosis],
    skew_tolerance_s: float = DEFAULT_SKEW_TOLERANCE_S,
    deployments: dict[str, str | None] | None = None,
) -> Diagnosis:
    """One report over several hosts. Its top-level ``primary`` and ``findings`` are those of
    the fleet primary's host, so consumers of the single-host contract see the decisive one.
    ``deployments`` names each host's multi-node deployment, when its launch arguments say:
    a waiting host is then only linked to an earlier failure in its own deployment."""
    known = deployments or {}
    reports = [_host_report(host, d, known.get(host)) for host, d in sorted(per_host.items())]
    groups: dict[str, list[HostReport]] = {}
    for report in reports:
        finding = per_host[report.host].finding(report.primary)
        if finding is not None:
            groups.setdefault(finding.signature, []).append(report)
    findings: list[FleetFinding] = []
    for signature, members in groups.items():
        finding = per_host[members[0].host].finding(members[0].primary)
        assert finding is not None
        stamps = [m.first_failure for m in members if m.first_failure]
        findings.append(
            FleetFinding(
                id=f"fleet-{len(findings) + 1}",
                signature=signature,
                category=finding.category,
                title=finding.title,
                role=Role.ROOT_CAUSE,
                hosts=[m.host for m in members],
                first_seen=min(stamps) if stamps else None,
            )
        )
    deployment = {r.host: r.deployment for r in reports}
    findings = _link_waiting(findings, timedelta(seconds=skew_tolerance_s), deployment)
    causes = [f for f in findings if f.role is Role.ROOT_CAUSE]
    decisive = min(causes, key=_order) if causes else None
    primary_host = decisive.hosts[0] if decisive else None
    base = per_host[primary_host] if primary_host else next(iter(per_host.values()))
    return base.model_copy(
        update={
            "inputs": [i for d in per_host.values() for i in d.inputs],
            "notes": [n for d in per_host.values() for n in d.notes],
            "hosts": reports,
            "fleet": Fleet(
                primary=decisive.id if decisive else None,
                primary_host=primary_host,
                findings=findings,
                healthy=[r.host for r in reports if r.state == "healthy"],
                skew_tolerance_s=skew_tolerance_s,
            ),
        }
    )


def _order(finding: FleetFinding) -> tuple[bool, object]:
    return (finding.first_seen is None, finding.first_seen)


def _shares_deployment(a: FleetFinding, b: FleetFinding, deployment: dict[str, str | None]) -> bool:
    """Whether a host of ``a`` and one of ``b`` can be one deployment (unknown: they can)."""
    return any(
        deployment[x] is None or deployment[y] is None or deployment[x] == deployment[y]
        for x in a.hosts
        for y in b.hosts
    )


def _link_waiting(
    findings: list[FleetFinding], skew: timedelta, deployment: dict[str, str | None]
) -> list[FleetFinding]:
    """A waiting failure that began after another host's own error (beyond the skew
    tolerance), on a host that can be of the same deployment, is that error's symptom."""
    own = [f for f in findings if f.category not in WAITING_CATEGORIES and f.first_seen]
    linked = []
    for finding in findings:
        earlier = [
            f
            for f in own
            if finding.category in WAITING_CATEGORIES
            and finding.first_seen
            and f.first_seen
            and f.first_seen + skew < finding.first_seen
            and _shares_deployment(finding, f, deployment)
        ]
        if earlier:
            cause = min(earlier, key=_order)
            finding = finding.model_copy(update={"role": Role.SYMPTOM, "caused_by": cause.id})
        linked.append(finding)
    return linked
