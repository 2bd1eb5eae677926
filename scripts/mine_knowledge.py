#!/usr/bin/env python3
"""Mine what the engines know from their releases into ``knowledge/mined/``.

    python scripts/mine_knowledge.py fetch   # download the files of knowledge/manifest.yaml
    python scripts/mine_knowledge.py build   # mine them (offline, from the cache) and write
    python scripts/mine_knowledge.py check   # are the committed outputs those of the manifest?

``fetch --only module_apis`` and ``build --only module_apis`` take the libraries' module API
alone (``module_apis:`` of the manifest: about 5 GB of files, 3 of them triton's wheels),
keeping every other output as the last build wrote it.

The cache is ``$DIAGNOSE_WHEEL_CACHE`` (default ``~/.cache/diagnose-knowledge/wheels``);
``fetch`` also stores each engine release's ``Requires-Dist`` there (``requires/``), read from
the package index's metadata by ``pip install --dry-run --report`` without the wheel.
Same manifest and same miner give the same bytes: sorted keys and lines, gzip without
timestamps, a clean environment for the parser harness. ``knowledge/mined/lock.json`` holds
the hashes of the manifest (and of each of its sections), of the miner's own sources and of
every output, which is what ``check`` (and the test suite) compare.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import BaseModel, Field

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from knowledge_mining import archives, native
from knowledge_mining.envvars import mine_env_vars
from knowledge_mining.model_types import first_releases, mine_model_types
from knowledge_mining.module_api import api_lifetimes, mine_module_api
from knowledge_mining.registries import mine_registries
from knowledge_mining.templates import Template, mine_source

ROOT = pathlib.Path(__file__).resolve().parent.parent
KNOWLEDGE = ROOT / "knowledge"
MANIFEST = KNOWLEDGE / "manifest.yaml"
OUTPUT = KNOWLEDGE / "mined"
LOCK = OUTPUT / "lock.json"
MINER_SOURCES = [
    pathlib.Path(__file__).resolve(),
    *sorted((ROOT / "scripts/knowledge_mining").glob("*.py")),
]
HARNESS = ROOT / "scripts/knowledge_mining/parser_harness.py"
PYPI_SIMPLE = "https://pypi.org/simple/{name}/"
NATIVE_STRING_LIMIT = 4000
HELP_LIMIT = 400
WORKERS = 2


class PinnedFile(BaseModel):
    """A release file, pinned by its sha256."""

    file: str
    sha256: str


class Release(PinnedFile):
    version: str


class Engine(BaseModel):
    package: str
    source_package: str
    licence: str
    homepage: str
    env_prefixes: list[str]
    releases: list[Release]
    requirement_extras: list[str] = Field(default_factory=list)
    """The extras a server install takes (``sglang[srt]``), whose requirements count."""
    requirement_releases: list[str] = Field(default_factory=list)
    """Releases whose requirements alone are mined, from the index's metadata."""

    def requirement_versions(self) -> list[str]:
        """Every release whose requirements are mined, oldest first."""
        versions = {release.version for release in self.releases} | set(self.requirement_releases)
        return sorted(versions, key=Version)


class Requirements(BaseModel):
    """Which of the engines' declared requirements are kept, and for which platform."""

    packages: list[str]
    prefixes: list[str]
    environment: dict[str, str]


class HeaderEnum(BaseModel):
    path: str
    enum: str
    prefix: str


class Library(PinnedFile):
    name: str
    version: str
    licence: str
    python: list[str] = Field(default_factory=list)
    python_exclude: list[str] = Field(default_factory=list)
    native: list[str] = Field(default_factory=list)
    headers: dict[str, HeaderEnum] = Field(default_factory=dict)


class ModelTypes(BaseModel):
    """The transformers releases whose known model types are mined."""

    package: str
    licence: str
    module: str
    """The file, inside each wheel, that holds the mapping."""
    mapping: str
    releases: list[Release]


