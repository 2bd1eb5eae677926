"""Where the assistant is and when to ask it: the ``[assistant]`` section of the user's config
file (``$XDG_CONFIG_HOME/diagnose/config.toml``), then the environment. Nothing is asked
unless ``--ask`` is given or ``when`` says so; the default is ``never``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from diagnose.assistant import config_path
from diagnose.core.errors import UserError

URL_VARIABLE = "DIAGNOSE_ASSISTANT_URL"
MODEL_VARIABLE = "DIAGNOSE_ASSISTANT_MODEL"
KEY_VARIABLE = "DIAGNOSE_ASSISTANT_API_KEY"
DEFAULT_TOKEN_BUDGET = 8000
"""The digest's size by default, in tokens (estimated as characters / 4)."""

When = Literal["never", "unknown", "always"]


class AssistantSection(BaseModel):
    """The config file's ``[assistant]`` section."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    url: str | None = Field(default=None, description="The base URL, up to /v1.")
    model: str | None = None
    api_key_env: str | None = Field(
        default=None, description="The NAME of the environment variable that holds the key."
    )
    timeout: float = Field(default=60.0, gt=0, le=600)
    max_tokens: int = Field(default=2048, gt=0, le=65536)
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, ge=500, le=200_000)
    when: When = "never"


@dataclass(frozen=True)
class AssistantSettings:
    """The section with the environment applied, and the key read."""

    url: str | None
    model: str | None
    api_key: str | None
    timeout: float
    max_tokens: int
    token_budget: int
    when: When


def read_section(path: Path) -> AssistantSection:
    """The file's ``[assistant]`` section (defaults when the file or the section is absent)."""
    if not path.is_file():
        return AssistantSection()
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UserError(f"{path}: cannot read the config file: {error}") from None
    try:
        return AssistantSection.model_validate(data.get("assistant", {}))
    except ValidationError as invalid:
        first = invalid.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(
            f"{path}: [assistant] {where}: {first['msg']}",
            help="keys: url, model, api_key_env, timeout, max_tokens, token_budget, when "
            "(never, unknown or always)",
        ) from None


def settings(environ: Mapping[str, str] | None = None) -> AssistantSettings:
    """The assistant's settings: the environment's variables over the config file's keys."""
    environ = os.environ if environ is None else environ
    section = read_section(config_path(environ))
    key_variable = section.api_key_env or KEY_VARIABLE
    return AssistantSettings(
        url=environ.get(URL_VARIABLE) or section.url,
        model=environ.get(MODEL_VARIABLE) or section.model,
        api_key=environ.get(KEY_VARIABLE) or environ.get(key_variable) or None,
        timeout=section.timeout,
        max_tokens=section.max_tokens,
        token_budget=section.token_budget,
        when=section.when,
    )
