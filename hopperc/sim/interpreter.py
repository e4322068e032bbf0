"""`hopperc.simulate`: run a kernel on the CPU model over the user's own arrays
and return what it stores, so a test compares the kernel's math with its own
numpy or PyTorch reference without a GPU.

The run is `hopperc sim`'s on a problem made of the arrays (`user_inputs.py`):
the lowered kernel, every block of its grid, under seeded schedule 0 by default;
more schedules and the exhaustive search on request. Its findings (and a result
that differs from the kernel's own statements run in order) raise
`SimulationFailed`: outputs come back only from a clean run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from hopperc import diagnostics
from hopperc.diagnostics import SourceFile, as_source
from hopperc.diagnostics.arguments import checked_defines, checked_shapes, counted
from hopperc.diagnostics.located import CompileError
from hopperc.sim.findings import Finding
from hopperc.target import DEFAULT_STEPS


class SimulationFailed(Exception):
    """The simulation found a deadlock, race, missing fence, barrier misuse,
    out-of-range access or wrong result: `findings` has each, located;
    `str(error)` lists them as `hopperc sim` prints them."""

    findings: tuple[Finding, ...]

    def __init__(self, kernel: str, findings: list[Finding]):
        self.findings = tuple(findings)
        n = len(findings)
        lines = [f"the simulation of {kernel} found {n} problem{'s' * (n != 1)}:"]
        for finding in findings:
            lines += [line for line in finding.lines()
                      if not line.startswith("    ") and line != "  last events:"]
        super().__init__("\n".join(lines))


class SimulationIncomplete(Exception):
    """The work budget ran out before the schedules asked for ran to their end,
    with no finding: nothing wrong was seen, but no outputs either; the message
    says how far it got."""


def simulate(source: str | Path | SourceFile, inputs: Mapping[str, object],
             defines: Mapping[str, int] | None = None, *,
             shapes: Mapping[str, int] | None = None, schedules: int = 1, search: int = 0,
             steps: int | None = None, jobs: int = 1) -> dict[str, np.ndarray]:
    """See `hopperc.simulate`; `steps`: the work budget (default: `hopperc sim`'s).
    The caller's environment is left alone: numpy, loaded with this module, has
    already read OPENBLAS_NUM_THREADS (the command line sets it before)."""
    steps = DEFAULT_STEPS if steps is None else counted("steps", steps, 1)
    schedules, search = counted("schedules", schedules, 1), counted("search", search, 0)
    jobs = counted("jobs", jobs, 1)
    defines, shapes = checked_defines(defines), checked_shapes(shapes)
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs must be a mapping of tensor and scalar names to arrays and "
                        f"numbers (a dict), not {type(inputs).__name__}")
    from hopperc import driver
    kernel = None
    try:
        kernel = as_source(source)
        report = driver.simulate(kernel, defines, shapes, schedules, search, steps, jobs,
                                 inputs=inputs)
    except diagnostics.CompileError as exc:
        raise CompileError(exc, kernel) from None
    if report.findings:
        raise SimulationFailed(kernel.name, report.findings)
    if report.incomplete:
        raise SimulationIncomplete(
            f"the simulation of {kernel.name} stopped at its work budget of {steps:,} steps "
            f"after {report.schedules} of {schedules} schedules; pass a larger steps= or "
            "smaller arrays")
    return report.outputs
