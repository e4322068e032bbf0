"""Row reductions of row-major tiles whose rows span warps (samples/softmax_wide.hk:
[16, 256] tiles over 128 threads, each row over all 4 warps): each warp reduces
its columns (two slots per thread, then 5 shuffles) and lane 0 stores the warp's
partial; the statement that uses the reduction combines the 4 partials from
shared memory, after a barrier the compiler places. Every thread holds every
row of the vectors (Layout.EVERY_ROW)."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.reference import expected_outputs
from hopperc.sim.tile_values import row_partials
from tests.conftest import ROOT, edit_error, filecheck, ir_after
from tests.sim import mutations as m

SAMPLE = ROOT / "samples" / "softmax_wide.hk"
TEXT = SAMPLE.read_text()


def test_partials_of_each_warp_and_row():
    """Element (r, c) of a [2, 256] tile over 128 threads lies in thread c % 128,
    so warp w holds columns 32w .. 32w + 31 and 128 + 32w .. 128 + 32w + 31;
    rows are padded with zeros to the width given."""
    values = np.arange(2 * 256, dtype=np.float32).reshape(2, 256)
    got = row_partials("sum", values, 128, 4)
    for w in range(4):
        cols = np.r_[32 * w:32 * w + 32, 128 + 32 * w:128 + 32 * w + 32]
        assert got[w, :2].tolist() == values[:, cols].sum(axis=1).tolist()
    assert not got[:, 2:].any()
    # row 0 holds 0 .. 255: warp w's largest is column 128 + 32w + 31
    assert row_partials("max", values, 128, 4)[:, 0].tolist() == [159, 191, 223, 255]


def test_partials_barriers_and_combine(tmp_path):
    """Per iteration: the partials of rowmax(x), a barrier (their reads come from
    other warps), the combine; the partials of rowsum(p), a barrier, the combine.
    Two barriers in all: the second also orders the first combine's reads before
    the next iteration's partials of x are stored, and the first the reads of p's
    partials before they are stored again. The buffers are [4 warps, 16 rows]."""
    filecheck(ir_after(TEXT), """
CHECK: shared x_rowmax_partials: f32[4, 16] stages 1 swizzle none
CHECK: shared p_rowsum_partials: f32[4, 16] stages 1 swizzle none
CHECK: m: f32[16] every_row = neg(inf)
CHECK: for j in 0 .. {{.*}}(interior of 0 .. N / 256)
CHECK: x: f32[16, 256] row_major =
CHECK-NEXT: st.shared x_rowmax_partials[warp, row] = rowmax(x) of the warp's elements
CHECK-NOT: m_new
CHECK: bar.sync 1, 128
CHECK-SAME: why: x_rowmax_partials written by a row reduction's partials
CHECK-NEXT: m_new: f32[16] every_row = max(m, max over warps of x_rowmax_partials[:, row])
CHECK-NEXT: p: f32[16, 256] row_major = exp2((x - m_new[:, None]))
CHECK-NEXT: st.shared p_rowsum_partials[warp, row] = rowsum(p) of the warp's elements
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: p_rowsum_partials written by a row reduction's partials
CHECK-NEXT: l = ((l * exp2((m - m_new))) + sum over warps of p_rowsum_partials[:, row])
CHECK-NEXT: m = m_new
CHECK-NEXT: for j in {{.*}}(boundary of 0 .. N / 256)
""", tmp_path)


def test_matches_softmax_in_float64_on_ragged_rows():
    """M = 40, N = 600: a partial row tile and a partial column tile (masked)."""
    front_end = driver.check(driver.read_source(SAMPLE))
    problem = make_problem(driver.lower(front_end), {"M": 40, "N": 600})
    x = problem.inputs["X"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(expected_outputs(front_end, problem)["Y"],
                               e / e.sum(axis=1, keepdims=True), rtol=1e-2, atol=1e-4)


def test_every_schedule_is_right():
    report = driver.simulate(driver.read_source(SAMPLE), None, {"M": 32, "N": 768},
                             seeds=4, search=100)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("which", [0, 1])
def test_without_a_partials_barrier_the_combine_races(which):
    """Remove the barrier after the partials of rowmax(x) (0) or rowsum(p) (1):
    a warp reads another's partial before it is stored."""
    front_end = driver.check(driver.read_source(SAMPLE))
    lowered = driver.lower(front_end)
    target = [s for s in walk(lowered.body) if isinstance(s, ir.NamedBarrier)
              and "partials" in s.reason.subject][which]
    broken = m.edit(lowered, m.remove(ir.NamedBarrier, lambda s: s is target))
    report = simulate(broken, front_end, make_problem(broken, default_dims(broken)), 4, 50,
                      first_finding=True)
    assert report.findings and report.findings[0].category.value == "race"


