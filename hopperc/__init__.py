"""hopperc: a compiler for NVIDIA Hopper kernels that writes all the synchronization."""
__version__ = "0.1.0"

from typing import TYPE_CHECKING


def compile(source, defines=None, *, arch="sm_90a", device=0):
    """Build a kernel (a .hk path or its text) and load it on a GPU: returns a
    `hopperc.runtime.Kernel`. See `hopperc.api.compile`."""
    from hopperc.api import compile as compile_and_load

    return compile_and_load(source, defines, arch=arch, device=device)


if TYPE_CHECKING:  # hopperc.simulate's types, without loading numpy on import
    from collections.abc import Mapping
    from pathlib import Path

    import numpy

    from hopperc.diagnostics import SourceFile


def simulate(source: "str | Path | SourceFile", inputs: "Mapping[str, object]",
             defines: "Mapping[str, int] | None" = None, *,
             shapes: "Mapping[str, int] | None" = None, schedules: int = 1, search: int = 0,
             steps: int | None = None, jobs: int = 1) -> "dict[str, numpy.ndarray]":
    """Run a kernel (a .hk path, its text or a SourceFile) on the CPU model over
    `inputs` (its tensors' arrays and scalar arguments, by name) and return every
    tensor it stores, by name, in its dtype: docs/sim.md, "Running your own inputs".
    Raises `hopperc.diagnostics.CompileError` for a bad kernel or input, and
    `hopperc.sim.interpreter.SimulationFailed` with the findings of an unclean run."""
    from hopperc.sim.interpreter import simulate as run_on_inputs

    return run_on_inputs(source, inputs, defines, shapes=shapes, schedules=schedules,
                         search=search, steps=steps, jobs=jobs)
