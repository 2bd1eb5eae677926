"""The model types a transformers release knows, read from its source with ``ast``.

``AutoConfig`` looks a checkpoint's ``model_type`` up in ``CONFIG_MAPPING``, built from the
``CONFIG_MAPPING_NAMES`` literal of ``transformers/models/auto/configuration_auto.py``: a type
missing from it is the "model type `qwen3_vl` but Transformers does not recognize this
architecture" of a transformers older than the model (``KeyError: 'gemma3'`` in older ones).
The module is parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from packaging.version import Version


def _keys(node: ast.expr, mapping: str, before: set[str]) -> set[str]:
    """The string keys of a mapping literal: ``OrderedDict([("a", "A"), ...])``, ``{...}``,
    ``dict(a=...)``, a list of pairs, and ``**mapping`` (the keys it had ``before``)."""
    found: set[str] = set()
    if isinstance(node, ast.Name) and node.id == mapping:
        return set(before)
    if isinstance(node, ast.Call):
        for argument in node.args:
            found |= _keys(argument, mapping, before)
        for keyword in node.keywords:
            if keyword.arg is None:
                found |= _keys(keyword.value, mapping, before)
            else:
                found.add(keyword.arg)
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                found |= _keys(value, mapping, before)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for item in node.elts:
            if (
                isinstance(item, (ast.Tuple, ast.List))
                and item.elts
                and isinstance(item.elts[0], ast.Constant)
                and isinstance(item.elts[0].value, str)
            ):
                found.add(item.elts[0].value)
    return found


def _sibling(path: str, module: str | None, level: int) -> str:
    """The file a relative ``from .module import ...`` in ``path`` reads."""
    parts = path.split("/")[:-level]
    return "/".join([*parts, *(module or "__init__").split(".")]) + ".py"


def mine_model_types(read: Callable[[str], str], path: str, mapping: str) -> list[str]:
    """The keys ``mapping`` holds once module ``path`` has run, sorted: its module-level
    assignments (followed into the sibling module it is imported from, as transformers 5.6
    moved the literal to ``auto_mappings.py``), ``mapping.update({...})`` and
    ``mapping[key] = ...``. ``read`` gives a file's text by its path in the wheel; a module
    that never defines the mapping is an error."""
    tree = ast.parse(read(path))
    found: set[str] = set()
    defined = False
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.level:
            if any((alias.asname or alias.name) == mapping for alias in statement.names):
                origin = _sibling(path, statement.module, statement.level)
                found, defined = set(mine_model_types(read, origin, mapping)), True
            continue
        value: ast.expr | None = None
        if (
            isinstance(statement, ast.Assign)
            and any(
                isinstance(target, ast.Name) and target.id == mapping
                for target in statement.targets
            )
        ) or (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.target.id == mapping
        ):
            value = statement.value
        if value is not None:
            found, defined = _keys(value, mapping, found), True
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "update"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == mapping
            ):
                found |= _keys(call, mapping, found)
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == mapping
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    found.add(target.slice.value)
    if not defined or not found:
        raise ValueError(f"{path} does not define {mapping}")
    return sorted(found)


def first_releases(per_release: dict[str, list[str]]) -> dict[str, object]:
    """The committed table: the releases mined (oldest first), each model type's first release
    (the oldest mined one that knows it), and, for a type the newest release no longer knows,
    the first release without it (``dropped``)."""
    ordered = sorted(per_release, key=Version)
    first: dict[str, str] = {}
    last_seen: dict[str, int] = {}
    for index, version in enumerate(ordered):
        for model_type in per_release[version]:
            first.setdefault(model_type, version)
            last_seen[model_type] = index
    dropped = {
        model_type: ordered[index + 1]
        for model_type, index in last_seen.items()
        if index + 1 < len(ordered)
    }
    return {
        "releases": ordered,
        "first": dict(sorted(first.items())),
        "dropped": dict(sorted(dropped.items())),
    }
