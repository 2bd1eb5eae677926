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
from diagnose.core.versions import at_least
from diagnose.knowledge import mined

_LACKS_A_NAME = frozenset({"dependency-api-mismatch"})
"""Findings of a package that lacks a name the code imports: with a requirement that has no
upper bound, the installed release is the older one."""
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
    if change is None or not vague(change.spec):
        return finding
    unnamed = engine is None
    if unnamed and engine_version is None:
        declaring = [e for e in mined.ENGINES if _common_floor(e, change.name) is not None]
        engine = declaring[0] if len(declaring) == 1 else None
    if engine not in mined.ENGINES:
        return finding
    if distribution_name(change.name) == engine:
        return finding  # the engine itself: its own release is another question
    name = mined.ENGINE_NAMES[engine]
    if engine_version is None:
        newest = mined.required(engine, None, change.name)
        if newest is None:
            return finding
        common = _common_floor(engine, newest.package)
        if common is not None:
            lowest, highest, since = common
            spec = f">={highest},<{highest.major + 1}"
            note = (
                (
                    "The log names no engine and no release (only " + name + " declares "
                    f"{newest.package} among the engines)"
                    if unnamed
                    else f"The log does not show which {name} release runs"
                )
                + f"; every {name} release since {since} asks for {newest.package} {lowest} or "
                f"newer within one major version (the newest asks {newest.spec}), so "
                f"{newest.package} {spec} satisfies whichever of them runs; where the installed "
                f"{newest.package} is newer already, it is the other package of the pair to "
                "align."
            )
            return finding.model_copy(
                update={
                    "package": PackageAction(name=newest.package, spec=spec, action="upgrade"),
                    "explanation": f"{finding.explanation} {note}",
                }
            )
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
        lacks_a_name = change.action == "pin" and finding.signature in _LACKS_A_NAME
        if lacks_a_name and installed_version(finding, change.name, found.package) is None:
            note = (
                f"{chain}, with no upper bound: every newer {found.package} fits it, and the "
                f"installed one lacks a name the code imports, so it is older than the code was "
                f"written for. Upgrade it within that range: the newest release has what the "
                "newest code imports."
            )
            return finding.model_copy(
                update={
                    "package": PackageAction(name=found.package, spec=found.spec, action="upgrade"),
                    "explanation": f"{finding.explanation} {note}",
                }
            )
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


def _common_floor(engine: str, package: str) -> tuple[Version, Version, str] | None:
    """The lowest and the highest minimum of ``package`` over the engine's newest releases
    that each ask only for a minimum within one major version, and the oldest of them: a
    version below the lowest is too old for each of those releases, and one from the highest
    up, within its major version, fits whichever of them runs."""
    floors: list[Version] = []
    since = None
    for release, declared in reversed(mined.requirements(engine).items()):
        spec = declared.get(package)
        if spec is None:
            continue
        try:
            clauses = list(SpecifierSet(spec))
            floor = Version(clauses[0].version) if len(clauses) == 1 else None
        except (InvalidSpecifier, InvalidVersion):
            floor = None
        if (
            floor is None
            or clauses[0].operator != ">="
            or (floors and floor.major != floors[0].major)
        ):
            break
        floors.append(floor)
        since = release
    return (min(floors), max(floors), since) if floors and since else None


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


_UNKNOWN_MODEL_TYPE = (
    re.compile(r"has model type `?([\w.-]+?)`? but Transformers does not recognize"),
    re.compile(r"\bmodel[ _]type:? `?'?([\w.-]+?)'?`? (?:is )?not recognized", re.I),
    re.compile(r"\bUnrecognized model type:? `?'?([\w.-]+?)'?`?(?=[\s.,;:]|$)", re.I),
)
"""How transformers (and the engines quoting it) name a ``model_type`` it does not know."""
_MAPPING_KEY_ERROR = re.compile(r"^\s*KeyError: '([\w.-]+)'\s*$")
"""Older transformers: ``CONFIG_MAPPING[config_dict["model_type"]]`` with no message."""
_LETTERS = re.compile(r"[^a-z0-9]")
_CONFIG_MAPPING = re.compile(r"configuration_auto\.py|CONFIG_MAPPING\[")
_TRANSFORMERS = "transformers"
_SOURCE_INSTALL = "pip install git+https://github.com/huggingface/transformers"


