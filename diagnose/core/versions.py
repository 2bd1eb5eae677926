"""Engine versions: read loosely, compared by their release numbers.

``0.5.10`` > ``0.5.9``; suffixes (``.post1``, ``rc1``, ``+cu129``, ``.dev3``) are tolerated and
ignored, so ``0.5.10.post1`` is a 0.5.10. A bound matches every release under it: ``max: 0.5``
takes in 0.5.23, ``max: 0.5.10`` takes in 0.5.10.post1. No dependency: ``packaging`` is not
one of ours.
"""

from __future__ import annotations

import re

_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def release(version: str) -> tuple[int, ...] | None:
    """The release numbers of ``version`` (``(0, 5, 10)``), or None when it has none."""
    match = _RELEASE.match(str(version))
    parts = match.group(1).split(".") if match else []
    if not parts or any(len(part) > 18 for part in parts):
        return None  # (a number of hundreds of digits is no release, and past what int reads)
    return tuple(int(part) for part in parts)


def _padded(numbers: tuple[int, ...], length: int) -> tuple[int, ...]:
    return numbers + (0,) * (length - len(numbers))


def compared(version: str, other: str) -> int | None:
    """-1, 0 or 1 as ``version`` is an earlier, the same or a later release than ``other``
    (``0.5.9`` < ``0.5.10``, ``2.5`` == ``2.5.0``); None when either has no release numbers."""
    have, want = release(version), release(other)
    if have is None or want is None:
        return None
    size = max(len(have), len(want))
    have, want = _padded(have, size), _padded(want, size)
    return (have > want) - (have < want)


def at_least(version: str, bound: str) -> bool:
    """``version`` is ``bound`` or later (``0.5.23`` >= ``0.5.10``)."""
    order = compared(version, bound)
    return order is None or order >= 0  # unreadable: claim nothing


def at_most(version: str, bound: str) -> bool:
    """``version`` is ``bound`` or one of its sub-releases, or earlier."""
    have, want = release(version), release(bound)
    if have is None or want is None:
        return True
    return _padded(have, len(want))[: len(want)] <= want


def is_version(text: str) -> bool:
    return release(text) is not None
