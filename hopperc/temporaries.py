"""Temporary files that name their writer, so a later process can tell a killed
writer's leftovers (SIGKILL, a crash, a power cut) from a live writer's.

A temporary for `dir/NAME` is `dir/.NAME.PID-START-NS-BOOT.RANDOM.tmp`: the
writer's process id, its start time (clock ticks since boot, so a reused pid
is a different owner), its pid namespace and the machine's boot. NAME is cut to
its first 128 bytes: the rest adds about 50 bytes, and a name near the file
system's limit (255 bytes) must still have a temporary. Its owner is
gone when the pid is not running, or runs a process started at another time.
A temporary of another boot or another pid namespace cannot be judged by its
pid: another boot is a reboot since or another machine writing into a shared
(network) directory, and the two look alike; another namespace is another
container. Such a temporary is taken for abandoned only after a day, longer
than any write.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from functools import lru_cache
from pathlib import Path

_NAME = re.compile(r"^\..+\.(?P<pid>\d+)-(?P<start>\d+)-(?P<ns>[0-9a-f]{8})-"
                   r"(?P<boot>[0-9a-f]{8})\.[A-Za-z0-9_]+\.tmp$")
_FOREIGN_AGE_SECONDS = 24 * 3600
_NAME_KEPT = 128  # bytes


def create(path: Path) -> tuple[int, str]:
    """An open, new temporary beside `path` (as `tempfile.mkstemp`: fd, name)."""
    pid = os.getpid()
    owner = f"{pid}-{_start_ticks(pid)}-{_pid_namespace()}-{_boot()}"
    name = os.fsdecode(os.fsencode(path.name)[:_NAME_KEPT])
    return tempfile.mkstemp(prefix=f".{name}.{owner}.", suffix=".tmp", dir=path.parent)


def abandoned(name: str, mtime: float) -> bool:
    """Whether `name` is a temporary of this module whose writer is gone."""
    match = _NAME.match(name)
    if match is None:
        return False
    if match["boot"] != _boot() or match["ns"] != _pid_namespace():
        return time.time() - mtime > _FOREIGN_AGE_SECONDS
    pid = int(match["pid"])
    if not _running(pid):
        return True
    start = _start_ticks(pid)
    return start != 0 and str(start) != match["start"]


def remove_abandoned(directory: Path) -> int:
    """Remove the abandoned temporaries in `directory`; returns how many. Never
    fails: a directory that cannot be read or a file that vanished is skipped."""
    removed = 0
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(".tmp")]
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and abandoned(entry.name,
                                                                   entry.stat().st_mtime):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _start_ticks(pid: int) -> int:
    """When `pid` started, in clock ticks since boot (0 where /proc is missing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return 0
    # The command name (field 2) may hold spaces and parentheses: count after its ')'.
    return int(stat[stat.rindex(b")") + 2:].split()[19])


@lru_cache(maxsize=1)
def _pid_namespace() -> str:
    try:
        return f"{os.stat('/proc/self/ns/pid').st_ino & 0xFFFFFFFF:08x}"
    except OSError:
        return "00000000"


@lru_cache(maxsize=1)
def _boot() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as handle:
            return hashlib.sha256(handle.read().strip()).hexdigest()[:8]
    except OSError:
        return "00000000"
