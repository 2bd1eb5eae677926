"""Small, safe expressions over captured values: conditions, derived numbers, templates.

Conditions are ``name``, ``not name``, ``left OP right`` with OP one of
``< <= > >= == !=``, or ``left in right`` / ``left not in right`` where ``right`` is a name
holding a list or a quoted comma-separated list (``algo in 'EAGLE, NEXTN'``; a member that
ends in ``*`` takes every value that begins with it: ``name in 'EngineCore*'``); operands are
names, numbers or quoted strings. An ordering (``< <= > >=``) of two values that are not both
numbers but both releases compares their release numbers: ``engine_version < '0.10.0'`` holds
for 0.8.5, 0.9 and 0.9.2.post1 (write the bound with three numbers: ``'0.10'`` is also the
number 0.1, and two numbers compare as numbers). Derived values are
arithmetic (``+ - * /``, parentheses, ``min``, ``max``, ``round``, ``floor``, ``ceil``,
``nearest_divisor``)
over names and numbers, or a text function of two captured texts: ``nearest_choice(value,
choices)`` or ``version_change(installed, wanted)``. Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from diagnose.core.versions import compared

Values = Mapping[str, Any]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}

_ORDERINGS = frozenset({operator.le, operator.ge, operator.lt, operator.gt})
_RELEASE_LIKE = re.compile(r"v?\d+(?:\.\d+)+(?:[.+-]?[A-Za-z][\w.+-]*)?$")
"""A release as an engine prints it (``0.8.5``, ``v0.10.1rc1``, ``0.9.2.post1``): at least two
numbers, so a quantity with a unit (``10 GB``) is never read as one."""

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def nearest_divisor(number: float, near: float) -> float:
    """The largest power of two that divides ``number`` and is not above ``near`` (1 when none
    is): the parallel size to suggest when ``near`` does not divide a model's head or expert
    count. Never above the size asked for, which may be every GPU the host has.

    >>> nearest_divisor(16, 6), nearest_divisor(12, 8), nearest_divisor(40, 6)
    (4.0, 4.0, 4.0)
    >>> nearest_divisor(9, 2)
    1.0
    """
    whole = int(number)
    candidates = [2**k for k in range(whole.bit_length()) if whole % 2**k == 0 and 2**k <= near]
    return float(max(candidates, default=1))


def blocks_short(shard: float, block: float) -> float:
    """By how much a parallel size must shrink for a shard of ``shard`` columns to be a whole
    number of ``block``-wide blocks: the smallest power of two ``k`` with ``shard * k`` a
    multiple of ``block``.

    >>> blocks_short(192, 128), blocks_short(96, 128), blocks_short(256, 128)
    (2.0, 4.0, 1.0)
    """
    factor = 1
    while (int(shard) * factor) % int(block) and factor < int(block):
        factor *= 2
    return float(factor)


_FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "nearest_divisor": nearest_divisor,
    "blocks_short": blocks_short,
}


def nearest_choice(value: str, choices: list[str], cutoff: float = 0.8) -> str | None:
    """The accepted value a refused one most likely meant: the same but for case, ``-`` and
    ``_`` (``deepseek_r1`` for ``deepseek-r1``), the one choice it begins, or the closest
    spelling at ``cutoff`` or above (``fp8_e4m3fn`` for ``fp8_e4m3``); None when none is near.
    The default cutoff is for a patch; a hint may go lower."""
    folded = {_folded(c): c for c in choices}
    if (same := folded.get(_folded(value))) is not None:
        return same
    started = [c for c in choices if c.lower().startswith(value.lower())]
    if len(started) == 1 and value:
        return started[0]
    import difflib  # only to suggest a spelling for a mistake

    close = difflib.get_close_matches(value, choices, n=1, cutoff=cutoff)
    return close[0] if close else None


def _folded(text: str) -> str:
    return text.lower().replace("-", "_")


def choice_list(printed: str) -> list[str]:
    """The values of an error's list of choices, quoted or not (``'auto', 'fp8'``, ``[a, b]``)."""
    return [c for c in (w.strip(" '\"[]{}()") for w in printed.split(",")) if c]


