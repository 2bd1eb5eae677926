"""``diagnose verify -u UNIT``: after a fix, is the last failure gone, and is the server up?

The newest start attempt and the last failed one before it are diagnosed apart (each alone,
as if it were the only attempt), or the newest against a saved report (``--compare``: a
``diagnose journal -f json`` report or a postmortem's JSON). The previous primary finding is
looked for in the newest attempt, and the newest attempt's furthest phase says whether the
server reached ``ready``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose.core.errors import ExitCode, UserError
from diagnose.core.models import Diagnosis
from diagnose.core.verification import AttemptSummary, Verification
from diagnose.inputs import journal as source
from diagnose.runs.journal import JournalOptions, Say, diagnose_scope, journal_query

LOOK_BACK = 20
"""Start attempts read back from the newest, to find the last failed one."""


def _summary(attempt: source.Attempt, diagnosis: Diagnosis) -> AttemptSummary:
    primary = diagnosis.finding(diagnosis.primary)
    return AttemptSummary(
        invocation=attempt.invocation,
        started_at=source.from_usec(attempt.first_us),
        ended_at=source.from_usec(attempt.last_us) if attempt.ended else None,
        result=attempt.result or (f"status={attempt.exit_status}" if attempt.exit_status else None),
        signature=primary.signature if primary else None,
        category=primary.category if primary else None,
        title=primary.title if primary else None,
        phase_reached=diagnosis.phase_reached,
    )


def _from_report(path: Path, unit: str) -> tuple[AttemptSummary, datetime | None]:
    """The previous attempt as a saved report tells it, and the time after which an attempt
    is a new one (its primary's last evidence, else its last input line)."""
    try:
        report: Any = json.loads(path.read_text(encoding="utf-8"))
        summary = _summary_of(report, path, unit)
    except OSError as error:
        raise UserError(f"--compare {path}: cannot read: {error.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise UserError(
            f"--compare {path}: not a diagnose JSON report",
            help="pass a report of diagnose journal -f json, or a postmortem's .json",
        ) from None
    return summary, summary.ended_at


def _summary_of(report: dict[str, Any], path: Path, unit: str) -> AttemptSummary:
    """The report's primary finding; any part of the wrong shape raises ``ValueError``,
    ``KeyError``, ``TypeError`` or ``AttributeError``."""
    findings = report["findings"]
    primary = next((f for f in findings if f["id"] == report["primary"]), None)
    if report.get("unit") and report["unit"] != unit:
        raise UserError(f"--compare {path}: the report is about {report['unit']}, not {unit}")
    stamps = [
        datetime.fromisoformat(e["timestamp"])
        for e in (primary or {}).get("evidence", [])
        if e.get("timestamp")
    ] or [
        datetime.fromisoformat(i["last_ts"]) for i in report.get("inputs", []) if i.get("last_ts")
    ]
    aware = [s if s.tzinfo else s.replace(tzinfo=timezone.utc) for s in stamps]
    return AttemptSummary(
        signature=primary["signature"] if primary else None,
        category=primary["category"] if primary else None,
        title=primary["title"] if primary else None,
        phase_reached=report.get("phase_reached"),
        ended_at=max(aware, default=None),
        report=str(path),
    )


def _verdict(
    previous: AttemptSummary, newest: AttemptSummary, attempt: source.Attempt
) -> tuple[bool, str | None, str]:
    """(fixed, new failure, verdict) for the two summaries."""
    old, new = previous.signature, newest.signature
    ready = newest.phase_reached == "ready"
    if old is not None and new == old:
        still = f"not fixed: {old} ({previous.title}) is still there in the newest attempt"
        return False, None, still
    gone = f"{old} is gone" if old else "the previous attempt had no known cause"
    if new is not None:
        then = "reached ready, then failed" if ready else "failed"
        return True, new, f"{gone}, but the newest attempt {then} with {new} ({newest.title})"
    if ready:
        return True, None, f"fixed: {gone} and the server reached ready"
    phase = newest.phase_reached or "no startup phase"
    if attempt.ended and attempt.failed:
        how = f" ({newest.result})" if newest.result else ""
        state = f"failed{how} without a known cause, after reaching {phase}"
    elif attempt.ended:
        state = f"stopped before ready (at {phase})"
    else:
        state = f"is still starting (at {phase})"
    return old is not None, None, f"{gone}, but the newest attempt {state}"


def verify(
    options: JournalOptions,
    compare: Path | None,
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Say,
    look_back: int = LOOK_BACK,
) -> Verification:
    options = replace(options, gpu=False, invocations=None)  # GPUs now say nothing about then
    query = journal_query(options)
    backend = source.open_backend(query.location, options.reader)
    scan = source.recent_attempts(query, backend, look_back)
    if not scan.attempts:
        raise UserError(
            f"{query.unit}: no start attempts in {query.location.describe()}",
            help="check the unit name, and that you may read the journal (sudo, systemd-journal)",
        )
    newest_attempt = scan.attempts[-1]
    notes = list(scan.notes)

    def diagnose(attempt: source.Attempt) -> Diagnosis:
        scope = source.read_attempts(backend, scan, [attempt])
        return diagnose_scope(scope, query, options, signature_dirs, hang_after, warn).diagnosis

    newest_diagnosis = diagnose(newest_attempt)
    newest = _summary(newest_attempt, newest_diagnosis)
    if compare is not None:
        previous, after = _from_report(compare, query.unit)
        if after is not None and newest_attempt.first_us <= round(after.timestamp() * 1e6):
            return Verification(
                unit=query.unit,
                previous=previous,
                newest=newest,
                fixed=False,
                reached_ready=False,
                verdict="not verified: no start attempt since the report "
                f"(its last line is at {after.isoformat()}); restart the unit first",
                notes=notes,
            )
    else:
        failed = [a for a in scan.attempts[:-1] if a.failed]
        if not failed:
            raise UserError(
                f"{query.unit}: no failed start attempt before the newest one "
                f"(in the last {len(scan.attempts)})",
                help="pass --compare REPORT.json (a saved diagnose report or postmortem)",
            )
        previous = _summary(failed[-1], diagnose(failed[-1]))
    fixed, new_failure, verdict = _verdict(previous, newest, newest_attempt)
    return Verification(
        unit=query.unit,
        previous=previous,
        newest=newest,
        fixed=fixed,
        reached_ready=newest.phase_reached == "ready",
        new_failure=new_failure,
        verdict=verdict,
        notes=notes,
    )


def exit_code(verification: Verification) -> ExitCode:
    """0 when the old finding is gone and the server reached ready with no new failure."""
    if verification.fixed and verification.reached_ready and verification.new_failure is None:
        return ExitCode.OK
    return ExitCode.FINDINGS


def render_text(verification: Verification) -> str:
    def line(label: str, summary: AttemptSummary) -> str:
        where = summary.report or (summary.invocation or "?")[:12]
        when = summary.started_at or summary.ended_at
        stamp = when.strftime("%Y-%m-%d %H:%M:%S") if when else "-"
        found = summary.signature or "no known cause"
        return (
            f"  {label:<9} {stamp}  {where:<12}  {found}  (reached {summary.phase_reached or '-'})"
        )

    out = [
        f"{verification.unit}: {verification.verdict}",
        line("previous", verification.previous),
        line("newest", verification.newest),
    ]
    out += [f"  note: {note}" for note in verification.notes]
    if verification.new_failure:
        out.append(f"  run diagnose journal -u {verification.unit} for the new failure's fix")
    return "\n".join(out) + "\n"
