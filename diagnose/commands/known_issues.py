"""``diagnose known-issues``: lint, build, cover and grow the base of known issues."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from diagnose.atomic import write_atomically
from diagnose.core.errors import UserError
from diagnose.core.models import Diagnosis
from diagnose.core.redact import Redactor
from diagnose.knowledge.issue_base import INDEX_NAME, anchors_payload, index_payload
from diagnose.knowledge.issue_lint import Problem, coverage, lint
from diagnose.knowledge.known_issues import THREAD_URL, KnownIssue, load_record
from diagnose.knowledge.location import ANCHORS_NAME

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_PATH = re.compile(r"(?<![\w.])(?:/[\w.@+-]+){2,}/?")
_QUOTED = re.compile(r"'[^'\n]{1,80}'")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)\b:? ")


@dataclass(frozen=True)
class Loaded:
    records: list[KnownIssue]
    problems: list[Problem]


def load(directory: Path) -> Loaded:
    """Every record under ``directory``; a file that does not load is a problem, not a stop."""
    if not directory.is_dir():
        raise UserError(f"{directory}: not a directory of known-issue records")
    records, problems = [], []
    for path in sorted(directory.rglob("*.yaml")):
        try:
            records.append(load_record(path))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            message = first["msg"].removeprefix("Value error, ")
            problems.append(Problem(str(path), f"{where}: {message}"))
        except (ValueError, yaml.YAMLError, OSError) as error:
            problems.append(Problem(str(path), str(error).splitlines()[0]))
    return Loaded(records, problems)


def check(directory: Path) -> list[Problem]:
    """Schema problems, lint problems, and an index out of date."""
    loaded = load(directory)
    problems = [*loaded.problems, *lint(loaded.records)]
    for name, payload in ((INDEX_NAME, index_payload), (ANCHORS_NAME, anchors_payload)):
        path = directory / name
        if not loaded.problems and (
            not path.is_file() or path.read_text(encoding="utf-8") != payload(loaded.records)
        ):
            problems.append(Problem(name, "out of date: run `diagnose known-issues build`"))
    return problems


def build(directory: Path) -> int:
    """Write the index and the anchors of a base with no schema problem; the record count."""
    loaded = load(directory)
    if loaded.problems:
        first = loaded.problems[0]
        raise UserError(
            f"{first.record}: {first.message}",
            help=f"{len(loaded.problems)} record(s) do not load; `diagnose known-issues lint`",
        )
    write_atomically(directory / INDEX_NAME, index_payload(loaded.records))
    write_atomically(directory / ANCHORS_NAME, anchors_payload(loaded.records))
    return len(loaded.records)


def coverage_table(directory: Path) -> str:
    records = load(directory).records
    rows = coverage(records)
    lines = [f"{'engine':<8} {'category':<19} {'records':>7} {'threads':>7}"]
    lines += [f"{e:<8} {c:<19} {n:>7} {t:>7}" for e, c, n, t in rows]
    threads = {thread.url for record in records for thread in record.threads}
    lines.append(f"{'all':<8} {'':<19} {len(records):>7} {len(threads):>7}")
    return "\n".join(lines) + "\n"


def template_of(message: str) -> str:
    """The message with its variable parts as typed holes (numbers, paths, quoted names).

    >>> template_of("Tried to allocate 2.00 GiB on GPU 3 for '/models/x'")
    'Tried to allocate {n1:float} GiB on GPU {n2:int} for {p1}'
    """
    holes = {"n": 0, "p": 0}

    def hole(kind: str, typed: str) -> str:
        holes[kind] += 1
        return f"{{{kind}{holes[kind]}{typed}}}"

    escaped = message.replace("{", "{{").replace("}", "}}")
    escaped = _QUOTED.sub(lambda m: hole("p", ""), escaped)
    escaped = _PATH.sub(lambda m: hole("p", ":path"), escaped)
    return _NUMBER.sub(lambda m: hole("n", ":float" if "." in m.group(0) else ":int"), escaped)


def draft(source: Path, diagnosis: Diagnosis, thread: str, out: Path) -> Path:
    """A record drafted from the first error no signature explains in ``diagnosis``, for the
    user to finish (cause, fix, conditions); written under ``out`` and never over a file."""
    if not THREAD_URL.match(thread):
        raise UserError(
            f"--thread: {thread!r} is not a GitHub issue, pull request or discussion URL",
            help="for example https://github.com/sgl-project/sglang/issues/1234",
        )
    unknown = next((f for f in diagnosis.findings if f.category == "unknown"), None)
    if unknown is None or not unknown.evidence:
        raise UserError(
            f"{source}: no unexplained error in the log: nothing to draft a record from",
            help="a signature or a record already explains it: `diagnose file` shows which",
        )
    lines = [(e.message or e.text).strip() for e in unknown.evidence]
    decisive = next((t for t in lines if _EXCEPTION.match(t)), None) or next(
        (t for t in lines if "Traceback (most recent call last)" not in t), lines[0]
    )
    line = Redactor().text(decisive)
    slug = re.sub(r"[^a-z0-9]+", "-", line.lower()).strip("-")[:48].strip("-") or "record"
    engine = diagnosis.engine or "any"
    component = engine if engine != "any" else "other"
    record_id = f"{component}-{slug}"
    record = {
        "id": record_id,
        "title": "TODO: one line, in your own words",
        "threads": [{"url": thread, "resolution": "reporter-confirmed"}],
        "engine": engine,
        "component": component,
        "category": "TODO",
        "message": {"template": template_of(line)},
        "cause": "TODO: one or two sentences: what the thread established.",
        "fix": {"note": "TODO: the structured change (env_set, args_add, package, system)"},
        "example": {"log": line + "\n"},
    }
    path = out / component / f"{record_id}.yaml"
    if path.exists():
        raise UserError(f"{path}: exists already", help="choose another --out, or edit that one")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=100))
    return path
