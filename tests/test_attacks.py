"""Issue 35's attacks, as an attacker would send them: the same hostile input through
``diagnose file``, ``diagnose journal --file`` and stdin (and the hook where it applies), and
what must never come out the other side."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.core.dropin import UnsafeDropin, render_dropin, render_fixes
from diagnose.core.errors import UserError
from diagnose.core.models import Patch
from diagnose.core.units import check_unit_name, escape_unit, is_unit_name
from tests import journalgen
from tests.conftest import REPO

CRASHLOOP_JSON = REPO / "fixtures/incidents/crashloop.journal.json"
INJECTED = "ExecStartPre=/bin/sh -c 'touch /tmp/pwned'"
EVIL_UNIT = f"sglang-qwen.service\n[Service]\n{INJECTED}\n#"
needs_journal = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl",
)


def _cli(
    *args: str | Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m diagnose ARGS``; with ``env``, in this environment less ``COLUMNS``, plus
    ``env``."""
    import os

    result = subprocess.run(
        [sys.executable, "-m", "diagnose", *map(str, args)],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
        env=None if env is None else {k: v for k, v in os.environ.items() if k != "COLUMNS"} | env,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def _through_file_and_stdin(tmp_path: Path, data: bytes, *args: str) -> list[str]:
    """The outputs of ``diagnose file PATH ARGS`` and ``diagnose file - ARGS``; neither may
    crash (exit 3)."""
    path = tmp_path / "input.log"
    path.write_bytes(data)
    outputs = []
    for result in (_cli("file", path, *args), _cli("file", "-", *args, stdin=data)):
        assert result.returncode in (0, 1), result.stderr
        _no_injected_line(result.stderr)
        outputs.append(result.stdout)
    return outputs


# -- 1. a name from the log never reaches a drop-in, a path, a command or a heading ---------


def _export_with_unit(unit: str) -> bytes:
    lines = []
    for line in CRASHLOOP_JSON.read_text().splitlines():
        entry = json.loads(line)
        for key in ("_SYSTEMD_UNIT", "UNIT"):
            if entry.get(key) == "sglang-qwen.service":
                entry[key] = unit
        lines.append(json.dumps(entry))
    return ("\n".join(lines) + "\n").encode()


def _no_injected_line(output: str) -> None:
    """No line of the output is the injected setting (the evidence may quote the JSON line
    that carried it, escaped, inside a line of its own)."""
    for line in output.splitlines():
        assert not line.lstrip("#>|` ").startswith("ExecStartPre="), line


@pytest.mark.parametrize("fmt", ["text", "markdown", "json", "html"])
def test_a_unit_name_with_directives_never_reaches_the_drop_in(tmp_path: Path, fmt: str) -> None:
    data = _export_with_unit(EVIL_UNIT)
    for output in _through_file_and_stdin(tmp_path, data, "--format", fmt):
        _no_injected_line(output)
        shown = "sglang-qwen.service\\x0a\\x5bService\\x5d"  # shown escaped
        assert shown in (json.loads(output)["unit"] if fmt == "json" else output)
        assert "systemctl restart" not in output  # and no command is built from it
        assert "zz-diagnose.conf" not in output  # nor a path


def test_patch_only_prints_no_drop_in_for_a_forged_unit(tmp_path: Path) -> None:
    """Nothing to print is a user error with its reason (exit 2), and the reason shows the
    name escaped."""
    data = _export_with_unit(EVIL_UNIT)
    path = tmp_path / "input.log"
    path.write_bytes(data)
    for result in (
        _cli("file", path, "--patch-only"),
        _cli("file", "-", "--patch-only", stdin=data),
    ):
        assert result.returncode == 2, result.stderr
        assert "[Service]" not in result.stdout
        assert "is not a unit name" in result.stderr
        _no_injected_line(result.stdout)
        _no_injected_line(result.stderr)


def test_a_real_unit_name_still_gets_its_drop_in(tmp_path: Path) -> None:
    for output in _through_file_and_stdin(tmp_path, _export_with_unit("sglang-qwen.service")):
        assert "/etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf" in output


@needs_journal
def test_a_host_name_with_directives_stays_on_its_line_through_the_journal(
    tmp_path: Path,
) -> None:
    entries = journalgen.crashloop_entries()
    for entry in entries:
        entry["_HOSTNAME"] = f"gpu-node-07\n[Service]\n{INJECTED}"
    journal = journalgen.write_journal(entries, tmp_path / "evil.journal")
    for fmt in ("text", "markdown", "json"):
        result = _cli("journal", "-u", "sglang-qwen", "--file", journal, "--format", fmt)
        assert result.returncode == 1, result.stderr
        _no_injected_line(result.stdout)
        assert "sglang-qwen.service.d/zz-diagnose.conf" in result.stdout or fmt == "json"


@needs_journal
def test_journal_and_hook_refuse_a_unit_name_that_is_not_one(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "a.journal")
    refused = _cli("journal", "-u", EVIL_UNIT, "--file", journal)
    assert refused.returncode == 2 and "not a unit name" in refused.stderr
    hook = _cli("hook", "install", "-u", "x.service\n[Service]", "--root", tmp_path)
    assert hook.returncode == 2 and "not a unit name" in hook.stderr
    assert not list(tmp_path.rglob("*.conf"))


@settings(max_examples=30, deadline=None)
@given(
    st.text(min_size=1, max_size=80)
    | st.builds(lambda a, b: f"{a}.service\n{b}", st.text(max_size=20), st.text(max_size=40))
)
def test_any_unit_name_in_an_export_never_becomes_a_line_of_the_drop_in(unit: str) -> None:
    import tempfile

    from tests.conftest import invoke

    with tempfile.NamedTemporaryFile(suffix=".json") as export:
        export.write(_export_with_unit(unit))
        export.flush()
        results = {fmt: invoke(["file", export.name, "-f", fmt]) for fmt in ("text", "json")}
    for fmt, result in results.items():
        assert result.exit_code in (0, 1), result.output
        output = result.stdout
        if fmt == "json":
            report = json.loads(output)
            shown = report["unit"] or ""
            assert shown.isprintable(), shown
            dropins = [f["patch"]["dropin"] for f in report["findings"] if f.get("patch")]
            for dropin in filter(None, dropins):
                header = dropin.splitlines()[0]
                assert header.startswith("# /etc/systemd/system/") and is_unit_name(
                    header.removeprefix("# /etc/systemd/system/").removesuffix(
                        ".d/zz-diagnose.conf"
                    )
                )
        for line in output.splitlines():
            if line.startswith("systemctl restart "):
                assert is_unit_name(shlex.split(line)[2]), line


def test_drop_in_rendering_refuses_control_characters_in_any_key_or_value() -> None:
    hostile = "1\nExecStartPre=/bin/sh"
    for patch in (
        Patch(env_set={"A": hostile}),
        Patch(env_set={hostile: "1"}),
        Patch(env_unset=[hostile]),
        Patch(unit_set={"Service.Restart": hostile}),
        Patch(unit_set={f"Service.{hostile}": "no"}),
        Patch(args_add=["--served-model-name", hostile]),
        Patch(args_remove=[hostile]),
        Patch(env_set={"A": "tab\there"}),
        Patch(env_set={"A": "carriage\rreturn"}),
    ):
        with pytest.raises(UnsafeDropin):
            render_dropin(patch, "sglang.service")
    with pytest.raises(UnsafeDropin):
        render_dropin(Patch(env_set={"A": "1"}), "x.service", exec_start="/bin/true\n[Unit]")
    with pytest.raises(UnsafeDropin):
        render_fixes(EVIL_UNIT, [], None)
    assert render_dropin(Patch(env_set={"A": "1"}), EVIL_UNIT) is None


def test_a_value_from_the_log_with_a_newline_gives_no_fix_rather_than_a_crash() -> None:
    from diagnose.core import ranking
    from diagnose.core.signature_file import SignatureFile

    signature = SignatureFile.model_validate(
        {
            "id": "x-test",
            "title": "t",
            "category": "unit_config",
            "severity": "error",
            "match": {"type": "line", "needles": ["x"], "regex": "x=(?P<v>.*)"},
            "explanation": "e",
            "patches": [{"env_set": {"X": "{v}"}}],
            "examples": {
                "positive": [{"name": "p", "log": "x=1\n"}],
                "negative": [{"name": "n", "log": "y\n"}],
            },
        }
    )
    patch, note = ranking._patch(signature, {"v": "1\n[Service]"}, "sglang.service")
    assert patch is None and note is not None and "control character" in note


@given(st.text(max_size=300))
def test_any_name_is_either_a_unit_name_or_shown_escaped_on_one_printable_line(name: str) -> None:
    shown = escape_unit(name)
    if is_unit_name(name):
        assert shown == name
        assert name.isprintable() and len(name.encode()) <= 255
    else:
        assert shown.isprintable() and shown.isascii()
    if any(ord(c) < 32 or ord(c) == 127 for c in name):  # a newline, a tab, an escape...
        assert not is_unit_name(name) and not is_unit_name(shown)


@given(
    st.text(
        alphabet=st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from("_.:-"),
        min_size=1,
        max_size=300,
    )
)
def test_unit_names_follow_systemd_length_and_characters(prefix: str) -> None:
    name = f"{prefix}.service"
    assert is_unit_name(name) == (len(name) <= 255)
    if is_unit_name(name) and not name.startswith((".", "-")) and ".." not in name:
        assert check_unit_name(name) == name
    else:
        with pytest.raises(UserError):
            check_unit_name(name)


def test_an_escaped_newline_is_never_a_unit_name_to_write_for() -> None:
    forged = "a.service\nExecStartPre=/bin/sh\n.service"
    assert not is_unit_name(escape_unit(forged))
    assert escape_unit("gpu/node.service") == "gpu\\x2fnode.service"
    with pytest.raises(UserError, match=r"\\x0a"):
        check_unit_name("x.service\n")


# -- 2. every parser of times and numbers is total ----------------------------------------

EDGE_LOG = (
    "9999-12-31T23:59:59-23:59 gpu-node-07 python3[48211]: Traceback (most recent call last):\n"
    "9999-12-31T23:59:59-23:59 gpu-node-07 python3[48211]: RuntimeError: boom\n"
    "0001-01-01T00:00:00+23:59 gpu-node-07 systemd[1]: sglang.service: Main process exited, "
    "code=exited, status=1/FAILURE\n"
)


def test_a_time_past_the_calendar_is_a_note_through_file_and_stdin(tmp_path: Path) -> None:
    entry = json.loads(CRASHLOOP_JSON.read_text().splitlines()[0])
    entry["__REALTIME_TIMESTAMP"] = "9" * 40
    export = _export_with_unit("sglang-qwen.service") + (json.dumps(entry) + "\n").encode()
    for data in (EDGE_LOG.encode(), export):
        for output in _through_file_and_stdin(tmp_path, data, "--format", "json"):
            notes = json.loads(output)["notes"]
            assert any(n.startswith("timestamp out of range on ") for n in notes), notes


_OFFSETS = st.builds(
    lambda sign, h, m: f"{sign}{h:02}:{m:02}",
    st.sampled_from("+-"),
    st.integers(0, 23),
    st.integers(0, 59),
)


@given(
    year=st.integers(0, 9999),
    month=st.integers(0, 13),
    day=st.integers(0, 32),
    clock=st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
    offset=_OFFSETS | st.sampled_from(["Z", "", "+2359", "-2359"]),
    usec=st.integers(-(10**30), 10**30),
)
def test_every_time_format_takes_any_date_and_offset(
    year: int, month: int, day: int, clock: tuple[int, int, int], offset: str, usec: int
) -> None:
    from diagnose.inputs.lineformat import LineParser

    date = f"{year:04}-{month:02}-{day:02}"
    time = "{:02}:{:02}:{:02}".format(*clock)
    months = ["Jan", "Dec", "Feb"][month % 3]
    lines = [
        f"{date}T{time}{offset} gpu-node-07 python3[1]: RuntimeError: x",
        f"{months} {day % 100:02} {time}.000001 gpu-node-07 python3[1]: RuntimeError: x",
        f"[{date} {time}] RuntimeError: x",
        f"[{date} {time} TP0] RuntimeError: x",
        f"(EngineCore_DP0 pid=1) ERROR {month:02}-{day:02} {time} [core.py:1] RuntimeError: x",
        f"[{date}T{time}.5Z] RuntimeError: x",
        json.dumps({"MESSAGE": "RuntimeError: x", "__REALTIME_TIMESTAMP": str(usec)}),
    ]
    parser = LineParser("x.log", year if year >= 1000 else 2026)
    for number, line in enumerate(lines, 1):
        record = parser.parse(number, line)
        assert record is not None
        if record.ts is not None:
            assert record.ts.utcoffset() is not None and record.ts.utcoffset().total_seconds() == 0


@given(
    st.one_of(
        st.builds(
            lambda y, m, d, off: f"{y:04}-{m:02}-{d:02}T23:59:59{off}",
            st.integers(0, 9999),
            st.integers(1, 12),
            st.integers(1, 28),
            _OFFSETS | st.just(""),
        ),
        st.integers(-(10**30), 10**30).map(lambda n: f"@{n}"),
        st.integers(0, 10**30).map(lambda n: f"-{n}d"),
        st.text(max_size=30),
    )
)
def test_a_journal_time_argument_is_a_time_or_a_user_error(text: str) -> None:
    from datetime import datetime, timezone

    from diagnose.inputs.journal import parse_time

    now = datetime(2026, 3, 3, tzinfo=timezone.utc)
    try:
        stamp = parse_time(text, now)
    except UserError:
        return
    assert stamp.tzinfo is not None


@needs_journal
def test_a_since_or_until_past_the_calendar_exits_2(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "a.journal")
    for option, value in (("--until", "0001-01-01"), ("--since", "9999-12-31T23:59:59-23:59")):
        result = _cli("journal", "-u", "sglang-qwen", "--file", journal, option, value)
        assert result.returncode == 2 and "out of range" in result.stderr, result.stderr


@given(
    st.one_of(
        st.integers(-(10**600), 10**600).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.from_regex(r"[+-]?\d{1,500}(\.\d{0,20})?([eE][+-]?\d{1,5})?", fullmatch=True),
        st.text(max_size=40),
    ),
    st.sampled_from(["tp_size", "pp_size", "nnodes", "mem_fraction_static", "port", "dp_size"]),
)
def test_preflight_values_take_any_number(value: str, name: str) -> None:
    from diagnose.commands.preflight import out_of_range_values
    from diagnose.core.expr import as_number
    from diagnose.preflight.checks import LaunchConfig, config_values

    number = as_number(value)
    assert number is None or (number == number and abs(number) != float("inf"))
    notes = out_of_range_values({name: value})
    assert len(notes) <= 1
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "x", f"--{name}", value]
    config_values(LaunchConfig(argv=argv, environment={}))


