"""A build killed (SIGKILL) between its renames: the metadata goes first and the
cubin last, so the pair left behind is detectably apart (the runtime refuses it,
make sees an old cubin); the next build writes a matching pair and removes the
killed build's temporaries, never a live writer's."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from hopperc import temporaries
from hopperc.buildsys.outputs import write_atomically
from hopperc.runtime.errors import MetadataError
from hopperc.runtime.kernel import check_pair, load
from tests.builds.helpers import TMA_COPY, hopperc

# `hopperc build` in a process that dies (as by SIGKILL) right after its first rename.
KILLED_AFTER_FIRST_RENAME = """
import os, sys
from hopperc.buildsys import outputs
from hopperc.cli import main
rename = outputs._rename
def rename_then_die(temp, path):
    rename(temp, path)
    os._exit(137)
outputs._rename = rename_then_die
sys.argv = ["hopperc", *sys.argv[1:]]
main()
"""


def _matching(directory) -> bool:
    meta = json.loads((directory / "k.json").read_text())
    return hashlib.sha256((directory / "k.cubin").read_bytes()).hexdigest() == \
        meta["cubin_sha256"]


def test_a_build_killed_between_renames_leaves_a_pair_the_runtime_refuses(tmp_path):
    (tmp_path / "k.hk").write_text(TMA_COPY)
    cache = tmp_path / "cache"
    assert hopperc("build", "k.hk", "-q", "-D", "BM=64", cwd=tmp_path,
                   cache=cache).returncode == 0
    old_cubin = (tmp_path / "k.cubin").read_bytes()
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_FIRST_RENAME, "build", "k.hk",
                             "-q", "-D", "BM=32"], cwd=tmp_path, capture_output=True,
                            env={**os.environ, "HOPPERC_CACHE_DIR": str(cache)})
    assert killed.returncode == 137, killed.stderr
    # The new metadata is in place, the old cubin (make's target) is not replaced.
    assert (tmp_path / "k.cubin").read_bytes() == old_cubin
    assert json.loads((tmp_path / "k.json").read_text())["constants"]["BM"] == 32
    assert not _matching(tmp_path)
    with pytest.raises(MetadataError, match=r"k\.json describes another cubin than "
                                            r".*k\.cubin.*rebuild with `hopperc build`"):
        load(tmp_path / "k.cubin")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert len(leftovers) == 1 and leftovers[0].startswith(".k.cubin.")

    # The next build (a cache hit: the killed build stored its entry) repairs the pair
    # and removes the dead writer's temporary.
    rebuilt = hopperc("build", "k.hk", "-D", "BM=32", cwd=tmp_path, cache=cache)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert _matching(tmp_path)
    check_pair((tmp_path / "k.cubin").read_bytes(), tmp_path / "k.cubin", tmp_path / "k.json")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == \
        ["k.cubin", "k.hk", "k.json"]


def test_metadata_without_a_cubin_hash_is_taken_as_it_is(tmp_path):
    (tmp_path / "k.json").write_text('{"schema": "hopperc.launch/2"}')
    check_pair(b"any cubin", tmp_path / "k.cubin", tmp_path / "k.json")


def test_the_runtime_reads_the_pair_while_no_build_can_rename_it(tmp_path, monkeypatch):
    """A build renames its pair under an exclusive lock of the directory; the
    runtime reads the two files under a shared one, so never one of each build
    (it would refuse such a pair as interrupted)."""
    from hopperc.runtime import kernel

    cubin = b"\x7fELF cubin"
    (tmp_path / "k.cubin").write_bytes(cubin)
    (tmp_path / "k.json").write_text(json.dumps(
        {"cubin_sha256": hashlib.sha256(cubin).hexdigest()}))
    renames_held_off = []

    def read_spec(path):  # between the two reads: could a build rename now?
        fd = os.open(tmp_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            renames_held_off.append(False)
        except BlockingIOError:
            renames_held_off.append(True)
        finally:
            os.close(fd)
        return "spec"

    monkeypatch.setattr(kernel, "read_spec", read_spec)
    assert kernel.read_pair(tmp_path / "k.cubin", tmp_path / "k.json") == (cubin, "spec")
    assert renames_held_off == [True]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    fd, live = temporaries.create(tmp_path / "k.cubin")
    os.close(fd)
    dead_pid = _dead_pid()
    # the same name as this process would give, for a pid that has exited
    dead = tmp_path / os.path.basename(live).replace(f".{os.getpid()}-", f".{dead_pid}-", 1)
    dead.write_bytes(b"partial")
    start = temporaries._NAME.match(os.path.basename(live))["start"]
    reused = tmp_path / os.path.basename(live).replace(f"-{start}-", f"-{int(start) + 1}-", 1)
    reused.write_bytes(b"a writer whose pid this process has since taken")
    unrelated = tmp_path / ".k.cubin.notes.tmp"
    unrelated.write_bytes(b"not a temporary of hopperc's")
    write_atomically({tmp_path / "k.json": b"{}", tmp_path / "k.cubin": b"new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [os.path.basename(live), unrelated.name, "k.cubin", "k.json"])


def _flipped(name: str, group: str) -> str:
    """`name` with one field of its owner changed."""
    match = temporaries._NAME.match(name)
    value = match[group]
    other = "f" * len(value) if value != "f" * len(value) else "0" * len(value)
    return name[:match.start(group)] + other + name[match.end(group):]


@pytest.mark.parametrize("field", ["boot", "ns"])
def test_a_temporary_of_another_boot_or_namespace_is_abandoned_only_when_old(tmp_path, field):
    """Another boot may be another machine writing into a shared directory now, as
    another namespace may be another container: their pids say nothing here."""
    fd, path = temporaries.create(tmp_path / "k.cubin")
    os.close(fd)
    name = os.path.basename(path)
    assert not temporaries.abandoned(name, mtime=0)  # this process's: alive
    now = time.time()
    assert not temporaries.abandoned(_flipped(name, field), mtime=now)
    assert temporaries.abandoned(_flipped(name, field), mtime=now - 2 * 24 * 3600)
    assert temporaries.abandoned(_flipped(name, field), mtime=0)


def test_the_build_cache_removes_a_killed_writers_temporaries(tmp_path):
    from hopperc.buildsys.cache import BuildCache, CachedBuild

    key = "ab" * 32
    shard = tmp_path / "builds" / "ab"
    shard.mkdir(parents=True)
    fd, live = temporaries.create(shard / key)
    os.close(fd)
    dead = shard / os.path.basename(live).replace(f".{os.getpid()}-", f".{_dead_pid()}-", 1)
    dead.write_bytes(b"half an entry")
    cubin = b"\x7fELF cubin"
    meta = json.dumps({"cubin_sha256": hashlib.sha256(cubin).hexdigest()}).encode()
    store = BuildCache(tmp_path)
    assert store.put(key, CachedBuild(cubin, meta, {"kernel": "k"}))
    assert sorted(p.name for p in shard.iterdir()) == sorted([key, os.path.basename(live)])
    assert store.get(key).cubin == cubin


def test_a_cache_entry_whose_metadata_names_another_cubin_is_a_miss(tmp_path):
    from hopperc.buildsys.cache import BuildCache, CachedBuild

    meta = json.dumps({"cubin_sha256": hashlib.sha256(b"another").hexdigest()}).encode()
    store = BuildCache(tmp_path)
    store.put("cd" * 32, CachedBuild(b"\x7fELF cubin", meta, {"kernel": "k"}))
    assert store.get("cd" * 32) is None


def test_an_output_whose_name_is_near_the_file_systems_limit_is_written(tmp_path):
    """The temporary's owner fields must not push its name past 255 bytes."""
    long = tmp_path / ("k" * 240 + ".cubin")
    write_atomically({long: b"cubin"})
    assert long.read_bytes() == b"cubin"
    assert [p.name for p in tmp_path.iterdir()] == [long.name]
