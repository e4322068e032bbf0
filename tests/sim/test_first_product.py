"""The first product of a loop overwrites an accumulator no code zeroed
(fold_zero_into_first_product): the simulator holds unwritten registers as NaN,
so a product that accumulated into them instead, or a loop that ran no
iteration over them, shows as a wrong result."""
from __future__ import annotations

from dataclasses import replace

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.passes.test_fold_zero_into_first_product import SCALAR_TRIPS
from tests.sim import mutations as m


def lowered(text: str) -> tuple[ir.Kernel, ir.Kernel]:
    front_end = driver.check(SourceFile("t.hk", text))
    return front_end, driver.lower(front_end)


def run(front_end: ir.Kernel, kernel: ir.Kernel, **scalars):
    problem = make_problem(kernel, default_dims(kernel))
    problem.scalars.update(scalars)
    return simulate(kernel, front_end, problem, 2, 0)


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_folded_loop_matches_the_reference_for_any_trip_count(trips):
    """n = 0 takes the zero path after the loop; n >= 1 starts from the
    overwriting product."""
    front_end, kernel = lowered(SCALAR_TRIPS)
    assert not run(front_end, kernel, n=trips).findings


def test_product_that_accumulates_into_unset_registers_is_a_wrong_result():
    front_end, kernel = lowered(SCALAR_TRIPS)

    def accumulate_always(s):
        if isinstance(s, ir.Mma) and s.overwrite_when is not None:
            return [replace(s, overwrite_when=None)]
        return None
    report = run(front_end, m.edit(kernel, accumulate_always), n=2)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 14  # the store of Y


def test_loop_that_runs_no_iteration_needs_the_zero_path():
    front_end, kernel = lowered(SCALAR_TRIPS)
    without = m.edit(kernel, lambda s: [] if isinstance(s, ir.IfThen)
                     and "<=" == getattr(s.cond, "op", None) else None)
    assert without != kernel
    report = run(front_end, without, n=0)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert not run(front_end, without, n=2).findings


def test_first_wgmma_without_a_fence_is_reported():
    """PTX wants a wgmma.fence before a warpgroup's first wgmma even when no
    code wrote its registers (the accumulator is unset)."""
    front_end, kernel = lowered(SCALAR_TRIPS)
    report = run(front_end, m.edit(kernel, m.remove(ir.WgmmaFence)), n=1)
    assert report.findings[0].category is Category.MISSING_FENCE
    assert "first wgmma has no wgmma.fence" in report.findings[0].message
