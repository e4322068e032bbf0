"""A^T per warpgroup: `sa^T[wg]`, each warpgroup's block of a `[K, M]` buffer's
columns as its MN-major A (attention backward's dV = P^T dO and dK = dS^T Q,
with P and dS stored by rows). The block is whole column blocks of the
swizzled layout, so each warpgroup's descriptor starts at its block (compared
with CuTe's make_gmma_desc of that block, cut with local_tile: tests/oracle,
products `*_mnpart*`); here: the code, the syncs, the simulator's results and
the refusals."""
from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.reference import expected_outputs
from tests.sim import mutations as m

# C = A B with A given as A^T ([K, M]), two warpgroups each its 64 of BM = 128.
GEMM = """kernel gemm_at(A: {t}[K, M], B: {t}[N, K], C: f32[M, N])
    tile(BM = 128, BN = 64, BK = {bk}) grid(m: M / BM, n: N / BN) threads 256
{{
    shared sa: {t}[BK, BM] swizzle {swizzle}
    shared sb: {t}[BN, BK] swizzle {swizzle}
    shared sc: f32[BM, BN]
    acc: f32[64, BN] = 0.0
    for k in 0 .. K / BK {{
        tma sa <- A[k, tile.m]
        tma sb <- B[tile.n, k]
        acc += sa^T[wg] @ sb^T
    }}
    sc[wg] = acc
    tma C[tile.m, tile.n] <- sc
}}
"""
FORMS = {"bf16_128B": ("bf16", "128B", 64), "f16_64B": ("f16", "64B", 32),
         "bf16_32B": ("bf16", "32B", 16)}

# dV = P^T V of attention backward's shape, each block's partial over its 128
# rows of X and V: each warpgroup writes its rows of P (sp[wg]) and reads its
# block of P's columns (sp^T[wg]), which the other warpgroup's rows fill too.
P_T_V = """kernel p_t_v(X: bf16[M, 64], W: bf16[128, 64], V: bf16[M, 64], Y: f32[M, 64])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: bf16[BM, 64] swizzle 128B
    shared sw: bf16[128, 64] swizzle 128B
    shared sv: bf16[BM, 64] swizzle 128B
    shared sp: bf16[BM, 128] swizzle 128B
    shared sy: f32[128, 64]
    tma sx <- X[tile.m, 0]
    tma sw <- W[0, 0]
    tma sv <- V[tile.m, 0]
    p: f32[64, 128] = sx[wg] @ sw^T
    sp[wg] = bf16(p)
    acc: f32[64, 64] = sp^T[wg] @ sv
    sy[wg] = acc
    tma Y[tile.m, 0] <- sy
}
"""


def gemm(form: str) -> str:
    dtype, swizzle, bk = FORMS[form]
    return GEMM.format(t=dtype, swizzle=swizzle, bk=bk)


@pytest.mark.parametrize("form", FORMS)
def test_a_transposed_per_warpgroup_builds_and_matches_float64(form):
    """One column block per warpgroup (128B), two (64B: LBO steps between them),
    four (32B); ragged M, N and K; NVRTC builds each (HGMMA per k-step, no spill)."""
    source = SourceFile("g.hk", gemm(form))
    built = driver.build(source)
    assert built.result.resources.spill_stores == 0
    (code,) = sm.functions(built.result.cubin).values()
    loop = sm.loop_holding(code, "HGMMA")
    assert sum(i.base == "HGMMA" for i in loop.body(code)) == FORMS[form][2] // 16
    shapes = {"M": 200, "N": 72, "K": 3 * FORMS[form][2] - 8}
    report = driver.simulate(source, shapes=shapes, seeds=2, search=50)
    assert report.ok and report.max_error == {"C": 0.0}, [f.headline() for f in report.findings]
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), shapes)
    a, b = (problem.inputs[n].astype(np.float64) for n in "AB")
    got = expected_outputs(front_end, problem)["C"]
    np.testing.assert_allclose(got, a.T @ b.T, rtol=1e-5, atol=1e-5)


