"""Atomic output files: all of a build's outputs appear together or not at all."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(files: dict[Path, bytes]) -> None:
    """Write every file to a temporary beside it, then rename them all into place.

    A failure before the renames leaves no output (and removes stale ones), so a
    failed build never leaves a partial or out-of-date file behind.
    """
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            temps.append((temp, path))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        for temp, path in temps:
            os.replace(temp, path)
    except BaseException:
        for temp, _ in temps:
            Path(temp).unlink(missing_ok=True)
        raise


def remove_stale(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
