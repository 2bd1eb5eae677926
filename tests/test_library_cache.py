"""The loaded library is kept between runs, keyed by the files' bytes and the schema's code: a
later run neither parses YAML nor validates nor compiles (it reads a regex's compiled code only
when a line needs it), and a stale, corrupt or foreign cache entry is harmless."""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import regex

from diagnose import library
from diagnose.core.errors import UserError
from diagnose.core.signature import Pattern, Signature
from diagnose.library import CACHE_DIR_VARIABLE, load_directory

from .conftest import REPO

SIGNATURE = REPO / "signatures" / "systemd" / "systemd-exec-failed.yaml"
EXEC_FAILED = (
    "sglang-qwen.service: Failed at step EXEC spawning /opt/sglang/.venv/bin/sglang: "
    "No such file or directory"
)


@pytest.fixture
def signatures(tmp_path: Path) -> Path:
    directory = tmp_path / "signatures"
    directory.mkdir()
    shutil.copy(SIGNATURE, directory)
    return directory


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(directory))
    return directory


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("library-*.pickle"))


def _no_yaml(path: Path, content: bytes) -> object:
    raise AssertionError(f"{path} was parsed although the cache holds it")


def _no_validation(cls: type, *args: object, **kwargs: object) -> object:
    raise AssertionError(f"{cls.__name__} was validated although the cache holds it")


def _no_compiling(pattern: str, *args: object, **kwargs: object) -> object:
    raise AssertionError(f"{pattern!r} was compiled although the cache holds it")


