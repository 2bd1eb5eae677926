"""The modules a release ships and the names each binds at its top level, read from its
source with ``ast``: what ``import vllm.x.y`` and ``from vllm.x import Name`` find there.

A program or plugin written for another release of the engine, or an engine written for another
release of a library, fails on exactly these ("No module named 'vllm.inputs.data'", "cannot
import name 'build_regex_from_schema' from 'outlines.fsm.json_schema'"); which releases have
the module or the name says which way to move, and to which release.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from packaging.version import Version

UNKNOWN_NAMES = "*"
"""Listed among a module's names where its top level binds names ``ast`` cannot see (a star
import from outside the release, or a lazy module: a module ``__getattr__``, or a module that
replaces itself in ``sys.modules``): a name missing from that release's list proves
nothing."""


@dataclass
class _TopLevel:
    """What one module's top level binds, before its star imports are followed."""

    package: str = ""
    """The package its relative imports start from."""
    names: set[str] = field(default_factory=set)
    stars: list[str] = field(default_factory=list)
    """The modules it star-imports, by absolute name."""
    exports: set[str] | None = None
    """Its ``__all__``, when a literal list of strings builds it."""
    exports_unknown: bool = False


def mine_module_api(
    sources: dict[str, str], lazy_names_listed: bool = False
) -> dict[str, list[str]]:
    """Every module of one release (packages too, with or without ``__init__.py``) and the
    names its top level binds, sorted; a star import of a module of the same release binds
    that module's ``__all__`` (else its public names). ``lazy_names_listed``: the package's
    lazy modules import every name they serve under ``if TYPE_CHECKING:`` (transformers and
    huggingface_hub check it in CI), so those names are complete."""
    packages = {module.rpartition(".")[0] for module in sources}
    scanned = {
        module: _scan(source, module, module in packages, lazy_names_listed)
        for module, source in sources.items()
    }
    api: dict[str, set[str]] = {}
    followed: dict[str, set[str]] = {}
    for module in scanned:
        api.setdefault(module, set()).update(_names(module, scanned, followed, ()))
        parts = module.split(".")
        for end in range(1, len(parts)):
            api.setdefault(".".join(parts[:end]), set())
    return {module: sorted(names) for module, names in sorted(api.items())}


def _names(
    module: str, scanned: dict[str, _TopLevel], done: dict[str, set[str]], path: tuple[str, ...]
) -> set[str]:
    """A module's names with its star imports followed."""
    if module not in done:
        top = scanned[module]
        names = set(top.names)
        for target in top.stars:
            sibling = f"{top.package}.{target}"
            if target not in scanned and sibling in scanned:
                target = sibling  # Python 2's implicit relative import (transformers' xlstm)
            names |= _exported(target, scanned, done, (*path, module))
        done[module] = names
    return done[module]


def _exported(
    target: str, scanned: dict[str, _TopLevel], done: dict[str, set[str]], path: tuple[str, ...]
) -> set[str]:
    """What ``from target import *`` binds: its ``__all__``, else its public names (through
    a cycle of star imports, those it binds itself); ``*`` for a module of another package.
    A module of the same package that the release lacks binds nothing: the import would fail,
    so the branch that holds it does not run (transformers' dummy objects for a dropped
    backend)."""
    found = scanned.get(target)
    if found is None:
        own = target.partition(".")[0] in {module.partition(".")[0] for module in scanned}
        return set() if own else {UNKNOWN_NAMES}
    if found.exports_unknown:
        return {UNKNOWN_NAMES}
    if found.exports is not None:
        return found.exports
    names = found.names if target in path else _names(target, scanned, done, path)
    return {name for name in names if not name.startswith("_")}


def _scan(source: str, module: str, is_package: bool, lazy_names_listed: bool) -> _TopLevel:
    package = module if is_package else module.rpartition(".")[0]
    top = _TopLevel(package)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        top.names.add(UNKNOWN_NAMES)
        return top
    lazy = type_checking = False
    for node in _statements(tree.body):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            type_checking = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lazy |= node.name == "__getattr__"
            top.names.add(node.name)
        elif isinstance(node, ast.Import):
            top.names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    top.stars.append(_absolute(node, package))
                else:
                    top.names.add(alias.asname or alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                top.names.update(_target_names(target))
            lazy |= any(_binds_lazily(target) for target in targets)
            _read_exports(top, targets, node.value)
        elif isinstance(node, ast.Expr):
            _read_exports_call(top, node.value)
    top.names.discard("__getattr__")
    if lazy and not (lazy_names_listed and type_checking):
        top.names.add(UNKNOWN_NAMES)
    return top


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A block's top-level statements, through ``if``, ``try`` and ``with`` (conditional
    imports), not into functions or classes; an ``if`` is given before its branches."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            yield from _statements(node.body)
            yield from _statements(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _statements(handler.body)
            yield from _statements(getattr(node, "finalbody", []))


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import *`` reads, by absolute name."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_type_checking(test: ast.expr) -> bool:
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def _binds_lazily(target: ast.expr) -> bool:
    """``__getattr__ = ...`` (among other names, too), or ``sys.modules[__name__] = ...``: the
    module serves names at run time that its top level does not bind."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds_lazily(element) for element in target.elts)
    if isinstance(target, ast.Name):
        return target.id == "__getattr__"
    return (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Attribute)
        and target.value.attr == "modules"
        and isinstance(target.slice, ast.Name)
        and target.slice.id == "__name__"
    )


def _read_exports(top: _TopLevel, targets: list[ast.expr], value: ast.expr | None) -> None:
    """``__all__ = [...]`` and ``__all__ += [...]``."""
    if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
        _add_exports(top, _strings(value))


def _read_exports_call(top: _TopLevel, call: ast.expr) -> None:
    """``__all__.extend([...])`` and ``__all__.append("x")``."""
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "__all__"
        and len(call.args) == 1
    ):
        argument = call.args[0]
        if call.func.attr == "append" and isinstance(argument, ast.Constant):
            _add_exports(top, {str(argument.value)})
        else:
            _add_exports(top, _strings(argument))


def _add_exports(top: _TopLevel, listed: set[str] | None) -> None:
    if listed is None:
        top.exports_unknown = True
    else:
        top.exports = (top.exports or set()) | listed


def _strings(value: ast.expr | None) -> set[str] | None:
    """The strings of a literal list or tuple (or a sum of them); None for anything else."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, right = _strings(value.left), _strings(value.right)
        return None if left is None or right is None else left | right
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    strings = [
        element.value
        for element in value.elts
        if isinstance(element, ast.Constant) and isinstance(element.value, str)
    ]
    return set(strings) if len(strings) == len(value.elts) else None


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