def test_every_example_with_numbers_of_hundreds_of_digits_gives_a_report() -> None:
    """Each positive example of the library with every number made 400 digits long (past a
    float's range): matching, derived values, templates and ranking stay total."""
    import re as re_module

    from diagnose.core.engine import Engine
    from diagnose.inputs.files import LogInput
    from diagnose.inputs.pipeline import run_logs
    from diagnose.library import load_facts, load_signature_files

    library, facts = load_signature_files(include_user_dirs=False), load_facts()
    for signature in library:
        for example in signature.examples.positive:
            log = re_module.sub(r"\d+", "9" * 400, example.log)
            engine = Engine(library, facts=facts)
            data = LogInput(path=None, name="x.log", data=log.encode())
            run_logs(engine, [data])
            engine.finish(inputs=[data.summary()])


def test_a_version_or_a_port_of_thousands_of_digits_is_no_crash(tmp_path: Path) -> None:
    huge = "9" * 5000  # past the digits int() reads from text
    log = (
        f"(APIServer pid=1) INFO 03-17 10:00:33 [api_server.py:1896] vLLM API server version "
        f"0.{huge}.1\n(APIServer pid=1) ERROR 03-17 10:00:34 [x.py:1] RuntimeError: boom\n"
    )
    _through_file_and_stdin(tmp_path, log.encode())
    version = _cli("file", "-", "--engine-version", f"sglang=={huge}", stdin=log.encode())
    assert version.returncode == 2 and "ENGINE==VERSION" in version.stderr
    docker = ["docker", "run", "-p", f"{huge}:{huge}", "img", "python", "-m"]
    launch = ["sglang.launch_server", "--model-path", "x", "--tp-size", huge]
    result = _cli("preflight", "--no-gpu", "--no-port", "--", *docker, *launch)
    assert result.returncode in (0, 1), result.stderr


