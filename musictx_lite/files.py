"""Writing a file so that a failure never leaves half of it: every record, table, score and checkpoint
the package writes goes through ``atomic_write``. ``sha256`` checks what was downloaded or shipped.

Notebook: book/using.md (resuming a run: a checkpoint survives an interrupted write).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``: a failed
    write leaves no half-written file, and an existing ``path`` stays as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix + ".part")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)                   # as open() would make it, not mkstemp's 0600
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in blocks of 1 MiB (a 57 MB download never sits in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
