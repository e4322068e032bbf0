"""`rowmin(x)` and `argmax(x)`: row reductions through rowmax's path (ir.RowReduce,
and RowPartials for a row-major tile whose rows span warps). argmax carries
(value, column) pairs through a thread's slots and the quad's shuffles, ordered as
numpy.argmax: the larger value, a NaN above every number, ties to the lower
column. The front end, the C++, one NVRTC build, the simulator against numpy in
float64 with ties and NaN, and `check`."""
from __future__ import annotations

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend.nvrtc import compile_cuda
from hopperc.codegen.render import _environment
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import tile as printed
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import edit_error
from tests.sim import mutations as m

# A warpgroup's [64, 64] tile per block: rows' minimum, first maximum's column, maximum.
QUAD = """kernel row_stats(X: f32[M, 64], LO: f32[M], ARG: i32[M], HI: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    lo: f32[BM] = rowmin(x)
    i: f32[BM] = argmax(x)
    LO[tile.m] = lo
    ARG[tile.m] = i32(i)
    HI[tile.m] = rowmax(x)
}
"""

# [16, 256] tiles over 128 threads: each row spans the 4 warps, whose partials meet
# in shared memory; the reduction is stored directly.
WIDE = """kernel row_min_wide(X: f32[M, 256], LO: f32[M])
    tile(BM = 16) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 256]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 256] = sx
    LO[tile.m] = rowmin(x)
}
"""


def _with_ties(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Small integers (many equal values per row), a NaN row, an all-equal row,
    a row of -inf and one whose maximum is +inf twice."""
    x = np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)
    x[1, [7, 40]] = np.nan
    x[2] = 2.0
    x[3] = -np.inf
    x[4, [9, 33]] = np.inf
    return x


def test_front_end_types_and_prints_them():
    lowered = driver.lower(driver.check(SourceFile("stats.hk", QUAD)))
    reductions = [printed(s.init) for s in walk(lowered.body)
                  if isinstance(s, ir.TileDef) and isinstance(s.init, ir.RowReduce)]
    assert reductions == ["rowmin(x)", "argmax(x)"]


@pytest.mark.parametrize("old, new, message", [
    ("argmax(x)", "argmax(sx)", "argmax() takes a 2-D register tile of f32 by name"),
    ("rowmin(x)", "rowmin(x, x)", "rowmin() takes a 2-D register tile of f32 by name"),
    ("rowmin(x)", "rowmn(x)", "unknown function 'rowmn'; did you mean 'rowmin'?"),
])
def test_diagnostics(old, new, message):
    assert message in edit_error(QUAD, old, new).message


def test_negative_argmax_of_a_row_major_tile_is_refused_at_its_line():
    error = edit_error(WIDE, "LO[tile.m] = rowmin(x)", "LO[tile.m] = argmax(x)")
    assert error.span.line == 7
    assert "argmax() takes a warpgroup's [64, N] tile (wgmma layout); 'x' is a row-major " \
           "[16, 256] tile" in error.message


def test_codegen_min_from_infinity_and_argmax_shuffles_value_and_column():
    cuda = driver.generate(SourceFile("stats.hk", QUAD)).cuda
    assert "hk_v = fminf(hk_v, __shfl_xor_sync(0xffffffffu, hk_v, 2));" in cuda
    for lane in (1, 2):
        assert (f"const float hk_ov = __shfl_xor_sync(0xffffffffu, hk_v, {lane}); "
                f"const int hk_oi = __shfl_xor_sync(0xffffffffu, hk_i, {lane}); "
                "if (hk_argmax_takes(hk_ov, hk_oi, hk_v, hk_i))") in cuda
    # the slot's column is the wgmma layout's (codegen.elements.WGMMA_COL)
    assert "hk_i = (8 * ((hk_s) / 4) + 2 * (static_cast<int>(threadIdx.x) % 4) + (hk_s) % 2)" \
        in cuda
    wide = driver.generate(SourceFile("wide.hk", WIDE)).cuda
    assert "float hk_v = __int_as_float(0x7f800000);" in wide  # rowmin's identity, +inf
    assert "hk_v = fminf(hk_v, __shfl_xor_sync(0xffffffffu, hk_v, 16));" in wide


def test_the_pair_order_is_numpy_argmax_s_checked_by_nvrtc():
    """hk_argmax_takes(v, i, best, best_i): whether (v, i) replaces the pair kept.
    Over pairs of distinct columns it is a strict total order whose greatest pair
    is numpy.argmax's (larger value; a NaN above all; ties and NaNs to the lower
    column), so the quad's shuffles may combine in any order."""
    cases = [("2.0f, 5, 1.0f, 0", True), ("1.0f, 0, 2.0f, 1", False),  # larger value
             ("1.0f, 0, 1.0f, 3", True), ("1.0f, 3, 1.0f, 0", False),  # tie: lower column
             ("HK_NAN, 9, HK_INF, 0", True), ("HK_INF, 0, HK_NAN, 9", False),
             ("HK_NAN, 2, HK_NAN, 7", True), ("HK_NAN, 7, HK_NAN, 2", False),
             ("-HK_INF, 1, -HK_INF, 4", True), ("-HK_INF, 4, -HK_INF, 4", False),
             ("-0.0f, 3, 0.0f, 1", False)]  # -0 == +0: a tie
    asserts = "\n".join(f'static_assert({"" if want else "!"}hk_argmax_takes({args}), "{args}");'
                         for args, want in cases)
    compile_cuda(_environment().get_template("prelude.cu.j2").render() + f"""
#define HK_NAN __builtin_bit_cast(float, 0x7fc00000u)
#define HK_INF __builtin_bit_cast(float, 0x7f800000u)
{asserts}
extern "C" __global__ void k() {{}}
""", "argmax_order.cu")


