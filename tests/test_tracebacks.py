"""Grouping the lines of a Python traceback into one event."""

from __future__ import annotations

from diagnose.core.incident import exception_line
from diagnose.core.records import Event
from diagnose.core.tracebacks import (
    MAX_TRACEBACK_LINES,
    frame_stack,
    innermost_frame,
    raised_message,
)
from diagnose.inputs.files import LogInput, events_from_lines
from tests.conftest import INCIDENTS, primary, run_text


def group(lines: list[str]) -> list[Event]:
    """Events in input order (a traceback is emitted when it closes, so sort by position)."""
    log = LogInput(path=None, name="test.log")
    return sorted(events_from_lines(lines, log), key=lambda e: e.seq)


def line_numbers(event: Event) -> list[int]:
    return [r.line for r in event.records]  # type: ignore[misc]


def test_a_bare_python_traceback_is_one_event() -> None:
    events = group(
        [
            "starting",
            "Traceback (most recent call last):",
            '  File "/srv/app.py", line 12, in <module>',
            "    main()",
            "    ^^^^^^",
            "ValueError: bad value",
            "",
            "[2026-03-01 11:00:00] next line",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1], [2, 3, 4, 5, 6, 7], [8]]
    traceback = events[1]
    assert traceback.text.startswith("Traceback (most recent call last):\n")
    assert "ValueError: bad value" in traceback.text
    assert events[2].text == "next line"


def test_an_excerpt_that_cut_off_the_header_still_makes_one_traceback() -> None:
    """Logs pasted into threads often start at a frame; the exception closes the traceback."""
    events = group(
        [
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/encoder_cache_manager.py",'
            " line 302, in compute_mm_encoder_budget",
            "    raise ValueError(",
            "ValueError: Please increase max_num_batched_tokens.",
            "[2026-03-01 11:00:00] next line",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3], [4]]
    assert exception_line(events[0]) is events[0].records[2]


def test_frames_a_page_left_unindented_still_make_one_traceback() -> None:
    events = group(
        [
            'File "deep_gemm/jit/build.py", line 8, in <module>',
            "    RUNTIME = deep_gemm.runtime.Runtime",
            "AttributeError: module 'deep_gemm' has no attribute 'runtime'",
            "[2026-03-01 11:00:00] next line",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3], [4]]


def test_an_exception_with_no_traceback_goes_on_only_where_its_sentence_does() -> None:
    """A pasted message that a page wrapped mid-sentence is one message; the line after a
    finished sentence is other output."""
    events = group(
        [
            "ValueError: To serve at least one request with the model's max seq len (262144),",
            "9.0 GiB KV cache is needed, which is larger than the available KV cache memory.",
            "pid, process_name, used_gpu_memory [MiB]",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "28761, /usr/bin/python3, 55872 MiB",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2], [3], [4], [5]]


def test_an_exception_named_by_its_module_goes_on_too_and_a_fence_ends_it() -> None:
    """Triton's ``OutOfResources`` says neither Error nor Exception: its ``errors`` module names
    it. A page's closing fence ends the message; the block after it is other output."""
    events = group(
        [
            "```",
            "triton.runtime.errors.OutOfResources: out of resource: shared memory,",
            "Required: 106496, Hardware limit: 101376",
            "```",
            "sglang/srt/batch_invariant_ops/batch_invariant_ops.py:305  in matmul_persistent",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1], [2, 3], [4], [5]]


def test_a_wrapped_triton_resource_error_reads_as_the_small_gpus_shared_memory() -> None:
    cause = primary(
        run_text(
            "triton.runtime.errors.OutOfResources: out of resource: shared memory,\n"
            "Required: 131072, Hardware limit: 101376.\n"
        )
    )
    assert cause is not None and cause.signature == "triton-out-of-shared-memory-small-gpu"


def test_a_warning_that_ends_in_a_colon_keeps_the_reason_on_its_next_line() -> None:
    """Python prints a warning's message as it is: one that ends in a colon gives its reason on
    the next line, which belongs to the warning and is no error of its own."""
    events = group(
        [
            "/usr/lib/python3/dist-packages/vllm/connections.py:8: RuntimeWarning: Failed to "
            "read commit hash:",
            "No module named 'vllm._version'",
            "  from vllm.version import __version__ as VLLM_VERSION",
            "No module named 'sentencepiece'",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3], [4]]


