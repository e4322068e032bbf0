"""The build cache: a finished build (cubin, launch metadata, summary and
warnings) stored under the hash of everything it depends on.

The key covers the source text, the name recorded in the cubin, the defines,
the target and the toolchain's identity (hopperc's version and the contents
of its files, NVRTC's version), so a hit is the build hopperc would make.
Entries live in `HOPPERC_CACHE_DIR` (default: the user cache directory).
Concurrent processes are safe: an entry is written to a temporary file and
renamed into place, so a reader sees a whole entry or none, and each entry
carries the hash of its cubin (in its header and in its metadata), so a
damaged one is a miss. Pruning (least
recently used first, down to 90% of `HOPPERC_CACHE_MAX_SIZE`) runs under a
file lock so that two processes do not prune at once.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from hopperc import toolchain
from hopperc.build import temporaries

FORMAT = 1
DEFAULT_MAX_SIZE = 1 << 30
_MAGIC = b"hopperc-cache 1\n"
_STALE_TEMPORARY_SECONDS = 3600
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# a decimal number, a unit, and an optional `B` or `iB`: `500M`, `500MiB`, `1.5k`
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[kmgtKMGT]?)(?:[iI]?[bB])?")


class CachedBuild(NamedTuple):
    cubin: bytes
    metadata: bytes  # the launch-metadata JSON, as written beside the cubin
    summary: dict  # kernel, registers, spills, shared memory, NVRTC time
    warnings: tuple[dict, ...] = ()  # Problem records


class CacheError(Exception):
    """A cache setting hopperc cannot use (the user's environment)."""


def build_key(source_text: str, recorded_name: str, defines: dict[str, int],
              arch: str) -> str:
    parts = {"format": FORMAT, "source": hashlib.sha256(source_text.encode()).hexdigest(),
             "recorded_name": recorded_name, "defines": sorted(defines.items()),
             "arch": arch, **toolchain.identity()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class BuildCache:
    def __init__(self, root: Path, max_size: int = DEFAULT_MAX_SIZE):
        self.root = root
        self.max_size = max_size

    @classmethod
    def from_environment(cls) -> BuildCache:
        return cls(toolchain.cache_root(),
                   parse_size(os.environ.get("HOPPERC_CACHE_MAX_SIZE", "")))

    def _path(self, key: str) -> Path:
        return self.root / "builds" / key[:2] / key

    def get(self, key: str) -> CachedBuild | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        entry = _decode(data)
        if entry is None:
            path.unlink(missing_ok=True)  # damaged: rebuilt and stored again
            return None
        try:
            os.utime(path)  # recently used: pruned last
        except OSError:
            pass
        return entry

    def put(self, key: str, entry: CachedBuild) -> bool:
        """Store an entry; a cache that cannot be written is skipped (returns False)."""
        path = self._path(key)
        header = json.dumps({"metadata": entry.metadata.decode(), "summary": entry.summary,
                             "warnings": list(entry.warnings),
                             "cubin_sha256": hashlib.sha256(entry.cubin).hexdigest()})
        return toolchain.store_quietly(path, _MAGIC + header.encode() + b"\n" + entry.cubin)

    def entries(self) -> list[os.DirEntry]:
        found = []
        try:
            shards = list(os.scandir(self.root / "builds"))
        except OSError:
            return []
        for shard in shards:
            if shard.is_dir():
                try:
                    found += [e for e in os.scandir(shard.path) if e.is_file()]
                except OSError:
                    continue
        return found

    def size(self) -> tuple[int, int]:
        """(entries, bytes)."""
        sizes = [_stat(e).st_size for e in self.entries() if not e.name.startswith(".")]
        return len(sizes), sum(sizes)

    def prune(self) -> int:
        """Remove least recently used entries until the cache fits; returns how many."""
        with self._exclusive(blocking=False) as held:
            if not held:
                return 0  # another process is pruning
            now = time.time()
            live, removed = [], 0
            for entry in self.entries():
                stat = _stat(entry)
                if entry.name.startswith("."):
                    # a killed writer's (older hopperc named no writer: those go by age)
                    if (temporaries.abandoned(entry.name, stat.st_mtime)
                            or now - stat.st_mtime > _STALE_TEMPORARY_SECONDS):
                        removed += _unlink(entry.path)
                else:
                    live.append((stat.st_mtime, stat.st_size, entry.path))
            total = sum(size for _, size, _ in live)
            if total <= self.max_size:
                return removed
            for _, size, path in sorted(live):
                if total <= self.max_size * 9 // 10:
                    break
                removed += _unlink(path)
                total -= size
            return removed

    def clear(self) -> int:
        if not (self.root / "builds").is_dir():
            return 0
        with self._exclusive(blocking=True):
            return sum(_unlink(entry.path) for entry in self.entries())

    @contextmanager
    def _exclusive(self, blocking: bool):
        """Yields whether this process holds the cache's pruning lock."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / "prune.lock"))
        try:
            lock.acquire(timeout=-1 if blocking else 0)
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()


def parse_size(text: str) -> int:
    """`500M`, `500MiB`, `500MB`, `2G`, `1.5k`, `1048576` (units of 1024); empty is
    the default. Anything else, and a size that is not positive, is a CacheError
    that says what is expected."""
    if not text.strip():
        return DEFAULT_MAX_SIZE
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise CacheError(f"HOPPERC_CACHE_MAX_SIZE={text!r}: expected a size like 500M, "
                         "500MiB or 2G")
    size = int(float(match["number"]) * _UNITS[match["unit"].upper()])
    if size < 1:
        raise CacheError(f"HOPPERC_CACHE_MAX_SIZE={text!r}: the cache needs a positive "
                         "size (unset it for the default, 1G)")
    return size


def _decode(data: bytes) -> CachedBuild | None:
    if not data.startswith(_MAGIC):
        return None
    header_end = data.find(b"\n", len(_MAGIC))
    if header_end < 0:
        return None
    try:
        header = json.loads(data[len(_MAGIC):header_end])
        cubin = data[header_end + 1:]
        digest = hashlib.sha256(cubin).hexdigest()
        # metadata that names a cubin (as `hopperc build` writes it) names this one
        if digest != header["cubin_sha256"] or \
                json.loads(header["metadata"]).get("cubin_sha256", digest) != digest:
            return None
        return CachedBuild(cubin, header["metadata"].encode(), header["summary"],
                           tuple(header["warnings"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _stat(entry: os.DirEntry) -> os.stat_result:
    try:
        return entry.stat()
    except OSError:
        return os.stat_result((0,) * 10)


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
        return 1
    except OSError:
        return 0
