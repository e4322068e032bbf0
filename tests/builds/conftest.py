"""A real build the cache, remote-cache and shard tests share: one NVRTC
compile per test process instead of one per test."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.builds.helpers import TMA_COPY, hopperc


class SharedBuild(NamedTuple):
    directory: Path  # holds k.hk, built from there as `k.hk`
    cache: Path  # the cache that build filled: one entry
    cubin: bytes

    def cache_copy(self, destination: Path) -> Path:
        """A cache of its own holding the build's entry (tests damage theirs)."""
        shutil.copytree(self.cache, destination)
        return destination

    def entry(self, cache: Path) -> Path:
        (path,) = [p for p in (cache / "builds").rglob("*") if p.is_file()]
        return path


@pytest.fixture(scope="session")
def shared_build(tmp_path_factory) -> SharedBuild:
    directory = tmp_path_factory.mktemp("shared-build")
    (directory / "k.hk").write_text(TMA_COPY)
    proc = hopperc("build", "k.hk", "-q", cwd=directory, cache=directory / "cache")
    assert proc.returncode == 0, proc.stderr
    return SharedBuild(directory, directory / "cache", (directory / "k.cubin").read_bytes())
