"""Builds an engine's launch parser with its heavy dependencies stubbed, and prints its options.

Run in a fresh interpreter by the miner (never imported by it):
``python parser_harness.py ENGINE SOURCE_ROOT [EXTRA_PATH ...]``. Every import that is not the
standard library, the engine itself or one of ``REAL_PACKAGES`` gets a stand-in module whose
attributes are inert stand-ins, so that ``ServerArgs.add_cli_args`` (SGLang) or
``make_arg_parser`` (vLLM) run as the release wrote them. Prints one JSON document.
"""

from __future__ import annotations

import abc
import argparse
import builtins
import importlib.abc
import importlib.machinery
import json
import pathlib
import re
import sys
import types
from typing import Any

REAL_PACKAGES = {
    "msgspec",
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "typing_inspection",
    "annotated_types",
    "yaml",
    "regex",
    "packaging",
}
# Accelerator namespaces a stand-in torch must not pretend to have.
ABSENT_ATTRIBUTES = {"npu", "xpu", "hpu", "mlu", "musa", "mps"}
STUB_VERSION = "2.9.0"
ADDRESS = re.compile(r" (object )?at 0x[0-9a-fA-F]+")


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _StandInMeta(abc.ABCMeta):
    """The class of stand-ins: any attribute, call, index or arithmetic gives a stand-in."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kw: Any
    ) -> Any:
        return super().__new__(mcls, name, bases, namespace)

    def __init__(
        cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(name, bases, namespace)

    def register(cls, *args: Any, **kwargs: Any) -> Any:
        return args[0] if args else None

    def __getattr__(cls, name: str) -> Any:
        if _dunder(name) or name in ABSENT_ATTRIBUTES:
            raise AttributeError(name)
        return StandIn

    def __getitem__(cls, item: Any) -> Any:
        return StandIn

    def __setitem__(cls, key: Any, value: Any) -> None:
        return None

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return super().__call__()

    def __or__(cls, other: Any) -> Any:
        return StandIn

    __ror__ = __or__

    def __bool__(cls) -> bool:
        return False

    def __iter__(cls) -> Any:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __int__(cls) -> int:
        return 0

    __index__ = __int__

    def __float__(cls) -> float:
        return 0.0

    def __contains__(cls, item: Any) -> bool:
        return False

    def __add__(cls, other: Any) -> Any:
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = __add__
    __mod__ = __pow__ = __and__ = __rand__ = __add__

    def __lt__(cls, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(cls, other: Any) -> bool:
        return cls is other or type(other) in (int, float)

    def __hash__(cls) -> int:
        return id(cls)

    def __enter__(cls) -> Any:
        return cls

    def __exit__(cls, *exc: Any) -> bool:
        return False

    def __mro_entries__(cls, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class StandIn(metaclass=_StandInMeta):
    """An instance of any stubbed class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __getattr__(self, name: str) -> Any:
        if _dunder(name) or name in ABSENT_ATTRIBUTES:
            raise AttributeError(name)
        return StandIn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return StandIn

    def __getitem__(self, key: Any) -> Any:
        return StandIn

    def __setitem__(self, key: Any, value: Any) -> None:
        return None

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __contains__(self, item: Any) -> bool:
        return False

    def __add__(self, other: Any) -> Any:
        return self

    __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = __and__ = __or__ = __ror__ = __add__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, StandIn) or other is StandIn or type(other) in (int, float)

    __hash__ = object.__hash__


class StandInModule(types.ModuleType):
    """A stubbed module: every attribute is a stand-in."""

    __path__: tuple[str, ...] = ()
    __version__ = STUB_VERSION

    def __getattr__(self, name: str) -> Any:
        if _dunder(name) or name in ABSENT_ATTRIBUTES:
            raise AttributeError(name)
        return StandIn


class StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Gives a stand-in for every module that is neither standard, the engine's nor real."""

    def __init__(self, engine_package: str) -> None:
        self.engine_package = engine_package
        self.forced: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        top = name.split(".")[0]
        if name in self.forced:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if top in sys.stdlib_module_names or top in REAL_PACKAGES:
            return None
        if top == self.engine_package:
            for finder in sys.meta_path:
                if finder is self:
                    continue
                try:
                    spec = finder.find_spec(name, path, target)
                except (ImportError, AttributeError, ValueError):
                    spec = None
                if spec is not None:
                    return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        return StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _safe_call(factory: Any) -> Any:
    """A default factory's value, or None when it needs what the stand-ins cannot give."""
    try:
        return factory()
    except Exception:
        return None


def _sglang_parser(root: pathlib.Path) -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def _vllm_parser(root: pathlib.Path) -> argparse.ArgumentParser:
    # Config defaults are built from config classes that need a real GPU stack: tolerate failures.
    builtins._safe_call = _safe_call  # type: ignore[attr-defined]
    arg_utils = root / "vllm" / "engine" / "arg_utils.py"
    source = arg_utils.read_text().replace("_safe_call(", "(")
    for call in ("default.default_factory", "field.default_factory"):
        source = source.replace(f"{call}()", f"_safe_call({call})")
    arg_utils.write_text(source)
    if (root / "vllm" / "utils" / "argparse_utils.py").exists():
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]
    else:
        from vllm.utils import FlexibleArgumentParser  # type: ignore[import-not-found]
    for package in ("common", "launchers", "openai"):
        if (root / "vllm" / "entrypoints" / package / "cli_args.py").exists():
            module = __import__(
                f"vllm.entrypoints.{package}.cli_args", fromlist=["make_arg_parser"]
            )
            if hasattr(module, "make_arg_parser"):
                parser = FlexibleArgumentParser(prog="vllm serve")
                return module.make_arg_parser(parser)
    raise SystemExit("no make_arg_parser found")


