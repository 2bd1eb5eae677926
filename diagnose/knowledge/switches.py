"""An error no tier explains that names a component an engine variable switches on:
``Model Runner V2 supports pooling tasks [...], but this model selects ...`` and
``VLLM_USE_V2_MODEL_RUNNER``. The engine's own variable table says the switch exists in the
release, and that it is not off unless set: the failing code is most likely the component it
turns on, and starting once with it off is the test (and, where it starts, the fix).

Asked just before the message-words tier, and like it a lead at low confidence.
"""

from __future__ import annotations

import re
from functools import cache

from diagnose.core.explain import Candidate, IncidentView, lead
from diagnose.core.models import Finding, Patch
from diagnose.core.optionlink import words_of
from diagnose.engines import profiles
from diagnose.knowledge import mined

SIGNATURE = "engine-switch-code-path"
_SWITCH = re.compile(r"(?:VLLM|SGLANG|SGL)_(?:[A-Z0-9]+_)*?(?:USE|ENABLE)_[A-Z0-9_]+")
"""A variable that turns a component on (``VLLM_USE_DEEP_GEMM``, ``SGLANG_ENABLE_JIT_X``)."""
_NOT_OWN = frozenset(("vllm", "sglang", "sgl", "use", "enable"))
_ENGINE_VARIABLE = re.compile(
    rf"\b(?:{'|'.join(prefix for each in profiles() for prefix in each.env_prefixes)})[A-Z0-9_]+\b"
)
"""An engine variable a message names outright (the prefixes the engines' profiles declare)."""
MIN_OWN = 4
"""Two words of at least this length, besides the engine and the verb, name a component; a
version suffix alone (``VLLM_USE_V1``) names none."""
_PATH = re.compile(r"[^\s/]*/\S*")
MAX_READ = 1000
"""A message names its component early; an endless line is read no further."""


