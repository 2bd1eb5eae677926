"""``diagnose signatures``: list, show, test, lint and the JSON Schema of the library."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from diagnose.core.engine import ENGINE_VALUES
from diagnose.core.errors import UserError
from diagnose.core.expr import template_fields
from diagnose.core.ranking import choose_patch
from diagnose.core.signature import AbsenceMatch, Pattern, SequenceMatch, Signature
from diagnose.core.signature_file import SignatureFile
from diagnose.library import builtin_dir, load_directory, load_facts, load_signature_files
from diagnose.testing import ExampleResult, check_signature, run_log


def listing(signatures: list[Signature]) -> list[dict[str, str]]:
    rows = sorted(signatures, key=lambda s: (s.category, s.id))
    return [
        {"id": s.id, "category": s.category, "severity": s.severity.value, "title": s.title}
        for s in rows
    ]


def markdown_table(signatures: list[Signature]) -> str:
    """The README's table of signatures, made from the library."""
    lines = ["| id | category | severity | what it means |", "|---|---|---|---|"]
    for row in listing(signatures):
        lines.append(f"| `{row['id']}` | {row['category']} | {row['severity']} | {row['title']} |")
    return "\n".join(lines) + "\n"


def find(signature_id: str, signature_dirs: list[Path]) -> SignatureFile:
    for signature in load_signature_files(signature_dirs):
        if signature.id == signature_id:
            return signature
    raise UserError(
        f"no signature {signature_id!r}", help="`diagnose signatures list` shows the ids"
    )


def show(signature: SignatureFile) -> str:
    """The signature as YAML, defaults left out, so it reads like the file that defines it."""
    data = signature.model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def explain(signature: SignatureFile) -> str:
    """What a signature means, in prose: for a reader, not for the engine.

    Texts that depend on the incident keep their ``{placeholders}``; conditional parts are
    marked with the condition that shows them."""

    def conditional(text: str, when: list[str]) -> str:
        return f"{text} [when {' and '.join(when)}]" if when else text

    out = [signature.title, "=" * len(signature.title), ""]
    engines = ", ".join(signature.engines)
    out.append(
        f"{signature.id}: {signature.category}, {signature.severity.value}, "
        f"{signature.confidence.value} confidence, {signature.role.value}; engines: {engines}"
    )
    if signature.versions is not None:
        out.append(f"versions: {signature.versions.model_dump(exclude_none=True)}")
    out += ["", *(conditional(t.text, t.when) for t in signature.explanation)]
    if signature.patches:
        out += ["", "Fix:"]
        for patch in signature.patches:
            changes = [
                *(f"set {key}={value}" for key, value in patch.env_set.items()),
                *(f"unset {key}" for key in patch.env_unset),
                *([f"remove {' '.join(patch.args_remove)}"] if patch.args_remove else []),
                *([f"add {' '.join(patch.args_add)}"] if patch.args_add else []),
                *(f"{key}={value}" for key, value in patch.unit_set.items()),
            ]
            line = "; ".join(changes) or "no configuration change"
            out.append("  - " + conditional(line, patch.when))
    if signature.patch_note:
        out.append(f"  ({signature.patch_note})")
    for heading, items in (
        ("Or:", signature.alternatives),
        ("Next checks:", signature.next_checks),
    ):
        if items:
            out += ["", heading, *(f"  - {conditional(t.text, t.when)}" for t in items)]
    if signature.references:
        out += ["", "References:", *(f"  {reference}" for reference in signature.references)]
    examples = signature.examples
    out += [
        "",
        f"{len(examples.positive)} positive and {len(examples.negative)} negative "
        f"examples: diagnose signatures show {signature.id}",
    ]
    return "\n".join(out) + "\n"


def schema() -> str:
    return json.dumps(SignatureFile.model_json_schema(), indent=2, sort_keys=True) + "\n"


def test(directory: Path | None) -> list[ExampleResult]:
    results: list[ExampleResult] = []
    for signature in load_directory(directory or builtin_dir()):
        results.extend(check_signature(signature))
    return results


@dataclass
class LintProblem:
    signature: str
    message: str


def _main_patterns(signature: Signature) -> list[Pattern]:
    match = signature.match
    if isinstance(match, SequenceMatch):
        return list(match.steps)
    if isinstance(match, AbsenceMatch):
        return [match.after]
    return [match]


