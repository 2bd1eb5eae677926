"""A call between the engine and a platform plugin's class that does not fit: the plugin
release and the engine release are out of step.

vLLM runs on TPUs, Ascend NPUs and Gaudi HPUs through plugins (``tpu-inference``,
``vllm-ascend``, ``vllm-gaudi``) whose platform class the engine calls through its platform
interface. Each plugin release is made for one engine release: when the engine adds an argument
to a platform method, an older plugin's override refuses it (``TpuPlatform.get_attn_backend_cls()
takes 11 positional arguments but 12 were given``), and the fix is the plugin release made for
the installed engine, not an engine upgrade. ``knowledge/platform-plugins.yaml`` lists them.
"""

from __future__ import annotations

import re
from functools import cache

import yaml
from pydantic import BaseModel, ConfigDict

from diagnose.core.explain import Candidate
from diagnose.core.models import Confidence, Finding, PackageAction, Role, Severity
from diagnose.core.versions import at_least
from diagnose.knowledge import mined
from diagnose.knowledge.location import knowledge_dir

PLUGINS_NAME = "platform-plugins.yaml"
_PLUGIN_FRAME = re.compile(r"/(?:site|dist)-packages/(?P<module>[A-Za-z_]\w*)/")
_GIVEN = re.compile(
    r"takes (?:from )?(?P<takes>\d+) (?:to \d+ )?positional arguments? but (?P<given>\d+)"
)


class PlatformPlugin(BaseModel):
    """A package that registers a platform with an engine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str
    module: str
    classes: tuple[str, ...]
    since: str | None = None
    """The first engine release whose class of that name is the plugin's."""


@cache
def platform_plugins(engine: str) -> tuple[PlatformPlugin, ...]:
    path = knowledge_dir() / PLUGINS_NAME
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return tuple(PlatformPlugin.model_validate(row) for row in (data or {}).get(engine, []))


def _plugin_of(
    owner: str, candidate: Candidate, engine: str, shown: str | None
) -> PlatformPlugin | None:
    """The plugin whose files the traceback shows, else the one that registers ``owner`` in
    the release shown (any release when none is shown)."""
    plugins = platform_plugins(engine)
    shown_modules = {
        m.group("module")
        for m in _PLUGIN_FRAME.finditer(f"{candidate.frame or ''}\n{candidate.text}")
    }
    for plugin in plugins:
        if plugin.module in shown_modules and owner in plugin.classes:
            return plugin
    for plugin in plugins:
        if owner in plugin.classes and (
            shown is None or plugin.since is None or at_least(shown, plugin.since)
        ):
            return plugin
    return None


def plugin_code_mismatch(
    owner: str, call: str, how: str, candidate: Candidate, engine: str, shown: str | None
) -> Finding | None:
    """``call`` (as the report writes it) of a platform plugin's class ``owner`` refused as
    ``how`` says (``takes 11 positional arguments but 12 were given``, ``got an unexpected
    keyword argument 'x'``, ``missing 1 required positional argument: 'x'``, or an attribute
    it lacks): the plugin and the engine are out of step. Which side is older follows from
    the refusal: more arguments than the class takes, or a keyword or attribute it lacks, is
    an engine newer than the plugin; a required argument the engine does not pass is a plugin
    newer than the engine. None when no listed plugin registers ``owner``."""
    plugin = _plugin_of(owner, candidate, engine, shown)
    if plugin is None:
        return None
    name = mined.ENGINE_NAMES.get(engine, engine)
    given = _GIVEN.search(how)
    plugin_newer = how.startswith("missing") or (
        given is not None and int(given.group("given")) < int(given.group("takes"))
    )
    release = f"{name} {shown}" if shown else f"the installed {name}"
    if plugin_newer:
        older = f"{release} is older than the {plugin.package} release installed"
        change = PackageAction(name=engine, spec="", action="upgrade")
        way = (
            f"Install the {name} release this {plugin.package} was made for, or the "
            f"{plugin.package} release made for {release}."
        )
    else:
        older = f"the {plugin.package} installed is older than {release}"
        change = PackageAction(name=plugin.package, spec="", action="upgrade")
        way = (
            f"Install the {plugin.package} release made for {release} (the plugin's release "
            f"notes name the {name} release each one pairs with), or the {name} release the "
            f"installed {plugin.package} was made for."
        )
    explanation = (
        f"{call} {how}. `{owner}` is the platform class of the {plugin.package} plugin "
        f"(`{plugin.module}`), which {name} calls through its platform interface; a plugin "
        f"release is made for one {name} release, and here the two do not fit: {older}. {way}"
    )
    return Finding(
        id="f0",
        signature=f"{engine}-platform-plugin-mismatch",
        category="kernel_build",
        severity=Severity.ERROR,
        role=Role.ROOT_CAUSE,
        title=f"The {plugin.package} plugin and {name} are out of step (`{owner}`)",
        explanation=explanation,
        confidence=Confidence.MEDIUM,
        evidence=[candidate.evidence],
        patch=None,
        patch_note="No setting makes a plugin fit another engine release: the pair does.",
        package=change,
        next_checks=[
            f"`pip show {engine} {plugin.package}`: the two versions, against the pairing the "
            "plugin's release notes give."
        ],
        phase=candidate.phase,
        tier="engine_source",
        raised_in=f"{plugin.package}, {plugin.module} ({owner})",
    )
