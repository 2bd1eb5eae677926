"""The one family of user errors, and the exit codes of the contract."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USER_ERROR = 2
    INTERNAL_ERROR = 3


class UserError(Exception):
    """A problem the user can fix: bad input, bad arguments, a bad signature file.

    The CLI prints ``message`` (and ``help`` when given) on one line and exits with 2.
    """

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.help = help

    def __str__(self) -> str:
        return f"{self.message} (help: {self.help})" if self.help else self.message
