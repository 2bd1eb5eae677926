"""A finding's added flags read against the flag table of the release the log shows.

A signature or known issue names a flag as the engines spell it today; the server in the log
may be older or newer. A flag renamed or split since is written as that release spells it; a
flag it dropped is left out, and said; a flag newer than it is kept with the upgrade it needs.
Nothing changes when the log shows no release: the installed one is then unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose.core.models import Finding, PackageAction
from diagnose.core.versions import at_least
from diagnose.knowledge import mined
from diagnose.knowledge.location import defined_by_some_release


def checked_flags(finding: Finding, engine: str | None, shown: str | None) -> Finding:
    """``finding`` with its added flags as the release ``shown`` of ``engine`` spells them; with
    no release shown, without the flags no release of ``engine`` has (another engine's)."""
    patch = finding.patch
    if patch is None or not patch.args_add or engine not in mined.ENGINES:
        return finding
    release = mined.nearest_version(engine, shown) if shown is not None else None
    table = mined.flag_table(engine, release) if release is not None else None
    name = f"{mined.ENGINE_NAMES[engine]} {shown}"
    in_log = flags_named_in(e.message or e.text for e in finding.evidence)
    words, notes, upgrade_to = [], [], None
    for flag, values in flag_settings(patch.args_add):
        known = flag.split("=", 1)[0]
        if known in in_log:  # the running engine's own output names it: it has it
            words += [flag, *values]
            continue
        if known.startswith("--") and not defined_by_some_release(engine, known):
            notes.append(
                f"`{known}` is no flag of any {mined.ENGINE_NAMES[engine]} release (another "
                "engine's): left out."
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
    changed = patch.model_copy(update={"args_add": words})
    update: dict[str, object] = {
        "patch": changed if changed.model_dump(exclude_defaults=True) else None,
        "patch_note": " ".join([*notes, *([finding.patch_note] if finding.patch_note else [])]),
    }
    if upgrade_to is not None and finding.package is None:
        update["package"] = PackageAction(name=engine, spec=f">={upgrade_to}", action="upgrade")
    return finding.model_copy(update=update)


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
