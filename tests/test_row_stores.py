"""`T[i, START : END] = v`: a register row vector stored to global memory
(ir.GlobalRowStore). What the front end accepts and refuses, the predicated
st.global it becomes (one lane per row, no barrier), and the simulator: the
reference writes exactly the rows inside the range, the warps agree with it,
and two threads storing one element unordered is a race."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.findings import Category
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import ROOT, edit_error

# Softmax statistics of each row of X, a 64-row tile per block; the base-2
# log-sum-exp of rows tile.m * 64 + r goes to LSE[1, first + ...] up to `last`.
LSE = """kernel row_lse(X: f32[M, N], Y: f32[M, N], LSE: f32[H, L], first: i32, last: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    m: f32[BM] = -inf
    l: f32[BM] = 0.0
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        x: f32[BM, BN] = sx
        m_new: f32[BM] = max(m, rowmax(x))
        p: f32[BM, BN] = exp2(x - m_new[:, None])
        l = l * exp2(m - m_new) + rowsum(p)
        m = m_new
    }
    LSE[1, first + BM * tile.m : last] = m + log2(l)
    tma sx <- X[tile.m, 0]
    sx = exp2(sx - m[:, None]) / l[:, None]
    tma Y[tile.m, 0] <- sx
}
"""

STORE = "LSE[1, first + BM * tile.m : last] = m + log2(l)"


def _expected_lse(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=1)
    return m + np.log2(np.exp2(x - m[:, None]).sum(axis=1))


def test_the_reference_writes_the_rows_inside_the_range_and_nothing_else():
    front_end = driver.check(SourceFile("lse.hk", LSE))
    problem = make_problem(driver.lower(front_end), {"M": 192, "N": 128, "H": 3, "L": 300})
    problem.scalars.update(first=5, last=150)  # rows 0 .. 144 land, the rest are cut
    got = expected_outputs(front_end, problem)["LSE"]
    want = _expected_lse(problem.inputs["X"])
    np.testing.assert_allclose(got[1, 5:150], want[:145], rtol=1e-5, atol=1e-5)
    untouched = np.ones(got.shape, dtype=bool)
    untouched[1, 5:150] = False
    assert (got[untouched] == 0).all()


def test_check_is_clean_and_matches_the_reference():
    report = driver.simulate(SourceFile("lse.hk", LSE), seeds=2, search=30)
    assert report.ok, [f.headline() for f in report.findings]
    assert "LSE" in report.max_error


def test_the_statement_keeps_its_end_and_layout_through_the_passes():
    lowered = driver.lower(driver.check(SourceFile("lse.hk", LSE)))
    (store,) = [s for s in walk(lowered.body) if isinstance(s, ir.GlobalRowStore)]
    assert store.tensor == "LSE" and store.rows == 64 and store.layout is ir.Layout.ROWS
    assert store.end == ir.Scalar(ir.ScalarKind.PARAM, "last") and store.span.line == 15


def test_codegen_stores_each_row_once_predicated_with_no_barrier():
    source = SourceFile("lse.hk", LSE)
    cuda = driver.generate(source).cuda
    assert "hk_st_global_f32(u_LSE + static_cast<long long>(1) * u_L + hk_e" in cuda
    assert "hk_t % 4 < 2 && hk_e >= 0 && hk_e < u_L" in cuda and "hk_e < (u_last)" in cuda
    # START reads a parameter: its sums wrap (a row past 2^31 - 1 lands below 0 and is
    # skipped) where int arithmetic would overflow, which C++ leaves undefined
    assert "const int hk_e = hk_wrap_add(hk_wrap_add(u_first, (64 * hk_tile_m)), hk_r);" in cuda
    built = driver.build(source)
    assert "@hk_p st.global.f32" in built.result.ptx
    (code,) = sm.functions(built.result.cubin).values()
    stores = [i for i, ins in enumerate(code) if ins.base == "STG"]
    assert len(stores) == 1 and code[stores[0]].opcode.startswith("STG.E")
    at = stores[0]
    # predicated itself, or only reached past a predicated exit or branch
    assert code[at].predicate or any(
        c.predicate and c.base in ("EXIT", "BRA") for c in code[at - 2:at])
    without = driver.build(SourceFile("lse.hk", LSE.replace(STORE, "")))
    (plain,) = sm.functions(without.result.cubin).values()
    barriers = [i.opcode for i in code if i.base in ("BAR", "MEMBAR")]
    assert barriers == [i.opcode for i in plain if i.base in ("BAR", "MEMBAR")]
    assert built.result.resources.spill_stores == 0


def test_no_synchronization_names_the_store():
    """Each row has one writer and nothing reads the tensor: the passes add
    nothing for the store (a barrier or fence would name its line)."""
    lowered = driver.lower(driver.check(SourceFile("lse.hk", LSE)))
    for stmt in walk(lowered.body):
        reason = getattr(stmt, "reason", None)
        if reason is not None:
            lines = {s.line for s in (reason.before_span, reason.after_span) if s is not None}
            assert 15 not in lines, stmt


# Two warpgroups, each its own 64 rows of a 128-row tile; R[...] gets rowmax.
TWO = """kernel two_groups(X: f32[M, 64], R: f32[M])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[64, 64] = sx[wg]
    R[BM * tile.m + 64 * wg : M] = rowmax(x)
}
"""


def test_each_warpgroup_stores_its_own_rows():
    report = driver.simulate(SourceFile("two.hk", TWO), seeds=2, search=30)
    assert report.ok, [f.headline() for f in report.findings]
    front_end = driver.check(SourceFile("two.hk", TWO))
    problem = make_problem(driver.lower(front_end), {"M": 200})
    got = expected_outputs(front_end, problem)["R"]
    np.testing.assert_array_equal(got, problem.inputs["X"].max(axis=1))


def test_negative_both_warpgroups_storing_the_same_rows_is_a_race():
    source = SourceFile("two.hk", TWO.replace(" + 64 * wg : M]", " : M]"))
    report = driver.simulate(source, seeds=2, search=10)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races and "nothing orders the two stores" in races[0].message
    assert races[0].span.line == 7


# A row-major tile of 16 rows over 128 threads: every thread holds every row
# (Layout.EVERY_ROW); the box form stores block tile.m of 16 elements, as bf16.
WIDE = """kernel wide_rows(X: f32[M, N], R: bf16[M])
    tile(BM = 16, BN = 256) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    m: f32[BM] = -inf
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        x: f32[BM, BN] = where(BN * j + col() < N, sx, -inf)
        m = max(m, rowmax(x))
    }
    R[tile.m] = bf16(m)
}
"""


def test_every_row_vectors_store_one_row_per_thread_in_the_box_form():
    source = SourceFile("wide.hk", WIDE)
    cuda = driver.generate(source).cuda
    assert "hk_st_global_u16(u_R + 0LL + hk_e, hk_f32_to_bf16(hk_v[hk_j]), hk_r < 16" in cuda
    assert "float hk_v[1] = {};" in cuda and "const int hk_r = hk_t + 128 * hk_j;" in cuda
    assert driver.build(source).result.resources.spill_stores == 0
    report = driver.simulate(source, seeds=2, search=30)
    assert report.ok, [f.headline() for f in report.findings]
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 40, "N": 300})
    got = expected_outputs(front_end, problem)["R"]
    want = problem.inputs["X"].max(axis=1)
    np.testing.assert_allclose(got, want, rtol=2 ** -8)


# 64 rows over one warp (Layout.EVERY_ROW): more rows than threads, so thread t
# stores rows t and t + 32, to global memory directly or through a 1-D buffer.
MORE_ROWS = """kernel more_rows(X: f32[M, 64], R: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 32
{
    shared sx: f32[BM, 64]
    shared sl: f32[BM]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    STORE
}
"""


@pytest.mark.parametrize("store", ["R[tile.m] = rowmax(x)",
                                   "sl = rowmax(x)\n    tma R[tile.m] <- sl"],
                         ids=["global", "shared"])
def test_a_vector_with_more_rows_than_threads_stores_every_row(store):
    source = SourceFile("more_rows.hk", MORE_ROWS.replace("STORE", store))
    cuda = driver.generate(source).cuda
    assert "float hk_v[2] = {};" in cuda and "if (hk_k % 32 == hk_t) hk_v[hk_k / 32] = hk_x;" in cuda
    assert "const int hk_r = hk_t + 32 * hk_j;" in cuda
    assert driver.build(source).result.resources.spill_stores == 0
    x = np.random.default_rng(5).standard_normal((100, 64)).astype(np.float32)
    out = hopperc.simulate(source, {"X": x})
    np.testing.assert_array_equal(out["R"], x.max(axis=1))
    report = driver.simulate(source, None, {"M": 100}, seeds=2, search=10)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("old, new, message", [
    (STORE, "q: f32[BM, BN] = sx\n    LSE[1, first : last] = q",
     "the value stored to a tensor is a register row vector (m: f32[64] = rowmax(s)) or an "
     "expression of them; tiles are stored through shared memory (tma)"),
    (STORE, "LSE[1, first : last] = m[:, None]", "'m' is one value per row in a row vector's "
                                                 "statement: name it alone, m"),
    (STORE, "LSE[1, first : last] = 1.0", "the value names no row vector: store a register "
                                          "row vector (m: f32[64] = rowmax(s)), a loaded "
                                          "vector (t: f32[BM] = T[tile.m])"),
    (STORE, "LSE[first : last] = m", "'LSE' has rank 2: give one index per dimension"),
    (STORE, "LSE[0 : 1, first] = m", "only the last dimension of 'LSE' takes a slice"),
    (STORE, "LSE[1, :] = m", "the last index of 'LSE' is START : END"),
    (STORE, "LSE[1, lane : last] = m", "this index names 'lane'"),
    (STORE, "LSE[1, first : last] = bf16(m)", "dtype mismatch: the value is bf16 but 'LSE' "
                                               "is f32; convert it explicitly"),
    ("tma Y[tile.m, 0] <- sx", "tma LSE[tile.m, 0] <- sx",
     "'LSE' is also written at line 15 by the other kind of store"),
    ("tma sx <- X[tile.m, 0]\n", "tma sx <- LSE[0, 0]\n",
     "this reads 'LSE', which the kernel stores from registers (line 15)"),
])
def test_diagnostics(old, new, message):
    error = edit_error(LSE, old, new)
    assert message in error.message


def _attention_without_lse() -> str:
    """samples/attention_fwd.hk without its log-sum-exp: the same kernel, O only."""
    text = (ROOT / "samples" / "attention_fwd.hk").read_text()
    for old in (", LSE: f32[B, H, L])", "\n        LSE[tile.b, tile.h,"):
        assert old in text
    text = text.replace(", LSE: f32[B, H, L])", ")")
    return "\n".join(line for line in text.splitlines() if "LSE[tile.b" not in line) + "\n"


def test_attention_stores_its_log_sum_exp_with_one_predicated_stg_per_thread():
    """samples/attention_fwd.hk writes each query row's log-sum-exp (what varlen
    attention and a backward pass read): one predicated STG, no barrier more than
    the kernel without it, no spill; `check` compares LSE with its reference."""
    sample = driver.read_source(ROOT / "samples" / "attention_fwd.hk")
    built = driver.build(sample)
    plain = driver.build(SourceFile("attention_o.hk", _attention_without_lse()))
    (code,) = sm.functions(built.result.cubin).values()
    (before,) = sm.functions(plain.result.cubin).values()
    stores = [i for i in code if i.base == "STG"]
    assert len(stores) == 1 and stores[0].opcode.startswith("STG.E") and stores[0].predicate
    assert not [i for i in before if i.base == "STG"]
    assert [i.opcode for i in code if i.base in ("BAR", "MEMBAR")] == \
        [i.opcode for i in before if i.base in ("BAR", "MEMBAR")]
    assert built.result.resources.spill_stores == 0
    report = driver.simulate(sample, None, {"B": 1, "H": 1, "L": 300}, seeds=1, search=10)
    assert report.ok and "LSE" in report.max_error, [f.headline() for f in report.findings]
