"""hopperc: a compiler for NVIDIA Hopper kernels that writes all the synchronization.

The Python API (docs/api.md): `build` a kernel to a cubin and its launch metadata
(no GPU needed), `compile` it and launch it on PyTorch tensors, `simulate` it on
the CPU model over numpy arrays. Importing hopperc loads nothing else: each name
loads what it needs on first use.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy

    from hopperc.buildsys.artifact import Artifact, BuildSummary
    from hopperc.diagnostics import SourceFile, ToolchainError
    from hopperc.diagnostics.located import CompileError, Diagnostic
    from hopperc.runtime.kernel import Kernel
    from hopperc.sim.interpreter import SimulationFailed, SimulationIncomplete

__version__ = "0.1.0"
__all__ = ["Artifact", "BuildSummary", "CompileError", "Diagnostic", "SimulationFailed",
           "SimulationIncomplete", "ToolchainError", "__version__", "build", "compile",
           "simulate"]

_HOME = {"Artifact": "hopperc.buildsys.artifact", "BuildSummary": "hopperc.buildsys.artifact",
         "CompileError": "hopperc.diagnostics.located",
         "Diagnostic": "hopperc.diagnostics.located", "ToolchainError": "hopperc.diagnostics",
         "SimulationFailed": "hopperc.sim.interpreter",
         "SimulationIncomplete": "hopperc.sim.interpreter"}


def build(source: str | os.PathLike[str], defines: Mapping[str, int] | None = None, *,
          arch: str = "sm_90a", ptx: bool = False, cuda: bool = False,
          name: str | None = None, cache: bool = True) -> Artifact:
    """Build a kernel (a .hk path, or its text: a str holding a newline, or a `{`
    but naming no file and not ending in `.hk`; docs/api.md) to a cubin and its
    launch metadata, through the build cache `hopperc build` uses; no GPU is
    needed. `defines` are the `-D` values; `ptx` and `cuda` also return the
    generated PTX and CUDA (the cache keeps neither: `ptx` compiles again with
    NVRTC, `cuda` generates the code again); `name` is the file name diagnostics
    and the cubin record (default: the path as given, or `<string>`);
    `cache=False` neither reads nor writes the cache. Raises `hopperc.CompileError`
    for the user's input (located, printing as the command line does),
    `hopperc.ToolchainError` when NVRTC fails, and TypeError or ValueError for a
    wrong argument."""
    from hopperc.buildsys.artifact import build as build_artifact

    return build_artifact(source, defines, arch=arch, ptx=ptx, cuda=cuda, name=name,
                          cache=cache)


def compile(source: str | os.PathLike[str], defines: Mapping[str, int] | None = None, *,
            arch: str = "sm_90a", device: int = 0) -> Kernel:
    """Build a kernel as `build` does (through the cache, so a kernel built before,
    in this process or another, costs a cache read) and load it on GPU `device`:
    returns a `hopperc.runtime.Kernel`, called with PyTorch tensors (docs/runtime.md)."""
    from hopperc.buildsys.artifact import build as build_artifact
    from hopperc.runtime import Kernel

    artifact = build_artifact(source, defines, arch=arch)
    return Kernel(artifact.cubin, artifact.metadata, device)


def simulate(source: str | os.PathLike[str] | SourceFile, inputs: Mapping[str, object],
             defines: Mapping[str, int] | None = None, *,
             shapes: Mapping[str, int] | None = None, schedules: int = 1, search: int = 0,
             steps: int | None = None, jobs: int = 1) -> dict[str, numpy.ndarray]:
    """Run a kernel (a .hk path, its text or a SourceFile) on the CPU model over
    `inputs` (its tensors' arrays and scalar arguments, by name) and return every
    tensor it stores, by name, in its dtype: docs/sim.md, "Running your own inputs".
    Raises `hopperc.CompileError` for a bad kernel or input,
    `hopperc.SimulationFailed` with the findings of an unclean run,
    `hopperc.SimulationIncomplete` when the work budget (`steps`) ran out first,
    and TypeError or ValueError for a wrong argument. It leaves `os.environ`
    alone: for one BLAS thread per process, as `hopperc sim` runs (faster on a
    busy machine), set OPENBLAS_NUM_THREADS=1 before numpy is first imported."""
    from hopperc.sim.interpreter import simulate as run_on_inputs

    return run_on_inputs(source, inputs, defines, shapes=shapes, schedules=schedules,
                         search=search, steps=steps, jobs=jobs)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'hopperc' has no attribute {name!r}")
    return getattr(import_module(_HOME[name]), name)

