"""Start attempts are counted one way: invocation IDs when the input has them, else the
systemd wordings of 245 to 257 and the engine's launch banner."""

from __future__ import annotations

from diagnose.core.attempts import AttemptCounter
from diagnose.core.records import Record
from tests.conftest import run_text

EXEC_FAILED_LOOP = [
    ("systemd", "Started sglang-qwen.service - SGLang Qwen.", "a1"),
    ("systemd", "sglang-qwen.service: Main process exited, code=exited, status=203/EXEC", "a1"),
    ("systemd", "sglang-qwen.service: Scheduled restart job, restart counter is at 1.", "a1"),
    ("systemd", "Started sglang-qwen.service - SGLang Qwen.", "b2"),
    ("systemd", "sglang-qwen.service: Main process exited, code=exited, status=203/EXEC", "b2"),
    ("kernel", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module", None),
    ("systemd", "Started sglang-qwen.service - SGLang Qwen.", "c3"),
]


def _records(rows: list[tuple[str, str, str | None]]) -> list[Record]:
    return [
        Record("journal", None, text, text, origin=origin, invocation=invocation)  # type: ignore[arg-type]
        for origin, text, invocation in rows
    ]


def test_invocation_ids_decide_when_the_input_has_them() -> None:
    """Three invocations that never reached the application are three attempts; the text
    rule alone (a systemd start counts once the application spoke) would see one."""
    counter = AttemptCounter()
    starts = [counter.begins_attempt(record, None) for record in _records(EXEC_FAILED_LOOP)]
    assert starts == [False, False, False, True, False, False, True]


def _loop(started: str, restarted: str) -> str:
    """Two starts of a unit; the second one's application line is no launch banner, so
    only systemd's lines can tell the attempts apart."""
    return "\n".join(
        [
            f"Mar 02 09:00:00 gpu1 systemd[1]: {started}",
            "Mar 02 09:00:01 gpu1 sglang[11]: [2026-03-02 09:00:01] server_args=ServerArgs(tp_size=1)",
            "Mar 02 09:00:02 gpu1 systemd[1]: sglang-qwen.service: Main process exited, code=exited, status=1/FAILURE",
            f"Mar 02 09:00:03 gpu1 systemd[1]: {restarted}",
            f"Mar 02 09:00:04 gpu1 systemd[1]: {started}",
            "Mar 02 09:00:05 gpu1 sglang[12]: [2026-03-02 09:00:05] Init torch distributed begin.",
        ]
    )


def test_systemd_wordings_from_245_to_257_mark_attempts() -> None:
    restart = "sglang-qwen.service: Scheduled restart job, restart counter is at 1."
    for started in (
        "Started sglang-qwen.service - SGLang Qwen.",  # 249 and later
        "Starting sglang-qwen.service...",  # a unit without a description
        "Started SGLang Qwen.",  # before 249: the description only
    ):
        assert run_text(_loop(started, restart)).attempts == 2, started


def test_a_description_alone_is_no_attempt_without_a_restart() -> None:
    """``Started Desc.`` names no unit: without a scheduled restart it may be any unit's."""
    log = _loop("Started Cleanup of Temporary Directories.", "Stopping user sessions...")
    assert run_text(log).attempts == 1
