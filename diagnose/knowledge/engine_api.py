"""An import of the engine that failed, read against the modules and names each engine release
ships.

A plugin, a program or a platform image written for one release of the engine imports a
module or a name another release does not have ("No module named 'vllm.inputs.data'",
"cannot import name 'ContinueGenerationReqInput' from 'sglang.srt.managers.io_struct'").
Which mined releases have it says which way the engine is off and to which release to move:
a module the newer releases dropped asks for the newest release that still has it; one the
older releases lacked asks for the first release that has it.
"""

from __future__ import annotations

import re

from diagnose.core.expr import DISTRIBUTIONS, distribution_name
from diagnose.core.models import Finding, PackageAction, PackageChange
from diagnose.core.versions import at_least
from diagnose.knowledge import mined

_ENGINE_MODULE = r"(?P<module>(?P<engine>vllm|sglang)(?:\.\w+)*)"
_OPEN, _CLOSE = "['\"\u2018]", "['\"\u2019]"  # Python's quotes, or a forum's curly ones
_MISSING = (
    re.compile("No module named " + _OPEN + _ENGINE_MODULE + _CLOSE),
    re.compile(rf"cannot import name {_OPEN}(?P<name>\w+){_CLOSE} from {_OPEN}{_ENGINE_MODULE}"),
    re.compile(rf"module {_OPEN}{_ENGINE_MODULE}{_CLOSE} has no attribute {_OPEN}(?P<name>\w+)"),
)
_INSTALLED_FRAME = re.compile(r'File "[^"\n]*/(?:site|dist)-packages/(?P<package>[A-Za-z_]\w*)/')


def engine_api_fix(finding: Finding, engine_version: str | None) -> Finding:
    """``finding`` with its change of the engine's package made exact by the releases that
    have what the failed import asked for; unchanged when its evidence names no engine module,
    or the mined releases cannot tell (all of them have it, none has it, or the installed
    release is one that has it)."""
    change = finding.package
    if change is None or change.action == "reinstall":
        return finding
    for evidence in finding.evidence:
        for pattern in _MISSING:
            found = pattern.search(evidence.message or evidence.text)
            if found is not None and found.group("engine") == change.name:
                return _moved(finding, found, engine_version, _importer(finding, change.name))
    return finding


_SUPPORT_CATEGORIES = ("model_unsupported", "launch_args")
"""Findings whose upgrade is for something the release lacks (a model, a method, an option):
only a release table that lists it says which release has it, and the newest may not."""


def named_upgrade(finding: Finding, engine_version: str | None) -> Finding:
    """``finding`` with an upgrade of the engine for a fault of the build (a bug a later
    release fixed) made to name a release: past the one shown, else the newest mined; an
    upgrade for missing support, and any other change, unchanged."""
    change = finding.package
    if change is None or change.action != "upgrade" or change.spec:
        return finding
    if finding.category in _SUPPORT_CATEGORIES:
        return finding
    spec = mined.upgrade_spec(change.name, engine_version)
    if not spec:
        return finding
    return finding.model_copy(update={"package": change.model_copy(update={"spec": spec})})


def _importer(finding: Finding, engine: str) -> str:
    """The installed package whose frame is the innermost other than the engine's: the code
    that asked for the import, as pip names it ("the importing code" when no frame shows)."""
    packages = [
        found.group("package")
        for evidence in finding.evidence
        for found in _INSTALLED_FRAME.finditer(evidence.text)
        if found.group("package") != engine
    ]
    if not packages:
        return "the importing code"
    name = packages[-1]
    return f"`{DISTRIBUTIONS.get(name) or distribution_name(name)}`"


def _moved(
    finding: Finding, found: re.Match[str], engine_version: str | None, importer: str
) -> Finding:
    engine, module = found.group("engine"), found.group("module")
    name = found.groupdict().get("name")
    span = mined.api_span(engine, module, name)
    if span is None or span.first is None or span.last_with is None:
        return finding
    oldest, newest = span.releases[0], span.releases[-1]
    if engine_version is None:  # the releases alone: which side of the span lacks it
        older_lack, newer_lack = span.first != oldest, span.dropped is not None
    elif not at_least(engine_version, span.first):
        older_lack, newer_lack = True, False
    elif span.dropped is not None and not at_least(span.last_with, engine_version):
        older_lack, newer_lack = False, True  # at or past the drop, or between the samples
    else:
        return finding  # the installed release is one that has it: an incomplete install
    if not (older_lack or newer_lack):
        return finding  # every mined release has it: the install, not the release, lacks it
    what = f"`{name}` of `{module}`" if name else f"`{module}`"
    title = mined.ENGINE_NAMES[engine]
    mined_range = f"of the {title} releases mined, {oldest} to {newest}"
    upper = f",<={span.last_with}" if span.dropped is not None else ""
    action: PackageChange
    if older_lack and newer_lack:
        spec, action = f">={span.first}{upper}", "pin"
        note = f"{what} is only in {title} {span.first} to {span.last_with} ({mined_range})."
    elif older_lack:
        spec, action = f">={span.first}{upper}", "upgrade"
        note = (
            f"{what} first comes in {title} {span.first} ({mined_range}): {importer} was "
            f"written for {title} {span.first} or newer."
        )
    else:
        spec, action = f"=={span.last_with}", "downgrade"
        note = (
            f"{what} is in {title} up to {span.last_with} and gone from {span.dropped} "
            f"({mined_range}): {importer} was written for {title} {span.last_with} or older. "
            f"A release of {importer} written for the installed {title} is the other way."
        )
    note += f" Install {engine}{spec}."
    return finding.model_copy(
        update={
            "package": PackageAction(name=engine, spec=spec, action=action),
            "explanation": f"{finding.explanation} {note}",
        }
    )
