"""An error no signature explains, read against the launch options and the engine variables
the log shows set: an optional code path that one of them turns on, named by the error itself.

``--model-impl transformers`` and ``AttributeError: 'TransformersForCausalLM' object has no
attribute 'tp_size'`` share a word no other option has: the failing code is the path that
option selects; so do ``VLLM_USE_FLASHINFER_MOE_FP8=1`` and a traceback through
``flashinfer/fused_moe``. A test switch (``VLLM_TEST_FORCE_FP8_MARLIN=1``) forces a path no
production start takes, and is a lead whatever the error says. The link is a lead, not a
certainty: the finding says so, and its fix is the one that tests it (start without the option
or the variable, or with the release that fixed the path).
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

_CAMEL = r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+"
_PAIR = r"['\"](?P<key>[a-z][a-z0-9_]*)['\"]: (?P<value>'[^']*'|True|[\w.-]+)"
"""Compiled when an error first needs the options read (``re`` caches them)."""
_GENERIC = frozenset(
    (
        "enable",
        "disable",
        "use",
        "model",
        "impl",
        "backend",
        "size",
        "path",
        "max",
        "min",
        "num",
        "mode",
        "type",
        "config",
        "args",
        "port",
        "host",
        "name",
        "dir",
        "file",
        "level",
        "log",
        "true",
        "false",
        "none",
        "auto",
        "default",
        "server",
        "served",
        "tokenizer",
        "trust",
        "remote",
        "code",
        "load",
        "format",
        "dtype",
        "device",
        "sglang",
        "force",
        "forced",
        "test",
    )
)
"""Words of option names and values that say nothing of a code path."""
MIN_WORD = 5


_ASSIGNMENT = re.compile(
    r"(?P<name>(?:VLLM|SGLANG|SGL)_[A-Z0-9_]+)=(?P<value>[^\s\"',;}]*[^\s\"',;}.:])"
)
_SETTERS = frozenset(("export", "env", "ENV", "-e", "--env", "set"))
"""Words after which an assignment sets a variable (a shell, docker, a Dockerfile)."""
_SET_BY = ("Environment=", "--env=", "-e=")
_LEADERS = frozenset(("$", "#", ">", "-", "+"))
"""A prompt or a list item that may open a line of assignments (a shell, a compose file)."""
_OFF = frozenset(("0", "false", "no", "off", "none", ""))


class OptionLink(NamedTuple):
    flag: str  # a launch flag (``--model-impl``) or an engine variable (``VLLM_USE_X``)
    value: str | None
    word: str

    @property
    def is_variable(self) -> bool:
        return not self.flag.startswith("-")


def env_assignments(text: str) -> list[tuple[str, str]]:
    """The engine variables a line sets, with their values: after ``export``, ``env``, ``-e``,
    ``--env`` or ``Environment=``, or opening a command line (``VLLM_X=1 vllm serve``, a
    compose file's ``- VLLM_X=1``); never a variable an error message quotes."""
    found: list[tuple[str, str]] = []
    opening = True  # still in the words that may open the line with assignments
    previous = ""
    for word in text.split():
        bare = word.strip("\"'")
        set_by = next((p for p in _SET_BY if bare.startswith(p)), None)
        if set_by is not None:
            bare = bare[len(set_by) :].strip("\"'")
        assignment = _ASSIGNMENT.fullmatch(bare)
        if assignment and (opening or set_by or previous in _SETTERS):
            found.append((assignment.group("name"), assignment.group("value")))
        elif not (word in _SETTERS or (opening and word in _LEADERS) or "=" in bare):
            opening = False
        previous = word
    return found


def flag_values(words: list[str]) -> list[tuple[str, str]]:
    """Each ``--flag`` of command-line words with its value (``--flag=v`` or the next word
    that is not an option; '' when it takes none)."""
    found = []
    for index, word in enumerate(words):
        if not word.startswith("--"):
            continue
        flag, _, inline = word.partition("=")
        following = words[index + 1] if index + 1 < len(words) else ""
        found.append((flag, inline or (following if not following.startswith("-") else "")))
    return found


def launch_options(command: str | None, settings: str | None) -> list[tuple[str, str | None]]:
    """The options of a launch command line (``--flag value``) or of a printed settings dict
    (``'model_impl': 'transformers'``), as flags with their values."""
    options: list[tuple[str, str | None]] = []
    if command:
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        options += [(flag, value or None) for flag, value in flag_values(words)]
    for pair in re.finditer(_PAIR, settings or ""):
        value = pair.group("value").strip("'")
        flag = "--" + pair.group("key").replace("_", "-")
        options.append((flag, None if value == "True" else value))
    return options


def keyword_of(flag: str) -> str:
    """A flag as the engine's argument classes and ``LLM(...)`` take it as a keyword
    (``--num-scheduler-steps``: ``num_scheduler_steps``)."""
    return flag[2:].replace("-", "_")


def keyword_refusal(flag: str) -> str:
    """How an argument class refuses ``flag`` given as a keyword (``--num-scheduler-steps``:
    ``unexpected keyword argument 'num_scheduler_steps'``)."""
    return f"unexpected keyword argument '{keyword_of(flag)}'"


def words_of(text: str) -> set[str]:
    """The lower-case words of a text, camel case and snake case split."""
    return {
        w.lower() for token in re.split(r"[^A-Za-z0-9]+", text) for w in re.findall(_CAMEL, token)
    }


def linked_option(error: str, options: list[tuple[str, str | None]]) -> OptionLink | None:
    """The one option whose own words (not its generic ones) the error names; None when none
    does, or when more than one does."""
    said = words_of(error)
    found: dict[str, OptionLink] = {}
    for flag, value in options:
        if not flag.startswith("-"):  # an engine variable: its name says the path it turns on
            if (value or "").lower() in _OFF:
                continue
            own = words_of(flag) - _GENERIC
        elif value is not None and ("/" in value or value.replace(".", "").isdigit()):
            continue  # a path or a number names no code path
        else:
            own = (words_of(flag) | words_of(value or "")) - _GENERIC
        shared = sorted(w for w in own & said if len(w) >= MIN_WORD)
        if shared:
            found.setdefault(flag, OptionLink(flag, value, shared[0]))
    return next(iter(found.values())) if len(found) == 1 else None


def forced_test_switch(variables: dict[str, str]) -> OptionLink | None:
    """The one test switch (``VLLM_TEST_FORCE_FP8_MARLIN=1``) set on, which forces a path no
    production start takes; None when none is, or more than one."""
    switches = [
        OptionLink(name, value, "test switch")
        for name, value in variables.items()
        if "_TEST_" in name and value.lower() not in _OFF
    ]
    return switches[0] if len(switches) == 1 else None
