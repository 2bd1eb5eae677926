"""Message templates from Python sources, read with ``ast`` (nothing is imported).

A template is the text of a ``raise``, ``assert``, ``logger.*``, ``warnings.warn`` or ``print``
call with its variable parts turned into holes, written as the known-issue records write them:
``{name}`` for any text, ``{name:int}`` and ``{name:float}`` for numbers. Literal braces are
doubled, as in ``str.format``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

LOG_METHODS = {
    "debug": "debug",
    "info": "info",
    "info_once": "info",
    "warning": "warning",
    "warning_once": "warning",
    "warn": "warning",
    "error": "error",
    "exception": "error",
    "critical": "critical",
    "fatal": "critical",
}
LOGGER_NAMES = {"logger", "log", "_logger", "LOGGER", "logging", "init_logger"}

# Functions whose messages are said to be on the start-up path: launch-argument handling,
# configuration checks, model loading and the initialisation of workers and communicators.
STARTUP_FUNCTION_WORDS = (
    "__init__",
    "__post_init__",
    "init",
    "setup",
    "load",
    "check",
    "verify",
    "validate",
    "resolve",
    "handle",
    "from_cli",
    "from_engine_args",
    "launch",
    "main",
    "run_server",
    "configure",
    "get_model",
    "download",
    "capture",
    "profile_run",
    "determine_available_memory",
)
STARTUP_MODULE_WORDS = (
    "server_args",
    "arg_groups",
    "arg_utils",
    "envs",
    "environ",
    "launch",
    "platforms",
    "model_loader",
    "weight_utils",
    "hf_transformers_utils",
    "transformers_utils",
    "cpp_extension",
)


@dataclass(frozen=True)
class Template:
    """One message as written in the source, with typed holes."""

    text: str
    holes: tuple[str, ...]
    kind: str  # raise | assert | log | warn | print
    level: str
    exception: str | None
    module: str
    function: str
    startup: bool

    @property
    def key(self) -> tuple[str, str, str, str | None, str]:
        return (self.text, self.module, self.level, self.exception, self.function)


def _hole_kind(spec: str) -> str:
    """The kind of a %-conversion or format spec: int, float or str."""
    last = spec[-1:] if spec else ""
    if last in "diouxXc" and last:
        return "int"
    if last in "eEfFgG%" and last:
        return "float"
    return "str"


def _expr_name(node: ast.AST) -> str:
    """A short name for the expression filling a hole: ``args.tp_size`` → ``tp_size``."""
    while isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        inner = node.slice
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            return inner.value
        return _expr_name(node.value)
    return "value"


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


class _Builder:
    """Accumulates literal text and holes."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.holes: list[str] = []

    def literal(self, text: str) -> None:
        self.chunks.append(_escape(text))

    def hole(self, name: str, kind: str) -> None:
        safe = "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_") or "value"
        if safe[0].isdigit():
            safe = "v_" + safe
        self.chunks.append("{" + safe + ("}" if kind == "str" else f":{kind}}}"))
        self.holes.append(kind)

    def text(self) -> str:
        return "".join(self.chunks)


def _percent(builder: _Builder, fmt: str, args: list[ast.expr]) -> None:
    """Expand a %-format string; each conversion becomes a hole named after its argument."""
    index = 0
    position = 0
    while position < len(fmt):
        sign = fmt.find("%", position)
        if sign < 0:
            builder.literal(fmt[position:])
            return
        builder.literal(fmt[position:sign])
        if fmt[sign + 1 : sign + 2] == "%":
            builder.literal("%")
            position = sign + 2
            continue
        end = sign + 1
        mapping_name = None
        if fmt[end : end + 1] == "(":
            close = fmt.find(")", end)
            mapping_name = fmt[end + 1 : close] if close > 0 else None
            end = close + 1 if close > 0 else end
        while end < len(fmt) and fmt[end] in "#0- +.*123456789hlL":
            end += 1
        conversion = fmt[end : end + 1]
        name = mapping_name or (_expr_name(args[index]) if index < len(args) else "value")
        index += 1
        builder.hole(name, _hole_kind(conversion))
        position = end + 1


def _format_method(builder: _Builder, fmt: str, call: ast.Call) -> None:
    """Expand a ``"...".format(...)`` string."""
    import string

    auto = 0
    keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        builder.literal(fmt)
        return
    for literal, field, spec, _conversion in parsed:
        builder.literal(literal)
        if field is None:
            continue
        if field == "":
            node = call.args[auto] if auto < len(call.args) else None
            auto += 1
            name = _expr_name(node) if node is not None else "value"
        elif field.isdigit():
            position = int(field)
            name = _expr_name(call.args[position]) if position < len(call.args) else "value"
        else:
            base = field.split(".")[0].split("[")[0]
            name = _expr_name(keywords[base]) if base in keywords else base
        builder.hole(name, _hole_kind(spec or ""))


