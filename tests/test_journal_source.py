"""Reading real journal files (made in the test by systemd-journal-remote) two ways:
systemd-python and ``journalctl -o json``, which must give the same records; and scoping to
the last start attempt or restart loop."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import pytest

from diagnose.core.errors import UserError
from diagnose.core.units import unit_name
from diagnose.inputs import journal as source
from tests import journalgen

pytestmark = pytest.mark.skipif(
    journalgen.journal_remote() is None or shutil.which("journalctl") is None,
    reason="needs systemd-journal-remote and journalctl (apt-get install systemd-journal-remote)",
)
UNIT = journalgen.UNIT


def _has_systemd_python() -> bool:
    try:
        import systemd.journal  # noqa: F401
    except ImportError:
        return False
    return True


READERS = [
    pytest.param(
        "systemd-python",
        marks=pytest.mark.skipif(
            not _has_systemd_python(),
            reason="systemd-python is not installed (pip install 'diagnose[journald]')",
        ),
    ),
    "journalctl",
]


@pytest.fixture(scope="module")
def loop_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("journal") / "loop.journal"
    return journalgen.write_journal(journalgen.crashloop_entries(), path)


def _select(path: Path, reader: str, **query: object) -> source.Scope:
    location = source.JournalLocation(files=[path])
    backend = source.open_backend(location, reader)
    return source.select(source.JournalQuery(UNIT, location, **query), backend)  # type: ignore[arg-type]


def _records(scope: source.Scope) -> list[dict[str, object]]:
    return [asdict(r) for r in scope.records]


@pytest.mark.skipif(not _has_systemd_python(), reason="systemd-python is not installed")
@pytest.mark.parametrize(
    "query",
    [{}, {"invocations": 2}, {"invocations": 10}, {"boot": "0"}],
    ids=["default", "last-2", "all", "boot-0"],
)
def test_both_readers_give_the_same_records(loop_journal: Path, query: dict[str, object]) -> None:
    started = time.perf_counter()
    python = _select(loop_journal, "systemd-python", **query)
    middle = time.perf_counter()
    journalctl = _select(loop_journal, "journalctl", **query)
    print(f"systemd-python {middle - started:.3f}s, journalctl {time.perf_counter() - middle:.3f}s")
    assert python.records, "no records"
    assert _records(python) == _records(journalctl)
    assert [asdict(a) for a in python.attempts] == [asdict(a) for a in journalctl.attempts]
    assert python.notes == journalctl.notes


@pytest.mark.parametrize("reader", READERS)
def test_default_scope_is_the_restart_loop(loop_journal: Path, reader: str) -> None:
    scope = _select(loop_journal, reader)
    assert len(scope.attempts) == 5 and scope.loop
    assert all(a.failed and a.started for a in scope.attempts)
    assert [a.restarted for a in scope.attempts] == [True] * 4 + [False]
    assert scope.left_out >= 1
    texts = [r.text for r in scope.records]
    assert texts[0].startswith("Started sglang-qwen.service")
    assert sum(t.startswith("Started sglang-qwen.service") for t in texts) == 5
    assert not any("ready to roll" in t or "Deactivated successfully" in t for t in texts)
    assert not any("not ours" in t for t in texts)  # another unit
    # kernel lines of the loop's window only
    assert any(t.startswith("NVRM: GPU at PCI") for t in texts)
    assert not any("USB device" in t for t in texts)
    assert scope.kernel_lines == 1
    # journald's rate limit for this unit (not the other one) is reported
    assert scope.suppressed == 1234
    assert any("suppressed 1234 messages" in n for n in scope.notes)
    # every record of journal input has a cursor and no line number (contract)
    assert all(r.cursor and r.line is None for r in scope.records)
    assert {
        r.invocation for r in scope.records if r.origin in ("app", "systemd")
    } == scope.invocations
    # a binary-safe (carriage return) message was read
    assert any(r.text.startswith("Loading shards:  25%") for r in scope.records)
    origins = {r.origin for r in scope.records}
    assert origins >= {"app", "systemd", "kernel", "journald"}


@pytest.mark.parametrize("reader", READERS)
def test_invocations_n_takes_the_last_n(loop_journal: Path, reader: str) -> None:
    assert len(_select(loop_journal, reader, invocations=1).attempts) == 1
    everything = _select(loop_journal, reader, invocations=50)
    assert len(everything.attempts) == 6
    assert not everything.attempts[0].failed and everything.attempts[0].result == "success"
    assert any("ready to roll" in r.text for r in everything.records)


@pytest.mark.parametrize("reader", READERS)
def test_since_and_until_take_every_attempt_in_the_window(loop_journal: Path, reader: str) -> None:
    since = source.parse_time("2026-03-03T11:53:40+00:00")
    until = source.parse_time("2026-03-03T11:54:30+00:00")
    scope = _select(loop_journal, reader, since=since, until=until)
    # the end of the first attempt, all of the second, the start of the third
    assert len(scope.attempts) == 3
    assert [a.started for a in scope.attempts] == [False, True, True]
    assert scope.attempts[1].failed and scope.attempts[1].restarted
    assert all(since <= r.ts <= until + source.KERNEL_SLACK for r in scope.records if r.ts)


@pytest.mark.parametrize("reader", READERS)
def test_boots(tmp_path: Path, reader: str) -> None:
    text = (journalgen.FIXTURES / "incidents/qwen-122b-crashloop.journal.txt").read_text()
    lines = text.splitlines(keepends=True)
    first = journalgen.entries_from_short("".join(lines[:40]), UNIT, boot_id="1" * 32, seed="b1")
    second = journalgen.entries_from_short(
        "".join(lines), UNIT, boot_id="2" * 32, seed="b2", shift=timedelta(hours=5)
    )
    path = journalgen.write_journal(first + second, tmp_path / "boots.journal")
    assert _select(path, reader, boot="-1").boot == "1" * 32
    assert _select(path, reader, boot="0").boot == "2" * 32
    assert _select(path, reader, boot="1").boot == "1" * 32
    old = _select(path, reader, boot="1" * 32)
    assert {r.ts.hour for r in old.records if r.ts} == {11}
    with pytest.raises(UserError):
        _select(path, reader, boot="-5")


@pytest.mark.parametrize("reader", READERS)
def test_a_start_whose_beginning_rotated_out_is_reported(tmp_path: Path, reader: str) -> None:
    text = (journalgen.FIXTURES / "incidents/qwen-122b-crashloop.journal.txt").read_text()
    entries = journalgen.entries_from_short(text, UNIT, seed="rot")
    last = entries[-1]["INVOCATION_ID"]
    entries = [
        e for e in entries if last in (e.get("INVOCATION_ID"), e.get("_SYSTEMD_INVOCATION_ID"))
    ]
    path = journalgen.write_journal(entries[8:], tmp_path / "rotated.journal")
    scope = _select(path, reader)
    assert len(scope.attempts) == 1 and not scope.attempts[0].started
    assert any("rotated out" in note for note in scope.notes)


@pytest.mark.parametrize("reader", READERS)
def test_a_unit_with_no_entries_gives_an_empty_scope(loop_journal: Path, reader: str) -> None:
    location = source.JournalLocation(files=[loop_journal])
    backend = source.open_backend(location, reader)
    scope = source.select(source.JournalQuery("nope.service", location), backend)
    assert scope.attempts == [] and scope.records == []


def test_unit_names_and_times() -> None:
    assert unit_name("sglang-qwen") == "sglang-qwen.service"
    assert unit_name("a@b.service") == "a@b.service"
    with pytest.raises(UserError):
        unit_name("../x")
    now = source.parse_time("@1772538790")
    assert source.parse_time("-2h", now) == now - timedelta(hours=2)
    assert source.parse_time("@1772538790.5").microsecond == 500000
    with pytest.raises(UserError):
        source.parse_time("next tuesday-ish")


def test_systemd_python_is_imported_only_by_the_journal_source() -> None:
    package = Path(source.__file__).parent.parent
    importers = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if "from systemd" in p.read_text() or "import systemd" in p.read_text()
    ]
    assert importers == ["inputs/journal.py"]
