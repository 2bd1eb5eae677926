"""Hardening (issue 17): hostile input gives one line and exit 2 (or a report), never a
traceback; files are written without replacing what must stay; cost grows with the input."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.scaling import attempts_log, diagnose_bytes
from diagnose.atomic import write_atomically
from diagnose.commands import hook
from diagnose.commands.signatures import backtracking_input
from diagnose.core.errors import UserError
from diagnose.core.expr import ExpressionError, fill, template_fields
from diagnose.core.signature import Pattern
from diagnose.inputs import journal as journal_source
from diagnose.inputs.follow import follow, open_followed
from diagnose.inputs.gpu import parse_query_apps, parse_query_gpu
from diagnose.inputs.lineformat import LineParser
from diagnose.library import load_file
from diagnose.systemd.apply import dropin_path
from diagnose.systemd.unit import parse_unit_text, under_root
from tests import journalgen
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
LOG = REPO / "fixtures/incidents/oom-kv-cache.log"


def _one_line_error(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith("diagnose: error: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


# -- no traceback for any input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        # a journal export line nested past Python's recursion limit
        '{"MESSAGE": "ok", "__REALTIME_TIMESTAMP": "1772538790000000"}\n'
        + '{"MESSAGE": '
        + "[" * 100_000
        + "]" * 100_000
        + "}\n",
        # times no calendar holds
        '{"MESSAGE": "RuntimeError: CUDA error: out of memory", '
        '"__REALTIME_TIMESTAMP": "99999999999999999999999"}\n',
        "[2026-02-30 25:61:61] RuntimeError: CUDA error: out of memory\n"
        "Feb 30 25:61:61 host python3[1]: RuntimeError: boom\n",
        # numbers out of any range in lines the signatures compute with
        "[2026-03-01 10:00:00] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        + "9" * 400
        + " GiB. GPU 0 has a total capacity of 1e999 GiB of which 0 bytes is free.\n"
        "[2026-03-01 10:00:00] Load weight end. type=X, avail mem=1e309 GB, mem usage=inf GB.\n",
        # a unit name far past systemd's limit
        "Mar 01 10:00:00 host systemd[1]: " + "a" * 100_000 + ".service: Main process exited, "
        "code=exited, status=1/FAILURE\n",
    ],
    ids=["nested-json", "huge-journal-time", "impossible-dates", "huge-numbers", "long-unit"],
)
def test_hostile_lines_give_a_report(tmp_path: Path, content: str) -> None:
    path = tmp_path / "hostile.log"
    path.write_text(content)
    result = run_cli("file", path, "-f", "json")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    json.loads(result.stdout)


def test_a_full_disk_on_stdout_is_one_line(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "diagnose", "file", str(LOG)],
            stdout=full, stderr=subprocess.PIPE, text=True, check=False,
        )  # fmt: skip
    assert result.returncode == 2 and "No space left on device" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_closed_stdout_is_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(LOG)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert result.returncode == 2 and "stdout is closed" in result.stderr, result.stderr


def test_an_input_that_cannot_be_sized_is_one_line(tmp_path: Path) -> None:
    """The progress bar sizes every input first: a name too long to stat fails there."""
    _one_line_error(run_cli("file", "a" * 5000))
    if os.geteuid() != 0:  # root reads any file
        path = tmp_path / "secret.log"
        path.write_text("x\n")
        path.chmod(0)
        _one_line_error(run_cli("file", path))


@pytest.mark.parametrize(
    "field", ["{v!z}", "{}", "{0}", "{v:>99999999}"], ids=["conversion", "empty", "index", "wide"]
)
def test_a_template_field_that_cannot_format_is_refused_at_load(tmp_path: Path, field: str) -> None:
    with pytest.raises(ExpressionError):
        template_fields(f"x {field}")
    signature = tmp_path / "bad-field.yaml"
    signature.write_text(
        "title: Bad\ncategory: unknown\nseverity: error\n"
        "match: {type: line, needles: [BOOM], regex: 'BOOM (?P<v>\\S+)'}\n"
        f"explanation: 'x {field}'\npatch_note: n\n"
        'examples: {positive: [{name: hit, log: "BOOM 1\\n"}], negative: [{name: m, log: b}]}\n'
    )
    with pytest.raises(UserError, match=r"bad-field\.yaml"):
        load_file(signature)


def test_a_format_spec_that_does_not_fit_the_value_leaves_the_text_out() -> None:
    assert fill("{v:d} GiB", {"v": "not-a-number"}) is None
    assert fill("{v} GiB", {"v": 2.0}) == "2 GiB"


def test_a_destination_is_written_as_its_flag() -> None:
    """``{name:flag}``: how Python errors name an option (``max_model_len``) becomes the flag."""
    assert fill("drop {k:flag}", {"k": "disable_log_requests"}) == "drop --disable-log-requests"
    assert fill("{k:flag}", {"k": "--tp-size"}) == "--tp-size"
    assert fill("{k:>6}", {"k": "ab"}) == "    ab"


def test_non_utf8_nvidia_smi_output_is_read(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    row = "0, GPU-0f1e, NVIDIA H200\xff, 143771, 1024, 0".encode("latin-1")
    fake.write_bytes(b"#!/bin/sh\nprintf '" + row + b"\\n'\n")
    fake.chmod(0o755)
    from diagnose.inputs import gpu

    shot = gpu.snapshot(str(fake), timeout=10)
    assert shot.missing is None or "nvidia-smi" in shot.missing


def test_a_since_past_any_calendar_is_a_user_error() -> None:
    for text in ("@1e300", "-99999999999999999999d"):
        with pytest.raises(UserError, match="not a time"):
            journal_source.parse_time(text)


# -- fuzzing the parsers (a small budget, in the normal run) ------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
_PREFIXES = st.sampled_from(
    [
        "",
        "Mar 01 11:53:10.123456 gpu-node-07 python3[4242]: ",
        "2026-03-01T11:53:10+0000 gpu-node-07 systemd[1]: ",
        "[2026-03-01 11:53:10 TP0] ",
        "(EngineCore_DP0 pid=4242) ERROR 03-01 11:54:07 [core.py:1100] ",
        "Feb 30 99:99:99 h x[]: ",
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=st.dictionaries(st.sampled_from(
    ["MESSAGE", "__REALTIME_TIMESTAMP", "_SYSTEMD_UNIT", "UNIT", "_PID", "SYSLOG_IDENTIFIER",
     "_TRANSPORT", "_SYSTEMD_INVOCATION_ID", "__CURSOR"]), _JSON), prefix=_PREFIXES,
    tail=st.text(max_size=200))  # fmt: skip
def test_fuzz_line_parser(entry: dict, prefix: str, tail: str) -> None:
    parser = LineParser("fuzz", 2026)
    entry.setdefault("MESSAGE", tail)
    for line in (json.dumps(entry), prefix + tail, prefix + json.dumps(entry)):
        parser.parse(1, line)


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=300), rows=st.lists(
    st.lists(st.sampled_from(["0", "GPU-x", "H200", "nan", "inf", "1e999", "-1", "", "[N/A]",
                              "143771 MiB", "\ufffd"]), max_size=7), max_size=5))  # fmt: skip
def test_fuzz_nvidia_smi(text: str, rows: list[list[str]]) -> None:
    csv = text + "\n" + "\n".join(", ".join(r) for r in rows)
    parse_query_gpu(csv)
    parse_query_apps(csv)


@settings(max_examples=40, deadline=None)
@given(text=st.lists(st.one_of(
    st.sampled_from(["[Service]", "[Unit]", "ExecStart=", "Environment=", "\\", "%", "$", '"',
                     "EnvironmentFile=-/x", "Restart=on-failure", "[Service"]),
    st.text(max_size=40)), max_size=20))  # fmt: skip
def test_fuzz_unit_files(text: list[str]) -> None:
    parse_unit_text("\n".join(text), "fuzz.service")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=st.dictionaries(
    st.sampled_from(["title", "category", "severity", "match", "explanation", "derive",
                     "patch_note", "examples", "patches", "where", "regex"]), _JSON, max_size=8))  # fmt: skip
def test_fuzz_signature_files(tmp_path: Path, document: dict) -> None:
    path = tmp_path / "fuzz-signature.yaml"
    path.write_text(yaml.safe_dump(document))
    with contextlib.suppress(UserError):  # refused with one line, or loaded
        load_file(path)


# -- files ----------------------------------------------------------------------------------


def test_o_keeps_the_mode_of_an_existing_report(tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_text("the previous report\n")
    report.chmod(0o600)
    result = run_cli("file", LOG, "-o", report)
    assert result.returncode == 1, result.stderr
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert "the previous report" not in report.read_text()


def test_o_writes_through_a_symlink_and_keeps_it(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_atomically(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


def test_o_writes_into_a_fifo_without_replacing_it(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomically(fifo, "the report\n")
    reader.join(timeout=10)
    assert got == [b"the report\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["report.fifo"]  # no temporary left


def test_o_refuses_a_directory(tmp_path: Path) -> None:
    _one_line_error(run_cli("file", LOG, "-o", tmp_path))


def test_o_dash_is_stdout(tmp_path: Path) -> None:
    result = run_cli("file", LOG, "-f", "json", "-o", "-")
    assert result.returncode == 1
    assert json.loads(result.stdout)["findings"]
    assert not Path("-").exists()


def test_a_symlink_under_root_cannot_lead_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    outside = tmp_path / "host-systemd"
    (outside / "system").mkdir(parents=True)
    (root / "etc" / "systemd").symlink_to(outside)
    with pytest.raises(UserError, match="outside"):
        dropin_path("x.service", root)


def test_files_a_unit_names_resolve_inside_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "model.env").write_text("A=inside\n")
    (root / "etc" / "link.env").symlink_to("/etc/model.env")  # absolute: means root's
    (root / "etc" / "up.env").symlink_to("../../../../../../etc/model.env")
    for name in ("link.env", "up.env", "../../etc/model.env"):
        resolved = under_root(root, f"/etc/{name}")
        assert resolved == (root / "etc" / "model.env").resolve(), name


def test_hook_remove_puts_back_the_file_install_replaced(tmp_path: Path) -> None:
    root = tmp_path / "root"
    system = root / "etc/systemd/system"
    system.mkdir(parents=True)
    mine = system / "diagnose-postmortem@.service"
    mine.write_text("[Service]\nExecStart=/usr/local/bin/my-own-postmortem %i\n")
    hook.install("sglang-qwen.service", root, "/bin/true")
    assert (system / "diagnose-postmortem@.service.bak").exists()
    result = hook.remove("sglang-qwen.service", root)
    assert mine.read_text().endswith("my-own-postmortem %i\n")
    assert not (system / "diagnose-postmortem@.service.bak").exists()
    assert any("restored" in line for line in result.kept)


def test_a_user_override_of_a_library_signature_is_said(tmp_path: Path) -> None:
    config = tmp_path / "config" / "diagnose" / "signatures"
    config.mkdir(parents=True)
    builtin = REPO / "signatures/common/cuda-out-of-memory.yaml"
    (config / "cuda-out-of-memory.yaml").write_text(builtin.read_text())
    result = subprocess.run(
        [sys.executable, "-m", "diagnose", "file", str(LOG)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )  # fmt: skip
    assert "signature cuda-out-of-memory from" in result.stderr
    assert "overrides the library's" in result.stderr


# -- watch ----------------------------------------------------------------------------------


def test_watch_opens_a_fifo_without_a_writer_and_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    stream, is_pipe = open_followed(str(fifo))
    assert is_pipe
    batches = follow(stream, 0.01, sleep=lambda _: None)
    assert next(batches) == []  # nothing yet, and no writer: an empty batch, not a hang
    with open(fifo, "w") as writer:
        writer.write("[2026-03-01 10:00:00] first line\n")
    seen = []
    for batch in batches:
        seen += batch
        if not batch and seen:
            break
    assert seen == ["[2026-03-01 10:00:00] first line"]


def test_watch_follows_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("one\n")
    stream, _ = open_followed(str(log))
    batches = follow(stream, 0.01, sleep=lambda _: None, path=log)
    assert next(batches) == ["one"]
    assert next(batches) == []
    log.rename(tmp_path / "server.log.1")  # logrotate's create mode
    log.write_text("two\n")
    assert [line for _ in range(3) for line in next(batches)] == ["two"]
    with open(log, "r+") as handle:  # copytruncate
        handle.truncate(0)
    with open(log, "a") as handle:
        handle.write("3\n")
    assert [line for _ in range(3) for line in next(batches)] == ["3"]


# -- linear in the input --------------------------------------------------------------------


def _journal_seconds(tmp_path: Path, attempts: int) -> float:
    from diagnose.runs.journal import JournalOptions, diagnose_journal

    path = tmp_path / f"loop-{attempts}.journal"
    entries = journalgen.entries_from_short(attempts_log(attempts).decode(), "sglang-qwen.service")
    journalgen.write_journal(entries, path)
    options = JournalOptions(unit="sglang-qwen.service", files=[path], gpu=False)
    best = float("inf")
    for _ in range(2):
        began = time.process_time()
        result = diagnose_journal(options, [], None, lambda _: None)
        best = min(best, time.process_time() - began)
    assert result.diagnosis.attempts == attempts
    return best


@pytest.mark.skipif(not journalgen.journal_remote(), reason="needs systemd-journal-remote")
def test_ten_times_the_attempts_cost_about_ten_times_the_time(tmp_path: Path) -> None:
    """A ratio, not seconds: linear gives ~10x; the quadratic path this replaced gave ~50x
    (one journal match term per invocation, tested on every entry)."""
    small, large = _journal_seconds(tmp_path, 60), _journal_seconds(tmp_path, 600)
    assert large / small < 25, (small, large)


def test_memory_for_200_attempts_stays_within_a_fixed_bound() -> None:
    diagnose_bytes(attempts_log(2))  # the library, loaded outside the measurement
    data = attempts_log(200)
    tracemalloc.start()
    diagnosis = diagnose_bytes(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert diagnosis.attempts == 200
    assert peak < 40 << 20, f"peak {peak >> 20} MiB"


def test_signatures_lint_finds_a_backtracking_regex() -> None:
    nested = Pattern(needles=["sum="], regex=r"sum=(\d+)+$")
    linear = Pattern(needles=["sum="], regex=r"sum=(?P<n>\d+)$")
    # quadratic: every start in a long word scans the word (hf-model-not-found before its fix)
    other = r"|Repository Not Found for url: (?P<url>\S+)"
    unanchored = Pattern(
        needles=["is not a local folder"], regex=r"(?P<model>\S+) is not a local folder" + other
    )
    anchored = Pattern(
        needles=["is not a local folder"],
        regex=r"(?<!\S)(?P<model>\S+) is not a local folder" + other,
    )
    assert backtracking_input(nested, ["sum=12\n"]) is not None
    assert backtracking_input(unanchored, ["m is not a local folder\n"]) is not None
    assert backtracking_input(anchored, ["m is not a local folder\n"]) is None
    assert backtracking_input(linear, ["sum=12\n"]) is None


@pytest.mark.parametrize(
    "report",
    [
        "[]",
        '{"findings": [1], "primary": "x"}',
        '{"findings": [{"id": "a", "evidence": [{"timestamp": "garbage"}]}], "primary": "a"}',
        '{"findings": [{"id": "a", "signature": 5, "evidence": "x"}], "primary": "a"}',
        "[" * 100_000,
    ],
    ids=["list", "finding-not-object", "bad-time", "wrong-types", "nested"],
)
def test_a_malformed_compare_report_is_a_user_error(tmp_path: Path, report: str) -> None:
    from diagnose.commands import verify

    path = tmp_path / "report.json"
    path.write_text(report)
    with pytest.raises(UserError, match="not a diagnose JSON report"):
        verify._from_report(path, "sglang-qwen.service")


def test_template_filters_write_flags_and_distributions() -> None:
    """`{x:flags}` keeps the options of a refused command line (each once, values and negative
    numbers aside); `{x:distribution}` names the distribution pip installs for an import name."""
    refused = "--speculative-model [ngram] --tp 1 --delta -1 --x=2 -tp 4 --tp 2"
    assert fill("{a:flags}", {"a": refused}) == "--speculative-model --tp --delta --x -tp"
    assert fill("{m:distribution}", {"m": "cv2"}) == "opencv-python-headless"
    assert fill("{m:distribution}", {"m": "flashinfer_python"}) == "flashinfer-python"
    assert fill("{m:distribution}", {"m": "cuda"}) == "cuda-python"
    assert fill("{m:distribution}", {"m": "pynvml"}) == "nvidia-ml-py"
    assert fill("{m:distribution}", {"m": "vllm_flash_attn"}) == "vllm"  # vendored in vLLM's wheel
