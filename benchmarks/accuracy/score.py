"""Score `diagnose` against the real-incident benchmark in this folder.

    python benchmarks/accuracy/score.py [--filter PATTERN] [--json OUT] [--diagnose PATH]
                                        [--digests DIR] [--assistant replay:DIR]

Each case under `cases/` is a log posted in a public thread plus the answer that thread settled
on; each log under `healthy/` comes from a server that started and served. Every log is run
through `diagnose file LOG --format json` with DIAGNOSE_EXCLUDE_THREADS set to the case's thread,
so knowledge drawn from that very thread cannot answer it. The script prints a table per engine
and per tier, then one line per case the tool got wrong. It is a measurement: it exits 0 whatever
the figures, and 2 only when a case file is malformed or the tool cannot be run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CATEGORIES = {
    "spec_decode_config", "dist_init_hang", "nccl_runtime", "gpu_oom", "host_oom", "gpu_busy",
    "port_in_use", "restart_loop", "start_timeout", "unit_config", "launch_args",
    "model_access", "model_unsupported", "chat_template", "context_length", "gpu_arch_support",
    "cuda_driver", "kernel_build", "gpu_hardware", "network_config", "unknown",
}  # fmt: skip
FIX_KEYS = {"env_set", "args_add", "args_remove", "unit_set", "package", "system"}
DEPLOYMENTS = {"systemd", "docker", "kubernetes"}
CONTEXT_FORM = {"kubernetes": "kubernetes", "docker": "compose"}
PACKAGE_ACTIONS = {"upgrade", "downgrade", "pin", "install", "reinstall"}


class BadInput(Exception):
    """A case file that does not follow the format in README.md."""


@dataclass
class Result:
    """How the tool did on one log."""

    id: str
    kind: str  # "case" or "healthy"
    engine: str
    expected: str | None
    got: str | None
    signature: str | None
    tier: str | None
    right_cause: bool = False
    right_fix: bool = False
    unknown: bool = False
    false_alarm: bool = False
    deployment: str | None = None  # what the thread says ran the server
    seen_deployment: str | None = None  # what the report read from the log alone
    context_patch: str | None = None  # told the deployment: "form", "note" or "none" (None: no fix)


def load_entry(path: Path, kind: str) -> dict[str, Any]:
    """Read one case or healthy file and check the keys the scorer relies on."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise BadInput(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a mapping at the top level")
    for key in ("id", "source", "engine", "log"):
        if not data.get(key):
            raise BadInput(f"{path}: missing `{key}`")
    if data["id"] != path.stem:
        raise BadInput(f"{path}: `id` must equal the file stem {path.stem!r}")
    if kind == "case":
        expected = data.get("expected")
        if not isinstance(expected, dict) or expected.get("category") not in CATEGORIES:
            raise BadInput(f"{path}: `expected.category` must be one of the contract categories")
        for category in expected.get("also_accept") or []:
            if category not in CATEGORIES:
                raise BadInput(f"{path}: unknown category {category!r} in `also_accept`")
        fix = expected.get("fix")
        if fix is not None and (not isinstance(fix, dict) or set(fix) - FIX_KEYS):
            raise BadInput(f"{path}: `expected.fix` keys must be among {sorted(FIX_KEYS)}")
        if data.get("deployment") not in (None, *DEPLOYMENTS):
            raise BadInput(f"{path}: `deployment` must be one of {sorted(DEPLOYMENTS)}")
        package = (fix or {}).get("package")
        if package is not None and package.get("action") not in PACKAGE_ACTIONS:
            raise BadInput(f"{path}: package action must be one of {sorted(PACKAGE_ACTIONS)}")
    return data


def file_options(diagnose: str) -> str:
    """The help of this build's `diagnose file`: which options it takes."""
    return subprocess.run(
        [diagnose, "file", "--help"], capture_output=True, text=True, check=False
    ).stdout


def supports_engine_version(diagnose: str) -> bool:
    """Whether this build of `diagnose file` takes --engine-version."""
    return "--engine-version" in file_options(diagnose)