@pytest.mark.parametrize(
    "flag", ["--tp-size", "--pp-size", "--nnodes", "--port", "--mem-fraction-static"]
)
@pytest.mark.parametrize("value", ["1" + "0" * 400, "9" * 5000, "-1" + "0" * 400, "nan", "1e400"])
def test_preflight_takes_a_huge_number_without_a_crash(flag: str, value: str) -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "x", flag, value]
    result = _cli("preflight", "--no-gpu", "-f", "json", "--", *argv)
    assert result.returncode in (0, 1, 2), result.stderr
    if result.returncode != 2:
        notes = json.loads(result.stdout)["notes"]
        assert any("not checked" in note for note in notes), notes


# -- 3. lines that end in a lone \r ------------------------------------------------------

CRASHLOOP_TEXT = REPO / "fixtures/incidents/qwen-122b-crashloop.journal.txt"


def _findings(output: str) -> list[tuple[str, list[int | None]]]:
    report = json.loads(output)
    return [(f["signature"], [e.get("line") for e in f["evidence"]]) for f in report["findings"]]


@pytest.mark.parametrize("ending", [b"\r", b"\r\n"])
def test_lines_that_end_in_cr_are_lines_in_files_pipes_and_gzip(
    tmp_path: Path, ending: bytes
) -> None:
    import gzip

    reference = _cli("file", CRASHLOOP_TEXT, "-f", "json")
    expected = _findings(reference.stdout)
    assert expected and expected[0][0] == "sglang-spec-v2-required"
    data = CRASHLOOP_TEXT.read_bytes().replace(b"\n", ending)
    for output in _through_file_and_stdin(tmp_path, data, "-f", "json"):
        assert _findings(output) == expected
        assert json.loads(output)["inputs"][0]["records"] == 153
    compressed = tmp_path / "input.log.gz"
    compressed.write_bytes(gzip.compress(data))
    assert _findings(_cli("file", compressed, "-f", "json").stdout) == expected


