"""`T[i, j] += s`: a scalar added to one element of global memory (a one-row
vector's ir.GlobalRowStore with atomic=True): one thread's red.global.add, once
by the threads that run the statement, or once by each warpgroup where it names
`wg`. The simulator adds in its schedule's order and finds an add racing a
plain store of the same element."""
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
from tests.conftest import ROOT, edit_error

# Each block adds twice its tile's first element to Count[0], each of its
# warpgroups 1 to Count[1 + wg], and the block's tile row + 1 to Tiles[0].
BLOCK_ADDS = """kernel block_adds(X: f32[M, N], Count: f32[4], Tiles: i32[1])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 256
{
    c: f32 = X[BM * tile.m, BN * tile.n]
    Count[0] += 2.0 * c
    Count[1 + wg] += 1.0
    Tiles[0] += tile.m + 1
}
"""


def test_each_block_adds_once_and_each_warpgroup_once():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((97, 200)).astype(np.float32)  # ragged: 2 x 4 blocks
    got = hopperc.simulate(SourceFile("adds.hk", BLOCK_ADDS), {"X": x}, schedules=3)
    want = 2 * x[::64, ::64].astype(np.float64).sum()
    assert abs(got["Count"][0] - want) <= 8 * 2 ** -22 * 2 * np.abs(x[::64, ::64]).sum()
    np.testing.assert_array_equal(got["Count"][1:], [8.0, 8.0, 0.0])
    np.testing.assert_array_equal(got["Tiles"], [4 * (1 + 2)])


def test_check_is_clean_on_ragged_shapes():
    report = driver.simulate(SourceFile("adds.hk", BLOCK_ADDS), shapes={"M": 97, "N": 200},
                             seeds=4, search=100)
    assert report.ok, [f.headline() for f in report.findings]


def test_one_thread_adds_over_the_block_and_each_warpgroup():
    lowered = driver.lower(driver.check(SourceFile("adds.hk", BLOCK_ADDS)))
    adds = [s for s in walk(lowered.body) if isinstance(s, ir.GlobalRowStore)]
    assert [(s.rows, s.threads, s.atomic, s.span.line) for s in adds] == \
        [(1, 256, True, 5), (1, 128, True, 6), (1, 256, True, 7)]
    built = driver.build(SourceFile("adds.hk", BLOCK_ADDS))
    assert built.result.ptx.count("red.global.add.f32") == 2
    assert built.result.ptx.count("red.global.add.s32") == 1
    (code,) = sm.functions(built.result.cubin).values()
    reds = sorted(i.opcode.split(".")[3] for i in code if i.base == "REDG")
    assert reds == ["F32", "F32", "S32"]


def test_negative_an_add_racing_a_plain_store_of_the_element_is_a_race():
    # Warpgroup 1 stores rows 64 .. 127 while thread 0 (warpgroup 0) adds to row 64.
    text = """kernel mixed(X: f32[M, 64], R: f32[M])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[64, 64] = sx[wg]
    R[BM * tile.m + 64 * wg : M] = rowmax(x)
    R[BM * tile.m + 64] += 1.0
}
"""
    report = driver.simulate(SourceFile("mixed.hk", text), shapes={"M": 128}, seeds=4,
                             search=50)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races, [f.headline() for f in report.findings]
    assert {races[0].span.line, races[0].related.line} == {7, 8}


@pytest.mark.parametrize("old, new, message", [
    ("Count: f32[4]", "Count: e4m3[4]", "'Count' is e4m3, which has no red.global.add"),
    ("Count[0] += 2.0 * c", "Count[0 : 1] += 2.0 * c",
     "a scalar is added to one element of 'Count': index every dimension by element"),
    ("Count[0] += 2.0 * c", "Count[0] += f32(row())", "the value added to one element is a "
                                                      "scalar"),
    ("Count[0] += 2.0 * c", "Count[lane % 4] += c", "this index names 'lane'"),
    ("Count[0] += 2.0 * c", "Count[0] = 2.0 * c", "a scalar is added to one element: "
                                                  "T[i, j] += s"),
])
def test_diagnostics(old, new, message):
    error = edit_error(BLOCK_ADDS, old, new)
    assert message in error.message and error.span.line == 5


def test_a_value_that_differs_between_lanes_is_refused():
    error = edit_error(BLOCK_ADDS, "Count[1 + wg] += 1.0", "k: i32 = lane\n    Count[1] += k")
    assert "this value names 'lane'" in error.message and error.span.line == 7


def test_pingpong_warpgroups_add_once_per_tile_they_take():
    """The consumer's warpgroups take tiles in turn: each adds for its own tiles;
    the producer warp adds once per tile it loads."""
    text = driver.read_source(ROOT / "samples" / "gemm_pingpong.hk").text
    text = text.replace("C: bf16[M, N])", "C: bf16[M, N], Tiles: i32[2])")
    text = text.replace("        acc: f32[BM, BN] = 0\n",
                        "        acc: f32[BM, BN] = 0\n        Tiles[0] += 1\n")
    text = text.replace("    role load: warp regs 40 {\n",
                        "    role load: warp regs 40 {\n        Tiles[1] += 1\n")
    a, b = np.zeros((128, 64), np.float32), np.zeros((512, 64), np.float32)  # 2 x 2 tiles
    got = hopperc.simulate(SourceFile("pp.hk", text), {"A": a, "B": b}, schedules=2)
    np.testing.assert_array_equal(got["Tiles"], [4, 4])
    lowered = driver.lower(driver.check(SourceFile("pp.hk", text)))
    assert [s.threads for s in walk(lowered.body) if isinstance(s, ir.GlobalRowStore)] == \
        [128, 32]
