"""Secrets out of reports: tokens, API keys, credentials in flags, headers, URLs and env.

A redacted value becomes ``<redacted:KIND:N>``; the same secret gets the same N within one
report, so two mentions of one token are visibly the same token.
"""

from __future__ import annotations

import functools
import re
from enum import Enum
from typing import Any

from pydantic import BaseModel

from diagnose.core.models import Diagnosis

_SECRET_NAME = r"[A-Za-z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Za-z0-9_]*"

# (kind, pattern); the secret is the group named "secret".
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("hf_token", re.compile(r"(?P<secret>\bhf_[A-Za-z0-9]{20,})")),
    ("api_key", re.compile(r"(?P<secret>\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,})")),
    (
        "api_key",
        re.compile(
            r"(?P<secret>\b(?:ghp|gho|ghs|github_pat|glpat|xox[abp])[-_][A-Za-z0-9_-]{16,})"
        ),
    ),
    ("api_key", re.compile(r"(?P<secret>\bAKIA[0-9A-Z]{16})")),
    ("bearer", re.compile(r"(?i)\b(?:bearer|token)\s+(?P<secret>[A-Za-z0-9._~+/=-]{12,})")),
    (
        "authorization",
        re.compile(
            r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic\s+)?(?P<secret>(?!<redacted)[A-Za-z0-9._~+/=-]{8,})"
        ),
    ),
    (
        "flag",
        re.compile(
            r"(?i)--(?:api[-_]key|token|hf[-_]token|password|secret|admin[-_]api[-_]key)(?:=|\s+)[\"']?(?P<secret>(?!<redacted)[^\s\"',)]+)"
        ),
    ),
    (
        "url_password",
        re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^\s:/@]+:(?P<secret>[^\s@/]+)@"),
    ),
    (
        "env",
        re.compile(
            rf"(?P<name>\b{_SECRET_NAME})\s*(?:=|:)\s*[\"']?(?P<secret>(?!<redacted)[^\s\"',)]{{4,}})"
        ),
    ),
]


class Redactor:
    """Redacts strings, remembering which secret got which placeholder."""

    def __init__(self) -> None:
        self._placeholders: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def _placeholder(self, kind: str, secret: str) -> str:
        """The secret's placeholder; ``counts`` counts distinct secrets, not mentions."""
        if secret not in self._placeholders:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self._placeholders[secret] = f"<redacted:{kind}:{self.counts[kind]}>"
        return self._placeholders[secret]

    def text(self, value: str) -> str:
        for kind, pattern in _RULES:
            value = pattern.sub(functools.partial(self._replace, kind), value)
        return value

    def _replace(self, kind: str, match: re.Match[str]) -> str:
        whole, secret = match.group(0), match.group("secret")
        if secret.startswith("<redacted:") or secret in {"hf_...", "None", "null", "EMPTY"}:
            return whole
        start, end = match.span("secret")
        offset = match.start()
        return whole[: start - offset] + self._placeholder(kind, secret) + whole[end - offset :]

    def value(self, value: Any) -> Any:
        if isinstance(value, Enum):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self._env_entry(key, item) for key, item in value.items()}
        if isinstance(value, BaseModel):
            return value.model_copy(
                update={name: self.value(getattr(value, name)) for name in type(value).model_fields}
            )
        return value

    def _env_entry(self, key: Any, item: Any) -> Any:
        if isinstance(key, str) and isinstance(item, str) and re.fullmatch(_SECRET_NAME, key):
            return self._placeholder("env", item) if item else item
        return self.value(item)


def redact(diagnosis: Diagnosis) -> Diagnosis:
    """The same diagnosis with every secret replaced, and the counts of what was replaced."""
    redactor = Redactor()
    cleaned = redactor.value(diagnosis.model_copy(update={"redactions": {}}))
    return cleaned.model_copy(update={"redactions": dict(sorted(redactor.counts.items()))})
