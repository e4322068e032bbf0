"""Output files a build can trust: all of a build's outputs appear together or
not at all, with the usual permissions, and a clear error when they cannot be
written.

A build writes each file to a temporary beside it and renames them into place;
the renames of one build hold an exclusive lock on the directory, so two
processes writing the same outputs leave the cubin and the metadata of one
build, never one of each. A failure (or SIGINT/SIGTERM, which the command
line turns into an exception) before the renames removes the temporaries and
leaves the previous outputs as they were.

Only SIGKILL (or a crash) can stop a build between two renames. The build
renames the metadata first and the cubin last, so such a stop leaves the old
cubin, older than its source, beside new metadata whose `cubin_sha256` does not
match it: make and ninja build it again, and the runtime refuses the pair. The
killed build's temporaries name their writer (`hopperc.temporaries`); the next
write into the directory removes those whose writer is gone.
"""
from __future__ import annotations

import fcntl
import os
import signal
import threading
from contextlib import ExitStack, contextmanager
from functools import lru_cache
from pathlib import Path

from hopperc import temporaries
from hopperc.diagnostics import CompileError


class OutputError(CompileError):
    """An output cannot be written: a path below a regular file, a read-only
    directory, a full disk. The user's environment, reported like their input."""

    rule = "output"


_cleaned: set[Path] = set()


def write_atomically(files: dict[Path, bytes], last: Path | None = None) -> None:
    """Write `files` together. `last` is renamed after the others: the file a
    build tool compares with its inputs."""
    temps: list[tuple[str, Path]] = []
    for directory in {path.parent for path in files} - _cleaned:
        temporaries.remove_abandoned(directory)
        _cleaned.add(directory)  # once per process: a library build writes many kernels
    try:
        for path, data in files.items():
            temps.append((_write_temporary(path, data), path))
        with ExitStack() as held:
            for directory in sorted({path.parent for path in files}):
                held.enter_context(_locked(directory))
            held.enter_context(_signals_deferred())
            for temp, path in sorted(temps, key=lambda pair: pair[1] == last):
                _rename(temp, path)
    except BaseException:
        for temp, _ in temps:
            Path(temp).unlink(missing_ok=True)
        raise


def _write_temporary(path: Path, data: bytes) -> str:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = temporaries.create(path)
    except OSError as exc:
        raise _output_error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            # mkstemp makes 0600; an output gets what any new file gets.
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _output_error(path, exc) from None
        raise
    return temp


def _rename(temp: str, path: Path) -> None:
    try:
        os.replace(temp, path)
    except OSError as exc:
        raise _output_error(path, exc) from None


@contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM wait until the renames are done: an interrupt between
    two renames would leave one build's cubin beside another's metadata."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deferred = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, deferred)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _locked:
    """An exclusive advisory lock on a directory while its outputs are renamed."""

    def __init__(self, directory: Path):
        self.directory = directory

    def __enter__(self):
        self.fd = os.open(self.directory, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_exc) -> None:
        os.close(self.fd)  # closing releases the lock


def _output_error(path: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc)
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        reason = f"{blocker} is a file, not a directory"
    return OutputError(None, f"cannot write {path}: {reason}", file=str(path))


@lru_cache(maxsize=1)
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
