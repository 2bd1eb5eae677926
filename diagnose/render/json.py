"""The JSON contract (schema_version 1): one object."""

from __future__ import annotations

from diagnose.core.models import Diagnosis


def render_json(diagnosis: Diagnosis, **_: object) -> str:
    single_host = {"hosts", "fleet"} if diagnosis.hosts is None else None
    return diagnosis.model_dump_json(indent=2, exclude=single_host) + "\n"