@cache
def _switches(engine: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The engine's boolean switches that are not off by default, with their own words."""
    found = []
    for name, variable in mined.env_vars(engine).items():
        if variable.type != "bool" or variable.default is False or not _SWITCH.fullmatch(name):
            continue
        own = frozenset(words_of(name) - _NOT_OWN)
        if sum(len(word) >= MIN_OWN for word in own) >= 2:
            found.append((name, own))
    return tuple(found)


def _in_release(name: str, engine: str, shown: str | None) -> bool:
    """The variable exists in the release the log shows (any mined release when it shows none)."""
    if shown is None:
        return True
    nearest = mined.nearest_version(engine, shown)
    return nearest is None or nearest in mined.env_vars(engine)[name].versions


def named_switch(text: str, engines: tuple[str, ...], shown: str | None) -> tuple[str, str] | None:
    """The one switch, with its engine, whose every own word the message says (its paths left
    out), of the release shown; None when none does, or several."""
    said = words_of(_PATH.sub(" ", text[:MAX_READ]))
    named = [
        (name, engine)
        for engine in engines
        for name, own in _switches(engine)
        if own <= said and _in_release(name, engine, shown)
    ]
    return named[0] if len(named) == 1 else None


def engine_switch_findings(incident: IncidentView) -> list[Finding]:
    """The first error read as the component an engine switch turns on, when its words name
    exactly one (of either engine's switches when the log does not say which engine ran:
    the variable's name does); its fix is the test: start with the switch off."""
    first: Candidate | None = next(iter(incident.readable()), None)
    if first is None:
        return []
    engines = mined.engines_to_read(incident.engine)
    named = named_switch(first.text, engines, incident.engine_version)  # the name says whose
    if named is None:
        return []
    name, engine = named
    if any(other != name for other in _ENGINE_VARIABLE.findall(first.text)):
        return []  # the message is about the variable it names, not a switch's component
    engine_name = mined.ENGINE_NAMES[engine]
    explanation = (
        f"The first error, `{first.text.strip()[:300]}`, names the component the engine "
        f"variable `{name}` switches on (on unless set off, in the releases that have it): the "
        f"failure is most likely in that component's path, which this {engine_name} release "
        f"does not handle for this model or setting. Start once with `{name}=0`: if the server "
        f"then starts, that is the cause. A newer {engine_name} release may have fixed the "
        "component; no signature or known issue knows this message, so treat it as a lead."
    )
    return [
        lead(
            first,
            signature=SIGNATURE,
            category="launch_args",
            title=f"The failure is in the component `{name}` switches on",
            explanation=explanation,
            patch=Patch(env_set={name: "0"}),
            patch_note=f"With `{name}=0` the engine takes the path it had before the component.",
            alternatives=[
                f"Keep the component and upgrade {engine_name}: the release notes or issues "
                "of the component name the fix."
            ],
            next_checks=[
                f"Start once with `{name}=0` in the server's environment; `env | grep {name}` "
                "where it starts shows whether something else sets it."
            ],
        )
    ]


FLAG_SIGNATURE = "engine-flag-feature-not-handled"
_NOT_HANDLED = re.compile(
    r"\bnot (?:yet )?(?:implemented|supported)\b|\bunsupported\b|\bnot handled\b", re.IGNORECASE
)
"""Words of a refusal: the path the message names is not there for this case."""
_FLAG_VERBS = frozenset(("enable", "disable", "no", "use", "allow"))


@cache
def _feature_flags(engine: str, version: str) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """The release's two-way switches (``--enable-x`` / ``--disable-x``) of a feature that is on
    by default or chosen by the engine (no default), each as the flag that turns it off, the
    one that turns it on and the feature's own words."""
    found = []
    for option in mined.flag_table(engine, version).options:
        if len(option.flags) != 2 or option.default not in (None, True):
            continue
        on, off = option.flags
        own = frozenset(words_of(on) - _FLAG_VERBS)
        if on.startswith("--enable-") and sum(len(word) >= MIN_OWN for word in own) >= 2:
            found.append((off, on, own))
    return tuple(found)


def _other_spellings(engine: str, on: str, off: str) -> list[str]:
    """How the mined releases that spell ``off`` otherwise turn ``on``'s feature off, each with
    the releases that do (``--no-enable-prefix-caching`` (0.6.6.post1 to 0.32.1))."""
    spans: dict[str, list[str]] = {}
    for version in mined.versions(engine):
        for option in mined.flag_table(engine, version).options:
            if len(option.flags) == 2 and option.flags[0] == on and option.flags[1] != off:
                spans.setdefault(option.flags[1], []).append(version)
    return [f"`{flag}` ({seen[0]} to {seen[-1]})" for flag, seen in spans.items()]


def named_feature_flag(
    text: str, engines: tuple[str, ...], shown: str | None
) -> tuple[str, str, str, str] | None:
    """The one feature flag whose every own word a refusal names, with the flag that turns it
    off, its engine and the release read (the one shown, else the newest mined); None when the
    message refuses nothing, or names none or several."""
    said_text = _PATH.sub(" ", text[:MAX_READ])
    if not _NOT_HANDLED.search(said_text):
        return None
    said = words_of(said_text)
    named = []
    for engine in engines:
        version = mined.nearest_version(engine, shown)  # the newest when none is shown
        if version is None:
            continue
        named += [
            (off, on, engine, version)
            for off, on, own in _feature_flags(engine, version)
            if own <= said
        ]
    return named[0] if len(named) == 1 else None


def flag_switch_findings(incident: IncidentView) -> list[Finding]:
    """The first error read as a feature a two-way flag turns on (on by default, or the
    engine's choice), when a refusal in it names exactly one: starting with the feature off is
    the test and, where it starts, the fix."""
    first: Candidate | None = next(iter(incident.readable()), None)
    if first is None:
        return []
    engines = mined.engines_to_read(incident.engine)
    named = named_feature_flag(first.text, engines, incident.engine_version)
    if named is None:
        return []
    off, on, engine, version = named
    engine_name = mined.ENGINE_NAMES[engine]
    others = [] if incident.engine_version else _other_spellings(engine, on, off)
    release = (
        f"{engine_name} {version}"
        if incident.engine_version
        else f"{engine_name} (as {version} spells it; the log shows no release)"
    )
    explanation = (
        f"The first error, `{first.text.strip()[:300]}`, says the path it took does not handle "
        f"the feature `{on}` turns on, which {release} turns on unless told otherwise (or "
        f"chooses for the model). The code in use (this release's, or a platform plugin's) "
        f"has no implementation of it for this case. Start with `{off}`: the server then takes "
        f"the path without the feature. A newer release may add it; no signature or known "
        "issue knows this message, so treat it as a lead."
    )
    return [
        lead(
            first,
            signature=FLAG_SIGNATURE,
            category="launch_args",
            title=f"The path in use does not handle the feature `{on}` turns on",
            explanation=explanation,
            patch=Patch(args_add=[off], args_remove=[on]),
            patch_note=(
                f"`{off}` is the release's own spelling; the feature costs only speed."
                + (f" Older releases spell it {', '.join(others)}." if others else "")
            ),
            next_checks=[
                f"`{engine} --help` (or the server's `non-default args` line): whether `{on}` "
                "is given, and how this release spells its opposite."
            ],
        )
    ]
