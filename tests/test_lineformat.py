"""Line formats: journalctl exports, SGLang and vLLM prefixes, terminal noise."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diagnose.core.records import Record
from diagnose.inputs.lineformat import LineParser, _utc, clean


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def parse(line: str, year: int = 2026) -> Record:
    record = LineParser("test.log", year).parse(7, line)
    assert record is not None
    return record


# -- SGLang -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[2026-03-01 11:53:10 TP0] msg", "TP0"),
        ("[2026-03-01 11:53:10 DP0 TP3] msg", "DP0 TP3"),
        ("[2026-03-01 11:53:10 DP1 PP0 TP2 EP2] msg", "DP1 PP0 TP2 EP2"),
        ("[2026-03-01 11:53:10 TP2 EP2 PP1] msg", "TP2 EP2 PP1"),
    ],
    ids=["tp", "dp-tp", "dp-pp-tp-ep", "any-order"],
)
def test_sglang_rank_prefix(line: str, rank: str) -> None:
    record = parse(line)
    assert record.ts == utc(2026, 3, 1, 11, 53, 10)
    assert record.rank == rank
    assert record.text == "msg"
    assert record.engine == "sglang"
    assert record.origin == "app"
    assert record.prefixed
    assert record.raw == line
    assert record.line == 7


def test_sglang_milliseconds_are_kept() -> None:
    record = parse("[2026-03-01 11:53:10.123 TP0] msg")
    assert record.ts == utc(2026, 3, 1, 11, 53, 10, 123000)
    assert record.rank == "TP0"
    assert record.text == "msg"


def test_sglang_main_process_has_no_rank() -> None:
    record = parse("[2026-03-01 11:53:10] The server is fired up and ready to roll!")
    assert record.ts == utc(2026, 3, 1, 11, 53, 10)
    assert record.rank is None
    assert record.text == "The server is fired up and ready to roll!"
    assert record.engine == "sglang"


def test_ranks_of_one_process_are_separate_streams() -> None:
    parser = LineParser("test.log", 2026)
    tp0 = parser.parse(1, "[2026-03-01 11:53:10 TP0] a")
    tp1 = parser.parse(2, "[2026-03-01 11:53:10 TP1] b")
    assert tp0 is not None and tp1 is not None
    assert tp0.stream != tp1.stream


def test_bare_text_is_an_app_line_without_engine_or_time() -> None:
    record = parse('  File "/x.py", line 3, in <module>')
    assert record.text == '  File "/x.py", line 3, in <module>'
    assert record.ts is None
    assert record.engine is None
    assert record.origin == "app"
    assert not record.prefixed


# -- journalctl text exports ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "ts"),
    [
        (
            "Mar 01 11:53:10 gpu-node-07 python3[4821]: [2026-03-01 11:53:09 TP1] hello",
            utc(2026, 3, 1, 11, 53, 10),
        ),
        (
            "Mar 01 11:53:10.123456 gpu-node-07 python3[4821]: [2026-03-01 11:53:09 TP1] hello",
            utc(2026, 3, 1, 11, 53, 10, 123456),
        ),
        (
            "2026-03-01T12:53:10+0100 gpu-node-07 python3[4821]: [2026-03-01 11:53:09 TP1] hello",
            utc(2026, 3, 1, 11, 53, 10),
        ),
        (
            "2026-03-01T11:53:10.250000+00:00 gpu-node-07 python3[4821]: [2026-03-01 11:53:09 TP1] hello",
            utc(2026, 3, 1, 11, 53, 10, 250000),
        ),
    ],
    ids=["short", "short-precise", "short-iso", "short-iso-precise"],
)
def test_journal_line_wrapping_sglang(line: str, ts: datetime) -> None:
    record = parse(line)
    assert record.ts == ts, "the journal's own stamp wins over the application's"
    assert record.host == "gpu-node-07"
    assert record.rank == "TP1"
    assert record.text == "hello"
    assert record.engine == "sglang"
    assert record.origin == "app"
    assert record.raw == line


def test_journal_short_takes_the_year_from_the_sglang_payload() -> None:
    record = parse(
        "Mar 01 11:53:10 gpu-node-07 python3[4821]: [2024-03-01 11:53:10 TP1] hello", 2026
    )
    assert record.ts == utc(2024, 3, 1, 11, 53, 10)


def test_journal_short_with_a_single_digit_day() -> None:
    record = parse("Mar  5 09:41:32 gpu-node-07 python3[4821]: plain text")
    assert record.ts == utc(2026, 3, 5, 9, 41, 32)
    assert record.text == "plain text"


@pytest.mark.parametrize(
    ("message", "unit"),
    [
        (
            "sglang-qwen.service: Main process exited, code=exited, status=1/FAILURE",
            "sglang-qwen.service",
        ),
        ("Started sglang-qwen.service - SGLang Qwen3.5-122B-A10B server.", "sglang-qwen.service"),
        ("Stopping vllm@llama.service - vLLM...", "vllm@llama.service"),
        ("Reached target multi-user.target - Multi-User System.", None),
    ],
)
def test_systemd_lines(message: str, unit: str | None) -> None:
    record = parse(f"Mar 01 11:53:10.000001 gpu-node-07 systemd[1]: {message}")
    assert record.origin == "systemd"
    assert record.unit == unit
    assert record.text == message
    assert record.engine is None


def test_a_user_service_manager_speaks_for_its_units() -> None:
    """``systemctl --user`` units: the user's manager is systemd, not PID 1."""
    record = parse("Mar 01 11:53:10 gpu-node-07 systemd[2211]: Started foo.service.")
    assert record.origin == "systemd"
    assert record.unit == "foo.service"


