"""Register row vectors and row reductions (`m: f32[64] = rowmax(s)`,
`rowsum`, `v[:, None]`): typing, the C++ they become, the layout argument that
makes a quad's shuffles reduce a whole row, and an online softmax checked
against numpy written out here."""
from __future__ import annotations

import numpy as np
import pytest

from hopperc import driver
from hopperc.codegen.elements import ROWS_ROW, WGMMA_COL, WGMMA_ROW
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import edit_error

SOFTMAX = """kernel softmax_rows(X: f32[M, N], Y: f32[M, N])
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
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        sx = exp2(sx - m[:, None]) / l[:, None]
        tma Y[tile.m, j] <- sx
    }
}
"""


def _formula(text: str, **env: int) -> int:
    return eval(text.replace("/", "//"), {}, dict(env))  # the C++ ints: non-negative


def test_a_quads_shuffles_reduce_each_row_of_the_wgmma_layout():
    """Slot j of a row vector is row ROWS_ROW; the thread's wgmma slots k with
    (k/2)%2 == j are that row (WGMMA_ROW, the fragment layout the CuTe oracle
    checks); the lanes holding a row differ only in their two low bits (so xor 1
    and 2 reach all of them), and together they hold every column."""
    columns, slots = 64, 64 * 64 // 128
    where = {(u, k): (_formula(WGMMA_ROW, hk_t=u, hk_k=k), _formula(WGMMA_COL, hk_t=u, hk_k=k))
             for u in range(128) for k in range(slots)}
    for t in range(128):
        for j in range(2):
            row = _formula(ROWS_ROW, hk_t=t, hk_k=j)
            holders = [(u, k) for (u, k), (r, _) in where.items() if r == row]
            assert {u for u, _ in holders} == {(t // 4) * 4 + q for q in range(4)}
            assert all((k // 2) % 2 == j for u, k in holders if u == t)
            assert sorted(where[h][1] for h in holders) == list(range(columns))


def test_online_softmax_matches_numpy():
    """The reference the simulator compares with, against a base-2 softmax
    written out in numpy; and every schedule of the lowered kernel agrees."""
    source = SourceFile("softmax.hk", SOFTMAX)
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 128, "N": 192})
    x = problem.inputs["X"]
    e = np.exp2(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(expected_outputs(front_end, problem)["Y"],
                               e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    report = driver.simulate(source, seeds=4, search=50)
    assert report.ok, [f.headline() for f in report.findings]


def test_reductions_become_slot_loops_and_quad_shuffles():
    cuda = driver.generate(SourceFile("softmax.hk", SOFTMAX)).cuda
    assert "float u_m[2];" in cuda and "float u_l[2];" in cuda
    assert ("float hk_v = u_x[2 * hk_k]; for (int hk_s = 2 * hk_k + 1; hk_s < 32; ++hk_s) "
            "if ((hk_s / 2) % 2 == hk_k) hk_v = fmaxf(hk_v, u_x[hk_s]);") in cuda
    assert "hk_v = hk_v + __shfl_xor_sync(0xffffffffu, hk_v, 2);" in cuda
    assert "u_m_new[(hk_k / 2) % 2]" in cuda  # a row vector broadcast over a wgmma tile
    resources = driver.build(SourceFile("softmax.hk", SOFTMAX)).result.resources
    assert resources.spill_stores == resources.spill_loads == 0


@pytest.mark.parametrize("old, new, message", [
    ("m: f32[BM] = -inf", "m: f32[32] = -inf", "shape mismatch in 'max': [32] and [64]"),
    ("rowmax(x)", "rowmax(sx)", "rowmax() takes a 2-D register tile of f32 by name"),
    ("x - m_new[:, None]", "x - m_new[None, :]", "a register vector is broadcast along its rows"),
    ("m: f32[BM] = -inf", "m: f32[65] = -inf",
     "a register vector is f32 or i32 with at most 64 values"),
])
def test_diagnostics(old, new, message):
    assert message in edit_error(SOFTMAX, old, new).message


def test_a_row_vector_broadcasts_over_tiles_whose_rows_its_threads_hold():
    """A [64, 4] tile is spread row-major (4 columns are no wgmma column group):
    its threads do not hold the vector's rows."""
    text = SOFTMAX.replace("        m = m_new\n",
                           "        m = m_new\n        q: f32[BM, 4] = 1.0 + m[:, None]\n", 1)
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("softmax.hk", text))
    assert ("'m' (a vector of a warpgroup's [64, N] tiles) is broadcast (m[:, None]) over "
            "tiles whose rows its threads hold") in info.value.message
    assert info.value.message.endswith("not over a row-major tile [64, 4]")


def test_broadcasts_along_one_axis_combine_into_a_per_row_term():
    """`m_new[:, None] * c + ...` is one value per row, broadcast over the tile
    it meets (the per-row term of a fused softmax argument)."""
    text = SOFTMAX.replace("exp2(x - m_new[:, None])",
                           "exp2(x * 1.0 - (m_new[:, None] * 0.75 + m_new[:, None] * 0.25))")
    front_end = driver.check(SourceFile("softmax.hk", text))
    problem = make_problem(driver.lower(front_end), {"M": 64, "N": 128})
    x = problem.inputs["X"]
    e = np.exp2(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(expected_outputs(front_end, problem)["Y"],
                               e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_broadcasts_along_different_axes_do_not_combine():
    text = SOFTMAX.replace("shared sx: f32[BM, BN]",
                           "shared sx: f32[BM, BN]\n    shared sv: f32[BN]")
    message = edit_error(text, "exp2(x - m_new[:, None])",
                         "exp2(x - (m_new[:, None] + sv[None, :]))").message
    assert "broadcasts combine along one axis with as many values" in message


@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_samples_match_float64_numpy_on_ragged_rows(name):
    """M = 100, N = 168: partial row and column tiles (TMA zero fill; softmax
    masks the padded columns to -inf). What the simulator checks against, versus
    the formula in float64: the difference is bf16 rounding."""
    from tests.conftest import ROOT
    front_end = driver.check(driver.read_source(ROOT / "samples" / f"{name}.hk"))
    problem = make_problem(driver.lower(front_end), {"M": 100, "N": 168})
    got = expected_outputs(front_end, problem)["Y"]
    x = problem.inputs["X"].astype(np.float64)
    if name == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    else:
        w = problem.inputs["W"].astype(np.float64)
        want = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