class ModuleApi(BaseModel):
    """A library whose modules and top-level names are mined release by release."""

    licence: str
    homepage: str
    modules: list[str]
    """The packages it installs, as imported (``huggingface_hub``)."""
    lazy_names_listed: bool = False
    """Its lazy modules import every name they serve under ``if TYPE_CHECKING:``."""
    exclude: list[str] = Field(default_factory=list)
    """Packages it ships as data, not as its API (each with its submodules)."""
    releases: list[Release]


class Helper(PinnedFile):
    name: str
    version: str


class Manifest(BaseModel):
    """``knowledge/manifest.yaml``."""

    schema_: int = Field(alias="schema")
    engines: dict[str, Engine]
    shared_env_prefixes: list[str]
    libraries: list[Library]
    helpers: list[Helper]
    requirements: Requirements
    model_types: ModelTypes | None = None
    module_apis: dict[str, ModuleApi] = Field(default_factory=dict)

    def pinned_files(self) -> list[tuple[str, PinnedFile]]:
        """``(distribution name, file)`` for everything the miner reads, each file once."""
        files: list[tuple[str, PinnedFile]] = []
        for engine in self.engines.values():
            files += [(engine.package, release) for release in engine.releases]
        files += [(library.name, library) for library in self.libraries]
        files += [(helper.name, helper) for helper in self.helpers]
        if self.model_types is not None:
            files += [(self.model_types.package, release) for release in self.model_types.releases]
        return _each_file_once(files + self.module_api_files())

    def module_api_files(self) -> list[tuple[str, PinnedFile]]:
        """``(distribution name, file)`` of the libraries whose module API is mined."""
        return _each_file_once(
            [
                (name, release)
                for name, library in self.module_apis.items()
                for release in library.releases
            ]
        )


def _each_file_once(files: list[tuple[str, PinnedFile]]) -> list[tuple[str, PinnedFile]]:
    return list({pinned.file: (name, pinned) for name, pinned in files}.values())


def load_manifest() -> Manifest:
    return Manifest.model_validate(yaml.safe_load(MANIFEST.read_text()))


def cache_dir() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache/diagnose-knowledge/wheels"
    return pathlib.Path(os.environ.get("DIAGNOSE_WHEEL_CACHE", default))


def cached(pinned: PinnedFile) -> pathlib.Path:
    """The cached file, checked against its pinned hash."""
    path = cache_dir() / pinned.file
    if not path.exists():
        raise SystemExit(f"{pinned.file} is not in {cache_dir()}: run `mine_knowledge.py fetch`")
    if archives.sha256_of(path) != pinned.sha256:
        raise SystemExit(f"{path} does not have the sha256 the manifest pins; delete it and fetch")
    return path


# --- fetch -------------------------------------------------------------------------------


