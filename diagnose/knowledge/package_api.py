"""An import that failed, read against the modules and names each release of the imported
package ships: an engine's (vLLM, SGLang) or a mined library's under it (outlines, xgrammar,
pydantic, transformers, huggingface_hub, torchao, flashinfer, compressed_tensors,
mistral_common, triton).

A plugin, a program or a platform image written for one release of the engine imports a
module or a name another release does not have ("No module named 'vllm.inputs.data'",
"cannot import name 'ContinueGenerationReqInput' from 'sglang.srt.managers.io_struct'"); an
engine written for one release of a library imports what another release moved ("cannot import
name 'build_regex_from_schema' from 'outlines.fsm.json_schema'"). Which mined releases have it
says which way the package is off and to which release to move: a module or name the newer
releases dropped asks for the newest release that still has it; one the older releases lacked
asks for the first release that has it. For a library, the releases are kept within what the
importing engine release requires of it, when the log shows that release. A name every release
has is no release mismatch (the module was not whole when asked for); a traceback cut short at
an import statement is read the same way, as the import that most likely failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from diagnose.core.expr import DISTRIBUTIONS, distribution_name
from diagnose.core.models import Confidence, Finding, PackageAction, PackageChange
from diagnose.core.versions import at_least
from diagnose.knowledge import mined
from diagnose.knowledge.requirements import installed_version

_MODULE = r"(?P<module>[A-Za-z_]\w*(?:\.\w+)*)"
_OPEN, _CLOSE = "['\"\u2018]", "['\"\u2019]"  # Python's quotes, or a forum's curly ones
_MISSING = (
    re.compile("No module named " + _OPEN + _MODULE + _CLOSE),
    re.compile(rf"cannot import name {_OPEN}(?P<name>\w+){_CLOSE} from {_OPEN}{_MODULE}"),
    re.compile(rf"module {_OPEN}{_MODULE}{_CLOSE} has no attribute {_OPEN}(?P<name>\w+)"),
)
_INSTALLED_FRAME = re.compile(
    r'File "[^"\n]*/(?:site|dist)-packages/(?P<package>[A-Za-z_]\w*)/'
    r'(?:(?P<path>[^"\n]*?)(?:/__init__)?\.py")?'
)
"""A traceback frame in an installed package, and its module's path under it when shown."""


class FailedImport(NamedTuple):
    """A module, or a name of one, that an import asked for."""

    module: str
    name: str | None = None

    def words(self) -> str:
        return f"`{self.name}` of `{self.module}`" if self.name else f"`{self.module}`"


_CUT_IMPORT = re.compile(
    r'File "(?P<file>[^"\n]+?)(?:/__init__)?\.py", line \d+, in \S+\n'
    rf"(?:from {_MODULE} import \(?\s*(?P<names>\w+(?:\s*,\s*\w+)*)"
    r"|import (?P<plain>[A-Za-z_]\w*(?:\.\w+)+))"
)
"""A cut traceback's innermost frame and the import statement it stopped at (``from M import
(A, B,`` or ``import M.sub``), as the incident keeps them (the frame, a newline, the code)."""
_MODULE_PATH = re.compile(
    r"^(?:.*-packages/|(?:.*/)?(?=(?:vllm|sglang)/))(?P<path>[A-Za-z_][\w/]*)$"
)
"""A frame's file as a module path: under site-packages, or in an engine's source tree (a
checkout's relative path, `vllm/v1/worker/x.py`, too)."""


def frame_module(file: str) -> str | None:
    """The module a traceback frame's file (without ``.py`` or ``/__init__.py``) is, when it
    lies under site-packages or in an engine's source tree; None otherwise."""
    place = _MODULE_PATH.match(file)
    return place.group("path").replace("/", ".") if place else None


class CutImport(NamedTuple):
    """An import a traceback stopped at that the mined releases say fails on some of them,
    the code that asks for it (a module, when the frame shows one) and the change that has
    it."""

    failed: FailedImport
    importer: str | None
    change: PackageAction
    note: str


