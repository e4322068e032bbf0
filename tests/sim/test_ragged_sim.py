"""Ragged boxes in the simulator: a `START : END` copy touches only the rows
[START, min(END, rows)) of its tensor: a load reads zeros for the rest of its
box, a store leaves every other row as it was. The reference and every
schedule agree (no finding), and the reference's result is the numpy one
worked out here; START < 0 is an out-of-range finding (the tensor map's view
clips only at END: runtime/ragged_view.py)."""
from __future__ import annotations

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.sim import mutations as m

UNTOUCHED = 7.0  # what Y holds before the kernel runs

COPY_ROWS = """\
kernel rows(X: bf16[M, N], Y: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[s + tile.m * BM : e, tile.n]
    tma Y[s + tile.m * BM : e, tile.n] <- buf
}
"""

# The load's whole box lands in Z: rows at or past END arrive as zeros.
ZERO_FILL = """\
kernel fill(X: bf16[M, N], Z: bf16[64, N], s: i32, e: i32)
    tile(BN = 64) grid(n: N / BN) threads 128
{
    shared buf: bf16[64, BN] swizzle 128B
    tma buf <- X[s : e, tile.n]
    tma Z[0, tile.n] <- buf
}
"""

DIMS = {"M": 150, "N": 64}
# (s, e): a partial box, an empty range, one row, END past the tensor, START
# past the tensor, END below START, several boxes ending inside the last one
RANGES = [(10, 40), (20, 20), (33, 34), (100, 500), (160, 170), (50, 30), (0, 150), (5, 149)]


def run(text: str, s: int, e: int, fill: float = 0.0):
    front_end = driver.check(SourceFile("t.hk", text))
    kernel = driver.lower(front_end)
    problem = make_problem(kernel, DIMS)
    problem.scalars.update(s=s, e=e)
    for name in problem.outputs:
        problem.inputs[name] = np.full_like(problem.inputs[name], fill)
    report = simulate(kernel, front_end, problem, 2, 200)
    return problem, report, expected_outputs(front_end, problem)


@pytest.mark.parametrize("s, e", RANGES)
def test_store_writes_only_rows_start_to_end(s, e):
    problem, report, out = run(COPY_ROWS, s, e, UNTOUCHED)
    assert not report.findings, report.findings
    x = problem.inputs["X"]
    want = np.full_like(x, UNTOUCHED)
    rows = slice(s, max(s, min(e, DIMS["M"])))
    want[rows] = x[rows]
    np.testing.assert_array_equal(out["Y"], want)


@pytest.mark.parametrize("s, e", RANGES)
def test_load_reads_zeros_at_or_past_end(s, e):
    problem, report, out = run(ZERO_FILL, s, e, UNTOUCHED)
    assert not report.findings, report.findings
    x = problem.inputs["X"]
    want = np.zeros((64, DIMS["N"]), dtype=np.float32)
    valid = min(64, max(0, min(e, DIMS["M"]) - s))
    want[:valid] = x[s:s + valid]
    np.testing.assert_array_equal(out["Z"], want)


def test_negative_start_is_an_out_of_range_access():
    _, report, _ = run(COPY_ROWS, -3, 40)
    assert {f.category for f in report.findings} == {Category.OUT_OF_RANGE}
    assert all(f.span.line == 5 and "starts at element -3" in f.message
               for f in report.findings)


READ_BACK = """\
kernel again(X: bf16[M, N], Y: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(one: 1) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    shared back: bf16[BM, BN] swizzle 128B
    tma buf <- X[0, 0]
    tma Y[s : e, 0] <- buf
    tma back <- Y[1, 0]
    tma X[1, 0] <- back
}
"""


def test_read_of_rows_a_ragged_store_reached_needs_its_plain_wait():
    """The store's rows [s, e) reach box 1 of Y for s = 70: the compiler, which
    cannot know s, waits for the store's global writes before the load; without
    that wait the simulator sees the load race with them."""
    front_end = driver.check(SourceFile("t.hk", READ_BACK))
    kernel = driver.lower(front_end)
    waits = [s for s in walk(kernel.body) if isinstance(s, ir.BulkWaitRead) and not s.read]
    assert len(waits) == 1
    without = m.edit(kernel, lambda s: [] if s is waits[0] else None)
    for lowered, races in ((kernel, False), (without, True)):
        problem = make_problem(lowered, DIMS)
        problem.scalars.update(s=70, e=100)
        report = simulate(lowered, front_end, problem, 4, 200)
        assert (Category.RACE in {f.category for f in report.findings}) is races
