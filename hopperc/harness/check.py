"""`hopperc run`: the kernel on a GPU with random inputs, compared with the
reference of its own statements (the numpy reference the simulator checks
against: the front-end IR run one tile at a time, before any synchronization
was added)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hopperc import driver
from hopperc.buildsys.artifact import build_source
from hopperc.diagnostics import SourceFile
from hopperc.harness.torch_bridge import require_torch, to_device, to_host
from hopperc.runtime import Kernel
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import ReferenceUnavailable, expected_outputs
from hopperc.sim.values import tolerance

# The GPU sums products in another order than numpy: allow two ulps of the
# output (the simulator, which sums as numpy does, allows one).
GPU_ULPS = 4


@dataclass(frozen=True)
class OutputCheck:
    tensor: str
    max_error: float
    mismatches: int
    size: int
    first: tuple[int, ...] | None  # index of the first mismatch
    got: float | None
    want: float | None


@dataclass(frozen=True)
class RunResult:
    kernel: str
    dims: dict[str, int]
    grid: tuple[int, int, int]
    outputs: tuple[OutputCheck, ...]
    reference: str | None  # None: no reference for this kernel, with why in `unchecked`
    unchecked: str = ""
    tensors: dict | None = None  # the GPU tensors after the run, for callers to compare
    # The problem's arrays before the run (f32 numpy): a tensor the kernel adds into
    # (a TMA reduce-add) starts from them, so a caller's reference needs them.
    inputs: dict | None = None

    @property
    def passed(self) -> bool:
        return self.reference is not None and all(o.mismatches == 0 for o in self.outputs)


def run_check(source: SourceFile, defines: dict[str, int] | None = None,
              shapes: dict[str, int] | None = None, seed: int = 0,
              device: int = 0) -> RunResult:
    compiled = build_source(source, dict(defines or {}))
    lowered = driver.lower(driver.check(source, defines))
    dims = driver.problem_dims(lowered, shapes, source.name)
    problem = make_problem(lowered, dims, seed)
    kernel = Kernel(compiled.cubin, compiled.metadata, device)
    torch = require_torch()
    tensors = {name: to_device(torch, data, lowered.tensor(name).dtype, device)
               for name, data in problem.inputs.items()}
    launch = kernel.prepare(**tensors, **problem.scalars)
    launch()
    torch.cuda.synchronize(device)
    try:
        want = expected_outputs(driver.check(source, defines), problem)
    except ReferenceUnavailable as exc:
        return RunResult(lowered.name, dims, launch.grid, (), None, str(exc), tensors,
                         problem.inputs)
    outputs = tuple(compare(name, to_host(tensors[name]), expect, lowered.tensor(name).dtype)
                    for name, expect in want.items())
    return RunResult(lowered.name, dims, launch.grid, outputs, "numpy reference", "", tensors,
                     problem.inputs)


def compare(name: str, got: np.ndarray, want: np.ndarray, dtype) -> OutputCheck:
    error = np.abs(got - want)
    bad = ~(error <= tolerance(dtype, want, GPU_ULPS))  # NaN is a mismatch
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    worst = float(np.nanmax(error, initial=0.0)) if not np.isnan(error).any() else float("nan")
    return OutputCheck(name, worst, int(bad.sum()), int(bad.size), first,
                       None if first is None else float(got[first]),
                       None if first is None else float(want[first]))
