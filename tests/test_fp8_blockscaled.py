"""samples/gemm_fp8_blockscaled.hk: DeepGEMM's block-scaled FP8 GEMM (1 x 128 scales
of A through a 1-D ring, 128 x 128 scales of B read as scalars, each k-block's
product promoted into a second accumulator), checked against the same math in
float64 numpy; and `sv[wg][:, None]`, a warpgroup's block of a 1-D shared buffer
as a row vector, which it needs."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.codegen.launch import launch_info
from hopperc.codegen.render import _Context
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "gemm_fp8_blockscaled.hk"


def _blockscaled(a, b, sa, sb) -> np.ndarray:
    """C = sum over k-blocks kb of (A_kb @ B_kb^T) * SA[kb, row] * SB[col / 128, kb],
    in float64 (K past the last whole block is zero, as the TMA loads fill it)."""
    m, k = a.shape
    n = b.shape[0]
    out = np.zeros((m, n))
    for kb in range(-(-k // 128)):
        cols = slice(128 * kb, 128 * kb + 128)
        part = a[:, cols].astype(np.float64) @ b[:, cols].astype(np.float64).T
        col_scale = np.repeat(sb[:, kb].astype(np.float64), 128)[:n]
        out += part * sa[kb].astype(np.float64)[:, None] * col_scale[None, :]
    return out


def _shapes(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k, "KB": -(-k // 128), "NB": -(-n // 128)}


@pytest.mark.parametrize("m, n, k", [(256, 256, 384), (192, 320, 320)])
def test_matches_the_blockscaled_gemm_in_float64(m, n, k):
    """Three k-blocks, so the promotion runs three times per tile with different
    scales per row and per column block; (192, 320, 320): the last tile's rows and
    columns are partial (TMA clips the store) and the last k-block holds 64 of
    its 128 elements (zero-filled), with two B-scale blocks and a third partial."""
    front_end = driver.check(driver.read_source(SAMPLE))
    problem = make_problem(driver.lower(front_end), _shapes(m, n, k))
    got = expected_outputs(front_end, problem)["C"]
    want = _blockscaled(*(problem.inputs[t] for t in ("A", "B", "SA", "SB")))
    assert np.abs(want).max() > 1
    np.testing.assert_allclose(got, want, atol=1e-2 * np.abs(want).max(), rtol=1e-2)


def test_every_schedule_is_right():
    """The simulator's runs (rings wrapping: 6 stages, 8 k-blocks) agree with the
    reference: the scale ring's stage is read by both warpgroups before its release."""
    report = driver.simulate(driver.read_source(SAMPLE), None, _shapes(256, 128, 1024),
                             seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_check_with_the_default_shapes_is_clean():
    report = driver.simulate(driver.read_source(SAMPLE), seeds=4, search=200)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_the_promotion_runs_in_the_main_loop():
    """Per k-step the loop holds the four k32 products, and the promotion: the two
    row scales (one ld.shared each, not one per slot), the B scale (one read-only
    global load), their two products and 64 FFMA into acc; the stage is released
    right after the row scales are read, before the FFMA."""
    built = driver.build(driver.read_source(SAMPLE))
    (code,) = sm.functions(built.result.cubin).values()
    body = sm.loop_holding(code, sm.WGMMA).body(code)
    count = {op: sum(i.base == op for i in body) for op in ("QGMMA", "FFMA", "LDS", "LDG",
                                                            "FMUL")}
    assert count == {"QGMMA": 4, "FFMA": 64, "LDS": 2, "LDG": 1, "FMUL": 2}
    release = next(k for k, i in enumerate(body) if i.opcode.startswith("SYNCS.ARRIVE"))
    assert max(k for k, i in enumerate(body) if i.base == "LDS") < release
    assert release < min(k for k, i in enumerate(body) if i.base == "FFMA")


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


def test_a_row_vector_stored_by_stmatrix_is_loaded_twice_per_thread_too():
    """The stmatrix form of a 16-bit warpgroup tile's store reads its row vector
    the same way: two loads ahead of the stores."""
    text = (RING.replace("Y: f32[M, N]", "Y: bf16[M, N]")
            .replace("    tma sx <- X", "    shared sy: bf16[BM, BN] swizzle 128B\n    tma sx <- X")
            .replace("sx[wg] = x * VIEW", "sy[wg] = bf16(x * ss[wg][:, None])")
            .replace("<- sx\n}", "<- sy\n}"))
    kernel = driver.lower(driver.check(SourceFile("ring.hk", text)))
    store = next(s for s in walk(kernel.body) if isinstance(s, ir.SharedStore))
    m = _Context(kernel, launch_info(kernel), "t.hk").matrix_store(store)
    assert m is not None and m.hoisted.count("hk_ld_shared_f32(") == 2
    assert "hk_ld_shared" not in m.value and "hk_row_vector0[(hk_k / 2) % 2]" in m.value


PLANES = """\
kernel planes(X: f32[B, M, N], S: f32[M], Y: f32[B, M, N])
    tile(BM = 32, BN = 64) grid(b: B / 2, m: M / BM) threads 128
{
    shared r: f32[2, BM, BN]
    shared sv: f32[BM]
    tma r <- X[tile.b, tile.m, 0]
    tma sv <- S[tile.m]
    r = r * sv[:, None]
    tma Y[tile.b, tile.m, 0] <- r
}
"""


def test_a_row_vector_over_stacked_planes_indexes_the_row_in_its_plane():
    """Two planes of 32 rows stacked are a 64-row grid in the wgmma layout: the
    hoisted loads take the row modulo 32, as each slot's read does (hk_r % 32)."""
    kernel = driver.lower(driver.check(SourceFile("planes.hk", PLANES)))
    store = next(s for s in walk(kernel.body) if isinstance(s, ir.SharedStore))
    e = _Context(kernel, launch_info(kernel), "t.hk").per_element(store)
    loads = re.findall(r"hk_ld_shared_f32\(([^;]*?)\) \* 4u\)", e.hoisted)
    assert len(loads) == 2 and all(load.endswith("% 32") for load in loads), e.hoisted


def test_a_tile_spanning_two_b_scale_blocks_selects_a_scale_per_column():
    """docs/language.md §13: with BN = 192 a tile's columns fall in two 128-wide
    B-scale blocks; the promotion picks SB[nb, k] or SB[nb + 1, k] per column."""
    text = SAMPLE.read_text()
    for old, new in [
            ("BN = 128, BK = 128", "BN = 192, BK = 128"), ("stages 6", "stages 4"),
            ("acc = acc + part * (ss[wg][:, None] * SB[tile.n, k])",
             "nb: i32 = (BN * tile.n - BN * tile.n % 128) / 128\n            acc = acc + part"
             " * (ss[wg][:, None] * where(BN * tile.n + col() < 128 * (nb + 1), SB[nb, k], "
             "SB[nb + 1, k]))")]:  # the epilogue's loop stores BN / 64 = 3 subtiles
        assert old in text, old
        text = text.replace(old, new)
    front_end = driver.check(SourceFile("bn192.hk", text))
    problem = make_problem(driver.lower(front_end), _shapes(128, 384, 256))
    got = expected_outputs(front_end, problem)["C"]
    want = _blockscaled(*(problem.inputs[t] for t in ("A", "B", "SA", "SB")))
    np.testing.assert_allclose(got, want, atol=1e-2 * np.abs(want).max(), rtol=1e-2)
