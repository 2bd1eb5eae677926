"""Renderers: a diagnosis as text for people, JSON for machines, Markdown and HTML for
postmortems, and the bare drop-in (``--patch-only``)."""

from __future__ import annotations

import importlib

from diagnose.core.models import Diagnosis

RENDERERS: dict[str, str] = {
    "text": "diagnose.render.text:render_text",
    "json": "diagnose.render.json:render_json",
    "markdown": "diagnose.render.markdown:render_markdown",
    "html": "diagnose.render.html:render_html",
    "dropin": "diagnose.render.common:render_patch_only",
    "dropin-json": "diagnose.render.common:render_patch_only_json",
}
"""Format name to ``module:function``, imported when used: a JSON report never loads rich."""


def render(diagnosis: Diagnosis, fmt: str, **options: object) -> str:
    module, _, function = RENDERERS[fmt].partition(":")
    renderer = getattr(importlib.import_module(module), function)
    text: str = renderer(diagnosis, **options)
    return text
