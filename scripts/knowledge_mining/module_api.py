"""The modules an engine release ships and the names each binds at its top level, read from
its source with ``ast``: what ``import vllm.x.y`` and ``from vllm.x import Name`` find there.

A program or plugin written for another release of the engine fails on exactly these
("No module named 'vllm.inputs.data'", "cannot import name 'ContinueGenerationReqInput' from
'sglang.srt.managers.io_struct'"); which releases have the module or the name says which way
to move, and to which release.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from packaging.version import Version

UNKNOWN_NAMES = "*"
"""Listed among a module's names where its top level binds names ``ast`` cannot see (a star
import, a module ``__getattr__``): a name missing from that release's list proves nothing."""


def mine_module_api(sources: dict[str, str]) -> dict[str, list[str]]:
    """Every module of one release (packages too, with or without ``__init__.py``) and the
    names its top level binds, sorted."""
    api: dict[str, set[str]] = {}
    for module, source in sources.items():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            names: set[str] = {UNKNOWN_NAMES}
        else:
            names = set(_bound_names(tree.body))
        api.setdefault(module, set()).update(names)
        parts = module.split(".")
        for end in range(1, len(parts)):
            api.setdefault(".".join(parts[:end]), set())
    return {module: sorted(names) for module, names in sorted(api.items())}


def _bound_names(body: list[ast.stmt]) -> Iterator[str]:
    """The names a block of top-level statements binds, through ``if``, ``try`` and ``with``
    (conditional imports), not into functions or classes."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield UNKNOWN_NAMES if node.name == "__getattr__" else node.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.asname or alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield UNKNOWN_NAMES if alias.name == "*" else alias.asname or alias.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from _target_names(target)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            yield from _bound_names(node.body)
            yield from _bound_names(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _bound_names(handler.body)
            yield from _bound_names(getattr(node, "finalbody", []))


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def api_lifetimes(per_release: dict[str, dict[str, list[str]]]) -> list[dict[str, object]]:
    """The committed rows, one per module: the span of releases that ship it and the names
    it binds, grouped by their own span. A span is ``[first, dropped]``: the oldest mined
    release that has it and the first mined release after that without it (null when the
    newest still has it); a names key is ``"first"`` or ``"first dropped"``. A module or name
    that comes and goes twice keeps its first arrival and its last departure."""
    ordered = sorted(per_release, key=Version)
    module_seen: dict[str, list[int]] = {}
    name_seen: dict[tuple[str, str], list[int]] = {}
    for index, version in enumerate(ordered):
        for module, names in per_release[version].items():
            _extend(module_seen.setdefault(module, [index, index]), index)
            for name in names:
                _extend(name_seen.setdefault((module, name), [index, index]), index)
    names: dict[str, dict[str, str]] = {module: {} for module in module_seen}
    for (module, name), seen in sorted(name_seen.items()):
        first, dropped = _span(seen, ordered)
        key = f"{first} {dropped}" if dropped else str(first)
        grouped = names[module]
        grouped[key] = f"{grouped[key]} {name}" if key in grouped else name
    return [
        {"module": module, "span": _span(seen, ordered), "names": names[module]}
        for module, seen in sorted(module_seen.items())
    ]


def _extend(seen: list[int], index: int) -> None:
    seen[1] = index


def _span(seen: list[int], ordered: list[str]) -> list[str | None]:
    first, last = seen
    return [ordered[first], ordered[last + 1] if last + 1 < len(ordered) else None]