def test_each_warpgroup_descriptor_starts_at_its_column_block():
    """128B: warpgroup w's A starts w blocks (64 rows x 128 bytes, 512 units of
    16 bytes) into sa, and steps 16 rows (128 units) per k-step."""
    cuda = driver.generate(SourceFile("g.hk", gemm("bf16_128B"))).cuda
    assert "((hk_warp / 4)) * 512u, 1024u, 1ull, 8192u)" in cuda
    assert "((hk_warp / 4)) * 512u + 128u, 1024u, 1ull, 8192u)" in cuda


def test_rows_written_per_warpgroup_and_read_by_columns_meet_at_a_block_barrier():
    """Warpgroup 0's block of sp's columns holds rows warpgroup 1 wrote: the
    hand-off before the wgmma is a barrier of both warpgroups (256 threads),
    after each writer's proxy fence; read by rows (sp[wg]) it is each warpgroup's own."""
    def hand_off(text: str) -> int:
        """Threads of the last barrier before the product that reads sp."""
        lowered = driver.lower(driver.check(SourceFile("p.hk", text)))
        threads = None
        for stmt in walk(lowered.body):
            if isinstance(stmt, ir.NamedBarrier):
                threads = stmt.threads
            if isinstance(stmt, ir.Mma) and stmt.a.buffer == "sp":
                return threads
        raise AssertionError("no product reads sp")
    assert hand_off(P_T_V) == 256
    assert hand_off(P_T_V.replace("sp^T[wg] @ sv", "sp[wg] @ sw")) == 128


def test_a_warpgroup_barrier_before_a_columns_read_races():
    """The same kernel with that barrier narrowed to each warpgroup: the
    simulator finds warpgroup 0's wgmma reading rows warpgroup 1 still writes."""
    front_end = driver.check(SourceFile("p.hk", P_T_V))
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered))
    assert simulate(lowered, front_end, problem, 4, 100).ok

    def per_warpgroup(s):
        if isinstance(s, ir.NamedBarrier) and s.threads == 256 and s.id != 0:
            return [replace(s, threads=128, per_warpgroup=True)]
        return None
    report = simulate(m.edit(lowered, per_warpgroup), front_end, problem, 4, 100)
    assert report.findings and report.findings[0].category is Category.RACE, \
        [f.headline() for f in report.findings]


def test_p_transposed_times_v_matches_float64():
    front_end = driver.check(SourceFile("p.hk", P_T_V))
    problem = make_problem(driver.lower(front_end), {"M": 256})
    x, w, v = (problem.inputs[n].astype(np.float64) for n in "XWV")
    p = (x @ w.T).astype(ml_dtypes.bfloat16).astype(np.float64)  # P as sp holds it
    got = expected_outputs(front_end, problem)["Y"]
    for block in range(2):
        rows = slice(128 * block, 128 * (block + 1))
        np.testing.assert_allclose(got[rows], p[rows].T @ v[rows], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("edit, message", [
    (("acc += sa^T[wg] @ sb^T", "acc += sa^T[0] @ sb^T"), "a transposed view takes one index, wg"),
    (("shared sa: bf16[BK, BM]", "shared sa: bf16[BK, 64]"),
     "64 columns of 'sa' do not split into 2 warpgroups' blocks of whole 128-byte"),
    (("acc += sa^T[wg] @ sb^T", "acc += sa^T[wg] @ sb^T\n        sc[wg] = f32(sa^T[wg])"),
     "sa^T[wg] (a warpgroup's columns of 'sa') is only a product's A, MN-major"),
    (("acc += sa^T[wg] @ sb^T", "acc += sa^T[wg] @ sb^T[wg]"), "is only a product's A"),
])
def test_columns_view_refusals(edit, message):
    with pytest.raises(CompileError) as caught:
        driver.check(SourceFile("g.hk", gemm("bf16_128B").replace(*edit)))
    assert message in str(caught.value)