def fetch(manifest: Manifest, module_apis_only: bool = False) -> None:
    """Download every pinned file missing from the cache (those of ``module_apis`` alone, when
    asked), from PyPI's simple index."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    files = manifest.module_api_files() if module_apis_only else manifest.pinned_files()
    for distribution, pinned in files:
        target = cache_dir() / pinned.file
        if target.exists() and archives.sha256_of(target) == pinned.sha256:
            continue
        request = urllib.request.Request(
            PYPI_SIMPLE.format(name=distribution),
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            index = json.load(response)
        url = next((f["url"] for f in index["files"] if f["filename"] == pinned.file), None)
        if url is None:
            raise SystemExit(f"{pinned.file} is not on PyPI's index of {distribution}")
        partial = target.with_name(target.name + ".part")
        urllib.request.urlretrieve(url, partial)
        if archives.sha256_of(partial) != pinned.sha256:
            partial.unlink()
            raise SystemExit(f"{pinned.file}: downloaded file does not match the pinned sha256")
        partial.rename(target)
        print(f"fetched {pinned.file}", flush=True)
    if module_apis_only:
        return
    for engine in manifest.engines.values():
        for version in engine.requirement_versions():
            fetch_requires(engine.package, version)


def requires_cache(package: str, version: str) -> pathlib.Path:
    return cache_dir() / "requires" / f"{package}-{version}.json"


def fetch_requires(package: str, version: str) -> None:
    """Store a release's ``Requires-Dist``, as the configured index's metadata gives it (no
    wheel is downloaded: pip reads the index's metadata file), with the file it describes."""
    target = requires_cache(package, version)
    if target.exists():
        return
    with tempfile.TemporaryDirectory(prefix="requires-") as scratch:
        report = pathlib.Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps"]
        command += ["--ignore-installed", "--only-binary=:all:", "-q", "--report", str(report)]
        subprocess.run([*command, f"{package}=={version}"], check=True, capture_output=True)
        installed = json.loads(report.read_text())["install"][0]
    url = installed["download_info"]["url"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(
        _json_bytes(
            {
                "file": url.rsplit("/", 1)[-1],
                "sha256": installed["download_info"]["archive_info"]["hashes"]["sha256"],
                "requires_dist": installed["metadata"].get("requires_dist", []),
            }
        )
    )
    print(f"fetched the requirements of {package} {version}")


# --- writing ---------------------------------------------------------------------------------


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


def _jsonl_gz_bytes(rows: Iterable[dict[str, Any]]) -> bytes:
    text = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        out.write(text.encode())
    return buffer.getvalue()


class Outputs:
    """The files of one build, written at the end so a failed build leaves the old ones."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def json(self, relative: str, data: Any) -> None:
        self.files[relative] = _json_bytes(data)

    def jsonl_gz(self, relative: str, rows: Iterable[dict[str, Any]]) -> None:
        self.files[relative] = _jsonl_gz_bytes(rows)

    def keep(self, kept: list[str]) -> None:
        """Take these outputs as the last build wrote them."""
        for relative in kept:
            self.files[relative] = (OUTPUT / relative).read_bytes()

    def write(self) -> None:
        if OUTPUT.exists():
            for old in sorted(OUTPUT.rglob("*"), reverse=True):
                if old.is_file():
                    old.unlink()
                elif old.is_dir():
                    old.rmdir()
        for relative, content in sorted(self.files.items()):
            path = OUTPUT / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        LOCK.write_bytes(_json_bytes(lock_document(self.files)))


def lock_document(files: dict[str, bytes]) -> dict[str, Any]:
    return {
        "manifest_sha256": manifest_sha256(),
        "manifest_sections": manifest_sections(),
        "miner_sha256": miner_sha256(),
        "files": {
            name: hashlib.sha256(content).hexdigest() for name, content in sorted(files.items())
        },
    }


def manifest_sha256() -> str:
    return hashlib.sha256(MANIFEST.read_bytes()).hexdigest()


def manifest_sections() -> dict[str, str]:
    """The sha256 of each top-level section of the manifest, as parsed (comments aside)."""
    document = yaml.safe_load(MANIFEST.read_text())
    return {
        key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
        for key, value in sorted(document.items())
    }


def changed_sections(lock: dict[str, Any]) -> list[str]:
    """The manifest's sections that changed since the build ``lock`` records (every section
    where the manifest changed and the lock records none)."""
    if lock["manifest_sha256"] == manifest_sha256():
        return []
    current, built = manifest_sections(), lock.get("manifest_sections", {})
    sections = current.keys() | built.keys()
    return sorted(key for key in sections if current.get(key) != built.get(key))


def miner_sha256() -> str:
    digest = hashlib.sha256()
    for path in MINER_SOURCES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# --- templates ---------------------------------------------------------------------------------


def template_id(prefix: str, template: Template) -> str:
    key = "\x1f".join(str(part) for part in template.key)
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def merge_templates(
    prefix: str, per_version: dict[str, list[Template]], extra: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per distinct template, with the versions that carry it."""
    rows: dict[str, dict[str, Any]] = {}
    for version, templates in per_version.items():
        for template in templates:
            ident = template_id(prefix, template)
            row = rows.get(ident)
            if row is None:
                row = rows[ident] = {
                    "id": ident,
                    "text": template.text,
                    "holes": list(template.holes),
                    "kind": template.kind,
                    "level": template.level,
                    "exception": template.exception,
                    "module": template.module,
                    "function": template.function,
                    "startup": template.startup,
                    "versions": [],
                    **extra,
                }
            if version not in row["versions"]:
                row["versions"].append(version)
    return [rows[key] for key in sorted(rows)]


def mine_templates(sources: dict[str, str]) -> list[Template]:
    found: list[Template] = []
    for module, source in sources.items():
        found += mine_source(source, module)
    return found


# --- launch flags --------------------------------------------------------------------------------


def flag_vocabulary(tables: list[dict[str, Any]]) -> list[str]:
    """Every long flag any release's parser defines: what a fix may name for this engine."""
    return sorted(
        {
            flag
            for table in tables
            for option in table["options"]
            for flag in option["flags"]
            if flag.startswith("--")
        }
    )


def run_parser_harness(
    engine: str, files: dict[str, bytes], helpers: list[pathlib.Path]
) -> dict[str, Any]:
    """The parser description printed by the harness, run in a clean interpreter."""
    with tempfile.TemporaryDirectory(prefix="mine-") as scratch:
        root = pathlib.Path(scratch) / "src"
        archives.extract_package(files, engine, root)
        extra_paths = []
        for helper in helpers:
            target = pathlib.Path(scratch) / helper.stem
            archives.extract_package(archives.load(helper), helper.name.split("-")[0], target)
            extra_paths.append(str(target))
        environment = {
            "PATH": "/usr/bin:/bin",
            "HOME": scratch,
            "PYTHONHASHSEED": "0",
            "LC_ALL": "C.UTF-8",
        }
        completed = subprocess.run(
            [sys.executable, str(HARNESS), engine, str(root), *extra_paths],
            capture_output=True,
            text=True,
            env=environment,
            cwd=scratch,
            timeout=600,
            check=False,
        )
    if completed.returncode != 0:
        raise SystemExit(f"parser harness failed for {engine}:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout)


def _trim_help(text: str | None) -> str | None:
    if text is None:
        return None
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= HELP_LIMIT else text[: HELP_LIMIT - 1] + "…"


DEPRECATION_HINT = re.compile(r"deprecat|renamed|removed|no longer|instead", re.I)
SUCCESSOR_IN_HELP = re.compile(
    r"(?:use|renamed to|replaced by|in favou?r of)\s+[`'\"]?(--[a-z0-9][a-z0-9-]*)", re.I
)


def flag_table(engine: str, version: str, described: dict[str, Any]) -> dict[str, Any]:
    """The per-version flag table written for one release."""
    options = []
    for option in described["options"]:
        help_text = _trim_help(option["help"])
        successor = (
            SUCCESSOR_IN_HELP.search(help_text or "")
            if option["deprecated"] or (help_text and DEPRECATION_HINT.search(help_text))
            else None
        )
        options.append(
            {
                **{
                    key: option[key]
                    for key in ("flags", "dest", "action", "type", "choices", "nargs", "required")
                },
                "default": option["default"],
                "deprecated": option["deprecated"]
                or bool(help_text and re.match(r"\W*deprecated", help_text, re.I)),
                "successor": successor.group(1) if successor else None,
                "help": help_text,
            }
        )
    options.sort(key=lambda option: (option["flags"][0] if option["flags"] else "", option["dest"]))
    probed = described["probe"]
    underscores = probed["underscores"]
    if underscores is None:
        underscores = described["parser_class"] == "FlexibleArgumentParser"
    return {
        "engine": engine,
        "version": version,
        "parser": {
            "class": described["parser_class"],
            "allow_abbrev": described["allow_abbrev"],
            "prefix_chars": described["prefix_chars"],
            "underscores_as_dashes": underscores,
            "probed": probed,
            "note": (
                "--a_b is read as --a-b (the name up to its first '.')"
                if underscores
                else "--a_b is not --a-b: argparse reports it as unrecognized"
            ),
        },
        "stubbed_modules": described["stubbed_modules"],
        "options": options,
    }


def _flag_index(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        flag: option
        for option in table["options"]
        for flag in option["flags"]
        if flag.startswith("--")
    }


def flag_changes(tables: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flags added and removed between consecutive releases, with successors where found:
    a deprecation note naming one, the same destination under a new name, or a split into
    longer flags that start with the old one (which then reads as an ambiguous prefix)."""
    changes = []
    for older, newer in itertools.pairwise(tables):
        before, after = _flag_index(older), _flag_index(newer)
        added = sorted(set(after) - set(before))
        removed = []
        for flag in sorted(set(before) - set(after)):
            option = before[flag]
            split = sorted(new for new in after if new.startswith(flag + "-"))
            same_dest = sorted({new for new in added if after[new]["dest"] == option["dest"]})
            named = option.get("successor")
            if named in after:
                kind, successors = "renamed", [named]
            elif same_dest:
                kind, successors = "renamed", same_dest[:1]
            elif split:
                kind, successors = "split", split
            else:
                kind, successors = "removed", []
            removed.append({"flag": flag, "kind": kind, "successors": successors})
        changes.append(
            {"from": older["version"], "to": newer["version"], "added": added, "removed": removed}
        )
    return changes


# --- environment variables ---------------------------------------------------------------------


def env_table(
    per_version: dict[str, dict[str, Any]], templates: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per variable: type, default and choices as of the newest release that has it,
    the releases that declare or read it, and the templates that mention it."""
    rows: dict[str, dict[str, Any]] = {}
    for version, found in per_version.items():
        for name, entry in found.items():
            row = rows.setdefault(name, {"name": name, "versions": [], "declared_in": []})
            row.update(
                type=entry.type,
                default=entry.default,
                choices=entry.choices,
                modules=sorted(entry.modules)[:5],
            )
            row["versions"].append(version)
            if entry.declared:
                row["declared_in"].append(version)
    mentions: dict[str, list[str]] = {}
    pattern = re.compile(
        r"\b(" + "|".join(sorted(map(re.escape, rows), key=len, reverse=True)) + r")\b"
    )
    for template in templates:
        for name in set(pattern.findall(template["text"])):
            mentions.setdefault(name, []).append(template["id"])
    for name, row in rows.items():
        row["validated_by"] = sorted(mentions.get(name, []))[:20]
    return [rows[name] for name in sorted(rows)]


# --- requirements ------------------------------------------------------------------------------


def kept_requirements(
    package: str, requires_dist: list[str], extras: list[str], rules: Requirements
) -> dict[str, str]:
    """The specifier of each kept package a release requires on the manifest's platform, for a
    plain install with ``extras`` (followed through the package's own extras, as
    ``sglang[srt]`` pulls ``sglang[runtime_common]``). Bare names (any version) are left out."""
    parsed = [Requirement(line) for line in requires_dist]
    wanted = {""} | {canonicalize_name(extra) for extra in extras}

    def applies(requirement: Requirement) -> bool:
        marker: Marker | None = requirement.marker
        return marker is None or any(
            marker.evaluate({**rules.environment, "extra": extra}) for extra in sorted(wanted)
        )

    grown = True
    while grown:
        more = {
            canonicalize_name(extra)
            for requirement in parsed
            if canonicalize_name(requirement.name) == canonicalize_name(package)
            and applies(requirement)
            for extra in requirement.extras
        }
        grown = not more <= wanted
        wanted |= more
    kept: dict[str, SpecifierSet] = {}
    for requirement in parsed:
        name = canonicalize_name(requirement.name)
        keep = name in rules.packages or name.startswith(tuple(rules.prefixes))
        if keep and requirement.specifier and applies(requirement):
            kept[name] = kept.get(name, SpecifierSet()) & requirement.specifier
    return {name: str(kept[name]) for name in sorted(kept)}


def build_requirements(name: str, engine: Engine, manifest: Manifest, outputs: Outputs) -> None:
    pinned = {release.version: release for release in engine.releases}
    releases = {}
    for version in engine.requirement_versions():
        path = requires_cache(engine.package, version)
        if not path.exists():
            raise SystemExit(f"{path} is missing: run `mine_knowledge.py fetch`")
        cached_metadata = json.loads(path.read_text())
        release = pinned.get(version)
        if (
            release is not None
            and cached_metadata["file"] == release.file
            and cached_metadata["sha256"] != release.sha256
        ):
            raise SystemExit(f"{path} describes another {release.file} than the manifest pins")
        releases[version] = {
            "file": cached_metadata["file"],
            "sha256": cached_metadata["sha256"],
            "requires": kept_requirements(
                engine.package,
                cached_metadata["requires_dist"],
                engine.requirement_extras,
                manifest.requirements,
            ),
        }
    outputs.json(
        f"{name}/requires.json",
        {
            "environment": manifest.requirements.environment,
            "extras": engine.requirement_extras,
            "releases": releases,
        },
    )


# --- build -------------------------------------------------------------------------------------


def mine_release(
    name: str,
    engine: Engine,
    release: Release,
    prefixes: tuple[str, ...],
    helpers: list[pathlib.Path],
) -> tuple[
    list[Template], dict[str, Any], dict[str, Any], dict[str, list[str]], dict[str, list[str]]
]:
    """Templates, environment variables, flag table, registered names and module API of one
    release."""
    files = archives.load(cached(release))
    sources = archives.python_sources(files, engine.source_package)
    templates = mine_templates(sources)
    package_sources = archives.python_sources(files, engine.package)
    envs = mine_env_vars(package_sources, prefixes)
    table = flag_table(name, release.version, run_parser_harness(engine.package, files, helpers))
    table["source"] = {"file": release.file, "sha256": release.sha256}
    registries = mine_registries(package_sources)
    api = mine_module_api(package_sources)
    print(
        f"{name} {release.version}: {len(templates)} templates, {len(table['options'])} options, "
        f"{len(envs)} variables, {len(registries['architectures'])} architectures, "
        f"{len(api)} modules",
        flush=True,
    )
    return templates, envs, table, registries, api


def build_engine(name: str, engine: Engine, manifest: Manifest, outputs: Outputs) -> dict[str, Any]:
    helpers = [cached(helper) for helper in manifest.helpers]
    prefixes = tuple(engine.env_prefixes + manifest.shared_env_prefixes)
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        results = list(
            pool.map(
                mine_release,
                *zip(
                    *[(name, engine, release, prefixes, helpers) for release in engine.releases],
                    strict=True,
                ),
            )
        )
    templates = {
        release.version: result[0] for release, result in zip(engine.releases, results, strict=True)
    }
    envs = {
        release.version: result[1] for release, result in zip(engine.releases, results, strict=True)
    }
    tables = [result[2] for result in results]
    for table in tables:
        outputs.json(f"{name}/flags/{table['version']}.json", table)
    rows = merge_templates(name, templates, {"engine": name})
    outputs.jsonl_gz(f"{name}/templates.jsonl.gz", rows)
    outputs.json(f"{name}/flag_changes.json", flag_changes(tables))
    outputs.json(f"{name}/flag_vocabulary.json", flag_vocabulary(tables))
    outputs.json(f"{name}/env_vars.json", env_table(envs, rows))
    registries = {
        release.version: result[3] for release, result in zip(engine.releases, results, strict=True)
    }
    outputs.json(f"{name}/registries.json", registries)
    api = {
        release.version: result[4] for release, result in zip(engine.releases, results, strict=True)
    }
    outputs.jsonl_gz(f"{name}/module_api.jsonl.gz", api_lifetimes(api))
    return {
        "engine": name,
        "licence": engine.licence,
        "homepage": engine.homepage,
        "versions": [release.version for release in engine.releases],
        "templates": len(rows),
    }


def build_libraries(manifest: Manifest, outputs: Outputs) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    strings: list[dict[str, Any]] = []
    summary = []
    for library in manifest.libraries:
        files = archives.load(cached(library))
        mined: list[Template] = []
        for package in library.python:
            sources = archives.python_sources(files, package)
            mined += mine_templates(
                {
                    module: source
                    for module, source in sources.items()
                    if not module.startswith(tuple(library.python_exclude))
                }
            )
        rows += merge_templates(library.name, {library.version: mined}, {"library": library.name})
        if library.native:
            for member, content in archives.binary_members(files, tuple(library.native)):
                for text in native.native_strings(content, NATIVE_STRING_LIMIT):
                    strings.append(
                        {
                            "library": library.name,
                            "version": library.version,
                            "file": member,
                            "text": text,
                        }
                    )
        for table_name, header in library.headers.items():
            text = files[header.path].decode("utf-8", "replace")
            outputs.json(
                f"native/{table_name}.json",
                {
                    "source": {
                        "library": library.name,
                        "version": library.version,
                        "header": header.path,
                    },
                    "codes": native.enum_codes(text, header.enum, header.prefix),
                },
            )
        summary.append(
            {"name": library.name, "version": library.version, "licence": library.licence}
        )
    outputs.jsonl_gz("libraries/templates.jsonl.gz", sorted(rows, key=lambda row: row["id"]))
    outputs.jsonl_gz("native/strings.jsonl.gz", strings)
    outputs.json(
        "native/errno.json",
        {
            "source": {"library": "Linux C library", "note": "names and strerror() text"},
            "codes": native.errno_table(),
        },
    )
    return summary


def build_model_types(manifest: Manifest, outputs: Outputs) -> dict[str, Any] | None:
    """``libraries/transformers-model-types.json``: each model type's first release."""
    spec = manifest.model_types
    if spec is None:
        return None
    per_release = {}
    for release in spec.releases:
        with zipfile.ZipFile(cached(release)) as wheel:

            def read(member: str, wheel: zipfile.ZipFile = wheel) -> str:
                return wheel.read(member).decode("utf-8")

            per_release[release.version] = mine_model_types(read, spec.module, spec.mapping)
    table = first_releases(per_release)
    outputs.json(
        f"libraries/{spec.package}-model-types.json",
        {"package": spec.package, "module": spec.module, "mapping": spec.mapping, **table},
    )
    print(f"{spec.package}: {len(table['first'])} model types over {len(spec.releases)} releases")
    return {
        "name": spec.package,
        "versions": [release.version for release in spec.releases],
        "licence": spec.licence,
    }


def mine_library_api(release: Release, library: ModuleApi) -> dict[str, list[str]]:
    """The modules and top-level names of one release of a library."""
    files = archives.load(cached(release), ".py")
    sources: dict[str, str] = {}
    for package in library.modules:
        sources.update(archives.package_sources(files, package))
    for excluded in library.exclude:
        sources = {
            module: source
            for module, source in sources.items()
            if module != excluded and not module.startswith(excluded + ".")
        }
    return mine_module_api(sources, library.lazy_names_listed)


def build_module_apis(manifest: Manifest, outputs: Outputs) -> list[dict[str, Any]]:
    """``libraries/module_api/<library>.jsonl.gz`` and their index, ``libraries/module_api.json``
    (each library's import packages and the releases mined, oldest first)."""
    index = {}
    summary = []
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        for name, library in sorted(manifest.module_apis.items()):
            apis = pool.map(mine_library_api, library.releases, itertools.repeat(library))
            per_release = {
                release.version: api for release, api in zip(library.releases, apis, strict=True)
            }
            rows = api_lifetimes(per_release)
            outputs.jsonl_gz(f"libraries/module_api/{name}.jsonl.gz", rows)
            versions = sorted(per_release, key=Version)
            index[name] = {"modules": library.modules, "releases": versions}
            summary.append(
                {
                    "name": name,
                    "versions": versions,
                    "licence": library.licence,
                    "homepage": library.homepage,
                }
            )
            print(f"{name}: {len(rows)} modules over {len(versions)} releases", flush=True)
    outputs.json("libraries/module_api.json", index)
    return summary


def build(manifest: Manifest) -> None:
    outputs = Outputs()
    for name, engine in sorted(manifest.engines.items()):
        build_requirements(name, engine, manifest, outputs)
    engines = [
        build_engine(name, engine, manifest, outputs)
        for name, engine in sorted(manifest.engines.items())
    ]
    libraries = build_libraries(manifest, outputs)
    model_types = build_model_types(manifest, outputs)
    sources: dict[str, Any] = {"engines": engines, "libraries": libraries}
    if model_types is not None:
        sources["model_types"] = model_types
    if manifest.module_apis:
        sources["module_apis"] = build_module_apis(manifest, outputs)
    outputs.json("sources.json", sources)
    outputs.write()
    print(f"wrote {len(outputs.files)} files under {OUTPUT.relative_to(ROOT)}")


MODULE_API_OUTPUTS = ("libraries/module_api.json", "libraries/module_api/")


def build_module_apis_only(manifest: Manifest) -> None:
    """Mine the libraries' module API again, keeping every other output (and its hash in the
    lock) as the last build wrote it: refused where a section of the manifest other than
    ``module_apis`` changed since, or an output differs from the lock. A change of the miner
    is taken not to touch the kept outputs; a full build is what shows it."""
    if not LOCK.exists():
        raise SystemExit(f"{LOCK.relative_to(ROOT)} is missing: run a full `build`")
    lock = json.loads(LOCK.read_text())
    changed = [section for section in changed_sections(lock) if section != "module_apis"]
    problems = output_problems(lock)
    if changed or problems:
        reasons = [f"the manifest's {section} changed since the last build" for section in changed]
        raise SystemExit("run a full `build`: " + "; ".join(reasons + problems))
    outputs = Outputs()
    outputs.keep(
        [
            name
            for name in lock["files"]
            if not name.startswith(MODULE_API_OUTPUTS) and name != "sources.json"
        ]
    )
    sources = json.loads((OUTPUT / "sources.json").read_text())
    sources.pop("module_apis", None)
    if manifest.module_apis:
        sources["module_apis"] = build_module_apis(manifest, outputs)
    outputs.json("sources.json", sources)
    outputs.write()
    print(f"wrote the module API of {len(manifest.module_apis)} libraries; kept the other outputs")


# --- check -------------------------------------------------------------------------------------


def check() -> list[str]:
    """Why the committed outputs are not those of the manifest and miner (empty when in sync)."""
    if not LOCK.exists():
        return [f"{LOCK.relative_to(ROOT)} is missing: run `mine_knowledge.py build`"]
    lock = json.loads(LOCK.read_text())
    problems = []
    if lock["manifest_sha256"] != manifest_sha256():
        sections = ", ".join(changed_sections(lock)) or "its comments"
        problems.append(f"knowledge/manifest.yaml changed since the last build ({sections})")
    if lock["miner_sha256"] != miner_sha256():
        problems.append("the miner's sources changed since the last build")
    return problems + output_problems(lock)


def output_problems(lock: dict[str, Any]) -> list[str]:
    """The outputs that are not those ``lock`` records: missing, unlisted or edited."""
    problems = []
    present = {str(path.relative_to(OUTPUT)) for path in OUTPUT.rglob("*") if path.is_file()} - {
        "lock.json"
    }
    for name in sorted(present - set(lock["files"])):
        problems.append(f"{name} is not in lock.json")
    for name, digest in sorted(lock["files"].items()):
        path = OUTPUT / name
        if not path.exists():
            problems.append(f"{name} is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name} differs from what the miner wrote")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["fetch", "build", "check"])
    parser.add_argument(
        "--only",
        choices=["module_apis"],
        help="fetch or build the libraries' module API alone, keeping the other outputs",
    )
    arguments = parser.parse_args()
    command = arguments.command
    if command == "check":
        problems = check()
        for problem in problems:
            print(problem)
        raise SystemExit(1 if problems else 0)
    manifest = load_manifest()
    if command == "fetch":
        fetch(manifest, module_apis_only=arguments.only == "module_apis")
    elif arguments.only == "module_apis":
        build_module_apis_only(manifest)
    else:
        build(manifest)


if __name__ == "__main__":
    main()
