"""The Python API: compile a kernel and load it on the GPU in one call.

Builds go through the same driver as `hopperc build`; a process keeps each
build it made (keyed by source text, defines and arch), so compiling the same
kernel again costs nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hopperc import driver
from hopperc.diagnostics import SourceFile, check_text
from hopperc.metadata import launch_metadata
from hopperc.runtime import Kernel


@dataclass(frozen=True)
class Compiled:
    built: driver.Built
    metadata: dict

    @property
    def cubin(self) -> bytes:
        return self.built.result.cubin


_builds: dict[tuple, Compiled] = {}


def as_source(source: str | Path | SourceFile) -> SourceFile:
    """A path (str or Path) to a .hk file, or the text of a kernel itself."""
    if isinstance(source, SourceFile):
        return source
    if isinstance(source, str) and ("\n" in source or "{" in source):
        check_text("<string>", source)
        return SourceFile("<string>", source)
    return driver.read_source(source)


def build(source: SourceFile, defines: dict[str, int] | None = None,
          arch: str = driver.DEFAULT_ARCH) -> Compiled:
    defines = dict(defines or {})
    key = (source.name, source.text, tuple(sorted(defines.items())), arch)
    if key not in _builds:
        built = driver.build(source, defines, arch)
        _builds[key] = Compiled(built, launch_metadata(
            built.generated.kernel, built.generated.launch, source.name, arch, defines,
            built.result.resources))
    return _builds[key]


def compile(source: str | Path | SourceFile, defines: dict[str, int] | None = None, *,
            arch: str = driver.DEFAULT_ARCH, device: int = 0) -> Kernel:
    """Build `source` (a .hk path or kernel text) and load it on GPU `device`."""
    compiled = build(as_source(source), defines, arch)
    return Kernel(compiled.cubin, compiled.metadata, device)
