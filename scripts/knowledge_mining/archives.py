"""Reading release files (wheels and source archives) without installing them."""

from __future__ import annotations

import hashlib
import pathlib
import tarfile
import zipfile
from collections.abc import Iterator


def sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def members(archive: pathlib.Path, suffix: str = "") -> Iterator[tuple[str, bytes]]:
    """``(path, content)`` of every regular file whose name ends with ``suffix``, in archive
    order; a source archive's top folder (``vllm-0.34.0/``) is left out of the path."""
    if archive.name.endswith(".whl") or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as wheel:
            for info in wheel.infolist():
                if not info.is_dir() and info.filename.endswith(suffix):
                    yield info.filename, wheel.read(info)
        return
    with tarfile.open(archive) as tar:
        for info in tar:
            if info.isfile() and info.name.endswith(suffix):
                name = info.name.split("/", 1)[1] if "/" in info.name else info.name
                handle = tar.extractfile(info)
                if handle is not None:
                    yield name, handle.read()


def load(archive: pathlib.Path, suffix: str = "") -> dict[str, bytes]:
    """Every file of an archive (those whose name ends with ``suffix``), by path: ``.py``
    leaves a wheel's compiled libraries unread."""
    return dict(members(archive, suffix))


def python_sources(files: dict[str, bytes], package: str) -> dict[str, str]:
    """Module name → source for the ``.py`` files of one package."""
    prefix = package.replace(".", "/") + "/"
    single = package.replace(".", "/") + ".py"
    sources = {}
    for name, content in files.items():
        if (name.startswith(prefix) or name == single) and name.endswith(".py"):
            module = name[:-3].replace("/", ".").removesuffix(".__init__")
            sources[module] = content.decode("utf-8", "replace")
    return dict(sorted(sources.items()))


def package_sources(files: dict[str, bytes], package: str) -> dict[str, str]:
    """``python_sources`` of a top-level package wherever the archive keeps it: at its root (a
    wheel) or under a source folder (``python/xgrammar/`` of xgrammar's source archive)."""
    marker = package + "/__init__.py"
    roots = [name.removesuffix(marker) for name in files if name.endswith("/" + marker)]
    if marker in files or not roots:
        return python_sources(files, package)
    root = min(roots, key=len)
    under = {name[len(root) :]: data for name, data in files.items() if name.startswith(root)}
    return python_sources(under, package)


def extract_package(files: dict[str, bytes], package: str, target: pathlib.Path) -> None:
    """Write one package's files (all of them) under ``target``."""
    prefix = package.split(".")[0] + "/"
    for name, content in files.items():
        if name.startswith(prefix):
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def binary_members(
    files: dict[str, bytes], suffixes: tuple[str, ...]
) -> Iterator[tuple[str, bytes]]:
    """Shared libraries (or other binaries) by a part of their name."""
    for name, content in sorted(files.items()):
        base = name.rsplit("/", 1)[-1]
        if any(suffix in base for suffix in suffixes):
            yield name, content
