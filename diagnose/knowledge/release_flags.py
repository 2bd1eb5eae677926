"""A finding's added flags read against the flag table of the release the log shows.

A signature or known issue names a flag as the engines spell it today; the server in the log
may be older or newer. A flag renamed or split since is written as that release spells it; a
flag it dropped is left out, and said; a flag newer than it is kept with the upgrade it needs.
When the log shows no release, the installed one is unknown: a flag no release has is left
out, and a variable only later releases read is said to need them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose.core.models import PLACEHOLDER, Finding, PackageAction, Patch
from diagnose.core.optionlink import keyword_refusal
from diagnose.core.versions import at_least
from diagnose.knowledge import mined
from diagnose.knowledge.location import defined_by_some_release

_FLAG_AND_VARIABLE = {"vllm": {"--attention-backend": "VLLM_ATTENTION_BACKEND"}}
"""A flag and the environment variable that set the same thing: the variable came first and
was dropped after the flag came, so a release has one, the other, or both."""


def checked_flags(finding: Finding, engine: str | None, shown: str | None) -> Finding:
    """``finding`` with its added flags and variables as the release ``shown`` of ``engine``
    spells them, values included; with no release shown, without the flags no release of
    ``engine`` has (another engine's)."""
    patch = finding.patch
    if patch is None or not (patch.args_add or patch.env_set):
        return finding
    if engine not in mined.ENGINES:
        return _without_flags_of_no_engine(finding, patch)
    if shown is None and patch.env_set and finding.tier != "signature":
        finding = _variables_of_later_releases(finding, engine, list(patch.env_set))
    release = mined.nearest_version(engine, shown) if shown is not None else None
    table = mined.flag_table(engine, release) if release is not None else None
    name = f"{mined.ENGINE_NAMES[engine]} {shown}"
    in_log = flags_named_in(e.message or e.text for e in finding.evidence)
    notes: list[str] = []
    upgrade_to = None
    words, variables = _checked_variables(engine, release, name, dict(patch.env_set), notes)
    equivalents = _FLAG_AND_VARIABLE.get(engine, {})
    for flag, values in flag_settings(patch.args_add):
        known = flag.split("=", 1)[0]
        option = _json_option_of(known)
        if option is not None and _has_option(engine, option, table):
            words += [flag, *values]  # one key of a JSON option the release has
            continue
        if known in in_log and (
            not known.startswith("--")
            or defined_by_some_release(engine, known)
            or _newer_than_mined(engine, shown)
        ):  # the running engine's own output names it: it has it
            words += [flag, *values]
            continue
        if release is not None and len(values) == 1:
            values = [_release_value(engine, release, known, values[0], name, notes)]
        variable = equivalents.get(known)
        if (
            variable is not None
            and release is not None
            and table is not None
            and len(values) == 1
            and table.lookup(known).outcome != "exact"
            and _has_variable(engine, variable, release)
        ):
            variables[variable] = values[0]
            notes.append(f"{name} has no `{known}`: the variable {variable} sets the same.")
            continue
        if known.startswith("--") and not defined_by_some_release(engine, known):
            notes.append(
                f"`{known}` is no flag of any {mined.ENGINE_NAMES[engine]} release (another "
                "engine's, or the program's that starts it, where its message names it): left "
                "out."
            )
            continue
        if (
            release is None
            or table is None
            or not known.startswith("--")
            or table.lookup(known).outcome in ("exact", "abbreviation")
        ):
            words += [flag, *values]
            continue
        history = mined.flag_history(engine, known, release)
        if history is not None and history.successors:
            for successor in history.successors:
                words += [successor, *values]
            spelled = " and ".join(f"`{s}`" for s in history.successors)
            notes.append(f"{name} spells `{known}` as {spelled}.")
        elif history is not None:
            notes.append(f"`{known}` is gone in {name} (removed in {history.gone_in}): left out.")
        else:
            added = mined.added_after(engine, known, release)
            words += [flag, *values]
            if added is not None:
                notes.append(
                    f"`{known}` came with {mined.ENGINE_NAMES[engine]} {added}: {name} does not "
                    "have it; upgrade for it."
                )
                if upgrade_to is None or at_least(added, upgrade_to):
                    upgrade_to = added
    if not notes:
        return finding
    revised = _revised(
        finding, patch.model_copy(update={"args_add": words, "env_set": variables}), notes
    )
    if upgrade_to is not None and finding.package is None:
        upgrade = PackageAction(name=engine, spec=f">={upgrade_to}", action="upgrade")
        return revised.model_copy(update={"package": upgrade})
    return revised


def _revised(finding: Finding, patch: Patch, notes: list[str]) -> Finding:
    """``finding`` with the checked ``patch`` (none, where nothing is left of it) and the
    ``notes`` that say what changed before its own."""
    return finding.model_copy(
        update={
            "patch": patch if patch.model_dump(exclude_defaults=True) else None,
            "patch_note": " ".join([*notes, *([finding.patch_note] if finding.patch_note else [])]),
        }
    )


def _without_flags_of_no_engine(finding: Finding, patch: Patch) -> Finding:
    """With no engine in the log, the added flags that no mined release of either engine has
    left out (a program's own option that its message names), and said."""
    words: list[str] = []
    notes: list[str] = []
    for flag, values in flag_settings(patch.args_add):
        known = flag.split("=", 1)[0]
        named = _json_option_of(known) or known
        if known.startswith("--") and not any(
            defined_by_some_release(engine, named) for engine in mined.ENGINES
        ):
            notes.append(
                f"`{known}` is no flag of any SGLang or vLLM release (the option of the "
                "program that starts the engine, where its message names it): left out."
            )
            continue
        words += [flag, *values]
    if not notes:
        return finding
    return _revised(finding, patch.model_copy(update={"args_add": words}), notes)


def _json_option_of(flag: str) -> str | None:
    """The option of a ``--option.key`` setting (vLLM sets one key of a JSON option so:
    ``--speculative-config.method mtp``), None for a plain flag."""
    option, dot, key = flag.partition(".")
    return option if dot and key and option.startswith("--") else None


def _has_option(engine: str, option: str, table: mined.FlagTable | None) -> bool:
    """Whether the release of ``table`` (any release, with none) has the JSON option."""
    if table is None:
        return defined_by_some_release(engine, option)
    return table.lookup(option).outcome == "exact"


def _newer_than_mined(engine: str, shown: str | None) -> bool:
    """Whether the release the log shows is newer than every mined one (its flags unknown)."""
    known = mined.versions(engine)
    return shown is not None and bool(known) and not at_least(known[-1], shown)


def _variables_of_later_releases(finding: Finding, engine: str, variables: list[str]) -> Finding:
    """With no release shown, a note for each of the ``variables`` the patch sets that only
    later releases read: an older installed release ignores it, and the upgrade is then part of
    the fix (a hand signature's fix is written for the releases it applies to, and is not
    asked)."""
    oldest = next(iter(mined.versions(engine)), None)
    known = mined.env_vars(engine)
    notes = []
    for name in variables:
        variable = known.get(name)
        releases = variable.versions if variable is not None else ()
        first = mined.first_release_with(engine, releases.__contains__) if releases else None
        if first is not None and first != oldest:
            notes.append(
                f"{name} is read from {mined.ENGINE_NAMES[engine]} {first} on (the first mined "
                f"release that has it); the log shows no release: on an older one, upgrade to "
                f"{first} or later for it to take effect."
            )
    if not notes:
        return finding
    note = " ".join([*notes, *([finding.patch_note] if finding.patch_note else [])])
    return finding.model_copy(update={"patch_note": note})


def _checked_variables(
    engine: str, release: str | None, name: str, variables: dict[str, str], notes: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The variables as ``release`` spells their values, and the flags that stand for those
    it no longer has."""
    if release is None:
        return [], variables
    words: list[str] = []
    table = mined.flag_table(engine, release)
    for flag, variable in _FLAG_AND_VARIABLE.get(engine, {}).items():
        if (
            variable in variables
            and not _has_variable(engine, variable, release)
            and table.lookup(flag).outcome == "exact"
        ):
            value = variables.pop(variable)
            notes.append(f"{name} has no {variable}: `{flag}` sets the same.")
            words += [flag, _release_value(engine, release, flag, value, name, notes)]
    for variable, value in variables.items():
        variables[variable] = _release_value(engine, release, variable, value, name, notes)
    return words, variables


def _has_variable(engine: str, variable: str, release: str) -> bool:
    found = mined.env_vars(engine).get(variable)
    return found is not None and release in found.versions


def _release_value(
    engine: str, release: str, flag: str, value: str, name: str, notes: list[str]
) -> str:
    """``value`` of ``flag`` (or of a variable) as ``release`` spells it; a note where it
    renames it or does not take it."""
    values = mined.flag_values(engine, release, flag)
    if values is None or value in values or PLACEHOLDER.fullmatch(value):
        return value  # a <placeholder> is the user's to fill in
    spelled = mined.near_value(value, values)
    if spelled is not None:
        notes.append(f"{name} spells `{flag} {value}` as `{spelled}`.")
        return spelled
    listed = ", ".join(f"`{v}`" for v in sorted(values))
    notes.append(f"{name} does not take `{flag} {value}`; its values are {listed}.")
    return value


def _in_every_mined_release(engine: str, refused: list[str], shown: str | None) -> dict[str, str]:
    """For a release older than every mined one that refused them: the options every mined
    release has, each with the oldest mined release (the first known to have it)."""
    known = mined.versions(engine)
    if shown is None or not known or at_least(shown, known[0]):
        return {}
    return {
        flag: known[0]
        for flag in refused
        if mined.first_release_with_flag(engine, flag) == known[0]
    }


def newer_flags(
    finding: Finding, engine: str | None, shown: str | None, refused: list[str]
) -> Finding:
    """``finding`` that drops ``refused`` flags (the log's release lacks them, or the evidence
    shows the engine refusing them), where newer releases have them: the upgrade that brings
    them instead, since the option is what the launcher, config file or documentation in use
    was written for."""
    patch = finding.patch
    program = finding.package  # a program's upgrade: its code passes the refused option
    if engine not in mined.ENGINES or (program is not None and program.name == engine):
        return finding
    if program is None and (patch is None or not patch.args_remove):
        return finding
    release = mined.nearest_version(engine, shown) if shown is not None else None
    said = " ".join(e.message or e.text for e in finding.evidence)
    keywords = [flag for flag in refused if keyword_refusal(flag) in said]
    if shown is not None and program is None and _every_release_around(engine, shown, keywords):
        return _not_that_release(finding, engine, shown, keywords)
    added = {flag: since for flag in refused if (since := mined.added_after(engine, flag, release))}
    if not added and program is not None:  # the evidence shows the release refusing them
        added = _in_every_mined_release(engine, refused, shown)
    if not added:
        return _older_engine_for(finding, engine, refused) if program is not None else finding
    dropped = list(added)
    upgrade_to = next(iter(added.values()))
    for since in added.values():
        upgrade_to = since if at_least(since, upgrade_to) else upgrade_to
    name = mined.ENGINE_NAMES[engine]
    came = (
        f"is in {name} {upgrade_to}, the oldest release mined,"
        if upgrade_to == mined.versions(engine)[0]
        else f"came with {name} {upgrade_to}"
    )
    note = (
        f"{', '.join(f'`{f}`' for f in dropped)} {came} and is there in every release since: "
        f"the installed {name} is older than what passes it. Upgrade, or take the option out "
        "of what passes it."
    )
    if program is not None:
        note += f" `{program.name}` is written for that newer {name}: it needs no upgrade itself."
    kept = (
        patch.model_copy(update={"args_remove": [f for f in patch.args_remove if f not in dropped]})
        if patch is not None
        else None
    )
    return finding.model_copy(
        update={
            "patch": kept,
            "package": PackageAction(name=engine, spec=f">={upgrade_to}", action="upgrade"),
            "patch_note": " ".join([note, *([finding.patch_note] if finding.patch_note else [])]),
        }
    )


def _every_release_around(engine: str, shown: str, refused: list[str]) -> bool:
    """Whether the mined releases either side of ``shown`` (or it itself) all define the
    flags the argument class ``refused``."""
    known = mined.versions(engine)
    below = [v for v in known if at_least(shown, v)]
    above = [v for v in known if not at_least(shown, v)]
    around = below[-1:] + above[:1]
    return (
        bool(refused)
        and len(around) == 2
        and all(
            mined.flag_table(engine, version).lookup(flag).outcome == "exact"
            for version in around
            for flag in refused
        )
    )


def _not_that_release(finding: Finding, engine: str, shown: str, refused: list[str]) -> Finding:
    """The installed engine says it is ``shown``, yet its argument class refuses options that
    release defines: its files are not one release's (two installs mixed, a partial upgrade,
    another copy earlier on the path)."""
    name = mined.ENGINE_NAMES[engine]
    options = ", ".join(f"`{flag}`" for flag in refused)
    explanation = (
        f"The argument class of the installed {name} refused {options}, yet {name} {shown} "
        "defines it, and so do the releases either side of it: the code that refused it is "
        f"not {name} {shown}'s. The environment holds files of two installs (a conda and a "
        "pip copy, a partial upgrade, a source checkout or another site-packages earlier on "
        "the path). The option itself needs no change."
    )
    note = (
        f"Reinstall {name} {shown} cleanly (`pip uninstall -y {engine}` until none is left, "
        "then install it, best in a fresh environment) and check which copy runs: "
        f"`python -c 'import {engine}; print({engine}.__file__, {engine}.__version__)'`."
    )
    return finding.model_copy(
        update={
            "category": "kernel_build",
            "title": f"The installed {name} is not a whole {shown}: it refuses {options}",
            "explanation": explanation,
            "patch": None,
            "alternatives": [],
            "package": PackageAction(name=engine, spec=f"=={shown}", action="reinstall"),
            "patch_note": note,
        }
    )


def _older_engine_for(finding: Finding, engine: str, refused: list[str]) -> Finding:
    """A program's upgrade whose code passes options the engine dropped: the newest release
    that still takes them, said as the other way out (the upgrade stays the fix)."""
    known = mined.versions(engine)
    spans = []
    for flag in refused:
        removed = mined.flag_history(engine, flag, known[-1])
        if removed is not None and removed.gone_in in known[1:]:
            gone_in = removed.gone_in
            spans.append((flag, known[known.index(gone_in) - 1], gone_in))
    if not spans or finding.package is None:
        return finding
    name = mined.ENGINE_NAMES[engine]
    last_with = min((span[1] for span in spans), key=known.index)
    gone = "; ".join(
        f"`{flag}` is in {name} up to {last} and gone from {drop}" for flag, last, drop in spans
    )
    note = (
        f"{gone} (of the releases mined): `{finding.package.name}` was written for an older "
        f"{name}. Upgrade it to a release written for the installed {name}, or install "
        f"{engine}=={last_with}, the newest mined release that still takes what it passes."
    )
    return finding.model_copy(
        update={
            "patch_note": " ".join([*([finding.patch_note] if finding.patch_note else []), note])
        }
    )


_LOG_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*[a-z0-9]")
_REFUSAL = re.compile(
    r"unrecognized arguments|invalid choice|ambiguous option|unexpected keyword|no such option"
)


def flags_named_in(lines: Iterable[str]) -> frozenset[str]:
    """The flags log lines name outside a refusal of them (the engine's printed command, its
    own advice): the running release has them, whatever the mined tables of other releases
    say."""
    return frozenset(
        flag for line in lines if not _REFUSAL.search(line) for flag in _LOG_FLAG.findall(line)
    )


def flag_settings(words: list[str]) -> list[tuple[str, list[str]]]:
    """``--flag value ...`` as each flag with the words that follow it."""
    settings: list[tuple[str, list[str]]] = []
    for word in words:
        if word.startswith("--") or not settings:
            settings.append((word, []))
        else:
            settings[-1][1].append(word)
    return settings
