"""Blind judging of the benchmark's cases: the material a reader judges, and the tally.

    python benchmarks/accuracy/judge.py pack --round 3[,4...] --out DIR [--expert DIR]
                                        [--answers NAME=DIR ...] [--assistant DIR] [--no-tool]
                                        [--diagnose PATH]
    python benchmarks/accuracy/judge.py tally --key DIR/key.json --verdicts DIR/verdicts.jsonl

`pack` runs `diagnose` on each case of the round (as score.py does, with the case's own thread
left out), renders its primary finding the plain way `/work/shared/judging.md` describes, puts
it beside any other answers (an expert's from the log alone, `--expert DIR/<case id>.json`;
any other source, `--answers NAME=DIR`; the tool's report with the assistant tier reading a
model's recorded answers to its digests, `--assistant DIR`, as score.py does) under shuffled
labels, and writes one `C<NN>.md` per case with the thread's settled cause and
fix, plus `READER.md` (the rules) and `key.json` (which label is which: keep it from the
reader). `tally` reads the reader's JSON lines and prints, per answer source, right cause,
right fix and no diagnosis, as counts and percentages.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import score

READER_RULES = """# Reading the answers blind

Each `C<NN>.md` holds a real incident's settled root cause and fix (what its public thread
established) and two or more answers, labelled A, B, C in an order that changes per case. One
may be a tool's report, another a person's or a model's reading of the log; do not guess which.
Judge each answer on its own, with nothing but these files.

- **cause**: true when the answer names the settled root cause (the same underlying cause, in
  any words; the right mechanism counts). Restating the error message without the cause behind
  it does not. An answer that lists several candidates is true only when its main claim is
  right. No diagnosis ("unknown", nothing found) is false.
- **fix**: true when doing what the answer says would resolve the incident as settled: the
  settled fix or an equally effective one, complete enough to work (a value raised far enough,
  every wrong flag corrected, a flag that exists in the release the log shows, the right package
  version). Vague advice or a change that would not fix it is false. When alternatives are
  offered, true when one concrete option offered would work. When the thread settled no fix,
  judge whether the fix follows from the settled cause.

Write one JSON line per case to `verdicts.jsonl`:
`{"case": "C07", "A_cause": true, "A_fix": false, "B_cause": true, "B_fix": true, "note": "one sentence on the deciding difference"}`
"""


def tool_answer(report: dict[str, Any]) -> dict[str, Any] | None:
    """The tool's primary finding as an answer, or None when it names no failure."""
    finding = score.primary_finding(report)
    if finding is None or finding.get("category") == "unknown":
        return None
    patch = finding.get("patch") or {}
    system = list(finding.get("system_actions") or [])
    return {
        "category": finding.get("category"),
        "cause": _cause(finding.get("title") or "", finding.get("explanation") or ""),
        "fix": {
            "env_set": patch.get("env_set") or {},
            "env_unset": patch.get("env_unset") or [],
            "args_add": patch.get("args_add") or [],
            "args_remove": patch.get("args_remove") or [],
            "unit_set": patch.get("unit_set") or {},
            "package": finding.get("package"),
            "system": system,
            "note": finding.get("patch_note") or "",
        },
        "checks": list(finding.get("next_checks") or []),
        "alternatives": list(finding.get("alternatives") or [])
        + [f"{h['cause']} (check: {h['check']})" for h in finding.get("hypotheses") or []],
    }


def _cause(title: str, explanation: str) -> str:
    """Title and explanation, the title left out where the explanation opens with it (an
    assistant finding whose title cut its first sentence short)."""
    if explanation.startswith(title.rstrip(".…")):
        return explanation.strip()
    return f"{title}. {explanation}".strip()


def render_answer(label: str, answer: dict[str, Any] | None) -> str:
    """One answer, rendered the same plain way whoever wrote it."""
    if answer is None:
        return f"## Answer {label}\n\nNo diagnosis: no failure named, or the cause is unknown.\n"
    fix = answer.get("fix") or {}
    lines = [f"## Answer {label}", "", f"- category: {answer.get('category')}"]
    lines.append(f"- cause: {answer.get('cause', '').strip()}")
    changes = []
    for key, value in sorted((fix.get("env_set") or {}).items()):
        changes.append(f"set environment {key}={value}")
    changes += [f"unset environment {key}" for key in fix.get("env_unset") or []]
    if fix.get("args_remove"):
        changes.append("remove flags: " + " ".join(map(str, fix["args_remove"])))
    if fix.get("args_add"):
        changes.append("add flags: " + " ".join(map(str, fix["args_add"])))
    changes += [
        f"set {key}={value} in the unit" for key, value in (fix.get("unit_set") or {}).items()
    ]
    package = fix.get("package")
    if package:
        changes.append(f"{package.get('action')} {package.get('name')}{package.get('spec') or ''}")
    changes += [f"on the host: {action}" for action in fix.get("system") or []]
    if fix.get("note"):
        changes.append(f"note: {fix['note']}")
    lines.append("- fix:" + ("" if changes else " none"))
    lines += [f"  - {change}" for change in changes]
    for key in ("checks", "alternatives"):
        if answer.get(key):
            lines.append(f"- {key}:")
            lines += [f"  - {item}" for item in answer[key]]
    return "\n".join(lines) + "\n"