def cut_import(text: str, engine_version: str | None) -> CutImport | None:
    """The import statement a traceback cut short stopped at, read against the modules and
    names each mined release ships: the first name (or module) that some releases lack, with
    the release change that has it; None when every release mined has them all (the import
    failed for another reason, or did not), the package is not mined, or it imports its own
    module (a broken install, not a pair of releases)."""
    found = _CUT_IMPORT.search(text)
    if found is None:
        return None
    module = found.group("module") or found.group("plain")
    package = mined.api_package(module)
    if package is None:
        return None
    importer = frame_module(found.group("file"))
    top = importer.partition(".")[0] if importer else None
    library = mined.library_apis().get(package)
    if top is not None and top in (library.modules if library else (package,)):
        return None
    engine_imports = top in mined.ENGINES and package not in mined.ENGINES
    required = (
        mined.required(str(top), engine_version, package)
        if engine_imports and engine_version
        else None
    )
    names = found.group("names")
    asked = (
        [FailedImport(module, name.strip()) for name in names.split(",")]
        if names
        else [FailedImport(module)]
    )
    if engine_imports and importer is not None:  # a name no release has fails on all of them
        for failed in asked:
            stops = _engine_release_without(failed, package, importer, engine_version)
            if stops is not None:
                return CutImport(failed, importer, *stops)
    for failed in asked:
        moved = _release_change(package, failed, None, required, top)
        if moved is not None and moved[0] is not None:
            return CutImport(failed, importer, moved[0], moved[1])
    return None


def engine_api_fix(finding: Finding, engine_version: str | None) -> Finding:
    """``finding`` with its change of the engine's package made exact by the releases that
    have what the failed import asked for; unchanged when its evidence names no engine module,
    or the mined releases cannot tell (none has it, or the installed release is one that has
    it). A name every release has, asked of a tree that is no installed release or of a release
    shown, is the engine's own files not being one release's (``_engine_not_installed``)."""
    fixed = _api_fix(finding, engine_version, None)
    if fixed is not finding or finding.package is None:
        return fixed
    return _engine_not_installed(finding, finding.package.name, engine_version) or finding


_IMPORTED_FROM = re.compile(r"\((?P<init>/[^()\s]*?/(?P<package>[A-Za-z_]\w*)/__init__\.py)\)")
"""Where an ``ImportError`` says the module it searched was (``from 'vllm'
(/workspace/vllm/__init__.py)``)."""


def _engine_not_installed(
    finding: Finding, engine: str, engine_version: str | None
) -> Finding | None:
    """A name of the engine every mined release binds, that the import did not find in a tree
    outside site-packages (the message's path: a source checkout the working directory or
    PYTHONPATH puts first) or in the release the log shows: the imported ``engine`` is not an
    installed release, whole. None otherwise."""
    failed = next((f for f in _missing_in(finding, engine) if f.name is not None), None)
    if failed is None:
        return None
    span = mined.api_span(engine, failed.module, failed.name)
    if span is None or not span.everywhere:
        return None
    said = " ".join(e.message or e.text for e in finding.evidence)
    tree = next(
        (
            found.group("init").rsplit("/", 2)[0]
            for found in _IMPORTED_FROM.finditer(said)
            if found.group("package") == engine and "-packages/" not in found.group("init")
        ),
        None,
    )
    shown = engine_version is not None and at_least(engine_version, span.releases[0])
    if tree is None and not shown:
        return None
    name = mined.ENGINE_NAMES.get(engine, engine)
    where = (
        f"Python found `{engine}` in `{tree}`, a source tree, not the installed package: the "
        "working directory (or PYTHONPATH) puts it first, and a tree that was never built or "
        "is of another release lacks what the installed one has. Start the server from "
        f"another directory (or take `{tree}` out of PYTHONPATH), or install that tree "
        "(`pip install -e`) if it is the one meant to run."
        if tree is not None
        else f"The {name} imported is not {name} {engine_version} whole: files of two installs "
        f"mixed, an install cut short, or a folder or file named `{engine}` in the working "
        "directory that Python imports first. Reinstall it, and start the server from a "
        "directory without such a folder."
    )
    return finding.model_copy(
        update={
            "signature": "import-of-a-name-every-release-has",
            "category": "kernel_build",
            "tier": "engine_source",
            "title": f"{failed.words()} failed to import, yet every {name} release has it",
            "explanation": (
                f"The import of {failed.words()} failed, and every {name} release mined "
                f"({span.releases[0]} to {span.releases[-1]}) has it: no release change brings "
                f"it. {where}"
            ),
            "package": None
            if tree is not None
            else PackageAction(name=engine, spec=f"=={engine_version}", action="reinstall"),
            "patch": None,
            "patch_note": None,
            "system_actions": [f"cd / before starting the server (out of {tree})"]
            if tree is not None
            else [],
            "alternatives": [],
            "next_checks": [
                f"`python -c 'import {engine}; print({engine}.__file__)'` from the directory the "
                "server starts in: it should be under site-packages."
            ],
        }
    )