def render_message(
    node: ast.expr, extra_args: list[ast.expr]
) -> tuple[str, tuple[str, ...]] | None:
    """The template of a message expression, or None when it has no literal text at all."""
    builder = _Builder()
    if not _render(builder, node, extra_args):
        return None
    text = builder.text()
    literal = "".join(
        chunk for chunk in builder.chunks if not chunk.startswith("{") or "{{" in chunk
    )
    if not any(ch.isalpha() for ch in literal):
        return None
    return text, tuple(builder.holes)


def _render(builder: _Builder, node: ast.expr, extra_args: list[ast.expr]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if extra_args and "%" in node.value:
            _percent(builder, node.value, extra_args)
        else:
            builder.literal(node.value)
        return True
    if isinstance(node, ast.JoinedStr):
        for value in node.values:
            if isinstance(value, ast.Constant):
                builder.literal(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                spec = ""
                if isinstance(value.format_spec, ast.JoinedStr):
                    spec = "".join(
                        str(v.value)
                        for v in value.format_spec.values
                        if isinstance(v, ast.Constant)
                    )
                builder.hole(_expr_name(value.value), _hole_kind(spec))
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _render(builder, node.left, [])
        right = _render(builder, node.right, [])
        return left or right
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    ):
        args = list(node.right.elts) if isinstance(node.right, ast.Tuple) else [node.right]
        _percent(builder, node.left.value, args)
        return True
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        _format_method(builder, node.func.value.value, node)
        return True
    builder.hole(_expr_name(node), "str")
    return False


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _log_level(call: ast.Call) -> str | None:
    """The level of a logging call (``logger.warning(...)``), or None for other calls."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS:
        return None
    owner = func.value
    owner_name = _call_name(owner.func) if isinstance(owner, ast.Call) else _call_name(owner)
    if owner_name in LOGGER_NAMES or owner_name.endswith("logger"):
        return LOG_METHODS[func.attr]
    return None


def _is_startup(module: str, function: str) -> bool:
    lowered = function.lower()
    if function == "<module>" or any(word in lowered for word in STARTUP_FUNCTION_WORDS):
        return True
    return any(word in module for word in STARTUP_MODULE_WORDS)


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.found: list[Template] = []
        # Messages built first and raised later (``msg = f"..."; raise ValueError(msg)``).
        self.assigned: list[dict[str, ast.expr]] = [{}]

    def _function(self) -> str:
        return ".".join(self.scope) or "<module>"

    def _add(
        self, node: ast.expr, extra: list[ast.expr], kind: str, level: str, exc: str | None
    ) -> None:
        if isinstance(node, ast.Name) and node.id in self.assigned[-1]:
            node = self.assigned[-1][node.id]
        rendered = render_message(node, extra)
        if rendered is None:
            return
        text, holes = rendered
        function = self._function()
        self.found.append(
            Template(
                text=text.strip(),
                holes=holes,
                kind=kind,
                level=level,
                exception=exc,
                module=self.module,
                function=function,
                startup=_is_startup(self.module, function.split(".")[-1]),
            )
        )

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.scope.append(name)
        self.assigned.append({})
        self.generic_visit(node)
        self.assigned.pop()
        self.scope.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp)) or (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "format"
            ):
                self.assigned[-1][node.targets[0].id] = value
            else:
                self.assigned[-1].pop(node.targets[0].id, None)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, node.name)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            self._add(exc.args[0], [], "raise", "error", _call_name(exc.func) or None)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._add(node.msg, [], "assert", "error", "AssertionError")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        level = _log_level(node)
        name = _call_name(node.func)
        if node.args:
            if level is not None:
                self._add(node.args[0], list(node.args[1:]), "log", level, None)
            elif name == "warn" and isinstance(node.func, ast.Attribute):
                self._add(node.args[0], [], "warn", "warning", None)
            elif name == "print" and isinstance(node.func, ast.Name):
                self._add(node.args[0], [], "print", "print", None)
        self.generic_visit(node)


def mine_source(source: str, module: str) -> list[Template]:
    """All message templates of one module's source (empty when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    visitor = _Visitor(module)
    visitor.visit(tree)
    return [template for template in visitor.found if template.text]