def test_kernel_lines() -> None:
    record = parse(
        "Mar 05 08:31:14.402188 gpu-node-07 kernel: Out of memory: Killed process 48230 (sglang::schedul)"
    )
    assert record.origin == "kernel"
    assert record.text == "Out of memory: Killed process 48230 (sglang::schedul)"
    assert record.ts == utc(2026, 3, 5, 8, 31, 14, 402188)


@pytest.mark.parametrize(
    "marker",
    [
        "-- Boot 3f2a9c1d0e5b4a7f8c6d2e1b0a9f8e7d --",
        "-- No entries --",
        "-- Logs begin at Mon 2026-03-02 08:00:01 UTC, end at Mon 2026-03-02 10:00:00 UTC. --",
        "-- Journal begins at Mon 2026-03-02 08:00:01 UTC. --",
    ],
)
def test_journal_marker_lines_are_skipped(marker: str) -> None:
    assert LineParser("test.log", 2026).parse(1, marker) is None


def test_a_line_that_merely_starts_with_dashes_is_kept() -> None:
    assert parse("-- hello --").text == "-- hello --"


# -- journalctl -o json ---------------------------------------------------------------------------


def _json_line(**fields: object) -> str:
    base = {
        "__CURSOR": "s=abc;i=1f",
        "__REALTIME_TIMESTAMP": "1772365990123456",  # 2026-03-01T11:53:10.123456Z
        "_HOSTNAME": "gpu-node-07",
        "SYSLOG_IDENTIFIER": "python3",
        "_PID": "4821",
        "_SYSTEMD_UNIT": "sglang-qwen.service",
        "_TRANSPORT": "stdout",
    }
    base.update(fields)
    return json.dumps(base)


def test_json_entry_with_sglang_payload() -> None:
    record = parse(_json_line(MESSAGE="[2026-03-01 11:53:10 TP3] Init torch distributed begin."))
    assert record.ts == utc(2026, 3, 1, 11, 53, 10, 123456)
    assert record.cursor == "s=abc;i=1f"
    assert record.host == "gpu-node-07"
    assert record.unit == "sglang-qwen.service"
    assert record.rank == "TP3"
    assert record.text == "Init torch distributed begin."
    assert record.engine == "sglang"
    assert record.origin == "app"


