"""Environment variables an engine declares or reads, with type and default, read with ``ast``.

Declarations: vLLM's ``envs.py`` (typed names under ``if TYPE_CHECKING:`` and the
``environment_variables`` table) and SGLang's ``environ.py`` (``Envs`` class fields such as
``EnvBool(False)``). Reads: ``os.environ.get``/``os.getenv``/``os.environ[...]`` and the
``get_*_env_var`` helpers anywhere in the package.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

ENV_FIELD_TYPES = {
    "EnvBool": "bool",
    "EnvBoolWithAlias": "bool",
    "EnvInt": "int",
    "EnvIntWithAlias": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvStrWithAlias": "str",
    "EnvTuple": "list",
    "EnvJSON": "json",
}
READ_HELPERS = {
    "get_bool_env_var": "bool",
    "get_int_env_var": "int",
    "get_float_env_var": "float",
    "get_str_env_var": "str",
    "getenv": "str",
    "get": "str",
    "env_with_choices": "str",
    "env_list_with_choices": "list",
    "env_set_with_choices": "list",
    "get_env_or_set_default": "str",
    "maybe_convert_int": "int",
    "maybe_convert_bool": "bool",
}
ANNOTATION_TYPES = {"bool": "bool", "int": "int", "float": "float", "str": "str"}


@dataclass
class EnvVar:
    """What one release says about one variable."""

    name: str
    type: str = "str"
    default: object = None
    choices: list[str] | None = None
    declared: bool = False
    modules: set[str] = field(default_factory=set)


def _literal(node: ast.AST | None) -> object:
    """A constant default, or None when it is computed."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)) and all(
        isinstance(item, (str, int, float)) for item in value
    ):
        return list(value)
    return None


def _annotation_type(node: ast.AST) -> str:
    text = ast.unparse(node)
    for name, kind in ANNOTATION_TYPES.items():
        if text == name or text.startswith(f"{name} |") or text == f"Optional[{name}]":
            return kind
    if text.startswith(("list", "List", "set")):
        return "list"
    if text.startswith("Literal"):
        return "str"
    return "str"


def _string_choices(node: ast.AST | None) -> list[str] | None:
    value = _literal(node) if node is not None else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return sorted(value)
    return None


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, prefixes: tuple[str, ...], found: dict[str, EnvVar]) -> None:
        self.module = module
        self.prefixes = prefixes
        self.found = found

    def _entry(self, name: str) -> EnvVar | None:
        if not name.isupper() or not name.startswith(self.prefixes):
            return None
        entry = self.found.setdefault(name, EnvVar(name))
        entry.modules.add(self.module)
        return entry

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        helper = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        if (
            helper in READ_HELPERS
            and isinstance(first, ast.Constant)
            and isinstance(first.value, str)
        ):
            is_environ = helper not in ("get",) or (
                isinstance(func, ast.Attribute) and ast.unparse(func.value).endswith("environ")
            )
            entry = self._entry(first.value) if is_environ else None
            if entry is not None and not entry.declared:
                entry.type = READ_HELPERS[helper]
                if len(node.args) > 1 and entry.default is None:
                    entry.default = _literal(node.args[1])
                if helper.startswith("env_") and len(node.args) > 2:
                    entry.choices = _string_choices(node.args[2])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        key = node.slice
        if (
            ast.unparse(node.value).endswith("environ")
            and isinstance(key, ast.Constant)
            and isinstance(key.value, str)
        ):
            self._entry(key.value)
        self.generic_visit(node)


def _declare_vllm(tree: ast.Module, module: str, found: dict[str, EnvVar]) -> None:
    """vLLM's ``envs.py``: the typed names and the ``environment_variables`` table."""
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    entry = found.setdefault(statement.target.id, EnvVar(statement.target.id))
                    entry.declared = True
                    entry.type = _annotation_type(statement.annotation)
                    entry.default = _literal(statement.value)
                    entry.modules.add(module)
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "environment_variables":
            table = node.value if isinstance(node, ast.AnnAssign) else None
            if isinstance(table, ast.Dict):
                for key, value in zip(table.keys, table.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        entry = found.setdefault(key.value, EnvVar(key.value))
                        entry.declared = True
                        entry.modules.add(module)
                        _choices_from_lambda(value, entry)


def _choices_from_lambda(node: ast.AST, entry: EnvVar) -> None:
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "").startswith("env_"):
            if len(call.args) > 2:
                entry.choices = _string_choices(call.args[2])
            return


def _declare_sglang(tree: ast.Module, module: str, found: dict[str, EnvVar]) -> None:
    """SGLang's ``environ.py``: fields of the ``Envs`` class, such as ``EnvBool(False)``."""
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == "Envs"):
            continue
        for statement in node.body:
            if not (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)):
                continue
            kind = getattr(statement.value.func, "id", "")
            for target in statement.targets:
                if isinstance(target, ast.Name) and kind in ENV_FIELD_TYPES:
                    entry = found.setdefault(target.id, EnvVar(target.id))
                    entry.declared = True
                    entry.type = ENV_FIELD_TYPES[kind]
                    args = statement.value.args
                    entry.default = _literal(args[0]) if args else None
                    entry.modules.add(module)


def mine_env_vars(sources: dict[str, str], prefixes: tuple[str, ...]) -> dict[str, EnvVar]:
    """Variables of one release; ``sources`` maps module names to their text."""
    found: dict[str, EnvVar] = {}
    trees = {}
    for module, source in sorted(sources.items()):
        try:
            trees[module] = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
    for module, tree in trees.items():
        if module.endswith((".envs", ".environ")) and module.count(".") <= 2:
            _declare_vllm(tree, module, found)
            _declare_sglang(tree, module, found)
    for module, tree in trees.items():
        _Collector(module, prefixes, found).visit(tree)
    return found