def test_builds_without_spills():
    built = driver.build(SourceFile("stats.hk", QUAD))
    resources = built.result.resources
    assert resources is not None and resources.spill_stores == resources.spill_loads == 0
    assert "shfl.sync.bfly.b32" in built.result.ptx


def test_reference_is_numpy_in_float64_with_ties_and_nan():
    front_end = driver.check(SourceFile("stats.hk", QUAD))
    problem = make_problem(driver.lower(front_end), {"M": 128})
    x = problem.inputs["X"] = _with_ties((128, 64), 1)
    got = expected_outputs(front_end, problem)
    x64 = x.astype(np.float64)
    assert got["ARG"].tolist() == np.argmax(x64, axis=1).tolist()
    assert got["ARG"][1] == 7 and got["ARG"][2] == 0 and got["ARG"][3] == 0 and \
        got["ARG"][4] == 9
    clean = ~np.isnan(x64).any(axis=1)
    np.testing.assert_array_equal(got["LO"][clean], x64.min(axis=1)[clean])
    np.testing.assert_array_equal(got["HI"][clean], x64.max(axis=1)[clean])


def test_reference_of_the_warps_partials_is_numpy_min():
    front_end = driver.check(SourceFile("wide.hk", WIDE))
    problem = make_problem(driver.lower(front_end), {"M": 40})
    x = problem.inputs["X"] = np.random.default_rng(2).standard_normal((40, 256)).astype(
        np.float32)
    np.testing.assert_array_equal(expected_outputs(front_end, problem)["LO"],
                                  x.astype(np.float64).min(axis=1))


@pytest.mark.parametrize("text", [QUAD, WIDE])
def test_check_is_clean(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]


def test_negative_without_the_partials_barrier_the_stored_minimum_races():
    """The store reads every warp's partial: a run that records accesses without
    data must see them too."""
    front_end = driver.check(SourceFile("wide.hk", WIDE))
    lowered = driver.lower(front_end)
    (target,) = [s for s in walk(lowered.body) if isinstance(s, ir.NamedBarrier)
                 and "partials" in s.reason.subject]
    broken = m.edit(lowered, m.remove(ir.NamedBarrier, lambda s: s is target))
    report = simulate(broken, front_end, make_problem(broken, default_dims(broken)), 2, 30,
                      first_finding=True)
    assert report.findings and report.findings[0].category.value == "race"
