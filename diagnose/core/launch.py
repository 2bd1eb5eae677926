"""The server's launch command as the log shows it: a command line it printed (``python3 -m
sglang.launch_server ...``, ``vllm serve ...``), or vLLM's ``non-default args: {...}``, which
holds exactly the options given. A container patch writes the whole command from it.

SGLang's ``server_args=ServerArgs(...)`` (or ``{...}``) is not read: it prints every setting
after SGLang derived its own (``tokenizer_path``, ``mem_fraction_static``, ``chunked_prefill_size``
...), so a command written from it would pin values SGLang should derive again.
"""

from __future__ import annotations

import ast
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PROGRAMS = {
    "sglang.launch_server": ["python3", "-m", "sglang.launch_server"],
    "vllm serve": ["vllm", "serve"],
    "openai.api_server": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
}
"""The program a log's command line names, when the line does not show its interpreter."""


@dataclass(frozen=True)
class LaunchCommand:
    """The program (``vllm serve``) and the words after it, and where they were read."""

    program: list[str]
    flags: list[str]
    source: str


def from_command_line(program: str, rest: str) -> LaunchCommand | None:
    """A command line the log printed: ``program`` as the fact caught it (with the interpreter
    when the line shows one), ``rest`` the words after it; None when the words are a usage
    text (``[-h]``, ``<model>``) or end in a line continuation (shlex refuses the ``\\``)."""
    try:
        words = shlex.split(rest)
    except ValueError:
        return None
    if any(w.startswith("[") or ("<" in w and ">" in w) for w in words):
        return None
    key = next((k for k in _PROGRAMS if program.endswith(k)), None)
    if key is None:
        return None
    said = program.split()
    known = _PROGRAMS[key]
    if len(said) >= 3 and said[-2] == "-m":
        known = [*said[:-1], known[-1]]  # the interpreter as the log shows it
    return LaunchCommand(known, words, "the command line in the log")


def _option(dest: str, value: Any) -> list[str] | None:
    """One option of vLLM's non-default args as command-line words (None: no sure spelling)."""
    flag = "--" + dest.replace("_", "-")
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + dest.replace("_", "-")]  # vLLM's booleans take --no-X
    if isinstance(value, str | int | float):
        return [flag, str(value)]
    if isinstance(value, list) and value and all(isinstance(v, str | int | float) for v in value):
        return [flag, *(str(v) for v in value)]
    if isinstance(value, dict):
        return [flag, json.dumps(value, separators=(",", ":"))]
    return None


def from_vllm_settings(settings: str) -> LaunchCommand | None:
    """``vllm serve`` with the options of vLLM's ``non-default args: {...}``; None when a value
    is not a literal or has no sure spelling."""
    try:
        given = ast.literal_eval(settings)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(given, dict):
        return None
    model = given.pop("model_tag", None)
    if model is not None and given.get("model") == model:
        del given["model"]
    words = [str(model)] if model is not None else []
    for dest, value in given.items():
        option = _option(str(dest), value)
        if option is None:
            return None
        words += option
    return LaunchCommand(["vllm", "serve"], words, "vLLM's non-default args in the log")


def read_launch(facts: Mapping[str, Any]) -> LaunchCommand | None:
    """The launch command the log's facts show: its command line first, else vLLM's
    non-default args; None when the log shows neither."""
    program, rest = facts.get("launch_program"), facts.get("launch_command")
    if program and rest is not None:
        found = from_command_line(str(program), str(rest))
        if found is not None:
            return found
    if facts.get("launch_settings_from") == "non-default args" and facts.get("launch_settings"):
        return from_vllm_settings(str(facts["launch_settings"]))
    return None
