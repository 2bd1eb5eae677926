"""``--apply``: one drop-in, at most one backup, nothing written twice, no escape from UNIT.d."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diagnose.core.errors import UserError
from diagnose.systemd.apply import apply_dropin, dropin_path

TEXT = "# /etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf\n[Service]\nEnvironment=A=1\n"


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_apply_twice_gives_one_file_and_no_backup(tmp_path: Path) -> None:
    first = apply_dropin("sglang-qwen.service", TEXT, tmp_path)
    second = apply_dropin("sglang-qwen.service", TEXT, tmp_path)
    assert first.changed and first.backup is None
    assert not second.changed
    assert _files(tmp_path) == ["etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf"]
    assert first.path.read_text() == TEXT
    assert oct(first.path.stat().st_mode & 0o777) == "0o644"
    assert first.commands("sglang-qwen.service") == [
        "systemctl daemon-reload",
        "systemctl restart sglang-qwen.service",
    ]


def test_a_changed_fix_keeps_one_backup(tmp_path: Path) -> None:
    apply_dropin("sglang-qwen.service", TEXT, tmp_path)
    changed = apply_dropin("sglang-qwen.service", TEXT.replace("A=1", "A=2"), tmp_path)
    again = apply_dropin("sglang-qwen.service", TEXT.replace("A=1", "A=3"), tmp_path)
    assert changed.backup is not None and again.backup == changed.backup
    assert _files(tmp_path) == [
        "etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf",
        "etc/systemd/system/sglang-qwen.service.d/zz-diagnose.conf.bak",
    ]
    assert again.backup.read_text() == TEXT.replace("A=1", "A=2")
    assert again.path.read_text() == TEXT.replace("A=1", "A=3")


@pytest.mark.parametrize(
    "unit", ["../../etc/passwd", "a/b.service", "..service", "x", ".hidden.service"]
)
def test_bad_unit_names_are_refused(tmp_path: Path, unit: str) -> None:
    with pytest.raises(UserError):
        dropin_path(unit, tmp_path)
    assert _files(tmp_path) == []


def test_a_symlinked_dropin_dir_that_leaves_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    os.symlink(outside, root / "etc/systemd/system/x.service.d")
    with pytest.raises(UserError, match="outside"):
        apply_dropin("x.service", TEXT, root)
    assert list(outside.iterdir()) == []


def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    for value in "123":
        apply_dropin("x.service", TEXT.replace("A=1", f"A={value}"), tmp_path)
    names = sorted(p.name for p in (tmp_path / "etc/systemd/system/x.service.d").iterdir())
    assert names == ["zz-diagnose.conf", "zz-diagnose.conf.bak"]
