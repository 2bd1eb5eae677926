"""Property tests: any bytes in, no exception out, and evidence always points at its line."""

from __future__ import annotations

import functools

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from diagnose.core.engine import Engine
from diagnose.core.scan import NeedleScanner
from diagnose.inputs.files import CHUNK_BYTES, MAX_LINE_BYTES, LogInput, cr_line_ends, events
from diagnose.inputs.lineformat import LineParser, clean
from diagnose.inputs.pipeline import run_logs
from diagnose.library import load_facts, load_signature_files


@functools.cache
def _library():
    return load_signature_files(include_user_dirs=False), load_facts()


@functools.cache
def _example_lines() -> list[bytes]:
    """Real-format lines from every signature's examples: they make findings happen."""
    signatures, _ = _library()
    lines = {
        line.encode()
        for s in signatures
        for e in (*s.examples.positive, *s.examples.negative)
        for line in e.log.splitlines()
    }
    return sorted(lines)


_NOISE = [
    b"",
    b"\r",
    b"\x00\x01\x02 binary \xff\xfe",
    b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07",
    b"Traceback (most recent call last):",
    b'  File "x.py", line 1, in <module>',
    b"During handling of the above exception, another exception occurred:",
    b"[bold]markup[/bold] [link=http://x]y[/link]",
    b"Mar 01 11:53:10.123456 host python3[1]: ",
    b"-- Boot 0123456789abcdef --",
    b'{"MESSAGE": [104, 105, 255], "__REALTIME_TIMESTAMP": "1772365990000000"}',
    b'{"MESSAGE": "broken json',
]


def _line_strategy() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from(_example_lines()),
        st.sampled_from(_NOISE),
        st.binary(max_size=120).filter(lambda b: b"\n" not in b),
        st.text(max_size=80).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass")),
    )


def _run(data: bytes, scanned: bool = True):
    signatures, facts = _library()
    engine = Engine(signatures, facts=facts)
    log = LogInput(path=None, name="input.log", data=data)
    if scanned:
        run_logs(engine, [log])
    else:
        for event in events(log, None):
            engine.feed(event)
    return engine.finish(inputs=[log.summary()]), log


def _as_read(data: bytes) -> bytes:
    """``data`` with the line ends the reader sees: ``\\n``, or a lone ``\\r`` (and ``\\r\\n``)
    in an input whose first block has no ``\\n`` but a ``\\r``."""
    if cr_line_ends(data[:CHUNK_BYTES]):
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def _expected_text(data: bytes, line: int) -> str:
    raw = _as_read(data).split(b"\n")[line - 1]
    return clean(raw[:MAX_LINE_BYTES].decode("utf-8", "replace"))


_settings = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(st.lists(_line_strategy(), max_size=60))
def test_any_lines_give_a_diagnosis_whose_evidence_points_at_its_line(lines: list[bytes]) -> None:
    data = b"\n".join(lines)
    assume(not data.startswith(b"\x1f\x8b"))  # that is a gzip file, tested elsewhere
    diagnosis, log = _run(data)
    read = _as_read(data)
    assert log.lines == (
        read.count(b"\n") + 1 if read and not read.endswith(b"\n") else read.count(b"\n")
    )
    for finding in diagnosis.findings:
        for evidence in finding.evidence:
            assert evidence.line is not None
            assert 1 <= evidence.line <= log.lines
            assert evidence.text == _expected_text(data, evidence.line)


@_settings
@given(st.lists(_line_strategy(), max_size=60))
def test_scanned_and_line_by_line_reading_agree(lines: list[bytes]) -> None:
    data = b"\n".join(lines) + b"\n"
    assume(not data.startswith(b"\x1f\x8b"))
    scanned, _ = _run(data, scanned=True)
    every_line, _ = _run(data, scanned=False)
    assert scanned.model_dump() == every_line.model_dump()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300).filter(lambda raw: b"\n" not in raw))
def test_line_parser_takes_any_bytes(raw: bytes) -> None:
    parser = LineParser("x", 2026)
    record = parser.parse(1, raw.decode("utf-8", "replace"))
    if record is not None:
        assert "\x1b" not in record.raw and "\x1b" not in record.text
        assert record.text in record.raw or record.raw.startswith("{")


def test_scanner_backends_find_the_same_lines() -> None:
    signatures, facts = _library()
    needles = Engine(signatures, facts=facts).needles()
    assert needles
    scanner = NeedleScanner(needles)
    chunk = b"\n".join(_example_lines()) + b"\n"
    ends = scanner.ends(chunk)
    assert ends == sorted(ends)
    found_lines = {chunk.rfind(b"\n", 0, end) + 1 for end in ends}
    expected = {
        start for start, line in _line_starts(chunk) if any(n.encode() in line for n in needles)
    }
    assert found_lines == expected


def _line_starts(chunk: bytes):
    start = 0
    for line in chunk.split(b"\n")[:-1]:
        yield start, line
        start += len(line) + 1