def library_api_fix(finding: Finding, engine: str | None, engine_version: str | None) -> Finding:
    """``finding`` with its change of a mined library made exact the same way, by the
    library's releases, within what the engine release in the log requires of the library
    when the engine is the code that imports it; unchanged when the package is no mined
    library, or the releases (or that requirement) cannot tell."""
    change = finding.package
    if change is None or change.name not in mined.library_apis():
        return finding
    required = None
    frame = _importer_frame(finding, change.name)
    caller = frame.group("package") if frame is not None else None
    if frame is not None and caller in mined.ENGINES and frame.group("path"):
        module = f"{caller}.{frame.group('path').replace('/', '.')}"
        prerelease = _imported_from_no_release(finding, change.name, module, engine_version)
        if prerelease is not None:
            return prerelease
    if engine in mined.ENGINES and engine_version is not None and caller in (None, engine):
        required = mined.required(engine, engine_version, change.name)
    installed = installed_version(finding, change.name)
    fixed = _api_fix(finding, installed, required)
    if fixed is not finding:
        return fixed
    floor = installed or _oldest_allowed(change.name, engine, engine_version)
    return _name_every_release_has(finding, change.name, floor) or finding


def _oldest_allowed(library: str, engine: str | None, engine_version: str | None) -> str | None:
    """The oldest ``library`` release the engine release in the log allows (with none shown,
    the oldest mined engine release): the lowest bound of its requirement; None when it
    declares no lower bound."""
    if engine not in mined.ENGINES:
        return None
    releases = mined.versions(str(engine))
    release = engine_version or (releases[0] if releases else None)
    requirement = mined.required(str(engine), release, library) if release else None
    if requirement is None:
        return None
    try:
        bounds = [
            Version(s.version)
            for s in SpecifierSet(requirement.spec)
            if s.operator in (">=", ">", "==", "~=")
        ]
    except (InvalidSpecifier, InvalidVersion):
        return None
    return str(min(bounds)) if bounds else None


def _name_every_release_has(finding: Finding, library: str, floor: str | None) -> Finding | None:
    """A name the import failed to find that every mined release of ``library`` binds, where
    the release installed (or the oldest the engine allows: ``floor``) is no older than those:
    no release change brings it, so a reading of two releases that do not fit is wrong. The
    module was there but not whole when the name was asked for (a circular import, a second
    thread importing it at the same moment, files missing from the install): reinstalling it
    is the change to make. None otherwise, or when nothing bounds the release from below."""
    if floor is None:
        return None
    for failed in _missing_in(finding, library):
        if failed.name is None:
            continue
        span = mined.api_span(library, failed.module, failed.name)
        if span is None or not span.everywhere:
            return None
        if not at_least(floor, span.releases[0]):
            return None
        return finding.model_copy(
            update={
                "signature": "import-of-a-name-every-release-has",
                "category": "kernel_build",
                "confidence": Confidence.LOW,
                "tier": "engine_source",
                "title": f"{failed.words()} failed to import, yet every {library} release has it",
                "explanation": (
                    f"The import of {failed.words()} failed, and every {library} release mined "
                    f"({span.releases[0]} to {span.releases[-1]}) has it: no other {library} "
                    "release brings it, so this is not a pair of releases that do not fit. The "
                    "module was found but was not whole when the name was asked for: a circular "
                    "import, a second thread importing it at the same moment (a main-branch or "
                    "nightly engine build that imports in the background), or files missing "
                    f"from the install. Reinstall {library}; with a source or nightly build of "
                    "the engine, update it to the latest commit or use a release."
                ),
                "package": PackageAction(name=library, spec="", action="reinstall"),
                "patch": None,
                "patch_note": f"No setting or release brings what every {library} release has.",
                "system_actions": [],
                "references": [],
                "alternatives": [],
                "next_checks": [
                    f"`python -c 'import {failed.module}'` alone: if it works, the engine's "
                    "import order (a circular import or a background import) is at fault; "
                    f"`pip show -f {library}` for a partial install."
                ],
            }
        )
    return None


