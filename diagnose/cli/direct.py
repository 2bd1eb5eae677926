"""The direct path: a plain ``diagnose file`` or ``diagnose journal`` run, parsed without
importing typer (a third of a small run's time).

It reads the options as the typer app declares them (``spec.py``, made from the app by
``scripts/build_cli_spec.py``) and understands only the usual ways of writing them:
``--name VALUE``, ``--name=VALUE``, ``-n VALUE``, flags, and arguments in any order. Anything
else (help, an unknown or misspelt option, a value typer would refuse, ``--``, short options
run together) is left to the typer app, which parses it and says what is wrong: this path
never reports a usage error of its own, so the two cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from diagnose import __version__
from diagnose.cli import common
from diagnose.cli.spec import COMMANDS, GLOBAL_FLAGS
from diagnose.core.errors import ExitCode


class Invocation(NamedTuple):
    """What a direct argument list asks for: a command and its parameters, or the version."""

    command: str | None
    values: dict[str, Any]
    debug: bool = False


def run(argv: Sequence[str], environ: Mapping[str, str]) -> ExitCode | None:
    """Run ``argv`` when it is a plain run of a direct command; None when it is not."""
    invocation = parse(argv, environ)
    if invocation is None:
        return None
    common.show_tracebacks = invocation.debug
    if invocation.command is None:
        print(f"diagnose {__version__}")
        return ExitCode.OK
    runner = common.run_file if invocation.command == "file" else common.run_journal
    return runner(**invocation.values)


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> Invocation | None:
    """The parameters typer would give the command's function for ``argv`` (choices as their
    text); None when ``argv`` is anything but a plain run of a direct command."""
    debug = False
    for position, token in enumerate(argv):
        if token == "--version" and "--version" in GLOBAL_FLAGS:
            return Invocation(None, {}, debug)  # eager, as in typer: the rest is not read
        if token == "--debug" and "--debug" in GLOBAL_FLAGS:
            debug = True
        elif token in COMMANDS:
            values = _command_values(COMMANDS[token], argv[position + 1 :], environ)
            return None if values is None else Invocation(token, values, debug)
        else:
            return None
    return None


def _command_values(
    parameters: Mapping[str, Mapping[str, Any]], argv: Sequence[str], environ: Mapping[str, str]
) -> dict[str, Any] | None:
    """Each parameter's value from the command's own arguments (then its environment
    variable, then its default); None at the first thing typer should judge instead."""
    by_name = {name: key for key, spec in parameters.items() for name in spec.get("names", ())}
    off_names = {name: key for key, spec in parameters.items() for name in spec.get("off", ())}
    argument = next((key for key, spec in parameters.items() if spec["kind"] == "argument"), None)
    given: dict[str, Any] = {}
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-") or token == "-":
            if argument is None:
                return None
            given.setdefault(argument, []).append(token)
            continue
        name, has_value, attached = token.partition("=")
        if not name.startswith("--") and (has_value or len(name) != 2):
            return None  # -fjson, -abc: run together
        if name in off_names and not has_value:
            given[off_names[name]] = False
            continue
        key = by_name.get(name)
        if key is None:
            return None
        spec = parameters[key]
        if spec["kind"] == "flag":
            if has_value:
                return None
            given[key] = True
            continue
        value = attached if has_value else next(tokens, None)
        if value is None or (value.startswith("-") and value != "-" and not has_value):
            return None
        if spec.get("multiple"):
            given.setdefault(key, []).append(value)
        else:
            given[key] = value  # the last one counts, as in typer
    values = {}
    for key, spec in parameters.items():
        if key in given:
            raw = given[key]
        elif "envvar" in spec and environ.get(spec["envvar"]):
            raw = environ[spec["envvar"]]
        elif spec.get("required"):
            return None
        else:
            values[key] = spec["default"]
            continue
        if spec["kind"] == "flag":
            values[key] = raw
            continue
        items = [_converted(spec, item) for item in (raw if isinstance(raw, list) else [raw])]
        if _REFUSED in items:
            return None
        values[key] = items if isinstance(raw, list) else items[0]
    return values


_REFUSED = object()


def _converted(spec: Mapping[str, Any], text: str) -> Any:
    """One given value as typer converts it; ``_REFUSED`` when typer would refuse it."""
    kind = spec["value"]
    if kind == "path":
        return Path(text)
    if kind == "choice":
        return text if text in spec["choices"] else _REFUSED
    if kind == "int":  # plain digits only: typer decides on any other way of writing one
        if not (text.isascii() and text.isdigit()):
            return _REFUSED
        number = int(text)
        return number if number >= spec.get("min", number) else _REFUSED
    return text
