"""The example harness: runs each signature's positive and negative examples.

The test suite and ``diagnose signatures test`` both use it, so a user's own signatures are
checked exactly as the built-in ones are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnose.core import expr
from diagnose.core.engine import Engine
from diagnose.core.signature import Signature
from diagnose.core.signature_file import Example, SignatureFile
from diagnose.inputs.files import LogInput
from diagnose.inputs.pipeline import run_logs
from diagnose.library import load_facts


@dataclass
class ExampleResult:
    signature: str
    case: str
    positive: bool
    passed: bool
    problems: list[str]
    xfail: str | None = None

    @property
    def test_id(self) -> str:
        return f"{self.signature}::{self.case}"


def run_log(
    signatures: list[Signature], text: str, name: str = "example.log"
) -> tuple[Engine, LogInput]:
    """An engine that has read ``text`` the way ``diagnose file`` reads a file."""
    engine = Engine(signatures, facts=load_facts())
    log = LogInput.from_text(text, name)
    run_logs(engine, [log])
    return engine, log


def check_example(signature: Signature, example: Example, positive: bool) -> ExampleResult:
    engine, log = run_log([signature], example.log)
    diagnosis = engine.finish(inputs=[log.summary()])
    findings = [f for f in diagnosis.findings if f.signature == signature.id]
    problems: list[str] = []
    if positive and not findings:
        problems.append("expected a finding; none matched")
    if not positive and findings:
        matched = "; ".join(f"line {e.line}: {e.text}" for f in findings for e in f.evidence)
        problems.append(f"expected no finding; matched unexpectedly: {matched}")
    if positive and findings:
        lines = {e.line for f in findings for e in f.evidence}
        missed = [n for n in example.lines if n not in lines]
        if missed:
            problems.append(
                f"evidence missed line(s) {missed}; it pointed at {sorted(n for n in lines if n)}"
            )
        if not all(f.explanation.strip() for f in findings):
            problems.append("no explanation applies to what this example captured")
        if any(_repeats_a_sentence(f.explanation) for f in findings):
            problems.append("the explanation says a sentence twice (conditions that overlap)")
        if example.captures:
            captured = {k: expr.format_number(v) for k, v in engine.values[signature.id].items()}
            for key, want in example.captures.items():
                if captured.get(key) != want:
                    problems.append(f"capture {key}: expected {want!r}, got {captured.get(key)!r}")
        if example.confidence is not None:
            got = sorted({f.confidence.value for f in findings})
            if got != [example.confidence.value]:
                problems.append(f"confidence: expected {example.confidence.value}, got {got}")
        if example.category is not None:
            categories = sorted({f.category for f in findings})
            if categories != [example.category]:
                problems.append(f"category: expected {example.category}, got {categories}")
    passed = not problems
    return ExampleResult(signature.id, example.name, positive, passed, problems, example.xfail)


def _repeats_a_sentence(explanation: str) -> bool:
    """Whether a sentence of some length comes twice: two explanation texts whose conditions
    both held, where one was meant."""
    sentences = [s for s in _SENTENCE_END.split(explanation) if len(s) > _REPEATED_SENTENCE_CHARS]
    return len(sentences) != len(set(sentences))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_REPEATED_SENTENCE_CHARS = 60


def check_signature(signature: SignatureFile) -> list[ExampleResult]:
    results = [check_example(signature, e, True) for e in signature.examples.positive]
    results += [check_example(signature, e, False) for e in signature.examples.negative]
    return results
