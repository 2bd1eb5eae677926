"""Finding and loading signature files: the built-in library and users' own directories."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import regex
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from diagnose import __version__
from diagnose.atomic import write_bytes_atomically
from diagnose.core import expr, models, versions
from diagnose.core import signature as signature_schema
from diagnose.core.engine import Engine
from diagnose.core.errors import UserError
from diagnose.core.signature import Architectures, Pattern, Relations, Signature
from diagnose.knowledge.deferred import (
    EngineSourceTier,
    KnownIssueTier,
    MessageWordsTier,
    ReleaseFactsTier,
    ReleaseFixChecks,
)

if TYPE_CHECKING:
    from diagnose.core.signature_file import SignatureFile

CACHE_DIR_VARIABLE = "DIAGNOSE_CACHE_DIR"
"""Where the parsed library is kept between runs (default: ``$XDG_CACHE_HOME/diagnose``);
``off`` keeps nothing."""
EXCLUDE_THREADS_VARIABLE = "DIAGNOSE_EXCLUDE_THREADS"
"""Comma-separated thread URLs whose known-issue records are left out (leave-one-thread-out
scoring in the accuracy benchmark)."""
FACTS_FILE = "_facts.yaml"
FLAGS_FILE = "_flags.yaml"
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


@functools.cache
def _yaml_loader() -> Any:
    """The safe loader (the C one where built), refusing a key written twice in one mapping,
    which YAML would let the later one win silently (an example's second `log:` hiding its
    first). Built on first use: a warm run never imports yaml."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    line = key_node.start_mark.line + 1
                    raise yaml.constructor.ConstructorError(
                        problem=f"key {key!r} appears twice in one mapping (line {line})"
                    )
                seen.add(key)
            return super().construct_mapping(node, deep)

    return Loader


def _parse_yaml(path: Path, content: bytes) -> object:
    import yaml  # only when the cache has not got the file (a warm run never imports it)

    try:
        return yaml.load(content.decode("utf-8"), Loader=_yaml_loader())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not valid YAML: {detail}") from None


def load_file(path: Path) -> SignatureFile:
    """Load one signature file; the id is the file stem."""
    return _validate(path, _parse_yaml(path, _read_bytes(path)))


def _validate(path: Path, data: object) -> SignatureFile:
    from diagnose.core.signature_file import SignatureFile  # only where files are read

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
        return SignatureFile.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ")
        raise UserError(f"{path}: {_location(first)}: {message}{more}") from None


def signature_files(directory: Path) -> list[Path]:
    """The signature files under ``directory`` (YAML, not named ``_...`` or ``.…``), in path
    order. Listed as strings: ``Path.rglob`` and sorting paths cost a small run 2% of its
    time."""
    found = [
        os.path.join(folder, name)
        for folder, _, names in os.walk(directory)
        for name in names
        if name.endswith((".yaml", ".yml")) and not name.startswith(("_", "."))
    ]
    return [Path(path) for path in sorted(found, key=lambda path: path.split(os.sep))]


def cache_dir() -> Path | None:
    """Where diagnose keeps what it may reuse between runs; None when `DIAGNOSE_CACHE_DIR=off`."""
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "diagnose"


_SCHEMA_SOURCES = (
    *(Path(str(module.__file__)) for module in (signature_schema, models, expr, versions)),
    Path(str(signature_schema.__file__)).with_name("signature_file.py"),  # not imported here
    Path(__file__),
)
"""The code that turns YAML into the cached objects: a checkout that changes it under the same
version must not read objects of the old shape."""


@functools.cache
def _schema_digest() -> bytes | None:
    """The version, the schema's source and the ``regex`` release (the cache keeps compiled
    patterns, in its own format), hashed once per run (every cache entry is keyed by them);
    None when the source cannot be read."""
    digest = hashlib.sha256(f"{__version__} regex {regex.__version__}".encode())
    try:
        for source in _SCHEMA_SOURCES:
            digest.update(source.read_bytes())
    except OSError:
        return None
    return digest.digest()