def unknown_model_type(finding: Finding) -> str | None:
    """The ``model_type`` the finding's evidence says the installed transformers does not
    know, if it names one: "has model type `qwen3_vl` but Transformers does not recognize this
    architecture", or the ``KeyError: 'gemma3'`` of an older config mapping."""
    texts = [evidence.message or evidence.text for evidence in finding.evidence]
    for text in texts:
        for pattern in _UNKNOWN_MODEL_TYPE:
            found = pattern.search(text)
            if found is not None:
                return found.group(1)
    if any(_CONFIG_MAPPING.search(evidence.text) for evidence in finding.evidence):
        for text in texts:
            found = _MAPPING_KEY_ERROR.search(text)
            if found is not None:
                return found.group(1)
    return None


def model_type_fix(finding: Finding, engine: str | None, engine_version: str | None) -> Finding:
    """``finding`` with its transformers upgrade made exact for the model type the log names:
    ``>=`` the first transformers release that knows it; the engine's upgrade instead where the
    running engine release's own requirements cap transformers below that release; no version
    at all (and why) where no released transformers knows the type. Unchanged when the finding
    does not upgrade transformers or the log names no model type."""
    change = finding.package
    if change is None or distribution_name(change.name) != _TRANSFORMERS:
        return finding
    if change.action not in ("upgrade", "pin", "install"):
        return finding
    model_type = unknown_model_type(finding)
    if model_type is None:
        return finding
    known = mined.model_type_releases(model_type)
    if not known.releases:
        return finding  # no table mined: nothing to say either way
    spec = known.spec()
    if spec is None or known.first is None:
        return _no_release_knows(finding, known)
    since = (
        f"is known to every transformers release mined, from {known.first}"
        if known.first == known.releases[0]
        else f"is first known to transformers {known.first}"
    )
    said = (
        f"`{model_type}` {since} (the keys of CONFIG_MAPPING_NAMES, mined from every minor "
        f"release from {known.releases[0]})"
        + (f" and gone again from {known.dropped}" if known.dropped else "")
        + "."
    )
    if engine in mined.ENGINES:
        releases = mined.versions(engine)
        before_tables = bool(releases) and (
            engine_version is None or not at_least(engine_version, releases[0])
        )
        registering = _first_registering(engine, model_type) if before_tables else None
        if registering is not None and engine_version is not None:
            # older than every release mined, the first of which to register it is named
            return _model_needs_newer_engine(finding, engine, engine_version, registering, said)
        if registering is not None:
            finding = _engine_too_if_older(finding, engine, registering)
    elif engine is None:  # the log does not say which engine: each one's side, where known
        for each in mined.ENGINES:
            registering = _first_registering(each, model_type)
            if registering is not None:
                finding = _engine_too_if_older(finding, each, registering)
    if engine in mined.ENGINES and engine_version is not None:
        capped = _engine_cap(engine, engine_version, known)
        if capped is not None:
            return _engine_upgrade(finding, engine, engine_version, known, capped, said)
        implemented = _first_release_implementing(engine, engine_version, model_type)
        if implemented is not None:
            return _model_needs_newer_engine(finding, engine, engine_version, implemented, said)
        found = mined.required(engine, engine_version, _TRANSFORMERS)
        if found is not None and _bounded_above(found.spec):
            exact = found.spec.startswith("==") and "," not in found.spec
            spec = found.spec if exact else str(SpecifierSet(spec) & SpecifierSet(found.spec))
            said += f" {found.sentence()}, which admits it."
    note = f"{said} Install transformers{spec}."
    return finding.model_copy(
        update={
            "package": PackageAction(name=_TRANSFORMERS, spec=spec, action="upgrade"),
            "explanation": _restated(finding, note),
        }
    )


_ENGINE_CONFIG = re.compile(
    r"\b(?:sglang|vllm)\.[\w.]*?configs\.(?P<module>\w+?)(?:_config)?\b|\b(?P<cls>[A-Z]\w*?)Config\b"
)
"""The engine's own config module or class of a model (``sglang.srt.configs.qwen2_5_vl_config``,
``Qwen2_5_VLConfig``): the model, written without its separators."""


def clashing_model_type(finding: Finding) -> str | None:
    """The transformers ``model_type`` of the model whose class the engine registers and the
    installed transformers already has ("'Qwen2_5_VLConfig' is already used by a Transformers
    model"), if the evidence names it."""
    by_letters = {_LETTERS.sub("", model_type): model_type for model_type in mined.model_types()}
    for evidence in finding.evidence:
        for found in _ENGINE_CONFIG.finditer(evidence.message or evidence.text):
            named = _LETTERS.sub("", (found.group("module") or found.group("cls")).lower())
            if named in by_letters:
                return by_letters[named]
    return None


