"""The names an engine release registers at run time, read from its source with ``ast``: the
model architectures it can load, the tool-call and reasoning parsers and the quantization
methods it knows.

The launch parser cannot list these (vLLM checks a parser name against a registry filled on
import, and a quantization method against a ``Literal``), yet they decide the commonest "needs a
newer release" incidents: a model whose architecture the installed release does not have, a
parser name from a newer model card, a checkpoint quantized with a newer method. vLLM's attention
backends are an enum too (``--attention-backend`` and ``VLLM_ATTENTION_BACKEND`` take its member
names), renamed across releases (``TRITON_ATTN_VLLM_V1`` became ``TRITON_ATTN``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_MANAGERS = {"ToolParserManager": "tool_parsers", "ReasoningParserManager": "reasoning_parsers"}
_LAZY_TABLES = {
    "_TOOL_PARSERS_TO_REGISTER": "tool_parsers",
    "_REASONING_PARSERS_TO_REGISTER": "reasoning_parsers",
}

_ATTENTION_BACKEND_ENUMS = ("_Backend", "AttentionBackendEnum")
"""vLLM's enum of attention backends: ``_Backend`` (``platforms/interface.py``, then
``attention/backends/registry.py``), ``AttentionBackendEnum`` from 0.12."""

_QUANTIZATION_PACKAGES = {
    "vllm.model_executor.layers.quantization",
    "sglang.srt.layers.quantization",  # not sglang.multimodal_gen's, the diffusion runtime's
}


def mine_registries(sources: dict[str, str]) -> dict[str, list[str]]:
    """``architectures``, ``tool_parsers``, ``reasoning_parsers``, ``quantization_methods`` and
    ``attention_backends`` of one release, sorted."""
    found: dict[str, set[str]] = {
        "architectures": set(),
        "tool_parsers": set(),
        "reasoning_parsers": set(),
        "quantization_methods": set(),
        "attention_backends": set(),
    }
    for module, source in sources.items():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        if _is_model_registry(module):
            found["architectures"] |= set(_registry_dict_keys(tree))
        if ".models." in f"{module}." and module.split(".")[-2:-1] == ["models"]:
            found["architectures"] |= set(_entry_classes(tree))
        if module in _QUANTIZATION_PACKAGES:
            found["quantization_methods"] |= set(_quantization_methods(tree))
        for kind, name in _registered_parsers(tree):
            found[kind].add(name)
        found["attention_backends"] |= set(_enum_members(tree, _ATTENTION_BACKEND_ENUMS))
    return {kind: sorted(names) for kind, names in found.items()}


def _is_model_registry(module: str) -> bool:
    """vLLM's table of architectures: ``models/registry.py`` (``models/__init__.py`` before)."""
    return module.endswith(("model_executor.models.registry", "model_executor.models"))


def _registry_dict_keys(tree: ast.Module) -> Iterator[str]:
    """Keys of the module-level ``_..._MODELS = {...}`` tables."""
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not any(name.endswith("_MODELS") for name in names) or not isinstance(value, ast.Dict):
            continue
        for key in value.keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value


def _quantization_methods(tree: ast.Module) -> set[str]:
    """The names in the quantization package's ``QUANTIZATION_METHODS``: a list (vLLM 0.6 to
    0.7), a dict's keys (vLLM 0.5, SGLang, whose dict spreads ``**BASE_QUANTIZATION_METHODS``
    that ``.update({...})`` calls extend per platform) or ``list(get_args(QuantizationMethods))``
    of a ``Literal[...]`` (vLLM 0.8 on)."""
    assigned: dict[str, ast.expr] = {}
    updates: dict[str, list[ast.expr]] = {}
    for node in _module_level(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
        ):
            updates.setdefault(node.func.value.id, []).extend(node.args)
            continue
        else:
            continue
        if isinstance(target, ast.Name):
            assigned.setdefault(target.id, value)
    names: set[str] = set()
    followed: set[str] = set()
    pending = ["QUANTIZATION_METHODS"]
    while pending:
        name = pending.pop()
        if name in followed or name not in assigned:
            continue
        followed.add(name)
        for value in [assigned[name], *updates.get(name, [])]:
            names |= set(_method_names(value, pending))
    return names


def _module_level(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes of the module's own code (in ``if`` blocks too), not those of its functions."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop(0)
        yield node
        pending += [
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]


def _method_names(node: ast.expr, pending: list[str]) -> Iterator[str]:
    """The string names ``node`` holds; the names it refers to go to ``pending``."""
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # {**OTHER_METHODS}
                yield from _method_names(value, pending)
            else:
                yield from _strings(key)
    elif isinstance(node, ast.Subscript):  # Literal["awq", ...]
        yield from _strings(node.slice)
    elif isinstance(node, ast.Call) and node.args:  # list(get_args(QuantizationMethods))
        yield from _method_names(node.args[0], pending)
    elif isinstance(node, ast.Name):
        pending.append(node.id)
    else:
        yield from _strings(node)


def _enum_members(tree: ast.Module, names: tuple[str, ...]) -> Iterator[str]:
    """The members of a module-level ``Enum`` subclass named one of ``names`` (a class of that
    name that is no enum, such as a shim for an old import path, has none)."""
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name not in names:
            continue
        bases = {
            base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            for base in node.bases
        }
        if "Enum" not in bases:
            continue
        for statement in node.body:
            targets = statement.targets if isinstance(statement, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    yield target.id


def _entry_classes(tree: ast.Module) -> Iterator[str]:
    """SGLang's ``EntryClass = Model`` or ``EntryClass = [ModelA, ModelB]`` in a model file."""
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
            continue
        values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
        for value in values:
            if isinstance(value, ast.Name):
                yield value.id
            elif isinstance(value, ast.Attribute):
                yield value.attr


def _registered_parsers(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of each parser registered by a ``Manager.register_module(...)``
    decorator or call, or listed in a lazy registration table."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            kind = _MANAGERS.get(owner.id) if isinstance(owner, ast.Name) else None
            if kind and node.func.attr in ("register_module", "register_lazy_module"):
                arguments = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "name")]
                for argument in arguments:
                    for name in _strings(argument):
                        yield kind, name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                kind = _LAZY_TABLES.get(target.id) if isinstance(target, ast.Name) else None
                if kind:
                    for key in node.value.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            yield kind, key.value


def _strings(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple)):
        for element in node.elts:
            yield from _strings(element)
