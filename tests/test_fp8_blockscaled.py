"""`sv[wg][:, None]`: a warpgroup's block of a 1-D shared buffer as a row vector
(a ring of BM row scales read by warpgroups of BM / W rows)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hopperc import driver
from hopperc.codegen.launch import launch_info
from hopperc.codegen.render import _Context
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs

# ------------------------------------------- a warpgroup's block of a 1-D buffer
RING = """\
kernel ring(X: f32[M, N], S: f32[M], Y: f32[M, N])
    tile(BM = 128, BN = 64) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, BN]
    shared ss: f32[BM]
    tma sx <- X[tile.m, 0]
    tma ss <- S[tile.m]
    x: f32[64, BN] = sx[wg]
    sx[wg] = x * VIEW
    tma Y[tile.m, 0] <- sx
}
"""


def test_a_warpgroup_reads_its_own_block_of_a_1d_buffer():
    """Row r of warpgroup w's 64 rows takes ss[64 w + r]: each row of Y is its row
    of X times its own scale."""
    text = RING.replace("VIEW", "ss[wg][:, None]")
    front_end = driver.check(SourceFile("ring.hk", text))
    problem = make_problem(driver.lower(front_end), {"M": 256, "N": 64})
    got = expected_outputs(front_end, problem)["Y"]
    np.testing.assert_array_equal(got, problem.inputs["X"] * problem.inputs["S"][:, None])
    report = driver.simulate(SourceFile("ring.hk", text), None, {"M": 256, "N": 64},
                             seeds=2, search=20)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_negative_a_1d_buffer_over_warpgroups_names_their_block():
    for view, message in [("ss[:, None]", "a vector of 128 broadcast over 64 rows"),
                          ("ss[1][:, None]", "'ss' has rank 1: index it with wg")]:
        with pytest.raises(CompileError, match=re.escape(message)):
            driver.check(SourceFile("ring.hk", RING.replace("VIEW", view)))


def test_a_row_vector_is_loaded_twice_per_thread_ahead_of_the_wgmma_slots():
    """A thread's 64 slots of a [64, N] wgmma tile lie in two rows: the row
    vector's two values are loaded once, not once per slot."""
    kernel = driver.lower(driver.check(SourceFile("ring.hk",
                                                  RING.replace("VIEW", "ss[wg][:, None]"))))
    store = next(s for s in walk(kernel.body) if isinstance(s, ir.SharedStore)
                 and s.dst.buffer == "sx")
    e = _Context(kernel, launch_info(kernel), "t.hk").per_element(store)
    assert e.hoisted.count("hk_ld_shared_f32(") == 2
    assert "hk_ld_shared" not in e.assign and "hk_row_vector0[(hk_k / 2) % 2]" in e.assign
