"""Writing a file so that a reader sees the old one or the whole new one, never half."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """A temporary file beside ``path``, flushed to disk, then renamed over it.

    ``mode`` defaults to what the umask allows for a new file. Raises ``OSError``; the
    temporary file never outlives a failure."""
    write_bytes_atomically(path, text.encode("utf-8"), mode)


def write_bytes_atomically(path: Path, content: bytes, mode: int | None = None) -> None:
    """:func:`write_atomically` for bytes."""
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with open(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
