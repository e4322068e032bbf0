"""The build cache: a finished build (cubin, launch metadata, summary and
warnings) stored under the hash of everything it depends on.

The key covers the source text, the name recorded in the cubin, the defines,
the target and the toolchain's identity (hopperc's version and the contents
of its files, NVRTC's version), so a hit is the build hopperc would make.
Entries live in `HOPPERC_CACHE_DIR` (default: the user cache directory), and
optionally also on an HTTP server shared by several machines
(`HOPPERC_REMOTE_CACHE`, hopperc/buildsys/remote.py): the local tier is asked
first, a remote hit is kept locally, and a build made here is sent to both.

An entry is one file: a header naming its key and the size and SHA-256 of
each of its parts (the cubin, the metadata, the summary with the warnings),
then the parts. Reading checks all of it, so an entry that is cut
short, edited, or copied over another key's path is a miss, never served.
Concurrent processes are safe: an entry is written to a temporary file and
renamed into place, so a reader sees a whole entry or none. Pruning (least
recently used first, down to 90% of `HOPPERC_CACHE_MAX_SIZE`) runs under a
file lock so that two processes do not prune at once. Nothing found in the
cache directory stops a build: what cannot be read is a miss, what cannot be
written is skipped (the caller warns once).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from hopperc import local_files, temporaries
from hopperc.buildsys import toolchain
from hopperc.diagnostics.problems import Problem, warning

if TYPE_CHECKING:
    from hopperc.buildsys.remote import RemoteCache

FORMAT = 2
DEFAULT_MAX_SIZE = 1 << 30
_MAGIC = b"hopperc-cache 2\n"
_PARTS = ("cubin", "metadata", "record")  # in the order they follow the header
LARGEST_ENTRY = 1 << 30  # a cubin is a few MB; anything larger is not an entry
_STALE_TEMPORARY_SECONDS = 3600
LARGEST_SIZE = 1 << 63  # what a file system's sizes (off_t) can say
_SIZE_SETTING = "HOPPERC_CACHE_MAX_SIZE"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# a decimal number, a unit, and an optional `B` or `iB`: `500M`, `500MiB`, `1.5k`
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[kmgtKMGT]?)(?:[iI]?[bB])?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class CachedBuild(NamedTuple):
    cubin: bytes
    metadata: bytes  # the launch-metadata JSON, as written beside the cubin
    summary: dict  # kernel, registers, spills, shared memory, NVRTC time
    warnings: tuple[dict, ...] = ()  # Problem records


class CacheError(Exception):
    """A cache setting hopperc cannot use (the user's environment): `setting` the
    variable, `reason` why, `shown` its value as messages may show it (None: not
    shown, a secret). The message names the variable once:
    `HOPPERC_CACHE_MAX_SIZE='nan': expected a size like 500M, 500MiB or 2G`."""

    def __init__(self, setting: str, reason: str, shown: str | None = None):
        super().__init__(setting, reason, shown)
        self.setting, self.reason, self.shown = setting, reason, shown

    def __str__(self) -> str:
        return f"{self.setting}{'' if self.shown is None else '=' + repr(self.shown)}: " \
               f"{self.reason}"

    @property
    def detail(self) -> str:
        """The message without the variable (a command line names it itself)."""
        return self.reason if self.shown is None else f"{self.shown!r}: {self.reason}"


def build_key(source_text: str, recorded_name: str, defines: dict[str, int],
              arch: str) -> str:
    parts = {"format": FORMAT, "source": hashlib.sha256(source_text.encode()).hexdigest(),
             "recorded_name": recorded_name, "defines": sorted(defines.items()),
             "arch": arch, **toolchain.identity()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class BuildCache:
    """The local tier, and the remote one when there is one. `origin` says where
    the last `get` found its entry: "local", "remote" or None (a miss)."""

    def __init__(self, root: Path, max_size: int = DEFAULT_MAX_SIZE,
                 remote: RemoteCache | None = None):
        self.root = root
        self.max_size = max_size
        self.remote = remote
        self.origin: str | None = None

    @classmethod
    def from_environment(cls) -> BuildCache:
        """HOPPERC_CACHE_DIR, HOPPERC_CACHE_MAX_SIZE and the HOPPERC_REMOTE_CACHE
        settings; a setting that cannot be used is a CacheError."""
        max_size = parse_size(os.environ.get("HOPPERC_CACHE_MAX_SIZE", ""))
        remote = None
        if os.environ.get("HOPPERC_REMOTE_CACHE", "").strip():
            # urllib: only when asked for
            from hopperc.buildsys.remote import RemoteCache, RemoteSettingError
            try:
                remote = RemoteCache.from_environment()
            except RemoteSettingError as exc:
                raise CacheError(exc.setting, exc.reason, exc.shown) from None
        return cls(local_files.cache_root(), max_size, remote)

    def _path(self, key: str) -> Path:
        return self.root / "builds" / key[:2] / key

    def get(self, key: str) -> CachedBuild | None:
        self.origin = None
        entry = self._get_local(key)
        if entry is not None:
            self.origin = "local"
            return entry
        data = self.remote.get(key, LARGEST_ENTRY) if self.remote is not None else None
        entry = decode(data, key) if data is not None else None
        if entry is not None:
            self.origin = "remote"
            local_files.store_quietly(self._path(key), data)  # kept here for next time
        return entry

    def _get_local(self, key: str) -> CachedBuild | None:
        path = self._path(key)
        data = _read_regular_file(path)
        if data is None:
            return None
        entry = decode(data, key)
        if entry is None:
            _unlink(str(path))  # damaged or another key's: rebuilt and stored again
            return None
        try:
            os.utime(path)  # recently used: pruned last
        except OSError:
            pass
        return entry

    def put(self, key: str, entry: CachedBuild) -> bool:
        """Store an entry here and on the remote (unless it is read-only); returns
        whether the local tier took it (the remote's failure is its own)."""
        data = encode(key, entry)
        stored = local_files.store_quietly(self._path(key), data)
        if self.remote is not None:
            self.remote.put(key, data)
        return stored

    def unwritable_warning(self) -> Problem:
        """The `cache` warning for a local tier that did not take a build."""
        return warning("cache", f"cannot write the build cache in {self.root}; building "
                                "without it", None, "HOPPERC_CACHE_DIR")

    def remote_warnings(self) -> tuple[Problem, ...]:
        """The `cache` warning for the remote tier's first failure (the build went
        on without it), if it failed: what the command line and the API show."""
        if self.remote is None or not self.remote.failure:
            return ()
        return (warning("cache", f"the remote build cache failed ({self.remote.failure}); "
                                 "building without it", None, "HOPPERC_REMOTE_CACHE"),)

    def entries(self) -> list[os.DirEntry]:
        found = []
        try:
            shards = list(os.scandir(self.root / "builds"))
        except OSError:
            return []
        for shard in shards:
            if _is_directory(shard):
                try:
                    found += [e for e in os.scandir(shard.path) if _is_file(e)]
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
                return 0  # another process is pruning, or the lock cannot be made
            now = time.time()
            live, removed = [], 0
            for entry in self.entries():
                stat_result = _stat(entry)
                if entry.name.startswith("."):
                    # a killed writer's (older hopperc named no writer: those go by age)
                    if (temporaries.abandoned(entry.name, stat_result.st_mtime)
                            or now - stat_result.st_mtime > _STALE_TEMPORARY_SECONDS):
                        removed += _unlink(entry.path)
                else:
                    live.append((stat_result.st_mtime, stat_result.st_size, entry.path))
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
        """Remove every local entry; OSError when the cache's lock cannot be taken."""
        if not self.entries():
            return 0
        with self._exclusive(blocking=True) as held:
            if not held:
                raise OSError(f"cannot create its lock file {self.root / 'prune.lock'}")
            return sum(_unlink(entry.path) for entry in self.entries())

    @contextmanager
    def _exclusive(self, blocking: bool):
        """Yields whether this process holds the cache's pruning lock (False when
        another holds it, or when the lock file cannot be created)."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.root / "prune.lock"))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock.acquire(timeout=-1 if blocking else 0)
        except (Timeout, OSError):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()


def parse_size(text: str) -> int:
    """`500M`, `500MiB`, `500MB`, `2G`, `1.5k`, `1048576` (units of 1024); empty is
    the default. Anything else, a size that is not positive and one above
    LARGEST_SIZE, is a CacheError that says what is expected. The number is a
    Decimal (exact, of any length), never a float, which overflows."""
    if not text.strip():
        return DEFAULT_MAX_SIZE
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise CacheError(_SIZE_SETTING, "expected a size like 500M, 500MiB or 2G", text)
    size = Decimal(match["number"]) * _UNITS[match["unit"].upper()]
    if size > LARGEST_SIZE:
        raise CacheError(_SIZE_SETTING, "larger than any disk: at most 2**63 bytes (8 EiB)",
                         text)
    if size < 1:
        raise CacheError(_SIZE_SETTING, "the cache needs a positive size (unset it for the "
                         "default, 1G)", text)
    return int(size)


def encode(key: str, entry: CachedBuild) -> bytes:
    """An entry's bytes: the magic line, a header line (the key, and each part's
    name, size and SHA-256), then the parts."""
    record = json.dumps({"summary": entry.summary, "warnings": list(entry.warnings)},
                        sort_keys=True).encode()
    parts = {"cubin": entry.cubin, "metadata": entry.metadata, "record": record}
    header = {"key": key, "parts": [{"name": name, "size": len(parts[name]),
                                     "sha256": hashlib.sha256(parts[name]).hexdigest()}
                                    for name in _PARTS]}
    return _MAGIC + json.dumps(header).encode() + b"\n" + b"".join(parts[n] for n in _PARTS)


def decode(data: bytes, key: str) -> CachedBuild | None:
    """The entry `data` holds if it is whole and is `key`'s, else None."""
    if not data.startswith(_MAGIC):
        return None
    header_end = data.find(b"\n", len(_MAGIC))
    if header_end < 0:
        return None
    try:
        header = json.loads(data[len(_MAGIC):header_end])
        listed = header["parts"]
        if header["key"] != key or [p["name"] for p in listed] != list(_PARTS):
            return None
        parts, offset = {}, header_end + 1
        for part in listed:
            size, digest = part["size"], part["sha256"]
            if type(size) is not int or size < 0 or not _SHA256.fullmatch(digest):
                return None
            parts[part["name"]] = data[offset:offset + size]
            offset += size
            if hashlib.sha256(parts[part["name"]]).hexdigest() != digest:
                return None
        if offset != len(data):
            return None
        return _entry(parts)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _entry(parts: dict[str, bytes]) -> CachedBuild | None:
    """The parts as a CachedBuild, if each has the form the build writes."""
    record = json.loads(parts["record"])
    summary, warnings = record["summary"], record["warnings"]
    metadata = json.loads(parts["metadata"])
    if not (isinstance(summary, dict) and isinstance(warnings, list)
            and isinstance(metadata, dict)
            and all(isinstance(w, dict) and isinstance(w.get("rule"), str)
                    and isinstance(w.get("message"), str) for w in warnings)):
        return None
    # metadata that names a cubin (as `hopperc build` writes it) names this one
    digest = hashlib.sha256(parts["cubin"]).hexdigest()
    if metadata.get("cubin_sha256", digest) != digest:
        return None
    return CachedBuild(parts["cubin"], parts["metadata"], summary, tuple(warnings))


def _read_regular_file(path: Path) -> bytes | None:
    """The contents of `path` if it is a regular file of a plausible size (not a
    link, a directory, a FIFO or a device: an entry is never one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > LARGEST_ENTRY:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_directory(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # a link loop, or a name that vanished
        return False


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _stat(entry: os.DirEntry) -> os.stat_result:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return os.stat_result((0,) * 10)


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
        return 1
    except OSError:
        return 0