def test_json_message_as_a_byte_array_with_invalid_utf8() -> None:
    payload = list(b"[2026-03-01 11:53:10 TP0] caf\xc3\xa9 \xff\xfe end")
    record = parse(_json_line(MESSAGE=payload))
    assert record.rank == "TP0"
    assert record.text == "café \ufffd\ufffd end"


def test_json_systemd_entry_takes_the_unit_from_UNIT() -> None:
    record = parse(
        _json_line(
            MESSAGE="sglang-qwen.service: Scheduled restart job, restart counter is at 1.",
            SYSLOG_IDENTIFIER="systemd",
            _PID="1",
            _SYSTEMD_UNIT="init.scope",
            UNIT="sglang-qwen.service",
        )
    )
    assert record.origin == "systemd"
    assert record.unit == "sglang-qwen.service"


def test_json_kernel_entry() -> None:
    record = parse(
        _json_line(
            MESSAGE="NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.",
            SYSLOG_IDENTIFIER="kernel",
            _TRANSPORT="kernel",
            _SYSTEMD_UNIT=None,
        )
    )
    assert record.origin == "kernel"
    assert record.text.startswith("NVRM: Xid")


def test_json_that_is_not_a_journal_entry_is_plain_text() -> None:
    line = '{"MESSAGE": broken'
    record = parse(line)
    assert record.text == line
    assert record.cursor is None


# -- vLLM -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "rank", "ts"),
    [
        (
            "(EngineCore_DP0 pid=4242) ERROR 10-09 21:14:07 [core.py:1100] msg",
            "EngineCore_DP0",
            utc(2026, 10, 9, 21, 14, 7),
        ),
        (
            "(Worker pid=1) (Worker_TP1 pid=1) ERROR 03-05 09:56:09 [x.py:880] msg",
            "Worker_TP1",
            utc(2026, 3, 5, 9, 56, 9),
        ),
        ("INFO 03-07 12:29:02 __init__.py:190] msg", None, utc(2026, 3, 7, 12, 29, 2)),
        (
            "(VllmWorkerProcess pid=221) ERROR 04-06 20:46:48 [multiproc_worker_utils.py:238] msg",
            "VllmWorkerProcess",
            utc(2026, 4, 6, 20, 46, 48),
        ),
    ],
    ids=["v1-engine-core", "double-prefix", "old-no-bracket", "v0-worker"],
)
def test_vllm_prefixes(line: str, rank: str | None, ts: datetime) -> None:
    record = parse(line)
    assert record.ts == ts
    assert record.rank == rank
    assert record.text == "msg"
    assert record.engine == "vllm"
    assert record.origin == "app"
    assert record.prefixed


def test_vllm_process_prefix_without_a_level() -> None:
    record = parse("(EngineCore_DP0 pid=4242) Traceback (most recent call last):")
    assert record.engine == "vllm"
    assert record.rank == "EngineCore_DP0"
    assert record.text == "Traceback (most recent call last):"
    assert record.ts is None


@pytest.mark.parametrize(
    "suffix",
    [
        " [repeated 2x across cluster]",
        " [repeated 7x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 "
        "to disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/"
        "user-guides/configure-logging.html#log-deduplication for more options.)",
    ],
)
def test_rays_deduplication_count_is_not_part_of_the_message(suffix: str) -> None:
    """Ray folds the same line from several workers into one and appends its count: the message
    is what the worker printed, so a signature or an engine template still reads it."""
    line = f"(RayWorkerWrapper pid=2211) AssertionError: 19114 is not divisible by 8{suffix}"
    record = parse(line)
    assert record.text == "AssertionError: 19114 is not divisible by 8"
    assert record.raw == line
    assert parse("INFO: see [repeated 2x across cluster] above").text.endswith("above")


def test_vllm_processes_are_separate_streams() -> None:
    parser = LineParser("test.log", 2026)
    a = parser.parse(1, "(EngineCore_DP0 pid=4242) ERROR 10-09 21:14:07 [core.py:1100] a")
    b = parser.parse(2, "(EngineCore_DP1 pid=4243) ERROR 10-09 21:14:07 [core.py:1100] b")
    assert a is not None and b is not None
    assert a.stream != b.stream


