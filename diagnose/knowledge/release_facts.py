"""What the mined releases settle by themselves: a launch value the installed release refuses
(a newer release accepts it, or a near spelling is valid) and a model architecture only newer
releases register. These are facts of the releases, not guesses from wording, so this tier is
asked before the known issues; it answers only when a release table decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from diagnose.core.explain import Candidate, IncidentView
from diagnose.core.models import Confidence, Finding, PackageAction, Patch, Role, Severity
from diagnose.core.versions import at_least
from diagnose.knowledge import mined

_INVALID_CHOICE = re.compile(
    r"argument (?P<flag>--[\w.-]+)(?:/-[\w-]+)?: invalid choice: '?(?P<value>[^'\s]*)'? "
    r"\(choose from (?P<choices>[^)]*)\)"
)
_INVALID_PARSER = re.compile(
    r"invalid (?P<kind>tool call|reasoning) parser: (?P<value>\S+) "
    r"\(chose from \{ ?(?P<choices>[^}]*?) ?\}\)"
)
_UNKNOWN_QUANTIZATION = re.compile(
    r"Unknown quantization method: (?P<value>[\w.-]+)\. Must be one of \[(?P<choices>[^\]]*)\]"
)
"""The engine's own check of a checkpoint's (or --quantization's) method, with its values."""
_PARSER_FLAGS = {
    "tool call": "--tool-call-parser",
    "reasoning": "--reasoning-parser",
    "quantization": "--quantization",
}
_ARCHITECTURES = re.compile(
    r"Model architectures? \[(?P<archs>[^\]]*)\] (?:are|is) not supported(?! .*inspected)"
    r"|Cannot find model module\. (?P<one_arch>'\w+') is not a registered model in the "
    r"Transformers library"
    r"|(?<![\w.])(?P<bare_arch>[A-Z]\w+) has no vLLM implementation and the Transformers "
    r"implementation is not compatible"
)
"""vLLM's refusals of a declared architecture: its registry's, and (0.7 to 0.9) the
Transformers fallback's that finds no native implementation either."""
_FAMILY_SUFFIX = re.compile(r"Text(?=For[A-Z]\w*$)")
"""The part of a text-only variant's class name (``Gemma4TextForCausalLM``) that the engine's
own class of the family (``Gemma4ForCausalLM``) lacks."""
_SUPPORTED = re.compile(r"Supported architectures: (?P<names>.*)")
_ON_PLATFORM = re.compile(r"not supported on (?P<platform>[A-Z][\w-]*)")
"""A platform backend's own list (``... are not supported on Neuron for now``): the mined
registries are the GPU model registry's, which says nothing of it."""
_QUOTED = re.compile(r"'([A-Za-z0-9_]+)'")


def release_fact_findings(incident: IncidentView) -> list[Finding]:
    """The earliest candidate a release table settles, as a finding."""
    engines = mined.engines_to_read(incident.engine)
    for candidate in incident.candidates:
        for reader in (_choice_finding, _architecture_finding, _removed_variable_finding):
            found = [f for e in engines if (f := reader(candidate, e, incident.engine_version))]
            if len(found) == 1:
                return found
    return []


# -- a value the installed release refuses -------------------------------------------------


def _choice_finding(candidate: Candidate, engine: str, shown: str | None) -> Finding | None:
    text = candidate.text
    parsed = (
        _INVALID_CHOICE.search(text)
        or _INVALID_PARSER.search(text)
        or _UNKNOWN_QUANTIZATION.search(text)
    )
    if parsed is None or not mined.versions(engine):
        return None
    fields = parsed.groupdict()
    flag = fields.get("flag") or _PARSER_FLAGS[fields.get("kind") or "quantization"]
    # a checkpoint's own quantization method is support the release lacks, not a bad option
    category = "model_unsupported" if parsed.re is _UNKNOWN_QUANTIZATION else "launch_args"
    value = parsed.group("value")
    printed = [c.strip().strip("'\"") for c in parsed.group("choices").split(",") if c.strip()]
    if not _printed_by(engine, flag, printed):
        return None  # another engine's flag or values
    name = mined.ENGINE_NAMES[engine]
    installed = _installed(engine, shown, flag, printed)
    window = mined.release_window(engine, lambda v: mined.accepts(engine, v, flag, value))
    newer, until = window if window is not None else (None, None)
    refused = f"The installed {name} refuses `{flag} {value}`: its values are {_listed(printed)}."
    tables = "(read from the releases' own flag and parser tables)"
    spec = f">={newer}" + (f",<{until}" if until else "")
    if until is not None and installed is not None and at_least(installed, until):
        title = f"`{flag} {value}` was removed in {name} {until}"
        sentences = [
            f"{refused} {name} {newer} to the release before {until} accept `{value}`; "
            f"{until} and later do not {tables}.",
            f"Install a release before {until}, or pick one of the installed release's values.",
        ]
        package = PackageAction(name=engine, spec=spec, action="downgrade")
        return _finding(candidate, engine, title, sentences, None, package, category)
    if newer is not None and (installed is None or not at_least(installed, newer)):
        since = f"{name} {newer}" + (
            "" if newer == mined.versions(engine)[0] else ", the first mined release with it"
        )
        title = f"`{flag} {value}` needs a newer {name} (accepted since {since})"
        accepted = (
            f"Every {name} release from {newer} on accepts `{value}`"
            if until is None
            else f"{name} {newer} to the release before {until} accept `{value}`"
        )
        sentences = [
            f"{refused} {accepted} {tables}.",
            f"Upgrade {name}, or pick one of the installed release's values.",
        ]
        package = PackageAction(name=engine, spec=spec, action="upgrade")
        return _finding(candidate, engine, title, sentences, None, package, category)
    near = mined.near_value(value, printed) or _other_engine_spelling(engine, flag, value, printed)
    if near is None and parsed.re is _UNKNOWN_QUANTIZATION and window is None:
        return _method_of_no_release(candidate, engine, value, printed)
    if near is None:
        return None
    title = f"`{flag} {value}` is not a value {name} knows; `{near}` is"
    sentences = [
        f"{name} refuses `{flag} {value}`: its values are {_listed(printed)}, and no mined "
        f"{name} release accepts `{value}`.",
        f"`{near}` is the value that fits it (a near spelling, or the name this engine gives "
        "the same format).",
    ]
    patch = Patch(args_remove=[flag], args_add=[flag, near])
    return _finding(candidate, engine, title, sentences, patch, None)


def _method_of_no_release(
    candidate: Candidate, engine: str, value: str, printed: Sequence[str]
) -> Finding:
    """A checkpoint's quantization method that no mined release of the engine implements, the
    newest included: it comes from outside the engine (a plugin that registers it), so an
    upgrade does not bring it."""
    name = mined.ENGINE_NAMES[engine]
    newest = mined.versions(engine)[-1]
    sentences = [
        f"The checkpoint (or `--quantization`) asks for the method `{value}`, and the installed "
        f"{name} knows only {_listed(printed)}. No {name} release up to {newest} implements "
        f"`{value}` (read from the releases' own tables), so an upgrade does not bring it.",
        f"A method outside that list comes from a plugin: a package that registers the "
        f"method with {name} when it is installed in the server's environment (the checkpoint's "
        "model card names it, with the kernels it needs). Install it, or serve a checkpoint "
        "quantized with one of the listed methods.",
    ]
    finding = _finding(
        candidate,
        engine,
        f"The quantization method `{value}` is no {name} release's: it needs its plugin",
        sentences,
        None,
        None,
        "model_unsupported",
    )
    return finding.model_copy(
        update={
            "system_actions": [
                f"Install the plugin package that registers `{value}` (the checkpoint's model "
                f"card names it) into the environment that runs {name}."
            ]
        }
    )


def _printed_by(engine: str, flag: str, printed: Sequence[str]) -> bool:
    """Whether some release of ``engine`` knows ``flag`` and nearly every value the error
    lists (a release between two mined ones may list a name the mined ones never did)."""
    versions = mined.versions(engine)
    if not printed or mined.flag_table(engine, versions[-1]).lookup(flag).option is None:
        return False
    known = sum(any(mined.accepts(engine, v, flag, value) for v in versions) for value in printed)
    return known >= 0.8 * len(printed)


def _installed(engine: str, shown: str | None, flag: str, printed: Sequence[str]) -> str | None:
    """The installed release: the one shown (compared as it is: it may be older than any
    mined), else the newest whose values are those printed."""
    if shown is not None:
        return shown
    wanted = frozenset(printed)
    matching = [v for v in mined.versions(engine) if mined.flag_values(engine, v, flag) == wanted]
    return matching[-1] if matching else None


def _other_engine_spelling(
    engine: str, flag: str, value: str, printed: Sequence[str]
) -> str | None:
    """The other engine names this format ``<value>_<format>`` (``llama4_pythonic``) and the
    format alone is a printed value (``pythonic``): that value. Parser names only: a
    quantization method with a suffix (``quark_mxfp4``) is another method, not a spelling."""
    kind = mined.PARSER_REGISTRIES.get(flag)
    if kind is None:
        return None
    found = set()
    for other in mined.ENGINES:
        if other == engine:
            continue
        for registry in mined.registries(other).values():
            for name in getattr(registry, kind):
                head, _, rest = name.partition("_")
                if head == value and rest in printed:
                    found.add(rest)
    return sorted(found)[0] if len(found) == 1 else None


def _listed(values: Sequence[str]) -> str:
    shown = ", ".join(f"`{v}`" for v in values[:20])
    return shown + (f" and {len(values) - 20} more" if len(values) > 20 else "")


# -- a variable of the engine's that the installed release no longer declares ----------------

_ENVS_ATTRIBUTE = re.compile(
    r"module '(?P<engine>vllm)\.envs' has no attribute '(?P<name>VLLM_[A-Z0-9_]+)'"
)
"""Code that reads one of vLLM's variables from ``vllm.envs``, where the installed release does
not declare it (a plugin or a program written for the releases that did)."""


def _removed_variable_finding(
    candidate: Candidate, engine: str, shown: str | None
) -> Finding | None:
    """A variable the installed release (the one the log shows) no longer declares, that some
    earlier releases did: the last of them is the engine's side of the fix."""
    found = _ENVS_ATTRIBUTE.search(candidate.text)
    if found is None or found.group("engine") != engine or shown is None:
        return None
    variable = mined.env_vars(engine).get(found.group("name"))
    window = mined.release_window(
        engine, lambda v: variable is not None and v in variable.declared_in
    )
    if variable is None or window is None:
        return None
    first, removed = window
    if removed is None or not at_least(shown, removed):
        return None
    name = mined.ENGINE_NAMES[engine]
    last = max(
        (v for v in variable.declared_in if not at_least(v, removed)),
        key=lambda v: mined.release(v) or (),
    )
    sentences = [
        f"Code reads `{variable.name}` from `{engine}.envs`, and the installed {name} "
        f"({shown}) no longer declares it: {name} {first} to {last} did, {removed} and later "
        "do not (read from the releases' own variable tables).",
        f"The code that reads it was written for those releases: most often a plugin or a "
        f"program built on {name} (its frame, where the log has one, names it). Upgrade that "
        f"package to its release for {name} {shown}, or install {name} {last}, the last "
        "release that declares the variable.",
    ]
    package = PackageAction(name=engine, spec=f"=={last}", action="downgrade")
    title = f"Code reads `{variable.name}`, which {name} {removed} removed from `{engine}.envs`"
    return _finding(candidate, engine, title, sentences, None, package, "kernel_build")


# -- an architecture only newer releases register --------------------------------------------


def _architecture_finding(candidate: Candidate, engine: str, shown: str | None) -> Finding | None:
    parsed = _ARCHITECTURES.search(candidate.text)
    registries = mined.registries(engine)
    if parsed is None or not registries or (parsed.group("bare_arch") and engine != "vllm"):
        return None
    declared = parsed.group("archs") or parsed.group("one_arch") or parsed.group("bare_arch")
    archs = [a.strip().strip("'\"") for a in declared.split(",") if a.strip()]
    if not archs:
        return None
    listed = ", ".join(f"`{a}`" for a in archs)
    platform = _ON_PLATFORM.search(candidate.text, parsed.start())
    if platform is not None:
        return _platform_finding(candidate, engine, listed, platform.group("platform"))

    newer = _first_release_registering(engine, archs)
    installed = shown  # compared as it is: it may be older than any mined release
    listed_names = _SUPPORTED.search(candidate.text[parsed.end() :])
    if listed_names is not None:  # the release that printed this list, of either engine
        printed = set(_QUOTED.findall(listed_names.group("names")))
        best = _closest_registry(printed)
        if best is not None and best[0] != engine:
            return None
        if best is not None and installed is None:
            installed = best[1]
    if newer is None:
        family = (
            _family_class_finding(candidate, engine, archs, shown) if engine == "vllm" else None
        )
        return family or _unregistered_finding(candidate, engine, archs, shown)
    if installed is not None and at_least(installed, newer):
        return None
    name = mined.ENGINE_NAMES[engine]
    title = f"The model's architecture {listed} needs {name} {newer} or newer"
    if newer == mined.versions(engine)[0]:  # releases before the oldest mined are not read
        title = f"The model's architecture {listed} needs a newer {name} ({newer} has it)"
    sentences = [
        f"The model declares {listed}; the installed {name}"
        + (f" ({shown})" if shown else "")
        + " has no implementation of it. "
        f"Every {name} release from {newer} on registers it (read from the releases' model "
        "registries).",
        f"Upgrade {name} (and transformers, which new model families often need too).",
    ]
    package = PackageAction(name=engine, spec=f">={newer}", action="upgrade")
    return _finding(candidate, engine, title, sentences, None, package, "model_unsupported")


def _first_release_registering(engine: str, archs: Sequence[str]) -> str | None:
    """The oldest mined release from which every release registers one of ``archs``."""
    registries = mined.registries(engine)

    def registers(version: str) -> bool:
        registry = registries.get(version)
        return registry is not None and any(a in registry.architectures for a in archs)

    return mined.first_release_with(engine, registers)


def _family_class_finding(
    candidate: Candidate, engine: str, archs: list[str], shown: str | None
) -> Finding | None:
    """A text-only variant's class name (``Gemma4TextForCausalLM``) that no release registers,
    where every release from one on registers the family's own class (``Gemma4ForCausalLM``),
    which loads the same weights: the config's architecture is overridden to that class."""
    if len(archs) != 1 or not _FAMILY_SUFFIX.search(archs[0]):
        return None
    family = _FAMILY_SUFFIX.sub("", archs[0])
    since = _first_release_registering(engine, [family])
    if since is None:
        return None
    name = mined.ENGINE_NAMES[engine]
    override = '{"architectures": ["' + family + '"]}'
    older = shown is not None and not at_least(shown, since)
    sentences = [
        f"The model's config declares `{archs[0]}`, a text-only variant's class name that no "
        f"{name} release registers, while every release from {since} on registers `{family}`, "
        "the family's own class, which loads the text model's weights (read from the "
        "releases' model registries).",
        f"Override the architecture the config declares: `--hf-overrides '{override}'`"
        + (f", on {name} {since} or newer ({shown} is older)." if older else "."),
    ]
    package = PackageAction(name=engine, spec=f">={since}", action="upgrade") if older else None
    return _finding(
        candidate,
        engine,
        f"`{archs[0]}` is registered under the family's class `{family}`",
        sentences,
        Patch(args_add=["--hf-overrides", override]),
        package,
        "model_unsupported",
    )


def _unregistered_finding(
    candidate: Candidate, engine: str, archs: list[str], shown: str | None
) -> Finding | None:
    """An architecture that no release read of either engine registers, nor its family's
    class: a class only the model's own code defines, which no upgrade adds."""
    versions = mined.versions(engine)
    if shown is not None and not at_least(versions[-1], shown):  # newer than any release read
        return None
    families = [_FAMILY_SUFFIX.sub("", a) for a in archs]
    if any(_first_release_registering(e, [*archs, *families]) for e in mined.ENGINES):
        return None
    listed = ", ".join(f"`{a}`" for a in archs)
    name = mined.ENGINE_NAMES[engine]
    transformers_backend = (
        "vLLM's Transformers backend where the model's code supports it, "
        "`--model-impl transformers --trust-remote-code`; "
        if engine == "vllm"
        else ""
    )
    sentences = [
        f"No {name} release from {versions[0]} to {versions[-1]} registers {listed} (read "
        "from the releases' model registries), so an upgrade does not add it: the name is "
        "the model maker's own class, which only the checkpoint's code defines (its "
        "config.json `architectures`).",
        f"Serve the model as its maker documents ({transformers_backend}their fork or "
        f"plugin, or a corrected config.json they publish); where the model is a fine-tune of "
        f"an architecture {name} has (the model card names its base model), declare that "
        'class instead: `--hf-overrides \'{"architectures": ["<the base model\'s class>"]}\'`.',
    ]
    title = f"No {name} release implements {listed}: the model maker's own class"
    return _finding(candidate, engine, title, sentences, None, None, "model_unsupported")


def _platform_finding(candidate: Candidate, engine: str, listed: str, platform: str) -> Finding:
    """A platform backend that runs only the architectures it lists: no release of the GPU
    registry, and no setting, changes what that backend implements."""
    name = mined.ENGINE_NAMES[engine]
    supported = _SUPPORTED.search(candidate.text)
    sentences = [
        f"{name}'s {platform} backend runs only the model families it implements"
        + (f" ({supported.group('names').strip().rstrip('.')})" if supported else "")
        + f", and {listed} is not one of them: the model is implemented for GPUs, not for "
        f"{platform}. No flag changes that, and an upgrade helps only where a release adds "
        f"the family to the {platform} backend.",
        f"Serve a model of a listed architecture on {platform}, or this model on a GPU.",
    ]
    title = f"{name}'s {platform} backend does not implement {listed}"
    return _finding(candidate, engine, title, sentences, None, None, "model_unsupported")


def _closest_registry(printed: set[str]) -> tuple[str, str] | None:
    """The engine and release whose registered architectures are most like ``printed`` (which
    may be cut short): the most of it registered, then the fewest names besides."""
    if len(printed) < 5:
        return None
    scored = [
        (
            round(len(printed & registry.architectures) / len(printed), 2),
            len(printed & registry.architectures) / len(printed | registry.architectures),
            e,
            v,
        )
        for e in mined.ENGINES
        for v, registry in mined.registries(e).items()
        if registry.architectures
    ]
    if not scored:
        return None
    coverage, _, engine, version = max(scored)
    return (engine, version) if coverage >= 0.8 else None


def _finding(
    candidate: Candidate,
    engine: str,
    title: str,
    sentences: list[str],
    patch: Patch | None,
    package: PackageAction | None,
    category: str = "launch_args",
) -> Finding:
    return Finding(
        id="f0",
        signature=f"{engine}-release-tables",  # one of mined.RELEASE_TABLES
        category=category,
        severity=Severity.CRITICAL,
        role=Role.ROOT_CAUSE,
        title=title,
        explanation=" ".join(sentences),
        confidence=Confidence.MEDIUM,
        evidence=[candidate.evidence],
        patch=patch,
        patch_note=None,
        package=package,
        phase=candidate.phase,
        tier="engine_source",
        raised_in=f"{mined.ENGINE_NAMES[engine]} release tables",
    )