def test_code_is_shuffles_and_one_store_per_warp_and_row():
    cuda = driver.generate(driver.read_source(SAMPLE)).cuda
    assert "float u_m[16];" in cuda and "float u_l[16];" in cuda
    for lane in (16, 8, 4, 2, 1):
        assert f"hk_v = fmaxf(hk_v, __shfl_xor_sync(0xffffffffu, hk_v, {lane}));" in cuda
    assert "if (static_cast<int>(threadIdx.x) % 32 == 0) hk_st_shared_f32(" in cuda
    assert "u_m_new[hk_k / 2]" in cuda  # two consecutive slots of a row per thread
    built = driver.build(driver.read_source(SAMPLE))
    assert built.result.resources.spill_stores == built.result.resources.spill_loads == 0
    (code,) = sm.functions(built.result.cubin).values()
    # 16 rows x 5 shuffles per reduction, two reductions, in each of the first
    # loop's two parts (its interior, and the boundary iteration that masks);
    # 5 barriers in all: two per iteration of each part, one handing the second
    # loop's writes to the store (the store's reads are complete before the next
    # load's phase)
    assert sum(i.opcode.startswith("SHFL.BFLY") for i in code) == 2 * 160
    assert sum(i.base == "BAR" and i.operands.replace(" ", "") == "0x1,0x80" for i in code) == 5


SMALL = """kernel k(X: f32[M, N], Y: f32[M, N])
    tile(BM = 8, BN = 64) grid(m: M / BM)
{
    shared sx: f32[BM, BN]
    role work: warp {
        tma sx <- X[tile.m, 0]
        x: f32[BM, BN] = sx
        s: f32[BM] = rowsum(x)
        sx = x / s[:, None]
        tma Y[tile.m, 0] <- sx
    }
}
"""


def test_a_warp_role_reduces_rows_of_one_warp():
    """A role of one warp: each row spans its 32 lanes; one partial per row."""
    assert "shared x_rowsum_partials: f32[1, 8]" in ir_after(SMALL)
    report = driver.simulate(SourceFile("k.hk", SMALL), None, {"M": 16, "N": 64}, seeds=2,
                             search=20)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("old, new, message", [
    ("BN = 256", "BN = 192", "needs each row spread over all 128 threads that hold it "
                             "(columns a multiple of 128) and at most 64 rows"),
    ("m: f32[BM] = -inf", "m: f32[BM] = rowmax(x)", "unknown name 'x'"),
])
def test_diagnostics(old, new, message):
    """Rows that do not span every thread, and reductions of names not yet declared."""
    assert message in edit_error(TEXT, old, new).message


WARPGROUPS = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 32, BN = 256) grid(m: M / BM) threads 256
{
    shared sx: bf16[BM, BN]
    tma sx <- X[tile.m, 0]
    x: f32[16, BN] = f32(sx[wg])
    m: f32[16] = rowmax(x)
    p: f32[16, BN] = exp2(x - m[:, None])
    l: f32[16] = rowsum(p)
    sx[wg] = bf16(p / l[:, None])
    tma Y[tile.m, 0] <- sx
}
"""


def test_each_warpgroup_reduces_its_own_tile(tmp_path):
    """With 256 threads each warpgroup holds its own [16, 256] tile: the partials
    buffer has a part per warpgroup ([8 warps, 16], `buf[wg]` of 2), and each
    warpgroup meets alone on it (bar.sync 2 + wg, 128), not with the other."""
    filecheck(ir_after(WARPGROUPS), """