def test_a_progress_bar_redrawn_with_cr_stays_one_record() -> None:
    from diagnose.inputs.files import LogInput, line_events

    data = b"start\nLoading:  10%\rLoading:  50%\rLoading: 100%\nValueError: x\n"
    texts = [e.text for e in line_events(LogInput(path=None, name="x", data=data))]
    assert texts == ["start", "Loading: 100%", "ValueError: x"]


@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=30), max_size=40
    ),
    st.sampled_from([b"\r", b"\r\n", b"\n"]),
    st.integers(1, 64),
)
def test_any_lines_read_the_same_whatever_they_end_in(
    lines: list[str], ending: bytes, block: int
) -> None:
    from diagnose.inputs import files
    from diagnose.inputs.files import cr_line_ends

    data = b"".join(line.encode("utf-8", "surrogatepass") + ending for line in lines)
    reference = b"".join(line.encode("utf-8", "surrogatepass") + b"\n" for line in lines)
    original = files.CHUNK_BYTES
    files.CHUNK_BYTES = max(block, 2)  # blocks cut anywhere, a \r\n across two of them
    try:
        got = [c for c in files.raw_chunks(files.LogInput(path=None, name="x", data=data))]
    finally:
        files.CHUNK_BYTES = original
    first = data[: max(block, 2)]
    if cr_line_ends(first) or ending == b"\n":  # (else a \r\n file keeps its \r for clean())
        assert b"".join(got) == reference


# -- 4. output file names from long unit names ------------------------------------------


@needs_journal
def test_a_postmortem_of_a_unit_named_with_255_bytes_is_written_and_listed(
    tmp_path: Path,
) -> None:
    long_unit = "sglang-" + "q" * (255 - len("sglang-.service")) + ".service"
    assert len(long_unit) == 255 and is_unit_name(long_unit)
    entries = [
        {k: v.replace("sglang-qwen.service", long_unit) for k, v in entry.items()}
        for entry in journalgen.crashloop_entries()
    ]
    journal = journalgen.write_journal(entries, tmp_path / "long.journal")
    out = tmp_path / "postmortems"
    for _ in (1, 2):  # the same name again: the same, stable file names
        result = _cli("postmortem", "write", "-u", long_unit, "--file", journal, "--dir", out)
        assert result.returncode == 0, result.stderr
        names = sorted(p.name for p in out.iterdir())
        assert len(names) == 2 and all(len(n.encode()) <= 255 for n in names), names
        assert names[0].startswith("sglang-qqq") and "~" in names[0]
    listed = json.loads(_cli("postmortems", "list", "--dir", out, "-f", "json").stdout)
    assert [row["unit"] for row in listed] == [long_unit]