def registered_model_fix(
    finding: Finding, engine: str | None, engine_version: str | None
) -> Finding:
    """``finding`` with its transformers downgrade made exact for a model the engine registers
    itself and a later transformers added: below the first transformers release that knows the
    model (within the running engine release's own requirement, when the log shows the
    release). Unchanged when the evidence names no such model or every mined release knows it."""
    change = finding.package
    if change is None or distribution_name(change.name) != _TRANSFORMERS:
        return finding
    model_type = clashing_model_type(finding) if change.action == "downgrade" else None
    if model_type is None:
        return finding
    known = mined.model_type_releases(model_type)
    if known.first is None or known.first == known.releases[0]:
        return finding  # known before the mining starts: no release without it is known
    spec = f"<{known.first}"
    note = (
        f"`{model_type}` is first known to transformers {known.first} (the keys of "
        f"CONFIG_MAPPING_NAMES, mined from every minor release from {known.releases[0]}): a "
        "transformers below it has no model of its own to collide with the engine's."
    )
    if engine in mined.ENGINES and engine_version is not None:
        found = mined.required(engine, engine_version, _TRANSFORMERS)
        if found is not None:
            joined = SpecifierSet(found.spec) & SpecifierSet(spec)
            if any(joined.contains(v, prereleases=True) for v in known.releases):
                spec = found.spec if found.spec.startswith("==") else str(joined)
                note += f" {found.sentence()}."
    note += f" Install transformers{spec}."
    return finding.model_copy(
        update={
            "package": PackageAction(name=_TRANSFORMERS, spec=spec, action="downgrade"),
            "explanation": _restated(finding, note),
        }
    )


def _admits_older(spec: str, known: mined.ModelTypeReleases) -> bool:
    """Whether ``spec`` also allows a mined transformers release older than the first that
    knows the model type (an upgrade of the engine alone then keeps the installed one)."""
    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    first = Version(known.first or "0")
    return any(Version(v) < first and Version(v) in allowed for v in known.releases)


def _admits(spec: str, known: mined.ModelTypeReleases) -> bool:
    """Whether ``spec`` allows a transformers release that knows the model type: a mined
    release, or a version the spec itself names, from ``first`` up to ``dropped``."""
    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        return True  # unreadable: no cap to report
    first = Version(known.first or "0")
    dropped = Version(known.dropped) if known.dropped else None
    named = [s.version.removesuffix(".*") for s in allowed]
    for candidate in [*known.releases, *named]:
        try:
            version = Version(candidate)
        except InvalidVersion:
            continue
        if version < first or (dropped is not None and version >= dropped):
            continue
        if allowed.contains(version, prereleases=True):
            return True
    return False


def _engine_cap(
    engine: str, engine_version: str, known: mined.ModelTypeReleases
) -> mined.ReleaseRequirement | None:
    """The running engine release's transformers requirement, when it allows no release
    that knows the model type."""
    found = mined.required(engine, engine_version, _TRANSFORMERS)
    if found is None or _admits(found.spec, known):
        return None
    return found


def _engine_upgrade(
    finding: Finding,
    engine: str,
    engine_version: str,
    known: mined.ModelTypeReleases,
    capped: mined.ReleaseRequirement,
    said: str,
) -> Finding:
    name = mined.ENGINE_NAMES[engine]
    cap = f"{capped.sentence()}, which allows no transformers that knows it"
    start = Version(mined.requirement_release(engine, engine_version) or engine_version)
    later = [v for v in mined.requirements(engine) if Version(v) > start]
    for version in later:
        found = mined.required(engine, version, _TRANSFORMERS)
        if found is None or _admits(found.spec, known):
            admits = found.sentence() if found else f"{name} {version} does not pin transformers"
            wanted = f"{_TRANSFORMERS}>={known.first}"
            both = f"pip install '{engine}>={version}' '{wanted}'"
            together = (
                f"{both} in the server's environment (both at once: alone, the engine's upgrade "
                "keeps the older transformers)"
            )
            keeps_older = found is None or _admits_older(found.spec, known)
            note = (
                f"{said} {cap}: upgrading transformers alone would break {name}'s own "
                f"requirements. Upgrade {name} to {version} or later, the first release whose "
                f"requirements admit it ({admits})"
                + (
                    f", together with `{wanted}`: those requirements also admit the installed "
                    f"transformers, which pip then keeps (`{both}`)."
                    if keeps_older
                    else "; it installs a matching transformers."
                )
            )
            return finding.model_copy(
                update={
                    "package": PackageAction(name=engine, spec=f">={version}", action="upgrade"),
                    "explanation": _restated(finding, note),
                    "system_actions": [*finding.system_actions, together]
                    if keeps_older
                    else finding.system_actions,
                }
            )
    note = (
        f"{said} {cap}, and no {name} release up to {later[-1] if later else engine_version} "
        f"(the newest whose requirements were read) admits one: the model needs a newer {name}."
    )
    return finding.model_copy(update={"package": None, "explanation": _restated(finding, note)})