def lint(signatures: list[SignatureFile]) -> list[LintProblem]:
    """What the loader cannot refuse but a reviewer would: untested needles and patches."""
    problems: list[LintProblem] = []
    fact_names = {name for fact in load_facts() for name in fact.compiled.groupindex}
    for signature in signatures:

        def problem(message: str, sid: str = signature.id) -> None:
            problems.append(LintProblem(sid, message))

        positives = [e.log for e in signature.examples.positive]
        for pattern in _main_patterns(signature):
            if not pattern.needles:
                problem(f"pattern {pattern.regex[:40]!r} has no needles: it runs on every line")
            elif not any(n in log for n in pattern.needles for log in positives):
                problem(f"no positive example contains any needle of {pattern.regex[:40]!r}")
        if not signature.references:
            problem("no references: link the upstream issue or documentation")
        if not signature.patches and not signature.patch_note:
            problem("no patch and no patch_note saying why no config change helps")
        chosen = set()
        for example in signature.examples.positive:
            engine, log = run_log([signature], example.log)
            engine.finish(inputs=[log.summary()])
            values = engine.values.get(signature.id)
            if values is not None:
                chosen.add(choose_patch(signature, values))
        for index in range(len(signature.patches)):
            if index not in chosen:
                problem(f"patches[{index}] is chosen by no positive example")
        for field in sorted(_unfilled_fields(signature, fact_names)):
            problem(
                f"its text names {{{field}}}, which no pattern captures, no derive computes and "
                "no fact gives: the sentence is never shown (write a literal brace as {{ or }})"
            )
        for pattern in signature.patterns():
            slow = backtracking_input(pattern, positives)
            if slow is not None:
                problem(
                    f"regex {pattern.regex[:40]!r} runs past {BACKTRACK_BUDGET_S:g}s on "
                    f"{slow}: it backtracks; make its repeats unambiguous (no nested or "
                    "adjacent quantifiers over the same characters)"
                )
    return problems


def _unfilled_fields(signature: Signature, fact_names: set[str]) -> set[str]:
    """Template fields of what a finding reports (texts, packages, patches) that nothing
    fills: a sentence naming one is dropped at run time."""
    known = set(ENGINE_VALUES) | fact_names | set(signature.derive)
    for pattern in signature.patterns():
        known |= set(pattern.compiled.groupindex)
    fields: set[str] = set()
    for text in signature.reported_templates():
        fields |= template_fields(text)
    return fields - known


BACKTRACK_BUDGET_S = 0.25
"""What a regex may take on one adversarial line of ``ADVERSARIAL_BYTES``: a linear regex takes
about a millisecond; one that backtracks takes seconds or never ends."""

ADVERSARIAL_BYTES = 32 << 10
_FILLERS = (" ", "a", "0", "-", ".", "/", ":", "=", "\t", "x ", "a=", "0.")


def adversarial_lines(pattern: Pattern, positives: list[str]) -> list[tuple[str, str]]:
    """(what, line) pairs a regex meets in a hostile log: each needle, and each positive
    example line, followed by a long run of one filler and a character that fails the match;
    and the second half of an example line repeated."""
    heads = [*pattern.needles]
    heads += [line for log in positives for line in log.splitlines() if line.strip()][:6]
    lines = []
    for head in heads:
        for filler in _FILLERS:
            run = filler * (ADVERSARIAL_BYTES // len(filler))
            lines.append(
                (f"{head[:30]!r} + {filler!r} x {len(run) // len(filler)}", head + run + "\x00")
            )
        tail = head[len(head) // 2 :] or head
        repeated = head + tail * (ADVERSARIAL_BYTES // max(1, len(tail)))
        lines.append(
            (f"{head[:30]!r} with its end repeated", repeated[:ADVERSARIAL_BYTES] + "\x00")
        )
    return lines


def backtracking_input(pattern: Pattern, positives: list[str]) -> str | None:
    """The adversarial line on which ``pattern`` runs past the budget, or None. A line is
    tried again before it counts: the budget is wall time, which a loaded machine can spend
    on a linear regex once; a backtracking one runs past it every time."""
    for what, line in adversarial_lines(pattern, positives):
        if all(_runs_past_budget(pattern, line) for _ in range(BACKTRACK_TRIES)):
            return what
    return None


BACKTRACK_TRIES = 3
"""How many times a line must run past the budget to count as backtracking."""


def _runs_past_budget(pattern: Pattern, line: str) -> bool:
    try:
        pattern.compiled.search(line, timeout=BACKTRACK_BUDGET_S)
    except TimeoutError:
        return True
    return False