def _cache_entry(kind: str, paths: list[Path], contents: list[bytes]) -> Path | None:
    """Where the objects loaded from these exact bytes are kept (None when caching is off or
    the schema's source cannot be read)."""
    directory = cache_dir()
    schema = _schema_digest()
    if directory is None or schema is None:
        return None
    digest = hashlib.sha256(schema)
    for path, content in zip(paths, contents, strict=True):
        digest.update(f"\0{path.name}\0{len(content)}\0".encode())
        digest.update(content)
    return directory / f"{kind}-{digest.hexdigest()[:32]}.pickle"


def _read_cache(entry: Path) -> object:
    """The objects kept in ``entry``; None when it is absent, corrupt, or not only ours to
    write (unpickling runs code: a file someone else could have written is never read)."""
    try:
        with entry.open("rb") as handle:
            status = os.fstat(handle.fileno())
            if status.st_uid != os.geteuid() or status.st_mode & 0o022:
                return None
            return pickle.load(handle)
    except Exception:  # any damage (truncation, a class since renamed): load the files again
        return None


def _save_cache(entry: Path, loaded: object) -> None:
    """Best effort: a cache that cannot be written only costs the next run some time.
    Entries not used for a month are removed when a new one is written."""
    try:
        payload = pickle.dumps(loaded, protocol=pickle.HIGHEST_PROTOCOL)
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(entry, payload, mode=0o600)
        month_ago = time.time() - 30 * 86400
        for old in entry.parent.glob("*.pickle"):
            if old.stat().st_atime < month_ago:
                old.unlink()
    except (OSError, pickle.PicklingError):
        pass


_Loaded = TypeVar("_Loaded")


def _through_cache(
    kind: str,
    paths: list[Path],
    contents: list[bytes],
    load: Callable[[], _Loaded],
    kept: Callable[[object], TypeGuard[_Loaded]],
) -> _Loaded:
    """What ``load`` makes of these files, or what it made of these exact bytes before (a warm
    run neither parses YAML nor validates). ``kept`` tells a cached result of the right kind
    from anything else the entry could hold."""
    entry = _cache_entry(kind, paths, contents)
    if entry is not None:
        cached = _read_cache(entry)
        if kept(cached):
            return cached
    loaded = load()
    if entry is not None:
        _save_cache(entry, loaded)
    return loaded


def _signatures(cached: object) -> TypeGuard[list[Signature]]:
    return isinstance(cached, list) and all(type(item) is Signature for item in cached)


def _signature_files(cached: object) -> TypeGuard[list[SignatureFile]]:
    from diagnose.core.signature_file import SignatureFile  # a diagnosis never reads files

    return isinstance(cached, list) and all(isinstance(item, SignatureFile) for item in cached)


def _patterns(cached: object) -> TypeGuard[tuple[Pattern, ...]]:
    return isinstance(cached, tuple) and all(isinstance(item, Pattern) for item in cached)


def _read_directory(directory: Path) -> tuple[list[Path], list[bytes]]:
    if not directory.is_dir():
        raise UserError(f"{directory}: not a directory of signatures")
    paths = signature_files(directory)
    return paths, [_read_bytes(path) for path in paths]


def load_directory(directory: Path) -> list[SignatureFile]:
    """The signature files in ``directory``, examples and all."""
    return _files(*_read_directory(directory))


def _files(paths: list[Path], contents: list[bytes]) -> list[SignatureFile]:
    def load() -> list[SignatureFile]:
        loaded: dict[str, Path] = {}
        signatures = []
        for path, content in zip(paths, contents, strict=True):
            signature = _validate(path, _parse_yaml(path, content))
            if signature.id in loaded:
                raise UserError(
                    f"{path}: duplicate signature id {signature.id!r}, "
                    f"also in {loaded[signature.id]}"
                )
            loaded[signature.id] = path
            signatures.append(signature)
        return signatures

    return _through_cache("library", paths, contents, load, _signature_files)


