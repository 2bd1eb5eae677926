"""Records: one log line with what its format tells (time, host, rank, who wrote it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Origin = Literal["app", "systemd", "kernel", "journald", "gpu", "other"]


@dataclass(slots=True)
class Record:
    source: str
    line: int | None
    text: str
    """The message, without the journal and application prefixes."""
    raw: str
    """The whole line as it reads (control sequences removed)."""
    ts: datetime | None = None
    host: str | None = None
    unit: str | None = None
    rank: str | None = None
    """SGLang rank tags ('TP0', 'DP0 TP3') or the vLLM process name ('EngineCore_DP0')."""
    stream: str = ""
    """Who wrote the line: lines of one traceback share it."""
    origin: Origin = "app"
    engine: str | None = None
    cursor: str | None = None
    prefixed: bool = False
    """The line carries its application's own prefix (not a bare continuation line)."""
    invocation: str | None = None
    seq: int = 0
    """Position in the input, across sources: orders records whose events arrive late."""


@dataclass(slots=True)
class Event:
    """What signatures match: a single record, or a whole Python traceback."""

    records: list[Record]
    seq: int
    text: str = field(default="")

    def __post_init__(self) -> None:
        if not self.text:
            self.text = "\n".join(record.text for record in self.records)

    @property
    def first(self) -> Record:
        return self.records[0]

    @property
    def ts(self) -> datetime | None:
        return next((r.ts for r in self.records if r.ts is not None), None)

    def record_at(self, offset: int) -> Record:
        """The record that holds character ``offset`` of ``text``."""
        position = 0
        for record in self.records:
            position += len(record.text) + 1
            if offset < position:
                return record
        return self.records[-1]