def test_a_unit_too_long_for_a_drop_in_directory_is_a_user_error(tmp_path: Path) -> None:
    long_unit = "sglang-" + "q" * (254 - len("sglang-.service")) + ".service"  # 254 bytes
    hook = _cli("hook", "install", "-u", long_unit, "--root", tmp_path)
    assert hook.returncode == 2 and "longer than 255 bytes" in hook.stderr
    assert not list(tmp_path.rglob("*.conf"))


def test_long_names_that_share_a_start_get_different_stems() -> None:
    from datetime import datetime, timezone

    from diagnose.commands.postmortem import report_stem

    when = datetime(2026, 3, 3, tzinfo=timezone.utc)
    a, b = ("x" * 240 + tail + ".service" for tail in ("a", "b"))
    assert report_stem(a, when) != report_stem(b, when)
    assert report_stem(a, when) == report_stem(a, when)
    assert len(report_stem(a, when, 100).encode()) + len(".json") <= 100


# -- 5. a secret cut by a terminal's wrap ------------------------------------------------

SECRET = "Zq8s3cr3tV4lu3Th4tWr4pp3dH3r3x9"
WRAPPED_LOG = (
    "[2026-03-03 11:53:30] server_args=ServerArgs(model_path='/models/Qwen3.5-122B-A1\n"
    f"0B', api_key='{SECRET}', port=30000, tp_size=4)\n"
    f'$ python -m sglang.launch_server --model-path /models/x --api-key "{SECRET[:13]}\n'
    f'{SECRET[13:]}" --port 30000\n'
    "[2026-03-03 11:53:31] Traceback (most recent call last):\n"
    '  File "/x.py", line 1, in <module>\n'
    "[2026-03-03 11:53:31] RuntimeError: something odd happened\n"
)


def _fragments(secret: str, size: int = 6) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_a_wrapped_secret_is_hidden_on_both_lines(tmp_path: Path, fmt: str) -> None:
    for output in _through_file_and_stdin(tmp_path, WRAPPED_LOG.encode(), "-f", fmt):
        assert "redacted:flag" in output
        leaked = [part for part in _fragments(SECRET) if part in output]
        assert not leaked, leaked


def test_a_wrapped_secret_in_a_journal_export_is_hidden(tmp_path: Path) -> None:
    entry = json.loads(CRASHLOOP_JSON.read_text().splitlines()[1])
    lines = []
    for number, line in enumerate(WRAPPED_LOG.splitlines()):
        lines.append(json.dumps({**entry, "MESSAGE": line, "__REALTIME_TIMESTAMP": str(number)}))
    data = ("\n".join(lines) + "\n").encode()
    for output in _through_file_and_stdin(tmp_path, data, "-f", "json"):
        assert not [part for part in _fragments(SECRET) if part in output]


def test_a_secret_that_ends_a_short_line_leaves_the_next_line_alone() -> None:
    from diagnose.core.redact import Redactor

    lines = Redactor().lines(["HF_TOKEN=hf_abcdefghijklmnopqrstuv", "PATH=/usr/bin", "x"])
    assert lines == ["HF_TOKEN=<redacted:hf_token:1>", "PATH=/usr/bin", "x"]
    lines = Redactor().lines(["api_key='abc123456789'", "Loading weights"])
    assert lines[1] == "Loading weights"


@given(
    secret=st.text(alphabet="abcdefghijkLMNOPQRS0123456789", min_size=16, max_size=60),
    form=st.sampled_from(["--api-key {}", '--api-key "{}"', "api_key='{}'", "HF_TOKEN=hf_{}"]),
    width=st.integers(80, 160),
    lead=st.integers(0, 120),
)
def test_a_secret_wrapped_at_any_column_inside_it_never_shows(
    secret: str, form: str, width: int, lead: int
) -> None:
    from diagnose.core.redact import Redactor

    line = f"{'x' * lead} {form.format(secret)} --port 30000"
    start = line.index(secret)
    if not start < width < start + len(secret):
        return  # the wrap is not inside the secret
    wrapped = [line[i : i + width] for i in range(0, len(line), width)]
    shown = "\n".join(Redactor().lines(wrapped))
    assert not [part for part in _fragments(secret, 8) if part in shown], shown


# -- 6. incidents stay inside one service --------------------------------------------------