def case_page(number: str, entry: dict[str, Any], answers: list[tuple[str, str]]) -> str:
    settled_fix = entry.get("settled_fix") or "not written down; judge it from the settled cause"
    parts = [
        f"# {number}",
        "",
        f"## Settled root cause\n\n{entry['resolution'].strip()}\n",
        f"## Settled fix\n\n{settled_fix.strip()}\n",
        f"## The log the answers read\n\n```text\n{entry['log'].rstrip()}\n```\n",
    ]
    parts += [text for _, text in answers]
    return "\n".join(parts)


def other_answers(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The answer sources beside the tool's: `--expert DIR`, then each `--answers NAME=DIR`."""
    sources = [("expert", args.expert)] if args.expert else []
    for given in args.answers or []:
        name, equals, folder = given.partition("=")
        if not equals or not name or name == "tool":
            raise score.BadInput(f"--answers {given!r}: expected NAME=DIR, NAME not 'tool'")
        sources.append((name, Path(folder)))
    return sources


def pack(args: argparse.Namespace) -> int:
    rounds = {int(r) for r in args.round.split(",")}
    entries = [
        entry
        for path, kind in score.collect(None)
        if kind == "case" and (entry := score.load_entry(path, kind)).get("round") in rounds
    ]
    if not entries:
        raise score.BadInput(f"no case has `round:` {args.round}")
    with_version = score.supports_engine_version(args.diagnose)
    shuffle = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    key: dict[str, dict[str, str]] = {}
    for index, entry in enumerate(entries, 1):
        number = f"C{index:02d}"
        sources: list[tuple[str, dict[str, Any] | None]] = []
        if not args.no_tool:
            report = score.run_diagnose(args.diagnose, entry, with_version)
            sources.append(("tool", tool_answer(report)))
        if args.assistant is not None:
            report = score.run_diagnose(args.diagnose, entry, with_version, args.assistant)
            sources.append(("assistant", tool_answer(report)))
        for name, folder in other_answers(args):
            answer = folder / f"{entry['id']}.json"
            if answer.is_file():
                sources.append((name, json.loads(answer.read_text(encoding="utf-8"))))
        shuffle.shuffle(sources)
        labels = "ABCDEFGH"[: len(sources)]
        key[number] = {
            "case": entry["id"],
            **{lab: src for lab, (src, _) in zip(labels, sources, strict=True)},
        }
        answers = [
            (lab, render_answer(lab, ans)) for lab, (_, ans) in zip(labels, sources, strict=True)
        ]
        (args.out / f"{number}.md").write_text(case_page(number, entry, answers), encoding="utf-8")
    (args.out / "READER.md").write_text(READER_RULES, encoding="utf-8")
    (args.out / "key.json").write_text(json.dumps(key, indent=2) + "\n", encoding="utf-8")
    print(f"{len(entries)} cases packed in {args.out}; keep key.json from the reader")
    return 0


def tally(args: argparse.Namespace) -> int:
    key = json.loads(args.key.read_text(encoding="utf-8"))
    counts: dict[str, dict[str, int]] = {}
    verdicts = [json.loads(line) for line in args.verdicts.read_text().splitlines() if line.strip()]
    for verdict in verdicts:
        labels = key.get(verdict.get("case"))
        if labels is None:
            raise score.BadInput(f"verdict for an unknown case: {verdict.get('case')!r}")
        for label, source in labels.items():
            if label == "case":
                continue
            tally_of = counts.setdefault(source, {"cases": 0, "cause": 0, "fix": 0})
            tally_of["cases"] += 1
            tally_of["cause"] += bool(verdict.get(f"{label}_cause"))
            tally_of["fix"] += bool(verdict.get(f"{label}_fix"))
    print(f"{'answer':<10}{'cases':>7}{'cause':>14}{'fix':>14}")
    for source, c in sorted(counts.items()):
        n = c["cases"]
        print(
            f"{source:<10}{n:>7}{c['cause']:>6} ({score.percent(c['cause'], n):>5})"
            f"{c['fix']:>6} ({score.percent(c['fix'], n):>5})"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="write the reader's material for one round")
    packing.add_argument("--round", required=True, help="the cases' `round:` values, e.g. 3,4")
    packing.add_argument("--out", type=Path, required=True, help="folder for the material")
    packing.add_argument("--expert", type=Path, help="folder of other answers, <case id>.json")
    packing.add_argument(
        "--answers",
        action="append",
        metavar="NAME=DIR",
        help="another answer source, DIR/<case id>.json (repeatable)",
    )
    packing.add_argument(
        "--assistant",
        type=Path,
        metavar="DIR",
        help="also the tool's report with --ask reading DIR/<case id>.json as the model's answer",
    )
    packing.add_argument(
        "--no-tool", action="store_true", help="leave out the tool's deterministic report"
    )
    packing.add_argument("--seed", type=int, default=0, help="the label shuffle's seed")
    packing.add_argument(
        "--diagnose",
        default=str(Path(sys.executable).with_name("diagnose")),
        help="the diagnose executable (default: the one beside this Python)",
    )
    tallying = commands.add_parser("tally", help="count the reader's verdicts per answer")
    tallying.add_argument("--key", type=Path, required=True)
    tallying.add_argument("--verdicts", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        return pack(args) if args.command == "pack" else tally(args)
    except (score.BadInput, OSError, json.JSONDecodeError) as error:
        print(f"judge.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
