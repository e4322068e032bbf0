"""Where hopperc's files lie on this machine, for the stages and the build
system alike: its package data (the grammar the parser reads, the templates the
renderer reads) and its cache directory (grammar tables, compiled templates,
builds), written into atomically.
"""
from __future__ import annotations

import os
from pathlib import Path

import hopperc


def package_directory() -> str:
    """The hopperc package that runs, its links resolved."""
    return os.path.realpath(os.path.dirname(hopperc.__file__))


def data_directory(name: str) -> Path:
    """`grammar` or `templates`: the repository's top-level directories, which the
    wheel ships inside the package (pyproject.toml maps them to hopperc.grammar
    and hopperc.templates). Installed from a wheel they lie in the package; run
    from a checkout (PYTHONPATH or an editable install), beside it. Found from
    the code that runs rather than by importing `hopperc.<name>`: beside another
    checkout's editable install, the import would find that checkout's files."""
    package = Path(package_directory())
    installed = package / name
    return installed if installed.is_dir() else package.parent / name


def cache_root() -> Path:
    """Where hopperc keeps what it can reuse (builds, grammar tables):
    `HOPPERC_CACHE_DIR`, else the user cache directory."""
    root = os.environ.get("HOPPERC_CACHE_DIR")
    if not root:
        import platformdirs
        root = platformdirs.user_cache_dir("hopperc", appauthor=False)
    return Path(root)


def store_quietly(path: Path, data: bytes) -> bool:
    """Write a cache file atomically (a temporary renamed into place, so readers
    see all of it or nothing); a cache that cannot be written is skipped. Killed
    writers' temporaries in the directory are removed."""
    from hopperc import temporaries

    temp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporaries.remove_abandoned(path.parent)
        fd, temp = temporaries.create(path)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
        temp = None
        return True
    except OSError:
        return False
    finally:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
