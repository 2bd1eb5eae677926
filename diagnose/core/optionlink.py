"""An error no signature explains, read against the launch options: an optional code path that
one option turns on, named by the error itself.

``--model-impl transformers`` and ``AttributeError: 'TransformersForCausalLM' object has no
attribute 'tp_size'`` share a word no other option has: the failing code is the path that
option selects. The link is a lead, not a certainty: the finding says so, and its fix is the
one that tests it (start without the option, or with the release that fixed the path).
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
    )
)
"""Words of option names and values that say nothing of a code path."""
MIN_WORD = 5


class OptionLink(NamedTuple):
    flag: str
    value: str | None
    word: str


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
        if value is not None and ("/" in value or value.replace(".", "").isdigit()):
            continue  # a path or a number names no code path
        own = (words_of(flag) | words_of(value or "")) - _GENERIC
        shared = sorted(w for w in own & said if len(w) >= MIN_WORD)
        if shared:
            found.setdefault(flag, OptionLink(flag, value, shared[0]))
    return next(iter(found.values())) if len(found) == 1 else None
