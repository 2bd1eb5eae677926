"""Checks on the known-issue base beyond its schema, and its coverage table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from diagnose.knowledge.issue_base import IssueBase
from diagnose.knowledge.known_issues import KnownIssue


@dataclass(frozen=True)
class Problem:
    record: str
    message: str
    error: bool = True


def lint(records: Sequence[KnownIssue]) -> list[Problem]:
    """Duplicate ids, wordings claimed twice for one engine (both engines may print one message
    and need different fixes), records whose own example does not reach them, and records
    that another record's wording also claims (the base could not tell them apart)."""
    problems: list[Problem] = []
    for record_id, count in Counter(r.id for r in records).items():
        if count > 1:
            problems.append(Problem(record_id, f"the id is used by {count} records"))
    owners: dict[str, list[KnownIssue]] = {}
    for record in records:
        for text in (record.message.template, *record.message.also):
            rival = next((o for o in owners.get(text, []) if _same_engine(o, record)), None)
            if rival is not None and rival.id != record.id:
                problems.append(Problem(record.id, f"same wording as {rival.id}: {text!r}"))
            owners.setdefault(text, []).append(record)
    base = IssueBase(records)
    for record in records:
        lines = [line for line in record.example.log.splitlines() if line.strip()]
        matches = base.match(lines, engine=None if record.engine == "any" else record.engine)
        claimed = [m.record.id for m in matches]
        if record.id not in claimed:
            problems.append(Problem(record.id, "its example log does not match its own message"))
            continue
        rivals = [m.record for m in matches if m.record.id != record.id]
        for rival in rivals:
            if rival.category != record.category:
                problems.append(
                    Problem(
                        record.id,
                        f"its example also matches {rival.id} ({rival.category}, "
                        f"not {record.category}); make one wording more specific",
                        error=False,
                    )
                )
    return problems


def _same_engine(first: KnownIssue, second: KnownIssue) -> bool:
    return "any" in (first.engine, second.engine) or first.engine == second.engine


def coverage(records: Sequence[KnownIssue]) -> list[tuple[str, str, int, int]]:
    """(engine, category, records, distinct threads) rows, largest first."""
    records_by: Counter[tuple[str, str]] = Counter()
    threads_by: dict[tuple[str, str], set[str]] = {}
    for record in records:
        key = (record.engine, record.category)
        records_by[key] += 1
        threads_by.setdefault(key, set()).update(t.url for t in record.threads)
    rows = [(e, c, n, len(threads_by[(e, c)])) for (e, c), n in records_by.items()]
    return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))