def _architectures_of(model_type: str, registry: mined.Registry) -> list[str]:
    """The registered architectures named after ``model_type`` (``glm4_moe``:
    ``Glm4MoeForCausalLM``), matched without case and separators."""
    stem = _LETTERS.sub("", model_type.lower())
    return sorted(
        arch
        for arch in registry.architectures
        if _LETTERS.sub("", arch.lower()).startswith((f"{stem}for", f"{stem}model"))
    )


def _first_release_implementing(
    engine: str, engine_version: str, model_type: str
) -> tuple[str, list[str]] | None:
    """The oldest mined release of ``engine`` that registers an architecture of
    ``model_type``, and those architectures, when the running release has none: the first
    mined release at or above it registers none (None when that cannot be told)."""
    registering = _first_registering(engine, model_type)
    if registering is None or at_least(engine_version, registering[0]):
        return None
    registries = mined.registries(engine)
    ceiling = next((v for v in mined.versions(engine) if at_least(v, engine_version)), None)
    if ceiling is None or ceiling not in registries:
        return None
    if _architectures_of(model_type, registries[ceiling]):
        return None
    return registering


def _first_registering(engine: str, model_type: str) -> tuple[str, list[str]] | None:
    """The oldest mined release of ``engine`` from which its registry lists an architecture of
    ``model_type`` through the newest, and those architectures; None when none does."""
    registries = mined.registries(engine)
    first = mined.first_release_with(
        engine,
        lambda version: (
            bool(_architectures_of(model_type, registries[version]))
            if version in registries
            else None
        ),
    )
    return (first, _architectures_of(model_type, registries[first])) if first else None


def _engine_too_if_older(
    finding: Finding, engine: str, registering: tuple[str, list[str]]
) -> Finding:
    """``finding`` with the engine's side of a model transformers does not know, when the log
    shows no engine release: an engine older than the first that registers the model needs
    upgrading too."""
    first, architectures = registering
    name = mined.ENGINE_NAMES[engine]
    listed = ", ".join(f"`{a}`" for a in architectures)
    action = (
        f"If {name} is older than {first}, upgrade it too: pip install '{engine}>={first}' "
        f"({name} registers {listed} from {first} on in the releases mined; transformers alone "
        "leaves the model unknown to an older engine)."
    )
    return finding.model_copy(update={"system_actions": [*finding.system_actions, action]})


def _model_needs_newer_engine(
    finding: Finding,
    engine: str,
    engine_version: str,
    implemented: tuple[str, list[str]],
    said: str,
) -> Finding:
    newer, architectures = implemented
    name = mined.ENGINE_NAMES[engine]
    listed = ", ".join(f"`{a}`" for a in architectures)
    older_than_tables = not at_least(engine_version, mined.versions(engine)[0])
    lacking = (
        f"{name} {engine_version} is older than every release mined, and the oldest of them "
        f"that registers it ({listed}) is {newer}: a release that old most likely has no "
        "implementation of it either."
        if older_than_tables
        else f"{name} {engine_version} has no implementation of it either: its model registry "
        f"lists no such architecture, which {name} registers ({listed}) from {newer} on (read "
        "from the releases' model registries)."
    )
    note = (
        f"{said} {lacking} Upgrade {name} to {newer} or later: transformers alone would leave "
        f"the model unknown to the engine, and the newer {name} brings a transformers that "
        "knows it."
    )
    return finding.model_copy(
        update={
            "package": PackageAction(name=engine, spec=f">={newer}", action="upgrade"),
            "explanation": _restated(finding, note),
            "patch_note": (
                f"The version is the first {name} release whose model registry lists the "
                f"architecture (knowledge/mined/{engine}/registries.json)."
            ),
        }
    )


def _restated(finding: Finding, note: str) -> str:
    """The explanation with ``note`` added, and without the sentence that stated the change
    it replaces (a known issue's "The fix: upgrade `transformers`.")."""
    change = finding.package
    stated = f" The fix: {change.action} `{change.name}{change.spec}`." if change else ""
    explanation = finding.explanation.replace(stated, "") if stated else finding.explanation
    return f"{explanation} {note}"


def _no_release_knows(finding: Finding, known: mined.ModelTypeReleases) -> Finding:
    newest = known.newest or "the newest"
    note = (
        f"No released transformers up to {newest} (the newest mined) knows "
        f"`{known.model_type}`. Either the model is newer than every release (install transformers "
        f"from source, `{_SOURCE_INSTALL}`, as the error says) or the checkpoint brings its own "
        "code (pass --trust-remote-code); no transformers version to pin is known."
    )
    return finding.model_copy(update={"package": None, "explanation": _restated(finding, note)})