def _two_services(vllm_start: bool = False) -> list[dict[str, str]]:
    """SGLang's restart loop and a vLLM failure in its midst, on one host; without the line
    that starts the vLLM service unless ``vllm_start`` (the export began after it)."""
    from datetime import timedelta

    fixtures = REPO / "fixtures"
    sglang = (fixtures / "incidents/qwen-122b-crashloop.journal.txt").read_text()
    vllm = (fixtures / "reasoning/engine-core-failed-kv-too-small.journal.txt").read_text()
    if not vllm_start:
        vllm = "".join(line for line in vllm.splitlines(True) if "Started vllm-qwen" not in line)
    entries = journalgen.entries_from_short(sglang, "sglang-qwen.service", seed="a")
    shift = -timedelta(days=6, hours=4, minutes=46)  # into the SGLang restart loop
    entries += journalgen.entries_from_short(vllm, "vllm-qwen.service", seed="b", shift=shift)
    entries.sort(key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    for entry in entries:
        entry["_HOSTNAME"] = "gpu-node-07"
    return entries


def _as_short_text(entries: list[dict[str, str]]) -> bytes:
    from datetime import datetime, timezone

    lines = []
    for e in entries:
        when = datetime.fromtimestamp(int(e["__REALTIME_TIMESTAMP"]) / 1e6, tz=timezone.utc)
        who = f"{e.get('SYSLOG_IDENTIFIER', 'x')}[{e.get('_PID', '1')}]"
        lines.append(f"{when:%b %d %H:%M:%S.%f} {e['_HOSTNAME']} {who}: {e['MESSAGE']}\n")
    return "".join(lines).encode()


def _by_unit(report: dict) -> dict[str, list[tuple[str, str | None]]]:
    return {
        u["unit"]: [(f["signature"], f.get("caused_by")) for f in u["findings"]]
        for u in report["units"]
    }


@pytest.mark.parametrize("form", ["text", "json"])
def test_two_services_in_one_export_are_two_incidents(tmp_path: Path, form: str) -> None:
    entries = _two_services()
    data = (
        _as_short_text(entries)
        if form == "text"
        else "".join(json.dumps(e) + "\n" for e in entries).encode()
    )
    for output in _through_file_and_stdin(tmp_path, data, "-f", "json"):
        units = _by_unit(json.loads(output))
        sglang, vllm = units["sglang-qwen.service"], units["vllm-qwen.service"]
        assert [s for s, _ in sglang] == ["sglang-spec-v2-required", "systemd-restart-loop"]
        assert vllm[0] == ("vllm-kv-cache-below-max-model-len", None)
        assert not any(s.startswith("vllm") for s, _ in sglang)


@needs_journal
def test_journal_of_one_service_holds_none_of_the_other(tmp_path: Path) -> None:
    journal = journalgen.write_journal(_two_services(True), tmp_path / "two.journal")
    for unit, mine, other in (
        ("vllm-qwen", "vllm-", "sglang-"),
        ("sglang-qwen", "sglang-", "vllm-"),
    ):
        result = _cli("journal", "-u", unit, "--file", journal, "-f", "json")
        assert result.returncode == 1, result.stderr
        signatures = [f["signature"] for f in json.loads(result.stdout)["findings"]]
        assert signatures[0].startswith(mine)
        assert not any(s.startswith(other) for s in signatures)


def _draft(signature_id: str, unit: str, values: dict[str, object], seq: int):
    from diagnose.core.models import Confidence, Evidence
    from diagnose.core.ranking import Draft
    from diagnose.library import load_library

    signature = next(s for s in load_library(include_user_dirs=False) if s.id == signature_id)
    evidence = [Evidence(source="x", line=seq, host="gpu-node-07", unit=unit, text="...")]
    return Draft(signature, seq, dict(values), evidence, 1, 1, None, Confidence.HIGH, unit)


def test_a_link_across_services_needs_shared_evidence_and_names_it() -> None:
    from diagnose.core.ranking import rank

    cause = _draft("sglang-spec-v2-required", "a.service", {"port": "30000"}, 1)
    apart = _draft("vllm-kv-cache-below-max-model-len", "b.service", {"port": "8000"}, 2)
    findings = rank([cause, apart])
    assert findings[1].caused_by is None
    tied = _draft("vllm-kv-cache-below-max-model-len", "b.service", {"port": "30000"}, 2)
    findings = rank([cause, tied])
    assert findings[1].caused_by == "f1"
    assert "the same port 30000" in findings[1].explanation
    same = _draft("systemd-restart-loop", "a.service", {}, 3)
    assert rank([cause, same])[1].caused_by == "f1"


# -- 7. a socket's errno is the cause, with its address and its check ----------------------

FLEET = REPO / "fixtures/fleet"
NO_ROUTE = [FLEET / "node0-store-timeout.journal.txt", FLEET / "node1-no-route.journal.txt"]


def _fleet(report: dict) -> list[tuple[str, list[str], str, str | None]]:
    return [
        (f["role"], f["hosts"], f["signature"], f.get("caused_by"))
        for f in report["fleet"]["findings"]
    ]


def _the_network_cause(report: dict) -> None:
    assert _fleet(report) == [
        ("symptom", ["gpu-node-07"], "dist-store-timeout", "fleet-2"),
        ("root_cause", ["gpu-node-08"], "dist-connect-socket-error", None),
    ]
    (host,) = [h for h in report["hosts"] if h["host"] == "gpu-node-08"]
    (cause,) = [f for f in host["findings"] if f["signature"] == "dist-connect-socket-error"]
    assert cause["category"] == "network_config"
    assert "No route to host" in cause["explanation"] and "10.20.0.7:5000" in cause["explanation"]
    checks = " ".join(cause["next_checks"])
    assert "`nc -zv 10.20.0.7 5000`" in checks and "firewall" in checks
    assert "dist_init_addr" in checks


def test_no_route_to_the_rendezvous_is_the_fleet_cause_through_files_and_stdin() -> None:
    _the_network_cause(json.loads(_cli("file", *NO_ROUTE, "-f", "json").stdout))
    joined = b"".join(path.read_bytes() for path in NO_ROUTE)
    _the_network_cause(json.loads(_cli("file", "-", "-f", "json", stdin=joined).stdout))


@needs_journal
def test_no_route_to_the_rendezvous_is_the_fleet_cause_through_the_journal(
    tmp_path: Path,
) -> None:
    entries = []
    for number, path in enumerate(NO_ROUTE):
        text = path.read_text()
        entries += journalgen.entries_from_short(text, "sglang-qwen.service", seed=str(number))
    journal = journalgen.write_journal(entries, tmp_path / "fleet.journal")
    result = _cli("journal", "-u", "sglang-qwen", "--file", journal, "-f", "json")
    assert result.returncode == 1, result.stderr
    _the_network_cause(json.loads(result.stdout))


@pytest.mark.parametrize(
    ("errno", "reason", "says", "check"),
    [
        (113, "No route to host", "firewall on 10.0.0.11", "ip route get 10.0.0.11"),
        (111, "Connection refused", "nothing listens on port 5000", "ss -ltnp"),
        (110, "Connection timed out", "drops the packets", "firewall-cmd"),
        (97, "Address family not supported by protocol", "IPv4 address", "disable_ipv6"),
    ],
)
def test_each_errno_has_its_own_cause_and_check(
    tmp_path: Path, errno: int, reason: str, says: str, check: str
) -> None:
    line = (
        "[2026-03-02 09:14:11 TP0] torch.distributed.DistNetworkError: The client socket has "
        "failed to connect to any network address of (10.0.0.11, 5000). The client socket has "
        f"failed to connect to [10.0.0.11]:5000 (errno: {errno} - {reason}).\n"
    )
    for output in _through_file_and_stdin(tmp_path, line.encode(), "-f", "json"):
        (cause,) = [f for f in json.loads(output)["findings"] if f["role"] == "root_cause"]
        assert cause["signature"] == "dist-connect-socket-error"
        assert says in cause["explanation"]
        assert check in " ".join(cause["next_checks"])
        assert "nc -zv 10.0.0.11 5000" in " ".join(cause["next_checks"])


def test_the_ipv6_probe_warning_of_a_healthy_start_is_no_failure(tmp_path: Path) -> None:
    healthy = (REPO / "fixtures/incidents/healthy-sglang.journal.txt").read_text().splitlines()
    probe = (
        "[W306 12:11:28.000000000 socket.cpp:759] [c10d] The client socket cannot be "
        "initialized to connect to [localhost]:29500 (errno: 97 - Address family not "
        "supported by protocol)."
    )
    prefix = healthy[5].split("]: ", 1)[0] + "]: "
    data = "\n".join([*healthy[:6], prefix + probe, *healthy[6:]]) + "\n"
    path = tmp_path / "healthy.log"
    path.write_text(data)
    for result in (
        _cli("file", path, "-f", "json"),
        _cli("file", "-", "-f", "json", stdin=data.encode()),
    ):
        assert result.returncode == 0, result.stdout
        assert json.loads(result.stdout)["primary"] is None


# -- 8. terminal output, --help and the HTML postmortem -------------------------------------

CRASHLOOP_TXT = REPO / "fixtures/incidents/qwen-122b-crashloop.journal.txt"
OOM_HOST = REPO / "fixtures/incidents/host-oom.journal.txt"


def _cli_env(*args: str | Path, env: dict[str, str], stdin: bytes | None = None) -> str:
    result = _cli(*args, stdin=stdin, env=env)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout


def _commands_of_checks(report: dict) -> list[str]:
    from diagnose.render.text import copied_commands

    shown = [f for f in report["findings"] if f["role"] != "symptom"]  # (a symptom: its title)
    checks = [c for f in shown for c in f["next_checks"]]
    return [m.group("command") for c in checks for m in copied_commands(c)]


def _fits(output: str, width: int, whole: list[str]) -> None:
    """Every line within ``width``, except a line that is one whole thing to copy."""
    from diagnose.render.text import _WHOLE

    for line in output.splitlines():
        if len(line) <= width:
            continue
        copied = line.strip().removeprefix("- ")  # (a check that starts with its command)
        assert (
            copied in whole
            or _WHOLE.fullmatch(copied)  # one code span longer than the width, alone
            or copied.startswith(("https://", "#", "[", "Environment=", "ExecStart"))
            or ":" in copied.split("  ")[0]  # an evidence line: log text, as it was
        ), line


@pytest.mark.parametrize("columns", ["60", ""])
def test_prose_wraps_to_the_width_and_commands_stay_whole(columns: str) -> None:
    for log in (CRASHLOOP_TXT, OOM_HOST):
        report = json.loads(_cli_env("file", log, "-f", "json", env={}))
        commands = _commands_of_checks(report)
        env = {"COLUMNS": columns} if columns else {}  # a pipe without COLUMNS: 80
        outputs = [
            _cli_env("file", log, env=env),
            _cli_env("file", "-", env=env, stdin=log.read_bytes()),
        ]
        for output in outputs:
            _fits(output, int(columns or 80), commands)
            lines = [line.strip() for line in output.splitlines()]
            for command in commands:  # each whole, on a line of its own
                assert command in lines or f"- {command}" in lines, command


@given(
    st.lists(
        st.one_of(
            st.text(alphabet="abcdefghij ,.:;", min_size=1, max_size=12),
            st.sampled_from(["`nc -zv 10.0.0.1 5000`", "(pip install -U vllm)", "`x`"]),
            st.just("pip install 'vllm>=0.11'"),
        ),
        max_size=30,
    ),
    st.integers(20, 120),
)
def test_wrapping_keeps_every_word_and_never_splits_a_command(parts: list[str], width: int) -> None:
    from diagnose.render.text import _WHOLE, wrap

    text = " ".join(parts)
    lines = wrap(text, width)
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    whole = [m.group() for m in _WHOLE.finditer(text)]
    for line in lines:
        assert len(line) <= width or any(w in line for w in whole) or " " not in line
    joined = "\n".join(lines)
    for command in whole:
        assert command in joined, (command, lines)


def _help_screens() -> list[list[str]]:
    import typer.main

    from diagnose.cli.app import app

    group = typer.main.get_command(app)
    screens: list[list[str]] = [[]]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        screens.append([name])
        screens += [[name, sub] for sub in getattr(command, "commands", {})]
    return screens


def test_help_is_readable_at_80_columns_and_switches_take_no_value() -> None:
    from typer.testing import CliRunner

    from diagnose.cli.app import app

    def invoke(args: list[str], env: dict[str, str]):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(app, args, env=env)

    for words in _help_screens():
        result = invoke([*words, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, words
        for line in result.stdout.splitlines():
            assert len(line) <= 80, (words, line)
        assert "<bool>" not in result.stdout and "<str>" not in result.stdout, words
        assert "…" not in result.stdout, words  # nothing cut
    journal = invoke(["journal", "--help"], env={"COLUMNS": "80"}).stdout
    assert "UNIT.d/zz-diagnose.conf" in journal
    assert "--drop-in=zz-diagnose" in journal  # wrapped at spaces, never at a hyphen
    assert "  --apply " in journal and "  --apply <" not in journal


def _headings(markdown: str, html: str) -> tuple[list[str], list[str]]:
    import html as html_module
    import re as re_module

    prose = re_module.sub(r"^```.*?^```", "", markdown, flags=re_module.M | re_module.S)
    from_markdown = [
        f"h{len(m.group(1))} {m.group(2).replace('`', '')}"
        for m in re_module.finditer(r"^(#{1,3}) (.+)$", prose, re_module.M)
    ]
    from_html = [
        f"h{m.group(1)} {html_module.unescape(re_module.sub('<[^>]+>', '', m.group(2)))}"
        for m in re_module.finditer(r"<h([1-3])[^>]*>(.*?)</h\1>", html)
    ]
    return from_markdown, from_html


@pytest.mark.parametrize(
    "logs",
    [
        [str(p) for p in NO_ROUTE],
        [str(CRASHLOOP_TXT)],
        [str(REPO / "fixtures/incidents/healthy-sglang.journal.txt")],
    ],
    ids=["two-hosts", "crashloop", "healthy"],
)
def test_the_html_postmortem_has_every_section_of_the_markdown(logs: list[str]) -> None:
    markdown = _cli_env("file", *logs, "-f", "markdown", env={})
    html = _cli_env("file", *logs, "-f", "html", env={})
    from_markdown, from_html = _headings(markdown, html)
    assert from_markdown == from_html
    if len(logs) == 2:
        assert "h2 Hosts" in from_html and "gpu-node-07" in html.split("</section>")[1]


_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_CLIPPED = (
    "<script>document.body.setAttribute('data-clipped', [...document.querySelectorAll('.bar')]"
    ".filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent).join('|'))"
    "</script>"
)


@pytest.mark.skipif(_CHROMIUM is None, reason="needs chromium")
@pytest.mark.parametrize("width", [1280, 390])
def test_no_timeline_label_is_cut_in_chromium(tmp_path: Path, width: int) -> None:
    import re as re_module

    from tests.test_postmortem import _chromium

    for name, logs in (("fleet", NO_ROUTE), ("loop", [CRASHLOOP_TXT])):
        page = _cli_env("file", *logs, "-f", "html", env={})
        shot = tmp_path / f"{name}-{width}.png"  # kept as the test's artifact
        (tmp_path / f"{name}.html").write_text(page)
        taken = _chromium(
            tmp_path, f"--window-size={width},1400", f"--screenshot={shot}",
            (tmp_path / f"{name}.html").as_uri(),
        )  # fmt: skip
        assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr
        # the same page with a probe that lists every bar whose words do not fit
        probe = tmp_path / f"{name}-probe.html"
        csp = r'<meta http-equiv="Content-Security-Policy"[^>]*>'
        probe.write_text(re_module.sub(csp, "", page).replace("</body>", _CLIPPED + "</body>"))
        dom = _chromium(tmp_path, f"--window-size={width},1400", "--dump-dom", probe.as_uri())
        found = re_module.search(r'data-clipped="([^"]*)"', dom.stdout)
        assert found is not None, dom.stderr
        assert found.group(1) == "", f"cut at {width}px: {found.group(1)}"


@needs_journal
def test_the_journal_report_wraps_to_the_width_too(tmp_path: Path) -> None:
    journal = journalgen.write_journal(journalgen.crashloop_entries(), tmp_path / "loop.journal")
    args = ("journal", "-u", "sglang-qwen", "--file", journal)
    commands = _commands_of_checks(json.loads(_cli_env(*args, "-f", "json", env={})))
    output = _cli_env(*args, env={"COLUMNS": "60"})
    _fits(output, 60, commands)
    assert "# /etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf" in output.splitlines()
