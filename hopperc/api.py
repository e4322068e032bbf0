"""`hopperc.compile`: build a kernel with `hopperc.build` (through the build
cache, so compiling a kernel built before, in this process or another, costs
a cache read) and load it on the GPU."""
from __future__ import annotations

import os
from collections.abc import Mapping

from hopperc.buildsys.artifact import build
from hopperc.runtime import Kernel
from hopperc.target import DEFAULT_ARCH


def compile(source: str | os.PathLike[str], defines: Mapping[str, int] | None = None, *,
            arch: str = DEFAULT_ARCH, device: int = 0) -> Kernel:
    """Build `source` (a .hk path or kernel text) and load it on GPU `device`."""
    artifact = build(source, defines, arch=arch)
    return Kernel(artifact.cubin, artifact.metadata, device)
