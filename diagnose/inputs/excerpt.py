"""Chosen lines of a saved log, by number, read again after the diagnosis: what the
assistant's digest quotes. One pass over the file in chunks of whole lines; only the chunks
that hold a wanted line are split, so a large log costs little more than counting its lines."""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import dataclass

from diagnose.inputs.files import LogInput, raw_chunks
from diagnose.inputs.lineformat import clean

MAX_LINE_CHARS = 600
"""A longer line is cut here (the digest says how much was left out)."""


@dataclass(frozen=True)
class Excerpt:
    """Lines of one log by their 1-based number, and how many lines the log has."""

    source: str
    lines: dict[int, str]
    total: int


def shown(line: bytes) -> str:
    """A log line as the digest shows it: decoded, control sequences out, cut when long."""
    text = clean(line.rstrip(b"\r\n").decode("utf-8", errors="replace"))
    if len(text) > MAX_LINE_CHARS:
        text = f"{text[:MAX_LINE_CHARS]}…[+{len(text) - MAX_LINE_CHARS} chars]"
    return text


def read_excerpt(log: LogInput, wanted: Collection[int], head: int, tail: int) -> Excerpt:
    """The ``wanted`` lines of ``log``, its first ``head`` and last ``tail`` lines."""
    marks = sorted(wanted)
    kept: dict[int, str] = {}
    number = 1  # the number of the first line of the next chunk
    last_blocks: list[tuple[int, bytes]] = []  # enough trailing chunks to hold ``tail`` lines
    for chunk in raw_chunks(log):
        count = chunk.count(b"\n")
        end = number + count  # one past the chunk's last line
        index = bisect.bisect_left(marks, number)
        if number <= head or (index < len(marks) and marks[index] < end):
            for offset, line in enumerate(chunk.split(b"\n")[:count]):
                at = number + offset
                if at <= head or at in wanted:
                    kept[at] = shown(line)
        last_blocks.append((number, chunk))
        while len(last_blocks) > 1 and end - last_blocks[1][0] >= tail:
            last_blocks.pop(0)
        number = end
    total = number - 1
    for start, chunk in last_blocks:
        for offset, line in enumerate(chunk.split(b"\n")[: chunk.count(b"\n")]):
            if start + offset > total - tail:
                kept[start + offset] = shown(line)
    return Excerpt(log.name, dict(sorted(kept.items())), total)
