"""A package change made exact by the engine release's own requirements.

A signature or known issue often knows which package to change (``transformers``, ``torch``,
``sgl-kernel``) but not to which version: that depends on the engine release. Each release
declares it (``sglang 0.4.3.post4`` requires ``transformers==4.48.3``), and
``knowledge/mined/<engine>/requires.json`` keeps those declarations. A change whose version
is empty or vague takes the release's requirement, with a sentence that says where it comes
from; a version a signature or known issue states is never replaced.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from diagnose.core.expr import distribution_name
from diagnose.core.models import Finding, PackageAction, PackageChange
from diagnose.knowledge import mined

_DIRECTED = ("pin", "upgrade", "downgrade")
"""Actions the installed version decides between; ``install`` and ``reinstall`` are kept."""
_TOO_NEW = ("pin", "downgrade")
"""Actions against an installed release that is too new: a minimum alone does not serve them."""
_AT_MOST = ("<", "<=", "==", "===", "~=")
_AT_LEAST = (">", ">=", "~=", "==", "===")
"""Operators a version below theirs fails by being too old."""


def vague(spec: str) -> bool:
    """A spec that names no version (empty, or words such as "matching the installed torch")."""
    return not any(character.isdigit() for character in spec)


def pinned_by_release(finding: Finding, engine: str | None, engine_version: str | None) -> Finding:
    """``finding`` with its package change's version taken from what the engine release
    requires (unchanged when the change states a version, or no mined release requires one)."""
    change = finding.package
    if change is None or not vague(change.spec) or engine not in mined.ENGINES:
        return finding
    if distribution_name(change.name) == engine:
        return finding  # the engine itself: its own release is another question
    name = mined.ENGINE_NAMES[engine]
    if engine_version is None:
        newest = mined.required(engine, None, change.name)
        if newest is None:
            return finding
        note = (
            f"The log does not show which {name} release runs (give it with --engine-version), "
            f"so the version to install is not known: for reference, {newest.sentence()} "
            f"({name}'s newest release); the installed release may require another."
        )
        return finding.model_copy(update={"explanation": f"{finding.explanation} {note}"})
    found = mined.required(engine, engine_version, change.name)
    if found is None:
        return finding
    chain = found.sentence()
    asked = found.via.release if found.via else found.release
    if asked != engine_version:
        chain += f" ({asked} is the release nearest to {engine_version} whose metadata was read)"
    if change.action in _TOO_NEW and not _bounded_above(found.spec):
        note = f"{chain}, with no upper bound: its requirements do not say which release to take."
        return finding.model_copy(update={"explanation": f"{finding.explanation} {note}"})
    installed = installed_version(finding, change.name, found.package)
    action = direction(change.action, found.spec, installed)
    shown = f" (the log shows {installed})" if installed else ""
    note = f"{chain}, in the published requirements: install that {found.package}{shown}."
    return finding.model_copy(
        update={
            "package": PackageAction(name=found.package, spec=found.spec, action=action),
            "explanation": f"{finding.explanation} {note}",
        }
    )


def installed_version(finding: Finding, *names: str) -> str | None:
    """The version of the package the finding's evidence shows installed (``torch 2.5.1``,
    ``transformers==4.49.0.dev0``, ``torch-2.5.1.dist-info``), if any."""
    spelled = "|".join(sorted({re.sub(r"[-_.]", "[-_.]", distribution_name(n)) for n in names}))
    pattern = re.compile(
        rf"(?<![\w.-])(?:{spelled})(?:==|\s+version\s+|\s+|-)v?(\d+(?:\.\d+)+[\w.+]*?)"
        r"(?=\.dist-info|[\s,;:)'\"]|$)",
        re.I,
    )
    for evidence in finding.evidence:
        found = pattern.search(evidence.message or evidence.text)
        if found is not None:
            return found.group(1)
    return None


def direction(action: PackageChange, spec: str, installed: str | None) -> PackageChange:
    """``pin`` becomes ``downgrade`` or ``upgrade`` when the installed version is known and
    the requirement lies below or above it; an explicit action stays."""
    if action not in _DIRECTED or installed is None:
        return action
    try:
        required, have = SpecifierSet(spec), Version(installed)
    except (InvalidSpecifier, InvalidVersion):
        return action
    if required.contains(have, prereleases=True):
        return action
    below = any(
        s.operator in _AT_LEAST and have < Version(s.version.removesuffix(".*")) for s in required
    )
    return "upgrade" if below else "downgrade"


def _bounded_above(spec: str) -> bool:
    try:
        return any(s.operator in _AT_MOST for s in SpecifierSet(spec))
    except InvalidSpecifier:
        return False
