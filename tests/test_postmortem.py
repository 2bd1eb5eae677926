"""The postmortem as a document: Markdown read by a CommonMark parser with GFM tables (as
GitHub and GitLab read it), the timeline drawn from the attempts, and the HTML postmortem
rendered in a real headless Chromium (DOM and screenshot)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from diagnose.core.models import Diagnosis, Timeline
from diagnose.core.redact import redact
from diagnose.core.timeline import MAX_ATTEMPTS, TimelineTracker
from diagnose.render import render
from diagnose.render.markdown import cell, inline
from diagnose.render.timeline import attempt_rows, folded_attempts
from tests.conftest import fixture, run_engine, run_text
from tests.test_reports import CASES

GFM = MarkdownIt("commonmark").enable("table")


def _diagnosis(case: str) -> Diagnosis:
    return redact(run_engine(*(fixture(p) for p in CASES[case])))


def _markdown(case: str) -> str:
    return render(_diagnosis(case), "markdown")


def _walk(tokens: list[Token]) -> list[Token]:
    out = []
    for token in tokens:
        out.append(token)
        out += _walk(token.children or [])
    return out


# -- Markdown as GitHub and GitLab read it -----------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_code_spans_hold_no_escapes(case: str) -> None:
    source = _markdown(case)
    spans = [t.content for t in _walk(GFM.parse(source)) if t.type == "code_inline"]
    assert spans or case == "healthy", "the postmortem names signatures and flags in code"
    assert not [s for s in spans if "\\" in s], "a backslash in a code span is shown as is"
    assert "\\|" not in "".join(spans)


@pytest.mark.parametrize("case", [c for c in CASES if c != "healthy"])
def test_the_postmortem_has_a_mermaid_timeline(case: str) -> None:
    fences = [t for t in GFM.parse(_markdown(case)) if t.type == "fence"]
    mermaid = [t.content for t in fences if t.info == "mermaid"]
    assert len(mermaid) == 1
    chart = mermaid[0]
    assert chart.startswith("gantt\n")
    assert "section Attempt 1" in chart
    assert ":crit," in chart, "the phase the attempt stopped in is marked"
    for line in chart.splitlines():
        if line.startswith("    ") and " :" in line:  # a task: name, then its data
            name = line.strip().split(" :", 1)[0]
            assert ":" not in name and "#" not in name and ";" not in name, line


def test_a_ready_start_draws_every_phase_and_no_stop() -> None:
    chart = next(t.content for t in GFM.parse(_markdown("healthy")) if t.type == "fence" and t.info)
    assert "ready and serving" in chart and ":crit," not in chart


def test_crashloop_timeline_names_each_attempt_and_what_stopped_it() -> None:
    diagnosis = _diagnosis("crashloop")
    rows = attempt_rows(diagnosis)
    assert [row.number for row in rows] == [1, 2, 3, 4, 5]
    primary = diagnosis.finding(diagnosis.primary)
    assert all(row.ended_by is primary for row in rows)
    assert all(20 <= (row.end - row.start).total_seconds() <= 30 for row in rows)  # type: ignore[operator]


def test_the_dist_init_hang_stops_in_its_phase_after_ten_minutes() -> None:
    rows = attempt_rows(_diagnosis("dist-init-stall"))
    assert len(rows) == 1
    assert [p.phase for p in rows[0].phases] == ["launch", "dist_init"]
    stalled = rows[0].phases[-1]
    assert (stalled.end - stalled.start).total_seconds() > 600  # type: ignore[operator]
    assert rows[0].stopped_in == "distributed (NCCL) initialisation"


def test_titles_not_ids_and_repeats_folded() -> None:
    source = _markdown("crashloop")
    assert "| f1 " not in source and "f1 sglang" not in source
    html = GFM.render(source)
    assert "MTP on a hybrid (Mamba/GDN) model needs spec v2" in html
    # the same ValueError in five attempts: one line and a count, in the evidence and the table
    assert source.count("ValueError: Speculative decoding") == 2
    assert "the same line 4 more times: lines 57, 88, 119, 150" in source
    assert "| 2026-03-03 11:53:43 | 4 | The unit is in a crash-restart loop |" in source


def test_pipes_in_tables_and_code() -> None:
    row = cell("run `a | b` then c | d")
    table = GFM.render(f"| what |\n|---|\n| {row} |\n")
    assert "<code>a &#124; b</code>" in row, "a pipe in code, in a table: an entity"
    assert "<code>a | b</code>" in table, "shown as a pipe, without a backslash"
    assert "c | d" in table and "\\" not in table
    assert table.count("<td>") == 1, "log text cannot add a column"
    paragraph = GFM.render(inline("run `a | b` then c | d"))
    assert "<code>a | b</code>" in paragraph and "\\" not in paragraph


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("extra_buffer and __init__", "<p>extra_buffer and __init__</p>"),
        ("*not bold* [not a link](x)", "<p>*not bold* [not a link](x)</p>"),
        ("# not a heading", "<p># not a heading</p>"),
        ("- not a list", "<p>- not a list</p>"),
        ("1. not a list", "<p>1. not a list</p>"),
        ("<b>not html</b> &amp;", "<p>&lt;b&gt;not html&lt;/b&gt; &amp;amp;</p>"),
    ],
)
def test_inline_text_renders_as_itself(text: str, rendered: str) -> None:
    assert GFM.render(inline(text)).strip() == rendered


def test_a_long_restart_loop_keeps_the_first_and_the_last_attempts() -> None:
    tracker = TimelineTracker()
    start = datetime(2026, 3, 3, 11, 0, tzinfo=timezone.utc)
    for attempt in range(30):
        at = start + timedelta(minutes=attempt)
        tracker.observe(attempt, at, True, "Started sglang.service.", None)
        tracker.observe(attempt, at + timedelta(seconds=5), False, "launch", "launch")
        tracker.observe(attempt, at + timedelta(seconds=20), False, "error", None)
        tracker.observe(
            attempt, at + timedelta(seconds=50), True, "x.service: Scheduled restart job", None
        )
    kept = tracker.attempts()
    assert len(kept) == MAX_ATTEMPTS
    assert [a.number for a in kept[:2]] == [1, 12] and kept[-1].number == 30
    assert kept[0].ended_at == start + timedelta(seconds=20), "the restart wait is not counted"
    diagnosis = Diagnosis(timeline=Timeline(attempts=kept))
    assert folded_attempts(attempt_rows(diagnosis)) == "attempts 2-11 are not shown"


# -- HTML in a real browser --------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (apt-get install chromium; .ci/run installs it)",
)
RED = (0xCF, 0x22, 0x2E)  # the stopped phase's colour in the stylesheet


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit RGB or RGBA PNG (what Chromium
    writes), read with zlib: enough to ask which colours were painted."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat = 8, b""
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    raw, stride, rows, previous = (
        zlib.decompress(idat),
        width * channels,
        [],
        bytes(width * channels),
    )
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                guess = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[x] = (line[x] + guess) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return width, channels, rows


@needs_chromium
def test_html_postmortem_renders_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "postmortem.html"
    page.write_text(render(_diagnosis("crashloop"), "html"), encoding="utf-8")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr
    document = dom.stdout
    assert 'id="timeline-chart"' in document
    assert document.count('data-attempt="') == 5
    assert document.count('class="bar stopped"') == 5, "each attempt shows where it stopped"
    assert "Attempt 5" in document
    dropin = '<pre class="dropin"># /etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf'
    assert dropin in document
    assert "Environment=SGLANG_ENABLE_SPEC_V2=1" in document
    assert "<script" not in document and " src=" not in document, "nothing to fetch or run"

    shot = tmp_path / "postmortem.png"  # kept under pytest's tmp dir as the test's artifact
    taken = _chromium(tmp_path, "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri())
    assert taken.returncode == 0, taken.stderr
    assert shot.stat().st_size > 20_000, "a page with text and a chart, not a blank image"
    width, channels, rows = _png_pixels(shot)
    assert width == 1200
    red = sum(
        1 for row in rows for x in range(0, len(row), channels) if tuple(row[x : x + 3]) == RED
    )
    assert red > 1000, "the stopped phases are painted in the timeline"


@needs_chromium
def test_html_of_a_healthy_start_paints_no_stop(tmp_path: Path) -> None:
    page = tmp_path / "healthy.html"
    page.write_text(render(_diagnosis("healthy"), "html"), encoding="utf-8")
    document = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert "Diagnosis: no failure found" in document
    assert 'class="bar ready"' in document and 'class="bar stopped"' not in document


def test_log_text_stays_text_in_html() -> None:
    """Markup in a log line is shown, never run or fetched: escaped like every other report."""
    log = "\n".join(
        [
            "[2026-03-01 11:53:30] server_args=ServerArgs(tp_size=1, mem_fraction_static=0.88)",
            "[2026-03-01 11:53:32 TP0] Capture cuda graph failed: CUDA out of memory. "
            '<script>alert(1)</script><img src="http://evil/x.png"> \x1b]0;title\x07',
            "",
        ]
    )
    diagnosis = redact(run_text(log, "hostile.log"))
    assert diagnosis.primary is not None, "the hostile line must reach the report"
    page = render(diagnosis, "html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page and "<img" not in page
    assert "\x1b" not in page and "\x07" not in page
    assert "default-src 'none'" in page, "the page may fetch nothing at all"