def run_tool(
    diagnose: str,
    entry: dict[str, Any],
    with_version: bool,
    options: list[str],
    extra_env: dict[str, str] | None = None,
) -> str:
    """Run `diagnose file LOG OPTIONS` on the entry's log, leaving its own thread out; its stdout.
    The log is always named `server.log`: its name is in a digest, and must not give the case's
    answer away."""
    with tempfile.TemporaryDirectory() as folder:
        log_path = Path(folder) / "server.log"
        log_path.write_text(entry["log"], encoding="utf-8")
        command = [diagnose, "file", str(log_path), *options]
        if with_version and entry.get("version"):
            command += ["--engine-version", f"{entry['engine']}=={entry['version']}"]
        env = dict(os.environ, DIAGNOSE_EXCLUDE_THREADS=entry["source"], **(extra_env or {}))
        completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if completed.returncode not in (0, 1):
        raise BadInput(f"{entry['id']}: diagnose exited {completed.returncode}: "
                       f"{completed.stderr.strip()[-500:]}")  # fmt: skip
    return completed.stdout


def run_diagnose(
    diagnose: str,
    entry: dict[str, Any],
    with_version: bool,
    answers: Path | None = None,
    deployment: str | None = None,
) -> dict[str, Any]:
    """The tool's JSON report on the entry's log; with ``answers``, the model's recorded answer
    ANSWERS/<id>.json read through `--ask` exactly as a live one (checked, and shown only when
    it passes), from no server; ``deployment``: told what ran the server, as `diagnose k8s` and
    `diagnose docker` know."""
    options = ["--format", "json"]
    if deployment:
        options += ["--deployment", deployment]
    env = {}
    if answers is not None and (answers / f"{entry['id']}.json").is_file():
        options.append("--ask")
        env = {"DIAGNOSE_ASSISTANT_URL": f"replay:{answers / (entry['id'] + '.json')}"}
    report: dict[str, Any] = json.loads(run_tool(diagnose, entry, with_version, options, env))
    return report


def write_digest(diagnose: str, entry: dict[str, Any], with_version: bool, folder: Path) -> None:
    """Write what `--ask` would send for the entry's log to FOLDER/<id>.txt."""
    digest = run_tool(diagnose, entry, with_version, ["--show-digest"])
    (folder / f"{entry['id']}.txt").write_text(digest, encoding="utf-8")


def primary_finding(report: dict[str, Any]) -> dict[str, Any] | None:
    """The finding the report names as the root cause, if any."""
    for finding in report.get("findings", []):
        if finding.get("id") == report.get("primary"):
            return dict(finding)
    return None


def finding_prose(finding: dict[str, Any]) -> str:
    """Every piece of advice a finding gives, lower-cased, for keyword checks."""
    parts: list[str] = [finding.get("explanation") or "", finding.get("patch_note") or ""]
    for key in ("system_actions", "next_checks", "alternatives"):
        parts += [str(item) for item in finding.get(key) or []]
    return "\n".join(parts).lower()