def _plain(value: Any) -> Any:
    """A JSON value for a default or choice; stand-ins and objects become None or their repr."""
    if isinstance(value, StandIn) or value is StandIn or isinstance(value, _StandInMeta):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in sorted(value.items(), key=repr)}
    if hasattr(value, "value") and hasattr(value, "name"):  # enum members
        return _plain(value.value)
    if callable(value) and getattr(value, "__name__", "") == "<lambda>":
        try:  # a default factory such as ``lambda: ["*"]``
            return _plain(value())
        except Exception:
            return "<computed>"
    return ADDRESS.sub("", repr(value))  # addresses differ from run to run


def _type_name(kind: Any) -> str | None:
    if kind is None:
        return None
    return getattr(kind, "__name__", None) or type(kind).__name__


def describe(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The options of a parser as plain data."""
    deprecated = {id(action) for action in getattr(parser, "_deprecated", set())}
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        kind = type(action).__name__
        options.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "action": kind,
                "type": _type_name(action.type),
                "choices": None if action.choices is None else _plain(list(action.choices)),
                "default": None if action.default is argparse.SUPPRESS else _plain(action.default),
                "nargs": _plain(action.nargs),
                "required": bool(action.required),
                "deprecated": id(action) in deprecated
                or "Deprecated" in kind
                or bool(getattr(action, "deprecated", False)),
                "help": None if action.help in (None, argparse.SUPPRESS) else str(action.help),
            }
        )
    return {
        "parser_class": type(parser).__name__,
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "options": options,
    }


_real_getattr = builtins.getattr


def _tolerant_getattr(obj: Any, name: Any, *default: Any) -> Any:
    """``getattr`` that answers a stand-in when the attribute name is itself a stand-in."""
    if not isinstance(name, str):
        return StandIn
    return _real_getattr(obj, name, *default)


ENTRY_MODULES = {"sglang.srt.server_args", "vllm.engine.arg_utils"}
MAX_ATTEMPTS = 60


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _failing_module(error: BaseException, root: pathlib.Path, engine: str) -> str | None:
    """The engine module to replace: the deepest engine frame's module, unless that is the
    package itself or the parser's own module (then the deepest module being imported)."""
    protected = {*ENTRY_MODULES, engine}
    deepest = importing = None
    trace = error.__traceback__
    while trace is not None:
        path = pathlib.Path(trace.tb_frame.f_code.co_filename)
        if path.is_relative_to(root):
            name = _module_name(path, root)
            if name not in protected:
                deepest = name
                if trace.tb_frame.f_code.co_name == "<module>":
                    importing = name
        trace = trace.tb_next
    return deepest or importing


def build_parser(engine: str, root: pathlib.Path) -> tuple[argparse.ArgumentParser, list[str]]:
    """The engine's parser; modules whose import-time code fails are replaced by stand-ins."""
    finder = StandInFinder(engine)
    sys.meta_path.insert(0, finder)
    for _attempt in range(MAX_ATTEMPTS):
        try:
            parser = _sglang_parser(root) if engine == "sglang" else _vllm_parser(root)
            return parser, sorted(finder.forced)
        except Exception as error:
            culprit = _failing_module(error, root, engine)
            if culprit is None or culprit in finder.forced:
                raise
            finder.forced.add(culprit)
            for name in [name for name in sys.modules if name.split(".")[0] == engine]:
                del sys.modules[name]
    raise SystemExit(f"gave up after stubbing {sorted(finder.forced)}")


def _accepts(parser: argparse.ArgumentParser, argv: list[str], dest: str) -> bool | None:
    """Whether the parser takes ``argv`` and sets ``dest``; None when it cannot be tried."""
    try:
        namespace = parser.parse_args(argv)
    except SystemExit:
        return False
    except Exception:
        return None
    return getattr(namespace, dest, None) is True


def probe(parser: argparse.ArgumentParser) -> dict[str, bool | None]:
    """Ask the parser itself how it reads ``--a_b`` and an abbreviated ``--a-``: one switch
    with a dash in its name is given both ways, with dummy values for required options."""
    required: list[str] = []
    switch = None
    for action in parser._actions:
        long_flags = [flag for flag in action.option_strings if flag.startswith("--")]
        if action.required and long_flags:
            required += [long_flags[0], "x"]
        if switch is None and isinstance(action, argparse._StoreTrueAction):
            dashed = [flag for flag in long_flags if "-" in flag[2:]]
            if dashed:
                switch = (dashed[0], action.dest)
    if switch is None:
        return {"underscores": None, "abbreviations": None}
    flag, dest = switch
    underscored = "--" + flag[2:].replace("-", "_")
    return {
        "underscores": _accepts(parser, [*required, underscored], dest),
        "abbreviations": _accepts(parser, [*required, flag[:-1]], dest),
    }


def main() -> None:
    engine, root_text, *extra = sys.argv[1:]
    builtins.getattr = _tolerant_getattr
    root = pathlib.Path(root_text).resolve()
    sys.path[:0] = [str(root), *extra]
    output = sys.stdout
    sys.stdout = sys.stderr  # engines log to stdout while their modules load
    parser, stubbed = build_parser(engine, root)
    description = {**describe(parser), "stubbed_modules": stubbed, "probe": probe(parser)}
    json.dump(description, output, sort_keys=True)


if __name__ == "__main__":
    main()