def test_second_load_reads_the_cache_and_gives_the_same_signatures(
    signatures: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_directory(signatures)
    assert len(_entries(cache)) == 1
    monkeypatch.setattr(library, "_parse_yaml", _no_yaml)
    monkeypatch.setattr(Signature, "model_validate", classmethod(_no_validation))
    second = load_directory(signatures)
    assert [s.model_dump() for s in second] == [s.model_dump() for s in first]


def test_the_cache_keeps_compiled_regexes_unread(signatures: Path, cache: Path) -> None:
    (cold,) = load_directory(signatures)
    assert cold.patterns()[0]._compiled is not None  # compiled, and so checked, when loaded
    (entry,) = _entries(cache)
    (kept,) = pickle.loads(entry.read_bytes())
    assert [p._compiled for p in kept.patterns()] == [None] * len(kept.patterns())
    assert all(p._compiled_pickle for p in kept.patterns())  # as `regex` pickles a pattern
    assert kept._conditions == {} and kept._derived is None


def test_cached_derived_values_are_parsed_when_first_used(tmp_path: Path, cache: Path) -> None:
    directory = tmp_path / "signatures"
    directory.mkdir()
    shutil.copy(REPO / "signatures" / "common" / "parallel-size-not-divisible.yaml", directory)
    (cold,) = load_directory(directory)
    (warm,) = load_directory(directory)
    assert warm._derived is None
    values = {"model_count": 40, "tp": 6, "numerator": 10, "denominator": 4}
    assert {n: a.value(values) for n, a in warm.derived.items()} == {
        n: a.value(values) for n, a in cold.derived.items()
    }


def test_cached_patterns_are_read_when_first_used_and_still_match(
    signatures: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_directory(signatures)
    (signature,) = load_directory(signatures)
    pattern = signature.patterns()[0]
    assert pattern._compiled is None  # not read at load
    monkeypatch.setattr(regex, "compile", _no_compiling)
    found = pattern.compiled.search(EXEC_FAILED)
    assert found is not None and found.group("step") == "EXEC"


def test_cached_conditions_are_read_when_first_tested(signatures: Path, cache: Path) -> None:
    (cold,) = load_directory(signatures)
    assert "step == 'EXEC'" in cold._conditions  # read, and so checked, at the first load
    (warm,) = load_directory(signatures)
    assert warm._conditions == {}
    assert warm.condition("step == 'EXEC'").holds({"step": "EXEC"})
    assert not warm.condition("step == 'EXEC'").holds({"step": "USER"})


def test_a_changed_file_is_parsed_again(signatures: Path, cache: Path) -> None:
    load_directory(signatures)
    path = signatures / SIGNATURE.name
    path.write_text(path.read_text().replace("severity: critical", "severity: error"))
    (signature,) = load_directory(signatures)
    assert signature.severity.value == "error"
    assert len(_entries(cache)) == 2


def test_a_corrupt_entry_is_ignored_and_replaced(signatures: Path, cache: Path) -> None:
    load_directory(signatures)
    (entry,) = _entries(cache)
    entry.write_bytes(b"\x00not a pickle")
    (signature,) = load_directory(signatures)
    assert signature.id == "systemd-exec-failed"
    assert entry.read_bytes() != b"\x00not a pickle"


def test_an_entry_of_another_kind_is_ignored_and_replaced(signatures: Path, cache: Path) -> None:
    load_directory(signatures)
    (entry,) = _entries(cache)
    entry.write_bytes(pickle.dumps([{"id": "systemd-exec-failed"}]))
    (signature,) = load_directory(signatures)
    assert isinstance(signature, Signature)
    assert isinstance(pickle.loads(entry.read_bytes())[0], Signature)


def test_an_entry_others_may_write_is_never_unpickled(
    signatures: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_directory(signatures)
    (entry,) = _entries(cache)
    assert entry.stat().st_mode & 0o777 == 0o600
    entry.chmod(0o666)
    unpickled: list[object] = []
    monkeypatch.setattr(pickle, "load", unpickled.append)
    (signature,) = load_directory(signatures)
    assert unpickled == []
    assert signature.id == "systemd-exec-failed"
    assert entry.stat().st_mode & 0o777 == 0o600  # written again, only ours


def test_a_changed_schema_module_is_a_new_entry(
    signatures: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "schema.py"
    source.write_text("class Signature: ...\n")
    monkeypatch.setattr(library, "_SCHEMA_SOURCES", (source,))
    schema_digest = functools.cache(library._schema_digest.__wrapped__)  # this test's own
    monkeypatch.setattr(library, "_schema_digest", schema_digest)
    load_directory(signatures)
    source.write_text("class Signature:\n    added: int\n")
    schema_digest.cache_clear()  # the next run reads the schema's source again
    load_directory(signatures)
    assert len(_entries(cache)) == 2


def test_another_regex_release_is_a_new_entry(
    signatures: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps patterns compiled, in the ``regex`` release's own format."""
    schema_digest = functools.cache(library._schema_digest.__wrapped__)  # this test's own
    monkeypatch.setattr(library, "_schema_digest", schema_digest)
    load_directory(signatures)
    monkeypatch.setattr(regex, "__version__", "0.0.0")
    schema_digest.cache_clear()  # the next run reads the release again
    load_directory(signatures)
    assert len(_entries(cache)) == 2


def test_the_schema_source_is_read_once_per_run(
    signatures: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Path] = []
    real_read = Path.read_bytes

    def counted(path: Path) -> bytes:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(
        library, "_schema_digest", functools.cache(library._schema_digest.__wrapped__)
    )
    monkeypatch.setattr(Path, "read_bytes", counted)
    load_directory(signatures)
    load_directory(signatures)
    assert sum(path == Path(library.__file__) for path in reads) == 1


def test_a_bad_regex_is_reported_and_nothing_is_cached(signatures: Path, cache: Path) -> None:
    path = signatures / SIGNATURE.name
    path.write_text(path.read_text().replace("(?P<step>[A-Z_]+)", "(?P<step>[A-Z_]+"))
    with pytest.raises(UserError, match="regex does not compile"):
        load_directory(signatures)
    assert _entries(cache) == []


def test_off_keeps_nothing(
    signatures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    load_directory(signatures)
    assert not (tmp_path / "xdg").exists()


def test_an_unwritable_cache_costs_nothing_but_time(
    signatures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocker / "cache"))
    (signature,) = load_directory(signatures)
    assert signature.id == "systemd-exec-failed"


def test_data_files_beside_the_signatures_are_cached_too(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    shutil.copy(REPO / "signatures" / library.FACTS_FILE, directory)
    first = [p.model_dump() for p in library.load_facts.__wrapped__(directory)]
    assert len(list(cache.glob("data-*.pickle"))) == 1
    monkeypatch.setattr(library, "_parse_yaml", _no_yaml)
    monkeypatch.setattr(Pattern, "model_validate", classmethod(_no_validation))
    assert [p.model_dump() for p in library.load_facts.__wrapped__(directory)] == first
    (directory / library.FACTS_FILE).write_text("facts: [")  # changed bytes: parsed again
    monkeypatch.undo()
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(cache))
    with pytest.raises(UserError, match="not valid YAML"):
        library.load_facts.__wrapped__(directory)


def test_cached_facts_compile_when_first_used(tmp_path: Path, cache: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    shutil.copy(REPO / "signatures" / library.FACTS_FILE, directory)
    assert all(p._compiled is not None for p in library.load_facts.__wrapped__(directory))
    warm = library.load_facts.__wrapped__(directory)
    assert all(p._compiled is None for p in warm)  # not compiled at load
    tp_size = next(p for p in warm if "--tp-size" in p.needles)
    found = tp_size.compiled.search("--model-path /models/q --tp-size 4")
    assert found is not None and found.group("tp_size") == "4"


def test_facts_with_a_bad_regex_are_not_cached(tmp_path: Path, cache: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / library.FACTS_FILE).write_text('facts:\n  - regex: "(?P<tp_size>\\\\d+"\n')
    for _ in range(2):  # the second run is told too, not handed an uncompiled regex
        with pytest.raises(UserError, match="regex does not compile"):
            library.load_facts.__wrapped__(directory)
    assert list(cache.glob("data-*.pickle")) == []


WARM_LOAD_PROBE = """
import sys
from diagnose.library import load_facts, load_library
load_library(include_user_dirs=False)
load_facts()
print("diagnose.core.signature_file" in sys.modules)
from diagnose.core.models import Diagnosis
from diagnose.core.signature import Pattern, Relations
from diagnose.core.signature_file import SignatureFile
print([m.__pydantic_complete__ for m in (SignatureFile, Pattern, Relations, Diagnosis)])
"""


def test_a_warm_load_builds_no_schema(tmp_path: Path) -> None:
    """Building the signature schema is a tenth of a small run; a cached library needs none,
    nor the examples (not even their classes), and no report model is built before the first
    report is."""
    environment = {**os.environ, CACHE_DIR_VARIABLE: str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", WARM_LOAD_PROBE],
            capture_output=True,
            text=True,
            env=environment,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == "True\n[True, True, True, False]\n"  # the cold run validated the files
    assert runs[1] == "False\n[False, False, False, False]\n"
