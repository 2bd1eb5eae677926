"""Finding and loading signature files: the built-in library and users' own directories."""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from diagnose import __version__
from diagnose.atomic import write_bytes_atomically
from diagnose.core.engine import Engine
from diagnose.core.errors import UserError
from diagnose.core.signature import PREVALIDATED, Architectures, Pattern, Relations, Signature
from diagnose.knowledge.deferred import (
    EngineSourceTier,
    KnownIssueTier,
    MessageWordsTier,
    ReleaseFactsTier,
)

CACHE_DIR_VARIABLE = "DIAGNOSE_CACHE_DIR"
"""Where the parsed library is kept between runs (default: ``$XDG_CACHE_HOME/diagnose``);
``off`` keeps nothing."""
EXCLUDE_THREADS_VARIABLE = "DIAGNOSE_EXCLUDE_THREADS"
"""Comma-separated thread URLs whose known-issue records are left out (leave-one-thread-out
scoring in the accuracy benchmark)."""
FACTS_FILE = "_facts.yaml"
RELATIONS_FILE = "_relations.yaml"
ARCHITECTURES_FILE = "_architectures.yaml"


def builtin_dir() -> Path:
    """The signatures shipped with the package (a wheel), or the repository's (a checkout)."""
    packaged = Path(__file__).parent / "_signatures"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "signatures"


def user_dirs() -> list[Path]:
    """Site and user signature directories, lowest precedence first."""
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    candidates = [Path("/etc/diagnose/signatures.d"), config_home / "diagnose" / "signatures"]
    return [path for path in candidates if path.is_dir()]


def _location(error: ErrorDetails) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(top level)"


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise UserError(f"{path}: cannot read signature file: {error.strerror}") from None


def _parse_yaml(path: Path, content: bytes) -> object:
    import yaml  # only when the cache has not got the file (a warm run never imports it)

    try:
        return yaml.load(
            content.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not valid YAML: {detail}") from None


def load_file(path: Path) -> Signature:
    """Load one signature file; the id is the file stem."""
    return _validate(path, _parse_yaml(path, _read_bytes(path)))


def _validate(path: Path, data: object, prevalidated: bool = False) -> Signature:
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: a signature file holds a mapping of keys, not {type(data).__name__}"
        )
    declared = data.setdefault("id", path.stem)
    if declared != path.stem:
        raise UserError(
            f"{path}: id {declared!r} differs from the file name",
            help=f"rename the file to {declared}.yaml or set id: {path.stem}",
        )
    try:
        return Signature.model_validate(data, context={PREVALIDATED: prevalidated})
    except ValidationError as error:
        first = error.errors()[0]
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ")
        raise UserError(f"{path}: {_location(first)}: {message}{more}") from None


def signature_files(directory: Path) -> list[Path]:
    return sorted(
        path
        for path in directory.rglob("*.y*ml")
        if path.suffix in {".yaml", ".yml"} and not path.name.startswith(("_", "."))
    )


def _cache_dir() -> Path | None:
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "diagnose"


