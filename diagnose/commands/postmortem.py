"""``diagnose postmortem write -u UNIT`` (what ``diagnose-postmortem@.service`` runs) and
``diagnose postmortems list``: a Markdown and a JSON report of the failed start, kept in
``/var/lib/diagnose/postmortems/UNIT-YYYYmmddTHHMMSSZ.{md,json}``, named by the unit and the
time of the failure's last journal entry."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose.core.errors import UserError
from diagnose.core.redact import redact
from diagnose.inputs.journal import from_usec
from diagnose.render import render
from diagnose.runs.journal import JournalOptions, JournalResult, Say, diagnose_journal
from diagnose.runs.output import write_report

STAMP = "%Y%m%dT%H%M%SZ"
NAME_MAX = 255
"""The longest file name most file systems take, in bytes."""
_NAME = re.compile(r"^(?P<unit>.+)-(?P<stamp>\d{8}T\d{6}Z)\.json$")


@dataclass(frozen=True)
class Written:
    markdown: Path
    json: Path
    result: JournalResult


def _directory(directory: Path) -> None:
    if directory.is_dir():
        return
    try:
        directory.mkdir(mode=0o750, parents=True)
        directory.chmod(0o750)  # mkdir's mode is masked by the umask
    except PermissionError:
        raise UserError(
            f"{directory}: permission denied", help="run as root, or pass --dir DIR"
        ) from None
    except OSError as error:
        raise UserError(f"{directory}: cannot create: {error.strerror}") from None


def report_stem(unit: str, when: datetime, name_max: int = NAME_MAX) -> str:
    """``UNIT-YYYYmmddTHHMMSSZ``; where ``.json`` after it would pass the file system's
    longest name (a unit name may itself be 255 bytes), the unit is cut and a stable hash
    of the whole name keeps it apart from others that start the same way.

    >>> report_stem("a.service", datetime(2026, 3, 3, 11, 53, 31, tzinfo=timezone.utc))
    'a.service-20260303T115331Z'
    >>> stem = report_stem("x" * 250 + ".service", datetime(2026, 3, 3, tzinfo=timezone.utc))
    >>> len(stem + ".json"), stem[-30:]
    (255, '~469261b4bf33-20260303T000000Z')
    """
    stamp = f"-{when.astimezone(timezone.utc).strftime(STAMP)}"
    if len(f"{unit}{stamp}.json".encode()) <= name_max:
        return f"{unit}{stamp}"
    digest = "~" + hashlib.sha256(unit.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    room = name_max - len(f"{digest}{stamp}.json")
    head = unit.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return f"{head}{digest}{stamp}"


def _name_max(directory: Path) -> int:
    """The longest file name ``directory``'s file system takes (255 where it does not say)."""
    try:
        return min(os.pathconf(directory, "PC_NAME_MAX"), NAME_MAX)
    except (OSError, ValueError):
        return NAME_MAX


def write(
    options: JournalOptions,
    directory: Path,
    signature_dirs: list[Path],
    hang_after: float | None,
    warn: Say,
    ask: bool = False,
) -> Written:
    """Diagnose the unit as ``diagnose journal`` does (asking the assistant as it would, with
    ``ask`` or the config's ``when``) and write both reports (redacted); the JSON goes last,
    so a listed JSON always has its Markdown beside it."""
    from diagnose.assistant import settings_if_any

    result = diagnose_journal(options, signature_dirs, hang_after, warn)
    assistant = settings_if_any(ask)
    if assistant is not None and (ask or assistant.when != "never"):
        from diagnose.assistant.sources import journal_opinion

        result.diagnosis = journal_opinion(result, assistant, ask)
    diagnosis = redact(result.diagnosis)
    unit = diagnosis.unit or result.scope.unit
    failed_at = from_usec(result.scope.attempts[-1].last_us)
    _directory(directory)
    stem = report_stem(unit, failed_at, _name_max(directory))
    markdown, report = directory / f"{stem}.md", directory / f"{stem}.json"
    write_report(markdown, render(diagnosis, "markdown"))
    write_report(report, render(diagnosis, "json"))
    return Written(markdown, report, result)


def _row(path: Path, stamp: str, unit: str) -> dict[str, Any]:
    when = datetime.strptime(stamp, STAMP).replace(tzinfo=timezone.utc)
    row: dict[str, Any] = {
        "unit": unit,
        "time": when.isoformat(),
        "signature": None,
        "category": None,
        "title": None,
        "json": str(path),
        "markdown": str(path.with_suffix(".md")) if path.with_suffix(".md").exists() else None,
        "error": None,
    }
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        primary = next(
            (f for f in report.get("findings", []) if f.get("id") == report.get("primary")), None
        )
    except (OSError, ValueError, AttributeError) as error:
        row["error"] = f"unreadable report: {error}"
        return row
    row["unit"] = report.get("unit") or unit
    if primary is not None:
        row |= {k: primary.get(k) for k in ("signature", "category", "title")}
    return row


def listing(directory: Path) -> list[dict[str, Any]]:
    """The reports in ``directory``, newest first (an absent directory holds none)."""
    if not directory.exists():
        return []
    try:
        paths = list(directory.iterdir())
    except PermissionError:
        raise UserError(f"{directory}: permission denied", help="run with sudo") from None
    except OSError as error:
        raise UserError(f"{directory}: cannot read: {error.strerror}") from None
    rows = []
    for path in paths:
        if match := _NAME.match(path.name):
            rows.append((match["stamp"], path.name, _row(path, match["stamp"], match["unit"])))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]), reverse=True)]


def text_line(row: dict[str, Any]) -> str:
    when = row["time"].replace("T", " ").replace("+00:00", "Z")
    what = row["error"] or (
        f"{row['signature']} ({row['category']}): {row['title']}"
        if row["signature"]
        else "no known cause"
    )
    return f"{when}  {row['unit']:<32} {what}\n{'':22}{row['markdown'] or row['json']}"