# -- terminal noise -----------------------------------------------------------------------------------


def test_crlf_and_ansi_colour_are_removed() -> None:
    record = parse("\x1b[1;33m[2026-03-01 11:53:10] UserWarning: deprecated\x1b[0m\r")
    assert record.raw == "[2026-03-01 11:53:10] UserWarning: deprecated"
    assert record.text == "UserWarning: deprecated"
    assert record.engine == "sglang"


def test_osc_title_and_screen_clear_are_removed() -> None:
    assert clean("\x1b]0;title\x07hello \x1b[2Jthere") == "hello there"
    assert clean("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\") == "link"


def test_other_control_characters_are_removed() -> None:
    assert clean("a\x00b\x07c\x7fd\x85e") == "abcde"
    assert clean("x\x9b31my") == "xy", "8-bit CSI is a whole sequence"


def test_carriage_return_overprint_keeps_the_last_version() -> None:
    record = parse("Loading shards:  10%|#   | 1/10\rLoading shards: 100%|####| 10/10")
    assert record.text == "Loading shards: 100%|####| 10/10"


def test_tabs_survive() -> None:
    assert clean("\tat frame") == "\tat frame"


# -- the year of year-less stamps -----------------------------------------------------------------------


def test_journal_year_rolls_over_from_december_to_january() -> None:
    parser = LineParser("test.log", 2025)
    stamps = [
        parser.parse(n, line).ts  # type: ignore[union-attr]
        for n, line in enumerate(
            [
                "Dec 31 23:59:58 gpu-node-07 python3[1]: a",
                "Dec 31 23:59:59 gpu-node-07 python3[1]: b",
                "Jan 01 00:00:01 gpu-node-07 python3[1]: c",
                "Jan 01 00:00:02 gpu-node-07 python3[1]: d",
            ],
            1,
        )
    ]
    assert stamps == [
        utc(2025, 12, 31, 23, 59, 58),
        utc(2025, 12, 31, 23, 59, 59),
        utc(2026, 1, 1, 0, 0, 1),
        utc(2026, 1, 1, 0, 0, 2),
    ]


def test_vllm_year_rolls_over_from_december_to_january() -> None:
    parser = LineParser("test.log", 2025)
    first = parser.parse(1, "INFO 12-31 23:59:59 [api_server.py:1] a")
    second = parser.parse(2, "INFO 01-01 00:00:01 [api_server.py:1] b")
    assert first is not None and second is not None
    assert first.ts == utc(2025, 12, 31, 23, 59, 59)
    assert second.ts == utc(2026, 1, 1, 0, 0, 1)


def test_no_rollover_within_a_year() -> None:
    parser = LineParser("test.log", 2026)
    a = parser.parse(1, "Mar 01 10:00:00 h python3[1]: a")
    b = parser.parse(2, "Mar 02 10:00:00 h python3[1]: b")
    assert a is not None and b is not None
    assert (a.ts.year, b.ts.year) == (2026, 2026)  # type: ignore[union-attr]


# -- Times ------------------------------------------------------------------------------------


@given(
    year=st.integers(1000, 9999),
    month=st.integers(0, 13),
    day=st.integers(0, 32),
    clock=st.from_regex(r"\A[0-2][0-9]:[0-6][0-9]:[0-6][0-9](\.[0-9]{1,6})?\Z"),
)
def test_stamps_are_read_as_strptime_reads_them(
    year: int, month: int, day: int, clock: str
) -> None:
    """Built without strptime (its first call costs more than a small log's parse)."""
    text = f"{year}-{month:02d}-{day:02d} {clock}"
    try:
        expected: datetime | None = datetime.strptime(
            text, "%Y-%m-%d %H:%M:%S.%f" if "." in clock else "%Y-%m-%d %H:%M:%S"
        ).replace(tzinfo=timezone.utc)
    except ValueError:
        expected = None
    assert _utc(year, month, day, clock) == expected


def test_a_stamp_with_other_digits_has_no_time() -> None:
    assert _utc(2026, 3, 1, "11:53:10") == utc(2026, 3, 1, 11, 53, 10)
    assert _utc(2026, 3, 1, "11:53:1\u0660") is None  # an Arabic-Indic zero


def test_a_pasted_lines_quote_and_ci_stamp_are_not_its_text() -> None:
    """Issue threads quote logs (`> `) and CI runners stamp each line (`[...Z] `): the record
    is the line inside, with the runner's time when the line has none of its own."""
    parser = LineParser("pasted.log", 2025)
    quoted = parser.parse(
        1,
        "> (APIServer pid=3478) ERROR 10-16 16:27:53 [core_client.py:564] "
        "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
    )
    assert quoted is not None
    assert (quoted.engine, quoted.rank) == ("vllm", "APIServer")
    assert quoted.text.startswith("Engine core proc")
    stamped = parser.parse(2, "> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'")
    assert stamped is not None and stamped.text == "KeyError: 'lm_head.weight'"
    assert stamped.ts is not None and stamped.ts.isoformat().startswith("2025-11-06T02:10:00")
    both = parser.parse(3, "[2025-11-06T02:10:01.000Z] [2025-11-06 02:10:00 TP0] Load weight end.")
    assert both is not None and both.rank == "TP0" and both.text == "Load weight end."
    assert both.ts is not None and both.ts.second == 0  # the line's own clock comes first


@pytest.mark.parametrize("mark", ["\u258e ", "\u258d ", "\u258c", "\u2503 ", "> \u258e "])
def test_a_quote_bar_a_page_put_before_a_line_is_not_its_text(mark: str) -> None:
    """Chat and forum pages quote a log with a bar before each line (``▎ ``): the line inside
    is read as it was printed, so its error is recognised."""
    parser = LineParser("pasted.log", 2025)
    quoted = parser.parse(1, f"{mark}(EngineCore_DP0 pid=7) ValueError: To serve at least one")
    assert quoted is not None
    assert (quoted.engine, quoted.text) == ("vllm", "ValueError: To serve at least one")


@pytest.mark.parametrize(
    "line",
    [
        "2026-06-08T18:01:24.332444215Z (APIServer pid=358293) AttributeError: 'X' object",
        "2026-06-08T18:01:24.332444215Z stderr F (APIServer pid=358293) AttributeError: 'X' object",
        "2026-06-08T20:01:24.332444+02:00 (APIServer pid=358293) AttributeError: 'X' object",
    ],
)
def test_a_container_runtimes_stamp_is_not_the_message(line: str) -> None:
    """`docker logs -t`, `kubectl logs --timestamps` and CRI log files stamp each line: the
    record is the server's line, at the runtime's time (to the microsecond)."""
    record = LineParser("pod.log", 2020).parse(1, line)
    assert record is not None
    assert (record.engine, record.rank) == ("vllm", "APIServer")
    assert record.text == "AttributeError: 'X' object"
    assert record.ts == datetime(2026, 6, 8, 18, 1, 24, 332444, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "line",
    [
        "vllm-server  | (APIServer pid=1) KeyError: 'gfx1151'",
        "vllm-server-1  | 2026-06-08T18:01:24.332444215Z (APIServer pid=1) KeyError: 'gfx1151'",
    ],
)
def test_a_compose_services_column_is_not_the_message(line: str) -> None:
    """`docker compose up` and `docker compose logs` put the service's name and a bar before
    each line it printed (`-t` a stamp after them): the record is the server's line, on the
    service's own stream."""
    record = LineParser("compose.log", 2020).parse(1, line)
    assert record is not None
    assert (record.engine, record.rank, record.text) == ("vllm", "APIServer", "KeyError: 'gfx1151'")
    assert record.stream.split("|")[0].endswith(line.split(" ")[0])
    table = LineParser("smi.log", 2020).parse(1, "| NVIDIA-SMI 570.86.15    Driver Version: 570 |")
    assert table is not None and table.text.startswith("| NVIDIA-SMI")  # a table's own bar stays


def test_torch_distributeds_rank_prefix_is_not_the_message() -> None:
    """A rank's stderr under torch.distributed carries `[rankN]: ` on every line: the line
    after it is the rank's own (a traceback's indentation kept), on the rank's stream."""
    parser = LineParser("ranks.log", 2025)
    frame = parser.parse(1, '[rank0]:   File "/opt/venv/lib/python3.12/site-packages/x.py", line 3')
    glog = parser.parse(2, "[rank1]:[W1204 10:00:00.1 ProcessGroupNCCL.cpp:1] Warning")
    assert frame is not None and frame.text.startswith('  File "/opt/venv/')
    assert frame.stream.endswith(":rank0")
    assert glog is not None and glog.text.startswith("[W1204 ") and glog.stream.endswith(":rank1")


def test_an_actor_frameworks_address_tag_is_left_out_of_the_message() -> None:
    """xinference's actor framework writes `[address=..., pid=N]` between an exception's class
    and its words; the message signatures read is the exception's own."""
    raw = (
        "ImportError: [address=0.0.0.0:40067, pid=32176] cannot import name 'build_regex_from_"
        "schema' from 'outlines.fsm.json_schema'"
    )
    record = parse(raw)
    assert record.raw == raw
    assert record.text == (
        "ImportError: cannot import name 'build_regex_from_schema' from 'outlines.fsm.json_schema'"
    )


def test_an_exception_written_as_its_class_repr_reads_as_python_writes_it() -> None:
    """RunPod's worker joins `<class 'TypeError'>`, the message and the traceback object with
    `; `: the message signatures read is Python's own `TypeError: ...` line."""
    raw = (
        "\"Uncaught exception | <class 'TypeError'>; BatchDecodeWithPagedKVCacheWrapper.plan() "
        "got an unexpected keyword argument 'kv_data_type'; <traceback object at 0x6ffe180f4ac0>;"
    )
    record = parse(raw)
    assert record.raw == raw
    assert "| TypeError: BatchDecodeWithPagedKVCacheWrapper.plan() got an" in record.text
    assert parse("ValueError: <class 'Foo'>; kept").text == "ValueError: <class 'Foo'>; kept"


def test_a_persons_words_glued_before_a_pasted_exception_are_not_its_line() -> None:
    """A thread in Chinese glues "it reported" to the exception it pasted: the line is the
    exception, read as one; words in the message itself, other text and words that hold a
    command or a stamp stay."""
    record = parse("报错AttributeError: 'Glm46VImageProcessorFast' object has no attribute 'x'")
    assert record.text == "AttributeError: 'Glm46VImageProcessorFast' object has no attribute 'x'"
    glued = parse("部署后\uff0c发送图片预估报错ValueError: Attempted to assign 2 = 2 tokens")
    assert glued.text == "ValueError: Attempted to assign 2 = 2 tokens"
    named = "使用vllm serve部署失败报错RuntimeError: x"  # the engine's command stays in the line
    assert parse(named).text == named
    kept = "ValueError: 模型路径不存在 /models/x"
    assert parse(kept).text == kept
    assert parse("加载模型失败\uff0c请检查路径").text == "加载模型失败\uff0c请检查路径"
    stamped = parse("[2026-05-11 09:12:40 TP0] 加载失败ValueError: x")
    assert stamped.engine == "sglang"


def test_a_log_viewers_level_tag_and_literal_newline_are_not_the_message() -> None:
    """RunPod's viewer glues `[info]` to each line and shows the newline as `\\n`: the engine's
    own prefix under it is still read; an error tag with no prefix under it stays, as the
    only word of the line's level."""
    record = parse(
        "[warning]WARNING 10-09 08:58:51 [chat_utils.py:376] 'add_generation_prompt' is not "
        "supported for mistral tokenizer, so it will be ignored.\\n"
    )
    assert record.engine == "vllm"
    assert record.text.endswith("so it will be ignored.")
    assert parse("[error]Please install vllm[audio] for audio support").text == (
        "[error]Please install vllm[audio] for audio support"
    )
    assert parse("[info]Jobs in queue: 1").text == "Jobs in queue: 1"


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (
            '2025-03-24 22:04:27 | ERROR | stderr |   File "/srv/fastchat/serve/vllm_worker.py"',
            '  File "/srv/fastchat/serve/vllm_worker.py"',
        ),
        (
            "2025-03-24 22:04:27.123 | ERROR    | worker:run:12 - AttributeError: 'X' object",
            "AttributeError: 'X' object",
        ),
    ],
)
def test_a_piped_loggers_columns_are_not_the_line(line: str, text: str) -> None:
    """FastChat's and loguru's columns (time, level, name) are cut off, the time kept: a
    traceback so prefixed is read as one, its frames as frames."""
    record = LineParser("worker.log", 2025).parse(1, line)
    assert record is not None
    assert record.text == text
    assert record.ts is not None and (record.ts.hour, record.ts.minute) == (22, 4)