def names_cause(finding: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The finding's category is accepted and it points at the decisive line."""
    accepted = {expected["category"], *(expected.get("also_accept") or [])}
    if finding.get("category") not in accepted:
        return False
    needle = (expected.get("evidence") or "").lower()
    if not needle:
        return True
    texts = [item.get("text") or "" for item in finding.get("evidence", [])]
    texts += [item.get("message") or "" for item in finding.get("evidence", [])]
    texts.append(finding.get("explanation") or "")
    return any(needle in text.lower() for text in texts)


def flag_pairs(tokens: list[str]) -> dict[str, str | None]:
    """Map each `-`flag in a flat token list to the value after it (None for a bare switch)."""
    pairs: dict[str, str | None] = {}
    for index, token in enumerate(tokens):
        if token.startswith("-"):
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            pairs[token] = None if following is None or following.startswith("-") else following
    return pairs


RENAMED_PROJECTS = {"flashinfer": "flashinfer-python"}
"""Distributions that one project published under two names: FlashInfer's early wheels (its own
index) were `flashinfer`, its PyPI releases are `flashinfer-python`."""


def project(name: str) -> str:
    """A distribution name as the package index compares it (PEP 503), one name per project."""
    normal = re.sub(r"[-_.]+", "-", name).lower()
    return RENAMED_PROJECTS.get(normal, normal)


def covers_package(finding: dict[str, Any], wanted: dict[str, str]) -> bool:
    """The finding asks for the same package change, as a key or failing that in its prose."""
    given = finding.get("package")
    if isinstance(given, dict):  # `pkg[extra]` installs `pkg` too
        name = str(given.get("name") or "").split("[", 1)[0]
        return bool(
            project(name) == project(wanted["name"]) and given.get("action") == wanted["action"]
        )
    prose = finding_prose(finding)
    action_words = {"reinstall": "install"}
    action_word = action_words.get(wanted["action"], wanted["action"])
    return wanted["name"].lower() in prose and action_word in prose


def covers_fix(finding: dict[str, Any], fix: dict[str, Any]) -> bool:
    """Every part of the expected fix appears in the finding's patch or advice."""
    patch = finding.get("patch") or {}
    env = patch.get("env_set") or {}
    for name, value in (fix.get("env_set") or {}).items():
        if name not in env or (value != "" and str(env[name]) != str(value)):
            return False
    given_args = flag_pairs([str(token) for token in patch.get("args_add") or []])
    for flag, value in flag_pairs([str(token) for token in fix.get("args_add") or []]).items():
        if flag not in given_args or (value not in (None, "") and given_args[flag] != value):
            return False
    removed = {str(token) for token in patch.get("args_remove") or []}
    if any(flag not in removed for flag in fix.get("args_remove") or []):
        return False
    unit = patch.get("unit_set") or {}
    if any(key not in unit for key in fix.get("unit_set") or {}):
        return False
    if fix.get("package") and not covers_package(finding, fix["package"]):
        return False
    prose = finding_prose(finding)
    return all(keyword.lower() in prose for keyword in fix.get("system") or [])


def score_case(entry: dict[str, Any], report: dict[str, Any]) -> Result:
    """Judge one case report against the thread's resolution."""
    expected = entry["expected"]
    finding = primary_finding(report)
    result = Result(
        id=entry["id"],
        kind="case",
        engine=entry["engine"],
        expected=expected["category"],
        got=finding.get("category") if finding else None,
        signature=finding.get("signature") if finding else None,
        tier=(finding.get("tier") or "signature") if finding else None,
    )
    result.unknown = finding is None or finding.get("category") == "unknown"
    if finding is None:
        return result
    result.right_cause = names_cause(finding, expected)
    if result.right_cause:
        fix = expected.get("fix")
        if "fix" not in expected:
            result.right_fix = True  # the thread settled the cause but not one fix
        elif fix is None:
            result.right_fix = finding.get("patch") is None
        else:
            result.right_fix = covers_fix(finding, fix)
    return result


def score_deployment(
    result: Result, entry: dict[str, Any], report: dict[str, Any], told: dict[str, Any] | None
) -> None:
    """The deployment read from the log alone, and, told the deployment, whether the primary
    finding's fix comes in its form (a patch object, or a note on what has no meaning there)."""
    result.deployment = entry.get("deployment")
    result.seen_deployment = (report.get("deployment") or {}).get("kind")
    finding = primary_finding(told) if told is not None else None
    patch = (finding or {}).get("patch")
    if result.deployment in CONTEXT_FORM and patch is not None:
        form = patch.get(CONTEXT_FORM[result.deployment])
        result.context_patch = "form" if form else "note" if patch.get("context_note") else "none"


def score_healthy(entry: dict[str, Any], report: dict[str, Any]) -> Result:
    """A healthy log is scored only on whether the tool raised a false alarm."""
    finding = primary_finding(report)
    return Result(
        id=entry["id"],
        kind="healthy",
        engine=entry["engine"],
        expected=None,
        got=finding.get("category") if finding else None,
        signature=finding.get("signature") if finding else None,
        tier=(finding.get("tier") or "signature") if finding else None,
        false_alarm=report.get("primary") is not None,
    )


def percent(part: int, whole: int) -> str:
    """`part` as a whole-number percentage of `whole`."""
    return f"{100 * part / whole:.0f}%" if whole else "-"


def print_tables(results: list[Result]) -> None:
    """Per-engine and per-tier figures, then the cases the tool got wrong."""
    cases = [result for result in results if result.kind == "case"]
    healthy = [result for result in results if result.kind == "healthy"]
    header = f"{'':<18}{'cases':>6}{'cause':>8}{'unknown':>9}{'fix':>7}{'healthy':>9}{'alarms':>8}"
    for title, key in (("engine", "engine"), ("tier", "tier")):
        groups: dict[str, list[Result]] = defaultdict(list)
        for result in results:
            groups[str(getattr(result, key) or "none")].append(result)
        groups["all"] = results
        print(f"by {title}\n{header}")
        for name, members in groups.items():
            group_cases = [m for m in members if m.kind == "case"]
            group_healthy = [m for m in members if m.kind == "healthy"]
            print(
                f"{name:<18}{len(group_cases):>6}"
                f"{percent(sum(m.right_cause for m in group_cases), len(group_cases)):>8}"
                f"{percent(sum(m.unknown for m in group_cases), len(group_cases)):>9}"
                f"{percent(sum(m.right_fix for m in group_cases), len(group_cases)):>7}"
                f"{len(group_healthy):>9}{sum(m.false_alarm for m in group_healthy):>8}"
            )
        print()
    print_deployments(cases)
    wrong = [result for result in cases if not result.right_cause]
    if wrong:
        print("wrong cause (id: expected -> got [signature])")
    for result in wrong:
        print(f"  {result.id}: {result.expected} -> {result.got} [{result.signature}]")
    for result in healthy:
        if result.false_alarm:
            print(f"  false alarm {result.id}: {result.got} [{result.signature}]")


def print_deployments(cases: list[Result]) -> None:
    """Cases whose thread names the deployment: read from the log alone (seen), and, told the
    deployment, of the primary findings with a fix: those in its form (a patch object), and
    those that only say in words what the form cannot hold (flags without the record)."""
    labelled = [c for c in cases if c.deployment]
    if not labelled:
        return
    print("by deployment (cases whose thread names it)")
    print(f"{'':<18}{'cases':>6}{'seen':>8}{'with fix':>10}{'in form':>9}{'said':>7}")
    groups: dict[str, list[Result]] = defaultdict(list)
    for case in labelled:
        groups[str(case.deployment)].append(case)
    groups["all"] = labelled
    for name, members in groups.items():
        fixed = [m for m in members if m.context_patch is not None]
        print(
            f"{name:<18}{len(members):>6}"
            f"{percent(sum(m.seen_deployment == m.deployment for m in members), len(members)):>8}"
            f"{len(fixed):>10}"
            f"{percent(sum(m.context_patch == 'form' for m in fixed), len(fixed)):>9}"
            f"{percent(sum(m.context_patch == 'note' for m in fixed), len(fixed)):>7}"
        )
    print()


def collect(pattern: str | None) -> list[tuple[Path, str]]:
    """The case and healthy files to score, optionally only those whose stem contains PATTERN."""
    found = [(path, "case") for path in sorted((HERE / "cases").glob("*.yaml"))]
    found += [(path, "healthy") for path in sorted((HERE / "healthy").glob("*.yaml"))]
    return [(path, kind) for path, kind in found if not pattern or pattern in path.stem]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", help="only files whose name contains this text")
    parser.add_argument("--json", type=Path, help="write per-case results to this file")
    parser.add_argument(
        "--diagnose",
        default=str(Path(sys.executable).with_name("diagnose")),
        help="the diagnose executable (default: the one beside this Python)",
    )
    parser.add_argument(
        "--digests",
        type=Path,
        metavar="DIR",
        help="also write each log's digest, exactly what --ask would send, to DIR/<id>.txt",
    )
    parser.add_argument(
        "--assistant",
        metavar="replay:DIR",
        help="score the assistant tier from recorded answers: DIR/<id>.json holds the message "
        "text a model returned for DIR's digest (see --digests); no network",
    )
    args = parser.parse_args(argv)
    answers = None
    if args.assistant is not None:
        if not args.assistant.startswith("replay:") or not Path(args.assistant[7:]).is_dir():
            print("score.py: --assistant: expected replay:DIR with DIR a folder", file=sys.stderr)
            return 2
        answers = Path(args.assistant[7:])
    try:
        if args.digests is not None:
            args.digests.mkdir(parents=True, exist_ok=True)
        entries = [(load_entry(path, kind), kind) for path, kind in collect(args.filter)]
        if not entries:
            raise BadInput("no case or healthy files matched")
        options = file_options(args.diagnose)
        with_version = "--engine-version" in options
        results = []
        for entry, kind in entries:
            report = run_diagnose(args.diagnose, entry, with_version, answers)
            if args.digests is not None:
                write_digest(args.diagnose, entry, with_version, args.digests)
            score = score_case if kind == "case" else score_healthy
            results.append(score(entry, report))
            if kind == "case" and entry.get("deployment"):
                told = (
                    run_diagnose(args.diagnose, entry, with_version, deployment=entry["deployment"])
                    if "--deployment" in options
                    else None
                )
                score_deployment(results[-1], entry, report, told)
    except (BadInput, OSError, json.JSONDecodeError) as error:
        print(f"score.py: {error}", file=sys.stderr)
        return 2
    print_tables(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
