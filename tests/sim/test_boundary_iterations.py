"""A loop split at its boundary iterations (split_boundary_iterations) computes
what the loop as written does, for any trip count; an interior that reaches
one iteration into the boundary drops the mask where it matters, and the
simulator's comparison with the reference shows it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.passes.test_split_boundary_iterations import CAUSAL, KEY_BOUND, kernel

SCALAR_TRIPS = kernel("        acc = acc + where(BN * j + col() < N, sx, 1.0)\n", trips="n",
                      params=", n: i32")


def lowered(text: str) -> tuple[ir.Kernel, ir.Kernel]:
    front_end = driver.check(SourceFile("t.hk", text))
    return front_end, driver.lower(front_end)


def run(front_end: ir.Kernel, kernel: ir.Kernel, **scalars):
    problem = make_problem(kernel, default_dims(kernel))
    problem.scalars.update(scalars)
    return simulate(kernel, front_end, problem, 2, 0)


def interior_one_further(kernel: ir.Kernel) -> ir.Kernel:
    """The interior ends at J1 + 1 and the boundary starts there: the first
    boundary iteration runs without its mask."""
    def block(b: ir.Block) -> ir.Block:
        out = []
        for stmt in b.stmts:
            if isinstance(stmt, ir.ForLoop) and stmt.split is not None:
                bound = stmt.stop if stmt.split.interior else stmt.start
                later = ir.ScalarOp("+", bound, ir.const(1))
                stmt = replace(stmt, stop=later) if stmt.split.interior else \
                    replace(stmt, start=later)
            elif isinstance(stmt, ir.RoleBlock):
                stmt = replace(stmt, body=block(stmt.body))
            out.append(stmt)
        return ir.Block(tuple(out))
    return replace(kernel, body=block(kernel.body))


@pytest.mark.parametrize("text", [KEY_BOUND, CAUSAL], ids=["key_bound", "causal"])
def test_split_loop_matches_the_reference(text):
    front_end, kernel = lowered(text)
    assert any(isinstance(s, ir.ForLoop) and s.split for s in kernel.body.stmts)
    report = run(front_end, kernel)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("trips", [0, 1, 2, 4])
def test_any_trip_count_matches_the_reference(trips):
    """Default N ends in a partial tile: with 0 or 1 trips the interior is empty
    or the boundary holds every iteration; past N / BN tiles are all masked."""
    front_end, kernel = lowered(SCALAR_TRIPS)
    report = run(front_end, kernel, n=trips)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("text", [KEY_BOUND, CAUSAL], ids=["key_bound", "causal"])
def test_interior_one_iteration_too_long_is_a_wrong_result(text):
    front_end, kernel = lowered(text)
    report = run(front_end, interior_one_further(kernel))
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
