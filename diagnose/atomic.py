"""Writing a file so that a reader sees the old one or the whole new one, never half."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def write_atomically(
    path: Path, text: str, mode: int | None = None, errors: str = "strict"
) -> None:
    """A temporary file beside ``path``, flushed to disk, then renamed over it.

    A symbolic link is followed, so the link stays and its target gets the new text. An
    existing regular file keeps its mode and owner unless ``mode`` is given; a new one gets
    ``mode``, or what the umask allows. A device or a FIFO (``/dev/null``, ``/dev/stdout``,
    a named pipe) is written in place: renaming over it would replace the device with a file.
    Raises ``OSError`` (``IsADirectoryError`` for a directory); the temporary file never
    outlives a failure. ``errors="surrogateescape"`` writes back bytes that were read that
    way (unit files that are not UTF-8)."""
    write_bytes_atomically(path, text.encode("utf-8", errors), mode)


_TEMPORARY_ROOM = 255 - len("..XXXXXXXX.tmp")


def write_bytes_atomically(path: Path, content: bytes, mode: int | None = None) -> None:
    """:func:`write_atomically` for bytes."""
    target = Path(os.path.realpath(path))
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(21, "is a directory", str(path))
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(target, content)
        return
    # the temporary name is the target's with 14 bytes more: cut so that it fits in 255
    name = os.fsencode(target.name)[:_TEMPORARY_ROOM].decode("utf-8", "ignore")
    import tempfile  # only here: a run that writes no file does not load it (nor shutil)

    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".tmp")
    try:
        with open(descriptor, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None and existing is not None:
            mode = stat.S_IMODE(existing.st_mode)
        elif mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        if existing is not None and (existing.st_uid, existing.st_gid) != _own_ids():
            _keep_owner(temporary, existing)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_in_place(target: Path, content: bytes) -> None:
    """A character device or FIFO: opened for writing as it is (never created, never
    truncated: neither has content to keep or lose)."""
    descriptor = os.open(target, os.O_WRONLY | os.O_NOCTTY)
    with open(descriptor, "wb") as handle:
        handle.write(content)


def _own_ids() -> tuple[int, int]:
    return os.geteuid(), os.getegid()


def _keep_owner(temporary: str, existing: os.stat_result) -> None:
    """Give the new file the old one's owner and group where we may (as root; a group we
    are in); otherwise it belongs to us, as any rewritten file would."""
    try:
        os.chown(temporary, existing.st_uid, existing.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.chown(temporary, -1, existing.st_gid)