def _imported_from_no_release(
    finding: Finding, library: str, caller: str, engine_version: str | None
) -> Finding | None:
    """An engine module (``caller``) that imports from a library a name no release of it has
    (the module exists, the name never did in the releases mined): the engine release was
    written against a pre-release of the library, so no release of the library fixes it, and
    the fix is the engine release whose module no longer imports it. None when the tables say
    otherwise."""
    for failed in _missing_in(finding, library):
        change = _engine_release_without(failed, library, caller, engine_version)
        if change is not None:
            package, note = change
            return finding.model_copy(
                update={
                    "category": "kernel_build",
                    "package": package,
                    "explanation": f"{finding.explanation} {note}",
                }
            )
    return None


def _engine_release_without(
    failed: FailedImport, library: str, caller: str, engine_version: str | None
) -> tuple[PackageAction, str] | None:
    """For a name of ``library`` that no mined release of it has, while the module does ship,
    the engine release whose ``caller`` module no longer binds it (the first mined one after
    the last that binds it; when none binds it, the first that has the module, or any after the
    running one), and the sentence that says why; None when the tables say otherwise."""
    if failed.name is None:
        return None
    shipped = mined.api_span(library, failed.module)
    span = mined.api_span(library, failed.module, failed.name)
    if shipped is None or shipped.first is None or span is None:
        return None
    if span.first is not None or span.unlisted:
        return None  # some release has it, or the tables cannot tell
    engine = caller.partition(".")[0]
    own = mined.api_span(engine, caller, failed.name)
    if own is None:
        return None
    title = mined.ENGINE_NAMES.get(engine, engine)
    releases = span.releases
    note = (
        f"{failed.words()} is in no {library} release (of those mined, {releases[0]} to "
        f"{releases[-1]}): the {title} code that imports it (`{caller}`) was written against a "
        f"pre-release of {library}, so no {library} release fixes it."
    )
    if own.first is None:
        module = mined.api_span(engine, caller)
        first = module.first if module is not None else None
        if first is not None and (engine_version is None or not at_least(engine_version, first)):
            spec = f">={first}"
            note += f" No mined {title} release imports it there (from {first}): upgrade {title}."
        else:
            spec = mined.upgrade_spec(engine, engine_version)
            note += f" No mined {title} release imports it there: upgrade {title}."
    else:
        later = own.releases[own.releases.index(str(own.last_with)) + 1 :]
        if not later:
            return None
        if engine_version is not None and at_least(engine_version, later[0]):
            return None
        spec = f">={later[0]}"
        note += f" {title} imports it up to {own.last_with} and no longer from {later[0]}."
    return PackageAction(name=engine, spec=spec, action="upgrade"), note


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


def _api_fix(
    finding: Finding, installed: str | None, required: mined.ReleaseRequirement | None
) -> Finding:
    change = finding.package
    if change is None or change.action == "reinstall":
        return finding
    failed = next(_missing_in(finding, change.name), None)
    if failed is None:
        return finding
    moved = _release_change(
        change.name, failed, installed, required, _importer(finding, change.name)
    )
    if moved is None:
        return finding
    package, note = moved
    return finding.model_copy(
        update={
            "package": package or change,
            "explanation": f"{finding.explanation} {note}",
        }
    )


