"""The platform plugins an engine runs through, and which of them a class belongs to.

vLLM runs on TPUs, Ascend NPUs and Gaudi HPUs through plugins (``tpu-inference``,
``vllm-ascend``, ``vllm-gaudi``) whose platform class the engine calls through its platform
interface. Each plugin release is made for one engine release: when the engine adds an argument
to a platform method, an older plugin's override refuses it (``TpuPlatform.get_attn_backend_cls()
takes 11 positional arguments but 12 were given``), and the fix is the plugin release made for
the installed engine, not an engine upgrade. ``knowledge/platform-plugins.yaml`` lists them;
the engine-source tier reads such a call with them.
"""

from __future__ import annotations

import re
from functools import cache

import yaml
from pydantic import BaseModel, ConfigDict

from diagnose.core.explain import Candidate
from diagnose.core.versions import at_least
from diagnose.knowledge.location import knowledge_dir
from diagnose.knowledge.mined import ENGINES

PLUGINS_NAME = "platform-plugins.yaml"
_PLUGIN_FRAME = re.compile(r"/(?:site|dist)-packages/(?P<module>[A-Za-z_]\w*)/")


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


def plugin_of(
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


def plugin_file(file: str) -> tuple[str, PlatformPlugin, str] | None:
    """The engine, the platform plugin and the module of a frame's file (without ``.py``) in a
    plugin's package, installed or a source checkout (``.../vllm-ascend/vllm_ascend/utils``);
    None for a file elsewhere."""
    parts = file.split("/")
    for engine in ENGINES:
        for plugin in platform_plugins(engine):
            if plugin.module in parts[:-1]:
                start = len(parts) - 1 - parts[::-1].index(plugin.module)
                return engine, plugin, ".".join(parts[start:])
    return None
