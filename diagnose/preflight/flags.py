"""A launch command read the way the engine's own parser reads it, from the mined flag tables.

The table is the one of the engine version in use (read from the unit's interpreter, given
with ``--engine-version``, else the newest mined): abbreviations resolve to the unique long
option they start (argparse's ``allow_abbrev``), underscores are dashes for vLLM only, a flag
that takes no value takes none. Problems are listed one per flag (or variable) with what fixes
it, as mappings a signature's ``each:`` preflight rule reports one finding each.

A problem is *certain* when the table is the version in use, or when every mined release
agrees; otherwise (a version not mined, or not known) it is reported as a warning that says
which release it was checked against.

>>> words = parse_words(["--speculative-algo", "NEXTN", "--tp", "4", "--trust-remote-code"],
...                     flag_table("sglang", "0.5.23"))
>>> [(w.written, w.flag, w.value) for w in words][:2]
[('--speculative-algo', '--speculative-algorithm', 'NEXTN'), ('--tp', '--tp-size', '4')]
>>> words[2].value is None  # a switch takes no value
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from diagnose.core.expr import nearest_choice
from diagnose.core.versions import release
from diagnose.knowledge.mined import (
    FlagLookup,
    FlagOption,
    FlagTable,
    close_env_vars,
    env_vars,
    flag_history,
    flag_table,
    nearest_version,
    versions,
)

_NO_VALUE: tuple[str, ...] = ("StoreTrue", "StoreFalse", "StoreConst", "BooleanOptional")
_NO_VALUE += ("EnableDisable", "Count", "Help", "Version")
"""Action class names of options that take no value."""


@dataclass(frozen=True)
class EngineVersion:
    """Which release of the engine the command runs, and how that is known."""

    engine: str
    version: str | None
    source: str
    """``installed`` (read from the interpreter), ``given`` (``--engine-version``), ``image``
    (a container tag) or ``newest`` (not known: the newest mined release)."""
    where: str | None = None
    """The dist-info directory or image it was read from."""

    @property
    def table_version(self) -> str | None:
        return nearest_version(self.engine, self.version)

    @property
    def exact(self) -> bool:
        return self.version is not None and self.version == self.table_version

    @property
    def newer_than_mined(self) -> bool:
        known = versions(self.engine)
        wanted = release(self.version) if self.version else None
        return bool(known and wanted and wanted > (release(known[-1]) or ()))

    def describe(self) -> str:
        """One sentence for the report: which parser the flags were checked against."""
        table = self.table_version
        shown = _display(self.engine)
        if self.source == "newest":
            return (
                f"flags checked against {shown} {table}'s parser, the newest release known: the "
                "installed version was not found (pass --engine-version "
                f"{self.engine}==X.Y.Z to check against yours)"
            )
        how = {
            "installed": f"installed, read from {self.where}",
            "given": "given with --engine-version",
            "image": f"from the image tag {self.where}",
        }.get(self.source, self.source)
        if self.exact:
            return f"flags checked against {shown} {table}'s parser ({how})"
        return (
            f"flags checked against {shown} {table}'s parser, the nearest release known to "
            f"{self.version} ({how}); a flag that other releases accept is only a warning"
        )


def _display(engine: str) -> str:
    return {"sglang": "SGLang", "vllm": "vLLM"}.get(engine, engine)


@dataclass(frozen=True)
class FlagWord:
    """One option on the command line: as written, what the parser makes of it, its value."""

    written: str
    """The option as written, without ``=value``."""
    lookup: FlagLookup
    value: str | None = None
    values: tuple[str, ...] = ()

    @property
    def option(self) -> FlagOption | None:
        return self.lookup.option

    @property
    def flag(self) -> str:
        """The long option the parser resolves it to (the written one when unresolved)."""
        option = self.lookup.option
        if option is None:
            return self.written
        if self.lookup.outcome == "abbreviation":
            return self.lookup.candidates[0]
        normal = _normal(self.written, self.underscores)
        if normal in option.flags and normal.startswith("--"):
            return normal
        return next((f for f in option.flags if f.startswith("--")), self.written)

    underscores: bool = field(default=False, compare=False)


def _normal(flag: str, underscores: bool) -> str:
    if underscores and flag.startswith("--"):
        head, dot, rest = flag[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + rest
    return flag


def _takes(option: FlagOption | None) -> str:
    """``none``, ``one``, ``optional`` or ``many``: how many words the option consumes."""
    if option is None:
        return "one"
    if any(word in option.action for word in _NO_VALUE):
        return "none"
    nargs = option.nargs
    if nargs in ("?",):
        return "optional"
    if nargs in ("*", "+") or (isinstance(nargs, int) and nargs > 1):
        return "many"
    if nargs == 0:
        return "none"
    return "one"


def _is_option(word: str) -> bool:
    if not word.startswith("-") or word in ("-", "--"):
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


def _lookup(table: FlagTable, name: str) -> FlagLookup:
    """``table.lookup``, and vLLM's nested form: ``--speculative-config.method`` sets one key
    of the JSON option ``--speculative-config`` (its parser reads the name up to the dot)."""
    lookup = table.lookup(name)
    if lookup.outcome == "unknown" and table.parser.underscores_as_dashes and "." in name:
        head = table.lookup(name.split(".", 1)[0])
        if head.option is not None:
            return FlagLookup(name, head.outcome, head.option, head.candidates)
    return lookup


def parse_words(words: Sequence[str], table: FlagTable) -> list[FlagWord]:
    """The options in ``words`` (the engine's arguments) as ``table``'s parser reads them."""
    return read_command(words, table)[0]


def read_command(words: Sequence[str], table: FlagTable) -> tuple[list[FlagWord], list[str]]:
    """The options in ``words`` and the positional words no option takes."""
    out: list[FlagWord] = []
    positional: list[str] = []
    i = 0
    underscores = table.parser.underscores_as_dashes
    while i < len(words):
        word = words[i]
        i += 1
        if not _is_option(word):
            positional.append(word)
            continue
        name, has_inline, inline = word.partition("=")
        lookup = _lookup(table, name)
        takes = _takes(lookup.option)
        if has_inline:
            out.append(FlagWord(name, lookup, inline, (inline,), underscores))
            continue
        taken: list[str] = []
        if takes in ("one", "optional") and i < len(words) and not _is_option(words[i]):
            taken.append(words[i])
            i += 1
        elif takes == "many":
            while i < len(words) and not _is_option(words[i]):
                taken.append(words[i])
                i += 1
        out.append(FlagWord(name, lookup, taken[0] if taken else None, tuple(taken), underscores))
    return out, positional


class _Others:
    """The other releases' tables, iterated on demand."""

    def __init__(self, engine: str, used: str) -> None:
        self.engine, self.used = engine, used

    def __iter__(self) -> Iterator[FlagTable]:
        return iter(_other_tables(self.engine, self.used))


# -- problems ------------------------------------------------------------------------------


@cache
def _other_tables(engine: str, used: str) -> tuple[FlagTable, ...]:
    """The other mined releases' tables (loaded only when a problem needs them)."""
    return tuple(flag_table(engine, v) for v in versions(engine) if v != used)


def _certain(version: EngineVersion, holds_elsewhere: Callable[[], bool]) -> bool:
    """Certain: the table is the version in use, or every release agrees (and the version is
    not newer than every mined one, where new flags may exist)."""
    if version.exact:
        return True
    return not version.newer_than_mined and not holds_elsewhere()


def _successor(engine: str, flag: str, version: str) -> tuple[str, tuple[str, ...]]:
    history = flag_history(engine, flag, version)
    if history is None:
        return "", ()
    return history.kind, history.successors


def problems(
    engine: str,
    words: Sequence[str],
    environment: Mapping[str, str],
    version: EngineVersion,
    foreign: Mapping[str, str],
    env_prefixes: Sequence[str],
    moved: Mapping[str, Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every problem the engine's parser (and its environment reader) would have with the
    command: ``unknown_flags``, ``ambiguous_flags``, ``bad_flag_values``, ``deprecated_flags``
    (the exact release only) and ``unknown_env_vars``.

    ``foreign`` maps flags of the other engine to this engine's spelling; ``moved`` holds this
    engine's ``folded`` and ``implied`` maps (``_flags.yaml``): a removed option now a key of a
    JSON option, a removed switch another option now implies."""
    used = version.table_version
    out: dict[str, list[dict[str, Any]]] = {
        "unknown_flags": [],
        "ambiguous_flags": [],
        "bad_flag_values": [],
        "deprecated_flags": [],
        "unknown_env_vars": [],
    }
    if used is None:
        return out
    table = flag_table(engine, used)
    others = _Others(engine, used)
    checked = f"{_display(engine)} {used}"
    seen: set[str] = set()
    for word in parse_words(words, table):
        if word.written in seen:
            continue
        seen.add(word.written)
        base = {"flag": word.written, "value": word.value, "checked_against": checked}
        lookup = word.lookup
        if lookup.outcome == "unknown":
            out["unknown_flags"].append(_unknown(engine, word, table, others, version, foreign))
        elif lookup.outcome == "ambiguous":
            written = word.written

            def elsewhere(written: str = written) -> bool:
                return any(_lookup(t, written).outcome != "ambiguous" for t in others)

            kind, successors = _successor(engine, word.written, used)
            meant = _alias_target(word.written, table, others)
            out["ambiguous_flags"].append(
                {
                    **base,
                    "candidates": list(lookup.candidates),
                    "removed_kind": kind,
                    "successors": list(successors),
                    "suggestion": meant[0] if meant else "",
                    "certain": _certain(version, elsewhere),
                }
            )
        elif word.option is not None and word.option.choices and word.values:
            bad = _bad_choice(word, table, others, version)
            if bad is not None:
                out["bad_flag_values"].append({**base, **bad})
        if word.option is not None and word.option.deprecated and version.exact:
            out["deprecated_flags"].append({**base, **_deprecated(engine, word, table)})
    out["unknown_env_vars"] = _env_problems(engine, environment, version, env_prefixes)
    if moved:
        words_read = parse_words(words, table)
        out["unknown_flags"] = _moved(out["unknown_flags"], words_read, table, moved)
    return out


def _json_value(text: str | None) -> Any:
    """A flag's value as the JSON option's key takes it: a number, JSON, else the text."""
    if text is None:
        return True
    try:
        return json.loads(text)
    except ValueError:
        return text


def _moved(
    unknown: list[dict[str, Any]],
    words: Sequence[FlagWord],
    table: FlagTable,
    moved: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Removed options whose setting moved: each group folded into one JSON option becomes
    one problem (kind ``folded``) that names every flag of the group and the option's new
    value; a removed switch another option implies becomes kind ``implied``."""
    folded: Mapping[str, Mapping[str, str]] = moved.get("folded") or {}
    implied: Mapping[str, str] = moved.get("implied") or {}
    groups: dict[str, list[dict[str, Any]]] = {}
    out: list[dict[str, Any]] = []
    for item in unknown:
        dashed = "--" + str(item["flag"])[2:].replace("_", "-")
        target = folded.get(dashed)
        if item.get("kind") == "removed" and target and table.lookup(target["into"]).option:
            item["key"] = target["key"]
            groups.setdefault(target["into"], []).append(item)
            if len(groups[target["into"]]) > 1:
                continue
        elif item.get("kind") in ("removed", "renamed") and implied.get(dashed):
            into = implied[dashed]
            given = any(w.flag == into for w in words)
            item.update(kind="implied", replacement=into, suggestion="", implied_given=given)
        out.append(item)
    for into, items in groups.items():
        existing = [w for w in words if w.flag == into and "." not in w.written]
        config: dict[str, Any] = {}
        for word in existing:
            value = _json_value(word.value)
            if isinstance(value, dict):
                config.update(value)
        for item in items:
            value = _json_value(item.get("value"))
            if item["key"] == "model" and value == "[ngram]":
                config.setdefault("method", "ngram")
                continue
            config.setdefault(item["key"], value)
        flags = [str(i["flag"]) for i in items] + [w.written for w in existing]
        items[0].update(
            kind="folded",
            replacement=into,
            folded_flags=" ".join(dict.fromkeys(flags)),
            folded_value=json.dumps(config),
            folded_keys=", ".join(f"`{i['flag']}` -> `{i['key']}`" for i in items),
            certain=all(i.get("certain", True) for i in items),
        )
    return out


def _unknown(
    engine: str,
    word: FlagWord,
    table: FlagTable,
    others: Iterable[FlagTable],
    version: EngineVersion,
    foreign: Mapping[str, str],
) -> dict[str, Any]:
    written = word.written
    item: dict[str, Any] = {
        "flag": written,
        "value": word.value,
        "checked_against": f"{_display(engine)} {table.version}",
        "kind": "unknown",
        "replacement": "",
        "suggestion": "",
        "successors": [],
    }

    def elsewhere() -> bool:
        """Another release knows it (SGLang's underscore rule holds in every release)."""
        if item["kind"] == "underscore":
            return False
        return any(_lookup(t, written).outcome != "unknown" for t in others)

    dashed = "--" + written[2:].replace("_", "-") if written.startswith("--") else written
    kind, successors = _successor(engine, written, table.version)
    if written in foreign or dashed in foreign:
        item["kind"] = "other_engine"
        item["replacement"] = foreign.get(written, foreign.get(dashed, "")) or ""
    elif "_" in written and dashed != written and table.lookup(dashed).outcome == "exact":
        item["kind"] = "underscore"
        item["suggestion"] = dashed
    elif kind:
        if kind == "removed" and not successors:
            successors = _alias_target(written, table, others)
            kind = "renamed" if successors else kind
        item["kind"] = kind
        item["successors"] = list(successors)
        if kind == "renamed" and successors:
            item["suggestion"] = successors[0]
    else:
        close = table.close_flags(written, limit=3)
        item["close"] = close
        if close:
            item["suggestion"] = close[0]
    item["certain"] = _certain(version, elsewhere)
    return item


_ALIAS_HELP = re.compile(r"^Deprecated alias for (--[\w-]+)\.?$")


def _deprecated(engine: str, word: FlagWord, table: FlagTable) -> dict[str, Any]:
    """A flag this release still accepts but deprecates: its help (which says what replaces
    it), the option that replaces it when that is a plain rename, and the first later mined
    release that no longer has it."""
    option = word.option
    assert option is not None
    alias = _ALIAS_HELP.match(option.help or "")
    successor = alias.group(1) if alias else (option.successor or "")
    if table.lookup(successor).outcome != "exact":
        successor = ""
    later = [v for v in versions(engine) if (release(v) or ()) > (release(table.version) or ())]
    removed_in = next(
        (v for v in later if flag_table(engine, v).lookup(word.flag).outcome != "exact"), ""
    )
    return {
        "flag": word.written,
        "resolved": word.flag,
        "help": (option.help or "").strip(),
        "suggestion": successor,
        "removed_in": f"{_display(engine)} {removed_in}" if removed_in else "",
        "certain": True,
    }


def _alias_target(written: str, table: FlagTable, others: Iterable[FlagTable]) -> tuple[str, ...]:
    """A removed flag that was a deprecated alias in another release (its ``dest`` another
    option's): the option it stood for, when this release has it."""
    for other in others:
        option = other.lookup(written).option
        if option is None or "--" + option.dest.replace("_", "-") == written:
            continue
        for current in table.options:
            if current.dest == option.dest and current.flags:
                return (next((f for f in current.flags if f.startswith("--")), current.flags[0]),)
    return ()


def _bad_choice(
    word: FlagWord, table: FlagTable, others: Iterable[FlagTable], version: EngineVersion
) -> dict[str, Any] | None:
    option = word.option
    assert option is not None and option.choices is not None
    choices = [str(c) for c in option.choices]
    wrong = [v for v in word.values if v not in choices]
    if not wrong:
        return None
    value = wrong[0]

    def accepted(other: FlagTable) -> bool:
        found = _lookup(other, word.written).option
        return bool(found and found.choices and value in [str(c) for c in found.choices])

    suggestion = nearest_choice(value, choices, cutoff=0.6) or ""
    return {
        "flag": word.flag,
        "written": word.written,
        "value": value,
        "choices": choices,
        "suggestion": suggestion,
        "certain": _certain(version, lambda: any(accepted(t) for t in others)),
    }


def _env_problems(
    engine: str,
    environment: Mapping[str, str],
    version: EngineVersion,
    prefixes: Sequence[str],
) -> list[dict[str, Any]]:
    used = version.table_version
    out: list[dict[str, Any]] = []
    for name in sorted(environment):
        if not prefixes or not name.startswith(tuple(prefixes)):
            continue
        var = env_vars(engine).get(name)  # loaded only when an engine variable is set
        item: dict[str, Any] = {
            "variable": name,
            "value": environment[name],
            "checked_against": f"{_display(engine)} {used}",
            "suggestion": "",
            "read_by": "",
        }
        if var is None:
            close = close_env_vars(engine, name)
            item["kind"] = "unknown"
            item["suggestion"] = close[0] if close else ""
            item["close"] = close
            item["certain"] = not version.newer_than_mined
        elif version.exact and used not in var.versions:
            item["kind"] = "not_read"
            item["read_by"] = ", ".join(var.versions)
            item["certain"] = True
        elif var.choices and environment[name] not in var.choices:
            item["kind"] = "bad_value"
            item["choices"] = list(var.choices)
            item["certain"] = True
        else:
            continue
        out.append(item)
    return out