CHECK: shared x_rowmax_partials: f32[8, 16]
CHECK: st.shared x_rowmax_partials[wg of 2][warp, row] = rowmax(x) of the warp's elements
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-NEXT: m: f32[16] every_row = max over warps of x_rowmax_partials[wg of 2][:, row]
""", tmp_path)
    source = SourceFile("k.hk", WARPGROUPS)
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 64, "N": 256})
    x = problem.inputs["X"].astype(np.float64) * 1.0
    e = np.exp2(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(expected_outputs(front_end, problem)["Y"],
                               e / e.sum(axis=1, keepdims=True), rtol=1e-2, atol=1e-4)
    report = driver.simulate(source, None, {"M": 64, "N": 256}, seeds=4, search=50)
    assert report.ok, [f.headline() for f in report.findings]
    assert driver.build(source).result.resources.spill_stores == 0


def test_a_row_vector_is_stored_to_a_1d_buffer_and_by_tma():
    """Each thread r stores row r of the combined partials (tests/test_shared_row_stores.py
    has the rest)."""
    text = """kernel k(X: f32[M, N], Y: f32[M])
    tile(BM = 4, BN = 128) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    shared sv: f32[BM]
    tma sx <- X[tile.m, 0]
    x: f32[BM, BN] = sx
    sv = rowsum(x)
    tma Y[tile.m] <- sv
}
"""
    x = np.random.default_rng(1).integers(-8, 8, (12, 128)).astype(np.float32)
    out = hopperc.simulate(SourceFile("k.hk", text), {"X": x})
    np.testing.assert_array_equal(out["Y"], x.sum(axis=1))  # small integers: exact


def test_rows_over_three_warps():
    """96 threads, 192 columns: each row over 3 warps, partials [3, 4]."""
    text = """kernel k(X: f32[M, N], Y: f32[M, N])
    tile(BM = 4, BN = 192) grid(m: M / BM) threads 96
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    x: f32[BM, BN] = sx
    s: f32[BM] = rowsum(x)
    sx = x / s[:, None]
    tma Y[tile.m, 0] <- sx
}
"""
    source = SourceFile("k.hk", text)
    front_end = driver.check(source)
    assert "shared x_rowsum_partials: f32[3, 4]" in ir_after(text)
    problem = make_problem(driver.lower(front_end), {"M": 8, "N": 192})
    x = problem.inputs["X"].astype(np.float64)
    np.testing.assert_allclose(expected_outputs(front_end, problem)["Y"],
                               x / x.sum(axis=1, keepdims=True), rtol=1e-4)
    report = driver.simulate(source, None, {"M": 8, "N": 192}, seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("rows, threads", [(4, 128), (64, 128)])
def test_row_and_col_in_a_vector_statement_are_the_row_and_0(rows, threads):
    """In `s: f32[R] = ...` element i is row i (as the generated code has it:
    hk_r is the row, hk_c 0), for either kind of vector: R = 64 in a warpgroup
    (Layout.ROWS) or R = 4 (Layout.EVERY_ROW)."""
    text = f"""kernel k(X: f32[M, N], Y: f32[M, N])
    tile(BM = {rows}, BN = 128) grid(m: M / BM) threads {threads}
{{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    s: f32[BM] = row() + 100.0 * col()
    sx = 0.0 * sx + s[:, None]
    tma Y[tile.m, 0] <- sx
}}
"""
    source = SourceFile("k.hk", text)
    assert ("hk_r = hk_k, hk_c = 0" if rows == 4 else "hk_c = 0") in \
        driver.generate(source).cuda.replace("[[maybe_unused]] const int ", "")
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 2 * rows, "N": 128})
    y = expected_outputs(front_end, problem)["Y"]
    assert y[:rows, 0].tolist() == list(range(rows)) and (y[:, 1:] == y[:, :1]).all()