def test_an_out_of_memory_message_broken_at_its_sentences_stays_one_message() -> None:
    """torch's message goes on in sentences that never start anything else; the line after
    them is other output."""
    events = group(
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB.",
            "GPU 0 has a total capacity of 22.03 GiB of which 582.00 MiB is free.",
            "Process 29529 has 796.00 MiB memory in use. Of the allocated memory 20.1 GiB is",
            "allocated by PyTorch.",
            "GPU 1 is idle.",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3, 4], [5]]


def test_a_prefixed_headless_traceback_continues_on_its_process_lines() -> None:
    events = group(
        [
            '(APIServer pid=7) ERROR 07-01 10:00:00 [api_server.py:9]   File "/x/site-packages'
            '/vllm/entrypoints/api_server.py", line 9, in run',
            "(APIServer pid=7) ERROR 07-01 10:00:00 [api_server.py:9]     run()",
            "(APIServer pid=7) ERROR 07-01 10:00:00 [api_server.py:9] KeyError: 'model'",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3]]


def test_a_faulthandler_frame_opens_no_traceback() -> None:
    """faulthandler's thread dumps write ``line N in f`` (no comma): each line stays alone."""
    events = group(['  File "/srv/app.py", line 12 in main', '  File "/srv/app.py", line 3 in f'])
    assert [line_numbers(e) for e in events] == [[1], [2]]


def test_every_line_outside_a_traceback_is_its_own_event() -> None:
    events = group(["a", "b", "[2026-03-01 11:00:00 TP0] c"])
    assert [line_numbers(e) for e in events] == [[1], [2], [3]]


def test_sglang_traceback_with_other_ranks_interleaved() -> None:
    """TP2's bare continuation lines join its traceback; TP0/TP1/TP3 lines stay apart."""
    path = INCIDENTS / "sglang-selfkill.journal.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    events = group(lines)
    traceback = next(e for e in events if "Scheduler hit an exception" in e.first.text)
    numbers = line_numbers(traceback)

    assert traceback.first.rank == "TP2"
    assert numbers[0] == 35
    # Through the final exception line and SGLang's "Possible solutions" list.
    final = next(
        r for r in traceback.records if r.text.startswith("Exception: Capture cuda graph failed")
    )
    assert final.line == 95
    assert "4. disable CUDA graph by --disable-cuda-graph." in traceback.text
    assert "torch.OutOfMemoryError: CUDA out of memory" in traceback.text  # the chained cause
    # Nothing from another rank or from systemd inside it.
    assert all(r.rank in (None, "TP2") for r in traceback.records)
    assert all(r.origin == "app" for r in traceback.records)
    assert "Received sigquit" not in traceback.text
    # The other ranks' lines between its first and last line are events of their own.
    inside = [e for e in events if e is not traceback and numbers[0] < e.first.line < numbers[-1]]  # type: ignore[operator]
    assert inside, "the fixture interleaves other ranks' lines"
    for event in inside:
        assert len(event.records) == 1
        assert event.first.rank in {"TP0", "TP1", "TP3"}
        assert event.first.line not in numbers
    # No line is lost or doubled.
    seen = sorted(n for e in events for n in line_numbers(e))
    assert seen == list(range(1, len(lines) + 1))


def test_vllm_prefixed_traceback_lines_are_grouped_per_process() -> None:
    prefix0 = "(EngineCore_DP0 pid=4242) ERROR 10-09 21:14:07 [core.py:1100] "
    prefix1 = "(EngineCore_DP1 pid=4243) ERROR 10-09 21:14:07 [core.py:1100] "
    events = group(
        [
            prefix0 + "EngineCore failed to start.",
            prefix0 + "Traceback (most recent call last):",
            prefix1 + "Traceback (most recent call last):",
            prefix0 + '  File "/vllm/v1/engine/core.py", line 691, in run_engine_core',
            prefix1 + '  File "/vllm/v1/engine/core.py", line 702, in run_engine_core',
            prefix0 + "RuntimeError: rank zero failed",
            prefix1 + "RuntimeError: rank one failed",
            "(APIServer pid=4200) INFO 10-09 21:14:08 [api_server.py:1] shutting down",
        ]
    )
    groups = {tuple(line_numbers(e)): e for e in events}
    assert set(groups) == {(1,), (2, 4, 6), (3, 5, 7), (8,)}
    assert groups[(2, 4, 6)].text.endswith("RuntimeError: rank zero failed")
    assert groups[(3, 5, 7)].text.endswith("RuntimeError: rank one failed")
    assert {r.rank for r in groups[(2, 4, 6)].records} == {"EngineCore_DP0"}


