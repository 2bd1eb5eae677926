"""Renderers: a diagnosis as text for people, JSON for machines, Markdown and HTML for
postmortems, and the bare drop-in (``--patch-only``)."""

from __future__ import annotations

from collections.abc import Callable

from diagnose.core.models import Diagnosis
from diagnose.render.common import render_patch_only
from diagnose.render.html import render_html
from diagnose.render.json import render_json
from diagnose.render.markdown import render_markdown
from diagnose.render.text import render_text

RENDERERS: dict[str, Callable[..., str]] = {
    "text": render_text,
    "json": render_json,
    "markdown": render_markdown,
    "html": render_html,
    "dropin": render_patch_only,
}


def render(diagnosis: Diagnosis, fmt: str, **options: object) -> str:
    return RENDERERS[fmt](diagnosis, **options)