def _nearest_printed_choice(value: Any, printed: Any) -> str | None:
    return nearest_choice(str(value), choice_list(str(printed)))


def version_change(installed: Any, wanted: Any) -> str | None:
    """The package action that takes ``installed`` to ``wanted``: ``upgrade`` or
    ``downgrade`` by release numbers (``0.6.13`` to ``0.6.14`` is an upgrade); None when
    they are the same release or one has no numbers."""
    order = compared(str(installed), str(wanted))
    return None if order is None else {-1: "upgrade", 1: "downgrade"}.get(order)


def underscores(key: Any) -> str:
    """A dashed key as a config class spells it (``num-speculative-tokens`` ->
    ``num_speculative_tokens``)."""
    return str(key).replace("-", "_")


_TEXT_FUNCTIONS: dict[str, Callable[..., str | None]] = {
    "nearest_choice": _nearest_printed_choice,
    "version_change": version_change,
    "underscores": underscores,
}
_TEXT_ARITY = {"underscores": 1}
"""The text functions that take other than two captured names."""


class ExpressionError(ValueError):
    """An expression that does not parse; raised at signature load time."""


def as_number(value: Any) -> float | None:
    """The numeric value of a capture, or None when it is not a finite number.

    >>> as_number("1,024"), as_number("1" + "0" * 400), as_number("nan"), as_number(10**400)
    (1024.0, None, None, None)
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            number = float(value.replace(",", ""))
        else:
            return None
    except (ValueError, OverflowError):  # (an int past float's range overflows)
        return None
    return number if math.isfinite(number) else None  # 1e400, nan: no number to compare


_MEMBERSHIP = re.compile(r"^\s*(?P<left>\S+)\s+(?P<op>not\s+in|in)\s+(?P<right>\S.*?)\s*$")


def _names(*tokens: str) -> set[str]:
    return {t.strip() for t in tokens if t.strip().isidentifier()}


def _members(value: Any) -> list[str] | None:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [format_number(v) for v in value]
    if isinstance(value, str):  # a printed list: `'a', 'b'` reads as a and b
        return [part.strip(" '\"") for part in value.split(",") if part.strip(" '\"")]
    return None


def _operand(token: str) -> Callable[[Values], Any]:
    token = token.strip()
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        literal = token[1:-1]
        return lambda values: literal
    number = as_number(token)
    if number is not None:
        return lambda values: number
    if not token.isidentifier():
        raise ExpressionError(f"not a name, number or quoted string: {token!r}")
    return lambda values: values.get(token)


class Condition:
    """A parsed condition; ``holds(values)`` is False when a name it needs is missing."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.negated = False
        """Whether it holds where its name has no value (``not name``)."""
        text = source.strip()
        for symbol, compare in _COMPARE.items():
            left, found, right = text.partition(symbol)
            if found:
                self._test = self._comparison(_operand(left), compare, _operand(right))
                self.names = _names(left, right)
                return
        membership = _MEMBERSHIP.match(text)
        if membership:
            left, right = membership.group("left"), membership.group("right")
            self._test = self._membership(
                _operand(left), membership.group("op") == "in", _operand(right)
            )
            self.names = _names(left, right)
            return
        negate = self.negated = text.startswith("not ")
        name = text[4:].strip() if negate else text
        if not name.isidentifier():
            raise ExpressionError(
                f"condition {source!r}: expected 'name', 'not name', 'a OP b' or 'a in b'"
            )
        self.names = {name}
        """Names the condition reads."""
        self._test = (lambda v: not v.get(name)) if negate else (lambda v: bool(v.get(name)))

    @staticmethod
    def _membership(
        left: Callable[[Values], Any], inside: bool, right: Callable[[Values], Any]
    ) -> Callable[[Values], bool]:
        def test(values: Values) -> bool:
            item, members = left(values), _members(right(values))
            if item is None or members is None:
                return False
            text = format_number(item)
            found = any(text.startswith(m[:-1]) if m.endswith("*") else text == m for m in members)
            return found is inside

        return test

    @staticmethod
    def _comparison(
        left: Callable[[Values], Any],
        compare: Callable[[Any, Any], bool],
        right: Callable[[Values], Any],
    ) -> Callable[[Values], bool]:
        def test(values: Values) -> bool:
            a, b = left(values), right(values)
            if a is None or b is None:
                return False
            na, nb = as_number(a), as_number(b)
            if na is not None and nb is not None:
                return compare(na, nb)
            if compare in _ORDERINGS:  # releases by their numbers: 0.8.5 < 0.10
                order = compared(str(a), str(b)) if _RELEASE_LIKE.match(str(a)) else None
                if order is not None and _RELEASE_LIKE.match(str(b)):
                    return compare(order, 0)
            return compare(str(a), str(b))

        return test

    def holds(self, values: Values) -> bool:
        return self._test(values)