def test_chained_exceptions_stay_one_event() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/srv/a.py", line 3, in load',
        "KeyError: 'weight'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/srv/a.py", line 5, in load',
        "RuntimeError: could not load",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/srv/main.py", line 9, in <module>',
        "SystemExit: load failed",
        "",
        "[2026-03-01 11:00:00] after",
    ]
    events = group(lines)
    assert [line_numbers(e) for e in events] == [list(range(1, 17)), [17]]
    text = events[0].text
    for part in ("KeyError: 'weight'", "RuntimeError: could not load", "SystemExit: load failed"):
        assert part in text


def test_a_second_unrelated_traceback_starts_a_new_event() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 1",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in <module>',
        "KeyError: 2",
    ]
    assert [line_numbers(e) for e in group(lines)] == [[1, 2, 3], [4, 5, 6]]


def test_systemd_lines_end_a_finished_traceback() -> None:
    lines = [
        "Mar 01 11:53:32.1 gpu-node-07 python3[48211]: Traceback (most recent call last):",
        'Mar 01 11:53:32.2 gpu-node-07 python3[48211]:   File "a.py", line 1, in <module>',
        "Mar 01 11:53:32.3 gpu-node-07 python3[48211]: ValueError: no",
        "Mar 01 11:53:33.0 gpu-node-07 systemd[1]: sglang-qwen.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    events = list(events_from_lines(lines, LogInput(path=None, name="test.log")))
    assert [line_numbers(e) for e in events] == [[1, 2, 3], [4]], "emitted in order, not at the end"


def test_a_too_long_traceback_is_cut_without_losing_lines() -> None:
    frames = [f'  File "/srv/f{i}.py", line {i}, in g' for i in range(MAX_TRACEBACK_LINES + 50)]
    lines = ["Traceback (most recent call last):", *frames, "RecursionError: too deep", "end"]
    events = group(lines)
    assert len(events[0].records) == MAX_TRACEBACK_LINES
    assert all(len(e.records) <= MAX_TRACEBACK_LINES for e in events)
    numbers = [n for e in events for n in line_numbers(e)]
    assert sorted(numbers) == list(range(1, len(lines) + 1))
    assert len(numbers) == len(set(numbers))
    rest = next(e for e in events if "RecursionError: too deep" in e.text)
    assert rest is not events[0]  # the frames past the cut carry the exception as a traceback
    assert rest.first.text.startswith('  File "') and exception_line(rest) is not None


def test_event_maps_text_offsets_back_to_records() -> None:
    events = group(
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in <module>',
            "ValueError: here",
        ]
    )
    event = events[0]
    assert event.record_at(event.text.index("ValueError")).line == 3
    assert event.record_at(0).line == 1


def test_the_tiers_read_a_wrapped_message_whole() -> None:
    """The lines a page wrapped one exception over are one message for the later tiers, which
    match it against whole templates."""
    from diagnose.inputs.pipeline import run_logs
    from diagnose.library import engine_for
    from tests.conftest import builtin_library

    engine = engine_for(builtin_library())
    text = (
        "ValueError: NvFp4 MoE backend 'FLASHINFER_CUTLASS' does not support the\n"
        "deployment configuration since kernel does not support current device.\n"
    )
    run_logs(engine, [LogInput.from_text(text, "wrapped.log")])
    assert list(engine.incident.wrapped.values()) == [" ".join(text.split("\n")).strip()]


def test_a_traceback_keeps_its_innermost_frame_with_the_code_under_it() -> None:
    frames = [
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/cli.py", line 9, in main',
        "    run()",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/models/a.py", line 36, in <module>',
        "    from transformers import (Thing,",
        "                              ^^^^^",
    ]
    innermost = f"{frames[3].strip()}\n{frames[4].strip()}"
    (cut,) = group(frames)  # cut short at the code line
    assert innermost_frame(cut) == innermost
    (whole,) = group([*frames, "ImportError: cannot import name 'Thing' from 'transformers'"])
    assert innermost_frame(whole) == innermost
    (frame_only,) = group([*frames[:4], "ImportError: no code line shown"])
    assert innermost_frame(frame_only) == frames[3].strip()
    (markers_only,) = group([*frames[:4], "    ~~~~~~~~^^^^^^^^^^"])  # no code, only markers
    assert innermost_frame(markers_only) == frames[3].strip()
    (no_frame,) = group(["Traceback (most recent call last):", "ValueError: bad"])
    assert innermost_frame(no_frame) is None


