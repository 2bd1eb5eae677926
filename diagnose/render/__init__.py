"""Renderers: a diagnosis as text for people, JSON for machines, Markdown for postmortems."""

from __future__ import annotations

import importlib

from diagnose.core.models import Diagnosis

RENDERERS: dict[str, str] = {
    "text": "diagnose.render.text:render_text",
    "json": "diagnose.render.json:render_json",
    "markdown": "diagnose.render.markdown:render_markdown",
}
"""Format name to ``module:function``, imported when used: a JSON report never loads rich."""


def render(diagnosis: Diagnosis, fmt: str, **options: object) -> str:
    module, _, function = RENDERERS[fmt].partition(":")
    renderer = getattr(importlib.import_module(module), function)
    text: str = renderer(diagnosis, **options)
    return text
