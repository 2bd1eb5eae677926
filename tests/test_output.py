"""Output a person can copy and read: plain drop-in lines, --patch-only, terminal conventions
(NO_COLOR, FORCE_COLOR, COLUMNS, TERM=dumb), checked on the installed command, in a pipe and
in a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.render.terminal import terminal
from tests.conftest import REPO

CRASHLOOP = "fixtures/incidents/qwen-122b-crashloop.journal.txt"
KV_CACHE = "fixtures/incidents/oom-kv-cache.log"
HEALTHY = "fixtures/incidents/healthy-sglang.journal.txt"
ESCAPE = "\x1b["


def _env(**extra: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"NO_COLOR", "FORCE_COLOR", "COLUMNS", "TERM", "LINES"}
    }
    return {**base, "XDG_CONFIG_HOME": "/nonexistent", **extra}


def _diagnose(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(**env),
        timeout=60,
    )


def _in_terminal(*args: str, columns: int = 80, **env: str) -> str:
    """Run diagnose with stdout and stderr on a real pseudo-terminal; what it drew."""
    leader, follower = pty.openpty()
    os.set_blocking(leader, False)
    import fcntl
    import struct
    import termios

    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnose", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        cwd=REPO,
        env=_env(**env),
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=30)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def _dropin() -> list[str]:
    report = json.loads(_diagnose("file", CRASHLOOP, "-f", "json").stdout)
    lines: list[str] = report["fix"]["dropin"].rstrip("\n").split("\n")  # the unit's one
    assert any(len(line) > 60 for line in lines), "a line longer than the width is the test"
    return lines


def _contains_block(text: str, block: list[str]) -> bool:
    lines = text.splitlines()
    return any(lines[i : i + len(block)] == block for i in range(len(lines)))


# -- copyable fixes ----------------------------------------------------------------------------


def test_at_60_columns_the_dropin_lines_are_printed_verbatim() -> None:
    dropin = _dropin()
    result = _diagnose("file", CRASHLOOP, COLUMNS="60")
    assert result.returncode == 1
    assert _contains_block(result.stdout, dropin), result.stdout
    assert not any(ch in result.stdout for ch in "│╭╮╰╯"), "no border around anything"
    # the prose is wrapped to the width; only what is copied (the drop-in, the next checks'
    # commands, each on a line of its own, a code span too long for the width, links) may be
    # longer, and is then one line for the terminal to fold
    long_lines = [line for line in result.stdout.splitlines() if len(line) > 60]
    copied = [
        line
        for line in long_lines
        if line in dropin
        or line.startswith(("  - ", "  http"))
        or (line.strip().startswith("`") and line.strip().count("`") == 2)
    ]
    assert long_lines == copied, long_lines
    lines = result.stdout.splitlines()
    assert "  - python -c 'import sglang; print(sglang.__version__)'" in lines
    assert "    from 0.5.15 the flag is `--mamba-radix-cache-strategy`" in lines


def test_the_commands_to_run_follow_the_dropin_as_plain_lines() -> None:
    seed = ("--unit-file", "fixtures/preflight/sglang-qwen.service", "--root", "fixtures/preflight")
    text = _diagnose("preflight", *seed, "--no-gpu", "--no-port", COLUMNS="60").stdout
    assert _contains_block(
        text, ["systemctl daemon-reload", "systemctl restart sglang-qwen.service"]
    )
    # from a saved log the unit's command line is not known: the flag change is a comment,
    # so a restart would fail the same way and none is advised
    saved = _diagnose("file", CRASHLOOP, COLUMNS="60").stdout
    assert "systemctl restart" not in saved
    assert "make them in ExecStart= too, or the restart fails the same way" in " ".join(
        saved.split()
    )


def test_on_a_narrow_terminal_the_dropin_is_neither_boxed_nor_wrapped() -> None:
    drawn = _in_terminal("file", CRASHLOOP, columns=50, NO_COLOR="1")
    assert _contains_block(drawn, _dropin()), drawn
    assert "╭" not in drawn


def test_patch_only_prints_just_the_dropin() -> None:
    result = _diagnose("file", CRASHLOOP, "--patch-only")
    assert result.returncode == 1, "the exit code still says what was found"
    assert result.stdout.splitlines() == _dropin()
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n")
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("log", "code", "reason"),
    [
        (HEALTHY, 0, "no failure found"),
        (KV_CACHE, 2, "the unit is not known"),  # a failure, and nothing to install: 2
    ],
)
def test_patch_only_without_a_dropin_prints_nothing_and_says_why(
    log: str, code: int, reason: str
) -> None:
    result = _diagnose("file", log, "--patch-only")
    assert result.returncode == code
    assert result.stdout == ""
    assert reason in result.stderr and result.stderr.count("\n") == 1


def test_patch_only_into_a_file_writes_the_dropin_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "50-diagnose.conf"
    assert _diagnose("file", CRASHLOOP, "--patch-only", "-o", str(target)).stdout == ""
    assert target.read_text().splitlines() == _dropin()
    target.unlink()
    _diagnose("file", HEALTHY, "--patch-only", "-o", str(target))
    assert not target.exists(), "no empty drop-in is left behind"


# -- terminal conventions ----------------------------------------------------------------------


def test_colour_on_a_terminal_and_none_with_no_color() -> None:
    assert ESCAPE in _in_terminal("file", CRASHLOOP)
    assert ESCAPE not in _in_terminal("file", CRASHLOOP, NO_COLOR="1")
    assert ESCAPE not in _in_terminal("file", CRASHLOOP, TERM="dumb")


def test_no_colour_in_a_pipe_unless_forced() -> None:
    assert ESCAPE not in _diagnose("file", CRASHLOOP).stdout
    assert ESCAPE in _diagnose("file", CRASHLOOP, FORCE_COLOR="1").stdout
    assert ESCAPE not in _diagnose("file", CRASHLOOP, FORCE_COLOR="1", NO_COLOR="1").stdout


def test_a_report_written_to_a_file_has_no_colour(tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    _diagnose("file", CRASHLOOP, "-o", str(out), FORCE_COLOR="1")
    assert ESCAPE not in out.read_text()


def test_columns_sets_the_width_in_a_pipe() -> None:
    narrow = _diagnose("file", CRASHLOOP, COLUMNS="60").stdout
    prose = narrow.split("\nFix\n")[0]
    assert max(len(line) for line in prose.splitlines()) <= 60
    wide = _diagnose("file", CRASHLOOP, COLUMNS="160").stdout
    assert max(len(line) for line in wide.splitlines()) > 100


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({}, True, (True, 120, True)),
        ({}, False, (False, 80, False)),
        ({"NO_COLOR": "1"}, True, (False, 120, True)),
        ({"NO_COLOR": ""}, True, (True, 120, True)),  # empty: not set (no-color.org)
        ({"FORCE_COLOR": "1"}, False, (True, 80, False)),
        ({"FORCE_COLOR": "0"}, False, (False, 80, False)),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, (False, 80, False)),
        ({"TERM": "dumb"}, True, (False, 120, False)),
        ({"COLUMNS": "60"}, True, (True, 60, True)),
        ({"COLUMNS": "60"}, False, (False, 60, False)),
        ({"COLUMNS": "wide"}, False, (False, 80, False)),
    ],
)
def test_terminal_conventions(env: dict[str, str], tty: bool, expected: tuple) -> None:
    style = terminal(env, tty, 120)
    assert (style.color, style.width, style.live) == expected


def test_help_documents_every_output_option_with_an_example() -> None:
    drawn = _diagnose("file", "--help", COLUMNS="120").stdout
    text = " ".join(drawn.replace("│", " ").split())  # the help's own box, unwrapped
    for needle in ("--format", "--output", "--patch-only", "html", "NO_COLOR", "FORCE_COLOR"):
        assert needle in text, needle
    assert "Example: -f markdown -o postmortem.md" in text
    assert "- is stdout" in text
    assert "--patch-only | sudo systemctl edit --stdin --drop-in=zz-diagnose UNIT" in text


def test_the_readme_shows_the_report_it_describes() -> None:
    """The README's "Reading a report" block is what the command prints today."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Reading a report", 1)[1]
    shown = section.split("```text\n", 1)[1].split("\n```", 1)[0]
    printed = _diagnose("file", "fixtures/incidents/oom-cuda-graph.log", COLUMNS="100")
    assert printed.returncode == 1
    assert printed.stdout.rstrip("\n") == shown


def test_a_command_taken_out_of_its_parentheses_leaves_no_bracket_open() -> None:
    from diagnose.render.text import _check

    check = "`df -h /dev/shm` inside the container (`docker exec CONTAINER df -h /dev/shm`)."
    lines = [line.plain.strip() for line in _check(check, 80)]
    assert "docker exec CONTAINER df -h /dev/shm" in lines
    assert not any(line.endswith("(") or line.startswith(")") for line in lines)
    assert "inside the container" in lines