def test_a_launchers_process_tag_before_a_piped_logger_is_cut_off_too() -> None:
    """SkyPilot tags its task's lines `(task, pid=N) `, and FastChat's worker writes its own
    columns after the tag: both go, so that the traceback reads as one."""
    record = LineParser("task.log", 2023).parse(
        1,
        "(task, pid=27090) 2023-09-25 00:32:05 | ERROR | stderr | Traceback (most recent call last):",
    )
    assert record is not None
    assert record.text == "Traceback (most recent call last):"
    assert record.ts is not None and (record.ts.hour, record.ts.minute) == (0, 32)


def _texts(lines: list[str]) -> list[str]:
    parser = LineParser("pytest.log", 2026)
    return [record.text for line in lines if (record := parser.parse(1, line)) is not None]


def test_pytests_report_of_an_exception_reads_as_python_writes_it() -> None:
    """pytest's `E   ` mark is taken off, and a location line before the exception is the
    frame it names (its short format's `path:line: in function` wherever it stands)."""
    assert _texts(
        [
            "vllm/models/deepseek_v4/quant_config.py:125: AttributeError",
            "E   AttributeError: 'list' object has no attribute 'get'",
        ]
    ) == [
        '  File "vllm/models/deepseek_v4/quant_config.py", line 125, in <unknown>',
        "AttributeError: 'list' object has no attribute 'get'",
    ]
    assert _texts(["vllm/config.py:88: in verify", "E       ValueError: bad"]) == [
        '  File "vllm/config.py", line 88, in verify',
        "ValueError: bad",
    ]