def test_a_markdown_fence_around_the_frames_does_not_end_the_traceback() -> None:
    """A thread's paste fences the frames and leaves the exception under the fence."""
    lines = [
        "```",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 8, in <module>',
        "    sys.exit(main())",
        "```",
        "",
        "ValueError: GGUF model with architecture gemma3 is not supported yet.",
    ]
    events = group(lines)
    (traceback,) = [e for e in events if e.first.text.startswith("Traceback")]
    last = exception_line(traceback)
    assert last is not None and last.text.startswith("ValueError: GGUF model")
    assert innermost_frame(traceback) == f"{lines[2].strip()}\n{lines[3].strip()}"


def test_a_raise_with_its_message_in_place_gives_the_exception_line_it_would_print() -> None:
    code = '    raise TimeoutError("Timed out waiting for engines to send"'
    assert raised_message(code) == "TimeoutError: Timed out waiting for engines to send"
    assert raised_message("raise ValueError(f'Invalid value {x!r} for the backend')") == (
        "ValueError: Invalid value {x!r} for the backend"
    )
    assert raised_message("raise RuntimeError(msg)") is None  # the message is not in the line
    assert raised_message('raise KeyError("a")') is None  # too short to match a message by


def test_a_traceback_cut_at_a_raise_is_read_by_the_message_it_raises() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", '
        "line 496, in __init__\n"
        '    raise TimeoutError("Timed out waiting for engines to send"\n'
    )
    cause = primary(run_text(log))
    assert cause is not None and cause.category == "start_timeout"
    assert cause.evidence[0].text.strip().startswith("raise TimeoutError(")


def test_pydantics_indented_lines_stay_with_its_validation_error() -> None:
    """pydantic indents every line of its errors, a message's own line breaks included: the
    sentence that ends a line does not end the message."""
    events = group(
        [
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
            "  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (128000).",
            "  This effectively limits the maximum sequence length to max_num_batched_tokens and",
            "  makes vLLM reject longer sequences.",
            "INFO 10-02 14:22:10 [launcher.py:12] Shutting down",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3, 4], [5]]


def test_a_message_that_goes_on_in_an_indented_block_stays_whole() -> None:
    """AITER prints where it failed, then its reason and advice indented below: one message,
    though its indented lines end sentences."""
    events = group(
        [
            "RuntimeError: [AITER] /workspace/aiter_meta/csrc/opus_gemm/opus_gemm.cu:540",
            "  splitk workspace not initialized for the current CUDA stream.",
            "  Call aiter.opus_gemm_workspace_init() before HIP graph capture.",
            "INFO 02-03 10:00:01 [launcher.py:12] Shutting down",
        ]
    )
    assert [line_numbers(e) for e in events] == [[1, 2, 3], [4]]


def test_a_traceback_gives_every_frame_of_its_last_chain_outermost_first() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/opt/app/first.py", line 3, in <module>',
        "    start()",
        "ValueError: an earlier error",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/opt/app/main.py", line 9, in main',
        "    run()",
        '  File "/opt/app/run.py", line 4, in run',
        '  File "/opt/venv/lib/python3.12/site-packages/uvloop/__init__.py", line 206, in get',
        "    raise RuntimeError(",
        "RuntimeError: There is no current event loop in thread 'MainThread'.",
    ]
    (event,) = group(lines)
    assert frame_stack(event) == (
        'File "/opt/app/main.py", line 9, in main\nrun()',
        'File "/opt/app/run.py", line 4, in run',  # no code line shown: the next frame follows
        'File "/opt/venv/lib/python3.12/site-packages/uvloop/__init__.py", line 206, in get\n'
        "raise RuntimeError(",
    )


def test_an_exception_pasted_indented_goes_on_over_its_wrapped_line() -> None:
    lines = [
        "  ImportError: .../flash_attn_2_cuda...so: undefined symbol:",
        "  _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib",
    ]
    (event,) = group(lines)
    assert line_numbers(event) == [1, 2]
