"""`rowmin(x)` and `argmax(x)`: row reductions through rowmax's path (ir.RowReduce,
and RowPartials for a row-major tile whose rows span warps). argmax carries
(value, column) pairs through a thread's slots and the quad's or the warp's
shuffles (then the warps' partials, values then columns), ordered as
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
from hopperc.sim.tile_values import combine_argmax, row_partials
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
WIDE = """kernel row_min_wide(X: f32[M, 256], LO: f32[M], ARG: i32[M])
    tile(BM = 16) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 256]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 256] = sx
    LO[tile.m] = rowmin(x)
    ARG[tile.m] = i32(argmax(x))
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
    # argmax across warps: pairs through the warp's 5 shuffles; lane 0 stores the
    # warp's value, and its column 4 warps x 16 rows x 4 bytes further
    assert "const int hk_oi = __shfl_xor_sync(0xffffffffu, hk_i, 16);" in wide
    assert "int hk_i = ((hk_s - hk_k * 2) * 128 + static_cast<int>(threadIdx.x) % 128);" in wide
    assert "+ 256u, static_cast<float>(hk_i));" in wide


def test_argmax_across_warps_keeps_each_warp_s_value_then_column():
    """[16, 256] over 128 threads: warp w holds columns 32w .. 32w + 31 and 128 +
    32w .. 128 + 32w + 31; its partial is its first maximum and that column."""
    x = np.zeros((2, 256), dtype=np.float32)
    x[0, [5, 40, 130, 232]] = [3, 3, 4, 4]  # warps 0, 1, 0 and 3
    x[1, [100, 70]] = np.nan  # warps 3 and 2
    parts = row_partials("argmax", x, 128, 4)
    assert parts.shape == (8, 4) and not parts[:, 2:].any()
    assert parts[:4, 0].tolist() == [4, 3, 0, 4] and parts[4:, 0].tolist() == [130, 40, 64, 232]
    assert np.isnan(parts[2:4, 1]).all() and parts[4:, 1].tolist() == [0, 32, 70, 100]
    assert combine_argmax(parts[:, :2]).tolist() == [130, 70]


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


@pytest.mark.parametrize("text", [QUAD, WIDE])
def test_builds_without_spills(text):
    built = driver.build(SourceFile("k.hk", text))
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


@pytest.mark.parametrize("seed", [2, 3])
def test_reference_of_the_warps_partials_is_numpy_min_and_argmax(seed):
    front_end = driver.check(SourceFile("wide.hk", WIDE))
    problem = make_problem(driver.lower(front_end), {"M": 40})
    x = problem.inputs["X"] = _with_ties((40, 256), seed)
    x[5, [250, 130]] = np.nan  # the first NaN in a later warp than the second
    got, x64 = expected_outputs(front_end, problem), x.astype(np.float64)
    assert got["ARG"].tolist() == np.argmax(x64, axis=1).tolist()
    clean = ~np.isnan(x64).any(axis=1)
    np.testing.assert_array_equal(got["LO"][clean], x64.min(axis=1)[clean])


@pytest.mark.parametrize("text", [QUAD, WIDE])
def test_check_is_clean(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]


@pytest.mark.parametrize("which", [0, 1])
def test_negative_without_a_partials_barrier_the_stored_reduction_races(which):
    """The store of rowmin (0) or argmax (1) reads every warp's partials."""
    front_end = driver.check(SourceFile("wide.hk", WIDE))
    lowered = driver.lower(front_end)
    target = [s for s in walk(lowered.body) if isinstance(s, ir.NamedBarrier)
              and "partials" in s.reason.subject][which]
    broken = m.edit(lowered, m.remove(ir.NamedBarrier, lambda s: s is target))
    report = simulate(broken, front_end, make_problem(broken, default_dims(broken)), 2, 30,
                      first_finding=True)
    assert report.findings and report.findings[0].category.value == "race"


WARPGROUPS = """kernel k(X: f32[M, 256], ARG: i32[M])
    tile(BM = 32) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 256]
    tma sx <- X[tile.m, 0]
    x: f32[16, 256] = sx[wg]
    ARG[BM * tile.m + 16 * wg : M] = i32(argmax(x))
}
"""


def test_each_warpgroup_reduces_its_own_argmax():
    """Each warpgroup's part of the partials ([2 * 4 warps, 16] of 2): its values,
    then its columns 4 rows (256 bytes) further; the columns count from the
    warpgroup's own first thread."""
    source = SourceFile("k.hk", WARPGROUPS)
    cuda = driver.generate(source).cuda
    assert "* 16 + hk_k) * 4) + 256u, static_cast<float>(hk_i));" in cuda
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 64})
    x = problem.inputs["X"] = _with_ties((64, 256), 4)
    assert expected_outputs(front_end, problem)["ARG"].tolist() == \
        np.argmax(x.astype(np.float64), axis=1).tolist()
    report = driver.simulate(source, None, {"M": 64}, seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]
