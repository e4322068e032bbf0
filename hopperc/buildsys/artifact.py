"""`hopperc.build`: one kernel to a cubin and its launch metadata, through the
same cache as `hopperc build`, as a typed `Artifact`.

The entry is the command line's: the same key (source text, recorded name,
defines, target, toolchain identity) and the same contents, so a kernel the
command line built is a hit here and the other way round. As on the command
line, a hit loads neither the parser, the passes, the templates nor NVRTC:
everything here is imported cheaply, and the compiler only on a miss. The
cache keeps the cubin and the metadata, not the PTX or the CUDA: the PTX is
compiled again (refreshing the entry), the CUDA generated again on a hit (the
front end, passes and templates; not NVRTC).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hopperc import diagnostics
from hopperc.buildsys.cache import BuildCache, CachedBuild, build_key
from hopperc.buildsys.jobs import build_entry, replayed_warnings
from hopperc.diagnostics import SourceFile, as_source
from hopperc.diagnostics.arguments import checked_defines
from hopperc.diagnostics.located import CompileError, Diagnostic
from hopperc.diagnostics.problems import Problem
from hopperc.target import DEFAULT_ARCH, check_arch


@dataclass(frozen=True)
class BuildSummary:
    """What `hopperc build` prints for a kernel: its registers per thread, its
    spills (bytes stored and loaded; 0 and 0 is none) and its dynamic shared
    memory. Registers and spills are None where ptxas did not report them."""

    kernel: str  # the name in the source
    symbol: str  # the entry symbol in the cubin
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    shared_bytes: int
    nvrtc_ms: int  # the compile's time, when it was compiled (a hit keeps the first's)


@dataclass(frozen=True)
class Artifact:
    """A built kernel: what `hopperc build` writes (`cubin`, and `metadata`, the
    launch-metadata JSON beside it: docs/metadata.md), its cache `key` (a compile
    key to store with it: equal keys, equal builds), its summary and warnings.
    `ptx` and `cuda` are the generated PTX and CUDA when asked for, else None."""

    cubin: bytes = field(repr=False)
    metadata: dict[str, Any] = field(repr=False)
    key: str
    summary: BuildSummary
    warnings: tuple[Diagnostic, ...]
    cached: bool  # taken from the build cache, not compiled in this call
    ptx: str | None = field(default=None, repr=False)
    cuda: str | None = field(default=None, repr=False)


def build(source: str | os.PathLike[str], defines: Mapping[str, int] | None = None, *,
          arch: str = DEFAULT_ARCH, ptx: bool = False, cuda: bool = False, name: str | None = None,
          cache: bool = True) -> Artifact:
    """See `hopperc.build`. The compiler's user errors come out as
    `hopperc.CompileError`; a toolchain failure as `hopperc.ToolchainError`."""
    checked = checked_defines(defines)
    source_file = None
    try:
        source_file = as_source(source, name)
        return build_source(source_file, checked, arch=arch, ptx=ptx, cuda=cuda, cache=cache)
    except diagnostics.CompileError as exc:
        raise CompileError(exc, source_file) from None


def build_source(source: SourceFile, defines: dict[str, int], *, arch: str = DEFAULT_ARCH,
                 ptx: bool = False, cuda: bool = False, cache: bool = True) -> Artifact:
    """`source` built (or taken from the cache); a miss is stored. Raises the
    compiler's own exceptions."""
    check_arch(arch)
    key = build_key(source.text, source.name, defines, arch)
    store = BuildCache.from_environment() if cache else None
    entry = store.get(key) if store is not None and not ptx else None
    if entry is not None:
        generated = None
        if cuda:
            from hopperc import driver  # the front end, passes and templates; not NVRTC
            generated = driver.generate(source, defines, source.name).cuda
        return _artifact(entry, key, replayed_warnings(entry, source), source, cached=True,
                         cuda=generated)
    entry, problems, built = build_entry(source, defines, arch, source.name)
    if store is not None:
        if store.put(key, entry):
            store.prune()
        else:
            problems += (store.unwritable_warning(),)
        problems += store.remote_warnings()
    return _artifact(entry, key, problems, source, cached=False,
                     ptx=built.result.ptx if ptx else None,
                     cuda=built.generated.cuda if cuda else None)


def _artifact(entry: CachedBuild, key: str, problems: tuple[Problem, ...],
              source: SourceFile, *, cached: bool, ptx: str | None = None,
              cuda: str | None = None) -> Artifact:
    summary = entry.summary
    spills = summary["spills"] or (None, None)
    return Artifact(
        cubin=entry.cubin, metadata=json.loads(entry.metadata), key=key,
        summary=BuildSummary(summary["kernel"], summary["symbol"], summary["registers"],
                             spills[0], spills[1], summary["shared_bytes"],
                             summary["nvrtc_ms"]),
        warnings=tuple(Diagnostic.of(p, source) for p in problems), cached=cached,
        ptx=ptx, cuda=cuda)
