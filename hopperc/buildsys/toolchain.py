"""The compiler's identity, known without loading it: the files of the hopperc
package and the NVRTC it compiles with. The build cache keys on it (so an edit
or an upgrade misses), depfiles list it (so make rebuilds), and `--manifest`
records it. Reading it costs a few milliseconds: no parser, no passes, no NVRTC.
"""
from __future__ import annotations

import hashlib
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import hopperc
from hopperc import local_files

# The package data the compiler reads, by directory: the repository's top-level
# grammar/ and templates/ (see local_files.data_directory).
_DATA_SUFFIXES = {"grammar": ".lark", "templates": ".j2"}


class Nvrtc(NamedTuple):  # records on the cache-hit path are NamedTuples: cheap to define
    version: str  # the wheel's, e.g. "13.0.88"
    library: Path | None


def compiler_files() -> tuple[str, ...]:
    """Every file hopperc's behaviour depends on: its code, grammar and templates."""
    return tuple(path for _name, path in _compiler_files())


@lru_cache(maxsize=1)
def _compiler_files() -> tuple[tuple[str, str], ...]:
    """(name, path) of each compiler file, by name: its path in the installed
    package (`grammar/hk.lark`) wherever it lies, so a checkout and the wheel
    built from it hash alike."""
    files = _files_under(local_files.package_directory(), ".py", "")
    for name, suffix in _DATA_SUFFIXES.items():
        files += _files_under(str(local_files.data_directory(name)), suffix, name)
    return tuple(sorted(files))


def _files_under(root: str, suffix: str, prefix: str) -> list[tuple[str, str]]:
    files = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
        files += [(os.path.join(prefix, os.path.relpath(path, root)), path)
                  for path in (os.path.join(directory, n) for n in names if n.endswith(suffix))]
    return files


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the contents of the compiler's files (not their paths or times,
    so two checkouts of one commit agree). Hashing them takes ~10 ms, so the
    result is kept in the cache directory under the hash of their paths, sizes
    and mtimes: any change to a file hashes the contents again."""
    stats = hashlib.sha256()
    for path in compiler_files():
        stat = os.stat(path)
        stats.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    memo = local_files.cache_root() / "compiler" / stats.hexdigest()
    try:
        known = memo.read_text()
        if len(known) == 64:
            return known
    except (OSError, ValueError):  # missing, not a file, or not text: hashed again
        pass
    fingerprint = _hash_contents()
    local_files.store_quietly(memo, fingerprint.encode())
    return fingerprint


def _hash_contents() -> str:
    digest = hashlib.sha256()
    for name, path in _compiler_files():
        with open(path, "rb") as handle:
            data = handle.read()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


@lru_cache(maxsize=1)
def nvrtc() -> Nvrtc:
    """The NVRTC wheel on sys.path (the one cuda-bindings loads first), read from
    its dist-info; without the wheel, the library is loaded and asked."""
    for entry in sys.path:
        directory = Path(entry or ".")
        try:
            infos = sorted(name for name in os.listdir(directory)
                           if name.startswith("nvidia_cuda_nvrtc-")
                           and name.endswith(".dist-info"))
        except OSError:
            continue
        if infos:
            version = infos[-1].removeprefix("nvidia_cuda_nvrtc-").removesuffix(".dist-info")
            return Nvrtc(version, _wheel_library(directory, directory / infos[-1]))
    from hopperc.backend import nvrtc as backend
    major, minor = backend.nvrtc_version()
    return Nvrtc(f"{major}.{minor}", backend.library_path())


def _wheel_library(site: Path, info: Path) -> Path | None:
    """The libnvrtc the wheel installed, from its RECORD."""
    try:
        record = (info / "RECORD").read_text()
    except OSError:
        return None
    for line in record.splitlines():
        name = line.split(",", 1)[0]
        stem = name.rsplit("/", 1)[-1]
        if stem.startswith("libnvrtc.so") and (site / name).exists():
            return (site / name).resolve()
    return None


def identity() -> dict[str, str]:
    """What a build's result depends on besides its input: the cache key's part."""
    return {"hopperc": hopperc.__version__, "compiler": compiler_fingerprint(),
            "nvrtc": nvrtc().version}