def test_pytests_closing_location_after_the_exception_stays_a_plain_line() -> None:
    """In pytest's long format the location repeats after the `E` lines: not a new frame."""
    texts = _texts(["E   KeyError: 'x'", "", "tests/test_load.py:40: KeyError"])
    assert texts == ["KeyError: 'x'", "", "tests/test_load.py:40: KeyError"]


def test_a_line_that_only_starts_with_e_keeps_its_words() -> None:
    assert _texts(["E rror budget exhausted", "Epoch 3 done"]) == [
        "E rror budget exhausted",
        "Epoch 3 done",
    ]


def test_a_child_line_relayed_in_a_go_supervisors_logfmt_field_is_the_line() -> None:
    """LocalAI relays its backend's stderr as `line="..."` of its own logfmt line (quotes
    escaped): the child's line is the record's text, so its traceback reads as one."""
    record = parse(
        'localai-1  | Jul 22 17:17:15 DEBUG GRPC stderr id="gemma-127.0.0.1:41633" line="  File '
        '\\"/backends/venv/lib/python3.10/site-packages/torch/_ops.py\\", line 1505, in '
        'load_library" caller={caller.file="/build/pkg/model/process.go"  caller.L=219 } '
    )
    assert record.text == (
        '  File "/backends/venv/lib/python3.10/site-packages/torch/_ops.py", line 1505, in '
        "load_library"
    )
    assert parse('level=info msg="started" line="x"').text == 'level=info msg="started" line="x"'