def _cached(
    kind: str, paths: list[Path], contents: list[bytes]
) -> tuple[list[object] | None, Path | None]:
    """The files' parsed YAML from the cache entry of these exact bytes (None when absent,
    unreadable or corrupt), and that entry (None when caching is off)."""
    digest = hashlib.sha256(__version__.encode())
    for path, content in zip(paths, contents, strict=True):
        digest.update(f"\0{path.name}\0{len(content)}\0".encode())
        digest.update(content)
    directory = _cache_dir()
    if directory is None:
        return None, None
    entry = directory / f"{kind}-{digest.hexdigest()[:32]}.marshal"
    try:
        cached = marshal.loads(entry.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None, entry  # parse again
    if isinstance(cached, list) and len(cached) == len(paths):
        return cached, entry
    return None, entry


def _parsed_files(paths: list[Path]) -> tuple[list[tuple[Path, object]], bool, Path | None]:
    """Each file's YAML; whether it comes from the cache (these exact bytes validated before);
    and the cache entry to write once they validate (None when cached or caching is off)."""
    contents = [_read_bytes(path) for path in paths]
    cached, entry = _cached("library", paths, contents)
    if cached is not None:
        return list(zip(paths, cached, strict=True)), True, None
    parsed = [_parse_yaml(path, content) for path, content in zip(paths, contents, strict=True)]
    return list(zip(paths, parsed, strict=True)), False, entry


def _save_cache(entry: Path, data: list[object]) -> None:
    """Best effort: a cache that cannot be written only costs the next run some time.
    Entries not used for a month are removed when a new one is written."""
    try:
        payload = marshal.dumps(data)
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(entry, payload)
        month_ago = time.time() - 30 * 86400
        for old in entry.parent.glob("*.marshal"):
            if old.stat().st_atime < month_ago:
                old.unlink()
    except (OSError, ValueError):
        pass


def load_directory(directory: Path) -> list[Signature]:
    if not directory.is_dir():
        raise UserError(f"{directory}: not a directory of signatures")
    loaded: dict[str, Path] = {}
    signatures = []
    parsed, cached, entry = _parsed_files(signature_files(directory))
    for path, data in parsed:
        signature = _validate(path, data, prevalidated=cached)
        if signature.id in loaded:
            raise UserError(
                f"{path}: duplicate signature id {signature.id!r}, also in {loaded[signature.id]}"
            )
        loaded[signature.id] = path
        signatures.append(signature)
    if entry is not None:
        _save_cache(entry, [data for _, data in parsed])
    return signatures


def load_library(
    extra_dirs: Iterable[Path] = (), include_user_dirs: bool = True
) -> list[Signature]:
    """Built-in signatures, then site, user and ``--signatures`` ones; later ids override."""
    by_id: dict[str, Signature] = {}
    directories = [builtin_dir(), *(user_dirs() if include_user_dirs else []), *extra_dirs]
    for directory in directories:
        for signature in load_directory(Path(directory)):
            if signature.id in by_id and directory != builtin_dir():
                _say_override(signature.id, Path(directory))
            by_id[signature.id] = signature
    relations = load_relations()
    for winner, losers in relations.supersedes.items():
        known = by_id.get(winner)
        if known is not None:
            supersedes = [*known.supersedes, *(s for s in losers if s not in known.supersedes)]
            by_id[winner] = known.model_copy(update={"supersedes": supersedes})
    for consequence, causes in relations.consequence_of.items():
        known = by_id.get(consequence)
        if known is not None:
            merged = [*known.consequence_of, *(c for c in causes if c not in known.consequence_of)]
            by_id[consequence] = known.model_copy(update={"consequence_of": merged})
    for waiting in relations.waits_for_peers:
        known = by_id.get(waiting)
        if known is not None:
            by_id[waiting] = known.model_copy(update={"waits_for_peers": True})
    return list(by_id.values())


_overrides_said: set[tuple[str, Path]] = set()


def _say_override(signature_id: str, directory: Path) -> None:
    """An override of a library signature changes every diagnosis: say so, once, on stderr."""
    if (signature_id, directory) not in _overrides_said:
        _overrides_said.add((signature_id, directory))
        sys.stderr.write(
            f"diagnose: note: signature {signature_id} from {directory} overrides the library's\n"
        )


_Checked = TypeVar("_Checked")


def _read_data(path: Path, what: str, check: Callable[[object, bool], _Checked]) -> _Checked:
    """A data file beside the signatures, parsed (or its parse from the cache) and passed to
    ``check`` with whether those exact bytes passed it before; cached once it has passed."""
    try:
        content = path.read_bytes()
    except OSError as error:
        raise UserError(f"{path}: cannot read the {what}: {error.strerror}") from None
    cached, entry = _cached("data", [path], [content])
    if cached is not None:
        return check(cached[0], True)
    data = _parse_yaml(path, content)
    checked = check(data, False)
    if entry is not None:
        _save_cache(entry, [data])
    return checked


_Data = TypeVar("_Data", bound=BaseModel)


def _load_model(path: Path, what: str, model: type[_Data]) -> _Data:
    """A data file beside the signatures, checked against its schema."""

    def check(data: object, _prevalidated: bool) -> _Data:
        try:
            return model.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            raise UserError(f"{path}: {_location(first)}: {first['msg']}") from None

    return _read_data(path, what, check)


@functools.cache
def load_relations(directory: Path | None = None) -> Relations:
    """Which signature wins over which (``_relations.yaml``), for the ranking."""
    path = (directory or builtin_dir()) / RELATIONS_FILE
    return _load_model(path, "relations file", Relations)


@functools.cache
def load_architectures(directory: Path | None = None) -> Architectures:
    """Facts about model architectures (``_architectures.yaml``), for preflight."""
    path = (directory or builtin_dir()) / ARCHITECTURES_FILE
    return _load_model(path, "architectures file", Architectures)


@functools.cache
def load_facts(directory: Path | None = None) -> tuple[Pattern, ...]:
    """Values every signature can use (launch arguments, versions), from ``_facts.yaml``."""
    path = (directory or builtin_dir()) / FACTS_FILE

    def check(data: object, prevalidated: bool) -> tuple[Pattern, ...]:
        facts = data.get("facts") if isinstance(data, dict) else None
        if not isinstance(facts, list):
            raise UserError(f"{path}: expected a list under 'facts'")
        patterns = []
        for index, item in enumerate(facts):
            try:  # from the cache, regexes compile on first use (most lines need few)
                patterns.append(Pattern.model_validate(item, context={PREVALIDATED: prevalidated}))
            except ValidationError as error:
                first = error.errors()[0]
                raise UserError(
                    f"{path}: facts.{index}.{_location(first)}: {first['msg']}"
                ) from None
        return tuple(patterns)

    return _read_data(path, "facts file", check)


def engine_for(
    signatures: Iterable[Signature],
    hang_after: float | None = None,
    engine_version: tuple[str, str] | None = None,
    knowledge: bool = True,
) -> Engine:
    """An engine over ``signatures`` and the launch facts, with the knowledge tiers below
    them (unless ``knowledge`` is false): what the release tables settle, known issues from
    resolved threads, then the engines' own messages."""
    excluded = os.environ.get(EXCLUDE_THREADS_VARIABLE, "")
    threads = tuple(url.strip() for url in excluded.split(",") if url.strip())
    return Engine(
        signatures,
        facts=load_facts(),
        hang_after=hang_after,
        explainers=(
            [ReleaseFactsTier(), KnownIssueTier(threads), EngineSourceTier(), MessageWordsTier()]
            if knowledge
            else []
        ),
        engine_version=engine_version,
    )