def all_hold(conditions: list[Condition], values: Values) -> bool:
    return all(condition.holds(values) for condition in conditions)


class Arithmetic:
    """A parsed expression: arithmetic, or a text function of captured names; ``value(values)``
    is None when a name is missing or a text function finds nothing."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._text: tuple[Callable[..., str | None], list[str]] | None = None
        try:
            tree = ast.parse(source, mode="eval")
            body = tree.body
            if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
                function = _TEXT_FUNCTIONS.get(body.func.id)
                if function is not None:
                    self._text = (function, self._text_names(body, body.func.id))
            if self._text is None:
                self._check(body)
        except SyntaxError as error:
            raise ExpressionError(f"expression {source!r} does not parse: {error.msg}") from None
        except (RecursionError, MemoryError):
            raise ExpressionError(f"expression {source[:40]!r}...: nested too deeply") from None
        self._tree = tree.body

    def _text_names(self, call: ast.Call, function: str) -> list[str]:
        names = [a.id for a in call.args if isinstance(a, ast.Name)]
        wanted = _TEXT_ARITY.get(function, 2)
        if len(names) != wanted or len(call.args) != wanted or call.keywords:
            raise ExpressionError(f"expression {self.source!r}: takes {wanted} captured names")
        return names

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            self._check(node.operand)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in _FUNCTIONS or node.keywords:
                raise ExpressionError(
                    f"expression {self.source!r}: unknown function {node.func.id}"
                )
            for argument in node.args:
                self._check(argument)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            pass
        elif not isinstance(node, ast.Name):
            raise ExpressionError(f"expression {self.source!r}: only arithmetic is allowed")

    def value(self, values: Values) -> float | str | None:
        if self._text is not None:
            function, names = self._text
            if any(values.get(name) in (None, "") for name in names):
                return None
            return function(*(values[name] for name in names))
        try:
            return self._evaluate(self._tree, values)
        except (LookupError, ZeroDivisionError, TypeError, ValueError, OverflowError):
            return None
        except RecursionError:
            return None

    def _evaluate(self, node: ast.AST, values: Values) -> Any:
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](
                self._evaluate(node.left, values), self._evaluate(node.right, values)
            )
        if isinstance(node, ast.UnaryOp):
            return -self._evaluate(node.operand, values)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            return _FUNCTIONS[node.func.id](*(self._evaluate(a, values) for a in node.args))
        if isinstance(node, ast.Constant):
            return node.value
        assert isinstance(node, ast.Name)
        number = as_number(values[node.id])
        if number is None:
            raise ValueError(node.id)
        return number


def template_fields(template: str) -> set[str]:
    """Names a ``{name}`` template refers to. A field needs a name (``{}`` and ``{0}`` have
    none), a known conversion and a short format spec; anything else is refused at load."""
    try:
        fields = [
            (name, conversion, spec)
            for _, name, spec, conversion in string.Formatter().parse(template)
            if name is not None
        ]
    except ValueError as error:
        raise ExpressionError(f"template {template!r}: {error}") from None
    for name, conversion, spec in fields:
        if not name or name[0].isdigit() or conversion not in (None, "r", "s", "a"):
            raise ExpressionError(
                f"template {template!r}: field {{{name}}} needs a name, such as {{value}}"
                if not name or name[0].isdigit()
                else f"template {template!r}: unknown conversion !{conversion} in {{{name}}}"
            )
        if re.search(r"\d{4}", spec or ""):
            raise ExpressionError(f"template {template!r}: format spec {spec!r} is too wide")
        if not name.isidentifier():  # JSON in a text (`{"mode": "X"}`) reads as a field
            raise ExpressionError(
                f"template {template!r}: {{{name}}} is no field name; write literal braces "
                "as {{ and }}"
            )
    return {name for name, _, _ in fields}


def format_number(value: Any) -> str:
    """Numbers without a useless ``.0``; lists as ``a, b, c``; everything else as text."""
    if isinstance(value, (list, tuple)):
        return ", ".join(format_number(v) for v in value)
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() else f"{value:g}"
    return str(value)


DISTRIBUTIONS = {
    "amp_C": "apex",
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "causal_conv1d_cuda": "causal-conv1d",
    "cv2": "opencv-python-headless",
    "Crypto": "pycryptodome",
    "cuda": "cuda-python",
    "cuda.bindings": "cuda-python",
    "cutlass": "nvidia-cutlass-dsl",
    "dateutil": "python-dateutil",
    "deep_gemm": "deep-gemm",
    "dotenv": "python-dotenv",
    "fastchat": "fschat",
    "fitz": "pymupdf",
    "flashinfer": "flashinfer-python",
    "Flash-Attention": "flash-attn",
    "flash_attn_2_cuda": "flash-attn",
    "flash_attn_cuda": "flash-attn",
    "google": "protobuf",
    "jwt": "pyjwt",
    "lm_eval": "lm-eval",
    "magic": "python-magic",
    "multipart": "python-multipart",
    "OpenSSL": "pyopenssl",
    "PIL": "pillow",
    "pynvml": "nvidia-ml-py",
    "selective_scan_cuda": "mamba-ssm",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "swift": "ms-swift",
    "trinity": "trinity-rft",
    "vllm_flash_attn": "vllm",
    "websocket": "websocket-client",
    "yaml": "pyyaml",
    "zmq": "pyzmq",
}
"""Import names whose distribution on the package index is named otherwise (a compiled
extension module, ``flash_attn_2_cuda``, by the package that builds it; a copy vendored in
another package's wheel, ``vllm_flash_attn``, by that package)."""


def distribution_name(name: str) -> str:
    """A package name as pip normalises it (``Flashinfer_Python`` is ``flashinfer-python``)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


_FLAG_TOKEN = re.compile(r"(?<!\S)--?[A-Za-z][\w-]*(?==|\s|$)")


class _Text(str):
    """A filled value; ``{name:flag}`` writes an argparse destination (``max_model_len``, as
    Python errors name it) as its flag (``--max-model-len``); ``{name:distribution}`` writes a
    package or import name as pip names its distribution (``flashinfer_python`` is
    ``flashinfer-python``, ``cv2`` is ``opencv-python-headless``); ``{name:flags}`` writes the
    options of a command-line excerpt, each once, without their values (``--a 1 --b`` is
    ``--a --b``)."""

    def __format__(self, spec: str) -> str:
        if spec == "flag":
            return "--" + self.strip().lstrip("-").replace("_", "-")
        if spec == "distribution":
            name = self.strip()
            return DISTRIBUTIONS.get(name) or distribution_name(name)
        if spec == "flags":
            return " ".join(dict.fromkeys(_FLAG_TOKEN.findall(self)))
        return str.__format__(str(self), spec)


def fill(template: str, values: Values) -> str | None:
    """Fill ``{name}`` fields; None when a field has no value."""
    names = template_fields(template)
    if any(values.get(name) in (None, "") for name in names):
        return None
    try:
        return template.format_map({name: _Text(format_number(values[name])) for name in names})
    except (ValueError, LookupError, AttributeError, TypeError):  # {n:d} over a text value
        return None
