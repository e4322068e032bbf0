"""A loop split at its boundary iterations (split_boundary_iterations) computes
what the loop as written does, for any trip count; an interior that reaches
one iteration into the boundary drops the mask where it matters, and the
simulator's comparison with the reference shows it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from hopperc.ir import nodes as ir
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.passes.test_split_boundary_iterations import CAUSAL, KEY_BOUND, WINDOW, kernel
from tests.sim.test_first_product import lowered, run

SCALAR_TRIPS = kernel("        acc = acc + where(BN * j + col() < N, sx, 1.0)\n", trips="n",
                      params=", n: i32")


def interior_one_further(kernel: ir.Kernel) -> ir.Kernel:
    """The interior reaches one iteration into its boundary (J1 + 1 after it, or
    J0 - 1 before it), which gives that iteration up: the iteration runs
    without its mask."""
    def shifted(stmt: ir.ForLoop, field: str, by: int) -> ir.ForLoop:
        return replace(stmt, **{field: ir.ScalarOp("+", getattr(stmt, field), ir.const(by))})

    def block(b: ir.Block) -> ir.Block:
        out = list(b.stmts)
        for k, stmt in enumerate(out):
            if isinstance(stmt, ir.RoleBlock):
                out[k] = replace(stmt, body=block(stmt.body))
            if not (isinstance(stmt, ir.ForLoop) and stmt.split and stmt.split.interior):
                continue
            before = k > 0 and isinstance(out[k - 1], ir.ForLoop) and out[k - 1].split
            if before:
                out[k - 1], out[k] = shifted(out[k - 1], "stop", -1), shifted(stmt, "start", -1)
            else:
                out[k], out[k + 1] = shifted(stmt, "stop", 1), shifted(out[k + 1], "start", 1)
        return ir.Block(tuple(out))
    return replace(kernel, body=block(kernel.body))


@pytest.mark.parametrize("text", [KEY_BOUND, CAUSAL, WINDOW], ids=["key_bound", "causal", "window"])
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


@pytest.mark.parametrize("text", [KEY_BOUND, CAUSAL, WINDOW], ids=["key_bound", "causal", "window"])
def test_interior_one_iteration_too_long_is_a_wrong_result(text):
    front_end, kernel = lowered(text)
    report = run(front_end, interior_one_further(kernel))
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]


def _overlap():
    from tests.conftest import ROOT
    return lowered((ROOT / "bench" / "kernels" / "mha_fwd_overlap.hk").read_text())


@pytest.mark.parametrize("length", [100, 200, 300, 512])
def test_first_iteration_apart_matches_the_reference(length):
    """mha_fwd_overlap's loop from 1: its first iteration (P V overwrites O) is a
    part of its own; with 1 to 4 key tiles the parts run 0 to 3 iterations."""
    front_end, kernel = _overlap()
    problem = make_problem(kernel, {**default_dims(kernel), "L": length, "H": 1})
    report = simulate(kernel, front_end, problem, 2, 0)
    assert report.ok, [f.headline() for f in report.findings]


def test_interior_taking_the_first_iteration_is_a_wrong_result():
    """An interior that starts one iteration early runs j == 1 accumulating into
    an O that nothing zeroed."""
    front_end, kernel = _overlap()
    problem = make_problem(kernel, {**default_dims(kernel), "L": 512, "H": 1})
    report = simulate(interior_one_further(kernel), front_end, problem, 2, 0)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