def load_signatures(directory: Path) -> list[Signature]:
    """The signatures in ``directory`` without their examples, as a diagnosis reads them (kept
    apart: the examples are two fifths of what a warm run would otherwise unpickle)."""
    paths, contents = _read_directory(directory)

    def load() -> list[Signature]:
        return [file.signature() for file in _files(paths, contents)]

    return _through_cache("signatures", paths, contents, load, _signatures)


_Signature = TypeVar("_Signature", bound=Signature)


def load_library(
    extra_dirs: Iterable[Path] = (), include_user_dirs: bool = True
) -> list[Signature]:
    """Built-in signatures, then site, user and ``--signatures`` ones; later ids override.
    Without their examples: :func:`load_signature_files` has them."""
    return _library(load_signatures, extra_dirs, include_user_dirs)


def load_signature_files(
    extra_dirs: Iterable[Path] = (), include_user_dirs: bool = True
) -> list[SignatureFile]:
    """:func:`load_library` with each signature's examples (to test, lint or show them)."""
    return _library(load_directory, extra_dirs, include_user_dirs)


def _library(
    load: Callable[[Path], list[_Signature]], extra_dirs: Iterable[Path], include_user_dirs: bool
) -> list[_Signature]:
    by_id: dict[str, _Signature] = {}
    directories = [builtin_dir(), *(user_dirs() if include_user_dirs else []), *extra_dirs]
    for directory in directories:
        for signature in load(Path(directory)):
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


def _read_data(
    path: Path,
    what: str,
    load: Callable[[object], _Loaded],
    kept: Callable[[object], TypeGuard[_Loaded]],
) -> _Loaded:
    """A data file beside the signatures, parsed and checked by ``load`` (or what ``load``
    made of the same bytes before)."""
    try:
        content = path.read_bytes()
    except OSError as error:
        raise UserError(f"{path}: cannot read the {what}: {error.strerror}") from None
    return _through_cache("data", [path], [content], lambda: load(_parse_yaml(path, content)), kept)


_Data = TypeVar("_Data", bound=BaseModel)


def _load_model(path: Path, what: str, model: type[_Data]) -> _Data:
    """A data file beside the signatures, checked against its schema."""

    def load(data: object) -> _Data:
        try:
            return model.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            raise UserError(f"{path}: {_location(first)}: {first['msg']}") from None

    def kept(cached: object) -> TypeGuard[_Data]:
        return isinstance(cached, model)

    return _read_data(path, what, load, kept)


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

    def load(data: object) -> tuple[Pattern, ...]:
        facts = data.get("facts") if isinstance(data, dict) else None
        if not isinstance(facts, list):
            raise UserError(f"{path}: expected a list under 'facts'")
        patterns = []
        for index, item in enumerate(facts):
            try:
                patterns.append(Pattern.model_validate(item))
            except ValidationError as error:
                first = error.errors()[0]
                raise UserError(
                    f"{path}: facts.{index}.{_location(first)}: {first['msg']}"
                ) from None
        return tuple(patterns)

    return _read_data(path, "facts file", load, _patterns)


def engine_for(
    signatures: Iterable[Signature],
    hang_after: float | None = None,
    engine_version: tuple[str, str] | None = None,
    knowledge: bool = True,
) -> Engine:
    """An engine over ``signatures`` and the launch facts, with the knowledge tiers below
    them (unless ``knowledge`` is false): what the release tables settle, known issues from
    resolved threads, then the engines' own messages; a package change without a version
    takes the one the engine release requires."""
    excluded = os.environ.get(EXCLUDE_THREADS_VARIABLE, "")
    threads = tuple(url.strip() for url in excluded.split(",") if url.strip())
    return Engine(
        signatures,
        facts=load_facts(),
        hang_after=hang_after,
        explainers=(
            [
                ReleaseFactsTier(),
                KnownIssueTier(threads),
                EngineSourceTier(builtin_dir() / FLAGS_FILE),
                MessageWordsTier(),
            ]
            if knowledge
            else []
        ),
        engine_version=engine_version,
        pins=ReleaseFixChecks() if knowledge else None,
    )
