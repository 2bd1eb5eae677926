"""Write the options of the commands the direct path runs, as the typer app declares them.

    python scripts/build_cli_spec.py          # writes diagnose/cli/spec.py
    python scripts/build_cli_spec.py --check  # exit 1 when the file is out of date

Run it after changing an option of ``file`` or ``journal`` (or the app's own options);
tests/test_direct_cli.py checks that the committed file is what the app gives. An option of a
kind the direct parser does not read (a flag from an environment variable, several values at
once) stops the script: teach ``diagnose/cli/direct.py`` that kind first.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import typer.main

from diagnose.cli.app import app

DIRECT_COMMANDS = ("file", "journal")
SPEC = Path(__file__).resolve().parent.parent / "diagnose" / "cli" / "spec.py"
HEADER = '''"""The options of the commands the direct path runs (``diagnose.cli.direct``), as the
typer app declares them. Written by scripts/build_cli_spec.py: do not edit."""

from typing import Any

'''


def _value_kind(annotation: Any) -> tuple[str, bool, dict[str, Any]]:
    """The kind of a parameter's values, whether it takes several, and its choices."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (annotation,) = arguments
    if typing.get_origin(annotation) is list:
        kind, _, extra = _value_kind(typing.get_args(annotation)[0])
        return kind, True, extra
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "choice", False, {"choices": [member.value for member in annotation]}
    kinds = {str: "str", Path: "path", int: "int", bool: "bool"}
    if annotation not in kinds:
        raise SystemExit(f"the direct path reads no {annotation} option: teach it first")
    return kinds[annotation], False, {}


def _default(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _parameter(parameter: Any, annotation: Any) -> dict[str, Any]:
    kind, several, extra = _value_kind(annotation)
    if parameter.nargs not in (1, -1) or (parameter.envvar and (several or kind == "bool")):
        raise SystemExit(f"--{parameter.name}: the direct path cannot read it: teach it first")
    if parameter.param_type_name == "argument":
        return {"kind": "argument", "value": kind, "default": _default(parameter.default)}
    spec: dict[str, Any] = {"kind": "flag" if kind == "bool" else "option"}
    spec["names"] = list(parameter.opts)
    if parameter.secondary_opts:
        spec["off"] = list(parameter.secondary_opts)
    if kind != "bool":
        spec["value"] = kind
    spec.update(extra)
    if several:
        spec["multiple"] = True
    if parameter.envvar:
        spec["envvar"] = parameter.envvar
    if parameter.min is not None:
        spec["min"] = parameter.min
    if parameter.required:
        spec["required"] = True
    spec["default"] = _default(parameter.default)
    return spec


def _literal(value: Any) -> str:
    """Python source for a value of the spec (str, int, bool, None, list, dict)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def spec_text() -> str:
    """The text of diagnose/cli/spec.py for the app as it is now."""
    group = typer.main.get_command(app)
    callbacks = {command.name: command.callback for command in app.registered_commands}
    lines = [HEADER]
    if not all(getattr(parameter, "is_flag", False) for parameter in group.params):
        raise SystemExit("the direct path reads only flags before the command: teach it first")
    flags = [name for parameter in group.params for name in parameter.opts]
    lines.append(f"GLOBAL_FLAGS = {_literal(flags)}\n\n")
    lines.append("COMMANDS: dict[str, dict[str, dict[str, Any]]] = {\n")
    for name in DIRECT_COMMANDS:
        hints = typing.get_type_hints(callbacks[name])
        lines.append(f"    {_literal(name)}: {{\n")
        for parameter in group.commands[name].params:  # type: ignore[attr-defined]
            spec = _parameter(parameter, hints[parameter.name])
            lines.append(f"        {_literal(parameter.name)}: {_literal(spec)},\n")
        lines.append("    },\n")
    lines.append("}\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    text = spec_text()
    if parser.parse_args().check:
        if SPEC.read_text() != text:
            print("out of date: diagnose/cli/spec.py; run scripts/build_cli_spec.py")
            return 1
        return 0
    SPEC.write_text(text)
    print(f"wrote {SPEC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