def _program_behind_engine(package: str, action: str, importer: str | None) -> str | None:
    """The program or plugin (not an engine) to upgrade, as pip names it, where it imports
    what the installed engine dropped (the change would be the engine's downgrade): the engine
    moves and removes its modules between releases, and the code built on it follows in its
    own next release; going back to the engine release it was written for undoes whatever the
    engine's upgrade was for. None for any other change."""
    if action != "downgrade" or package not in mined.ENGINES:
        return None
    if importer is None or importer in mined.ENGINES:
        return None
    return _distribution(importer)


def _missing_in(finding: Finding, package: str) -> Iterator[FailedImport]:
    """The failed imports (a module, or a name of one) the finding's evidence shows from
    ``package``'s modules, in order."""
    for evidence in finding.evidence:
        for pattern in _MISSING:
            for found in pattern.finditer(evidence.message or evidence.text):
                if mined.api_package(found.group("module")) == package:
                    yield FailedImport(found.group("module"), found.groupdict().get("name"))


def _importer_frame(finding: Finding, package: str) -> re.Match[str] | None:
    """The innermost frame of an installed package outside ``package``'s own: the code that
    asked for the import; None when no frame shows."""
    library = mined.library_apis().get(package)
    own = library.modules if library is not None else (package,)
    frames = [
        found
        for evidence in finding.evidence
        for found in _INSTALLED_FRAME.finditer(evidence.text)
        if found.group("package") not in own
    ]
    return frames[-1] if frames else None


def _importer(finding: Finding, package: str) -> str | None:
    """The package of ``_importer_frame``, as imported."""
    frame = _importer_frame(finding, package)
    return frame.group("package") if frame is not None else None


def _release_change(
    package: str,
    failed: FailedImport,
    installed: str | None,
    required: mined.ReleaseRequirement | None,
    importer: str | None,
) -> tuple[PackageAction | None, str] | None:
    """The release of ``package`` that has what the import asked for (by the side of the
    releases that have it the failed one is on), and the sentence that says so; no change but
    a sentence when the engine release's requirement (``required``) allows no release that has
    it; None when the tables cannot tell. ``importer`` is the importing code's package, as
    imported (None when no frame shows it); a program behind the engine is asked to follow it
    (``_program_behind_engine``)."""
    span = mined.api_span(package, failed.module, failed.name)
    if span is None or span.first is None or span.last_with is None:
        return None
    allowed = _allowed_by(required)
    having = [release for release in span.releases if span.covers(release) and allowed(release)]
    what = failed.words()
    title = mined.ENGINE_NAMES.get(package, package)
    if required is not None and not having:
        if _pins_within(required, span.first, span.last_with):
            return None  # its pin has it: the install, not the requirement, is off
        note = (
            f"{required.sentence()}, and no {title} release it allows has {what} (it is in "
            f"{span.first} to {span.last_with}): the code that imports it was written for "
            f"another {title} than the engine release requires."
        )
        return None, note
    releases = span.releases
    start, end = releases.index(span.first), releases.index(span.last_with)
    shipping = mined.api_span(package, failed.module) if failed.name else None
    sides = _lacking_sides(span, start, end, shipping, installed, allowed)
    if sides is None:
        return None
    named = _pip_name(importer)
    spec, action, note = _exact(span, having, sides, what, title, named)
    program = _program_behind_engine(package, action, importer)
    if program is not None:
        note += (
            f" Upgrade `{program}` to a release written for the installed {title} (its release "
            f"notes or requirements name the {title} it supports); where there is none yet, "
            f"install {package}{spec} instead."
        )
        return PackageAction(name=program, spec="", action="upgrade"), note
    if action == "downgrade":
        note += f" A release of {named} written for the installed {title} is the other way."
    if required is not None:
        note += f" {required.sentence()}, and the release to install keeps to it."
    note += f" Install {package}{spec}."
    return PackageAction(name=package, spec=spec, action=action), note


def _exact(
    span: mined.ReleaseSpan,
    having: list[str],
    sides: tuple[bool, bool],
    what: str,
    title: str,
    importer: str,
) -> tuple[str, PackageChange, str]:
    """The spec, the action and the sentence for the side of the span the failed release is
    on: both (the releases between), older (from the first that has it) or newer (the newest
    that has it); ``having`` holds the releases with it that may be installed, oldest first."""
    releases = span.releases
    mined_range = f"of the {title} releases mined, {releases[0]} to {releases[-1]}"
    if having[-1] == releases[-1]:
        between = f">={having[0]}"
    elif having[0] == having[-1]:
        between = f"=={having[0]}"
    else:
        between = f">={having[0]},<={having[-1]}"
    if sides == (True, True):
        only = span.first if span.first == span.last_with else f"{span.first} to {span.last_with}"
        return between, "pin", f"{what} is only in {title} {only} ({mined_range})."
    if sides == (True, False):
        note = (
            f"{what} first comes in {title} {span.first} ({mined_range}): {importer} was "
            f"written for {title} {span.first} or newer."
        )
        return between, "upgrade", note
    after = releases[releases.index(str(span.last_with)) + 1 :]
    gone = next((release for release in after if release not in span.unlisted), span.dropped)
    note = (
        f"{what} is in {title} up to {span.last_with} and gone from {gone} "
        f"({mined_range}): {importer} was written for {title} {span.last_with} or older."
    )
    return f"=={having[-1]}", "downgrade", note


def _pip_name(package: str | None) -> str:
    """A package as pip names it, in backquotes ("the importing code" when unknown)."""
    return "the importing code" if package is None else f"`{_distribution(package)}`"


def _distribution(package: str) -> str:
    """An imported package's distribution, as pip names it."""
    return DISTRIBUTIONS.get(package) or distribution_name(package)


def _lacking_sides(
    span: mined.ReleaseSpan,
    start: int,
    end: int,
    shipping: mined.ReleaseSpan | None,
    installed: str | None,
    allowed: Callable[[str], bool],
) -> tuple[bool, bool] | None:
    """Whether the release that failed is older or newer than the span (``releases[start]``
    to ``releases[end]``): by the release installed, else by the releases alone (those the
    requirement allows, whose tables show it absent); None when neither (every such release
    has it, or the installed one does: an incomplete install) or the tables cannot say. Where
    both sides lack a name but one side's releases lack its module too (``shipping``), the
    other side is the one: there the import would fail as "No module named"."""
    releases = span.releases
    if installed is None:
        older = [r for r in releases[:start] if allowed(r) and r not in span.unlisted]
        newer = [r for r in releases[end + 1 :] if allowed(r) and r not in span.unlisted]
        if older and newer and shipping is not None:
            older_ship, newer_ship = (
                any(shipping.covers(release) for release in side) for side in (older, newer)
            )
            if older_ship != newer_ship:
                return older_ship, newer_ship
        return (bool(older), bool(newer)) if older or newer else None
    standing = [release for release in releases if at_least(installed, release)]
    if standing and standing[-1] in span.unlisted:
        return None  # the mined release that stands for it cannot say
    if not at_least(installed, releases[start]):
        return True, False
    if span.dropped is not None and not at_least(releases[end], installed):
        return False, True  # at or past the drop, or between the samples
    return None


def _allowed_by(required: mined.ReleaseRequirement | None) -> Callable[[str], bool]:
    """Whether a release is one the importing release's requirement allows (any, without
    one)."""
    try:
        specifier = SpecifierSet(required.spec) if required is not None else None
    except InvalidSpecifier:
        specifier = None
    if specifier is None:
        return lambda release: True
    return lambda release: specifier.contains(release, prereleases=True)


def _pins_within(required: mined.ReleaseRequirement, first: str, last: str) -> bool:
    """The requirement pins (``==``) a release from ``first`` to ``last``, the mined releases
    that have the name (one the samples skip)."""
    try:
        pins = [Version(s.version) for s in SpecifierSet(required.spec) if s.operator == "=="]
    except (InvalidSpecifier, InvalidVersion):
        return False
    return any(Version(first) <= pin <= Version(last) for pin in pins)
