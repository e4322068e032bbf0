"""`tma T[i, j] += buf`: a TMA reduce-add (cp.reduce.async.bulk.tensor .add),
ordered by the store's passes (proxy fence + barrier before it, commit_group
after it, wait_group.read before its source is rewritten or the block exits),
refused where PTX has no such add, and what ptxas makes of it (UTMAREDG)."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend.cubin_tools import sass_instructions
from hopperc.codegen.names import kernel_symbol
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import print_kernel
from test_diagnostics import case, expect_error
from tests.conftest import ROOT

ADD = """\
kernel add_tile(X: f32[M, N], Y: f32[M, N])
    tile(BM = 64, BN = 32) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: f32[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] += buf
}
"""


def test_reduce_add_is_a_store_with_the_add_flag_and_the_stores_syncs():
    lowered = driver.lower(driver.check(SourceFile("add.hk", ADD)))
    (store,) = [s for s in walk(lowered.body) if isinstance(s, ir.AsyncStore)]
    assert store.reduce_add and store.tensor == "Y"
    text = print_kernel(lowered)
    assert "tma.reduce-add Y[tile.m * 64, tile.n * 32] += buf" in text
    after = text[text.index("tma.reduce-add"):]
    assert "cp.async.bulk.commit_group" in after
    assert "cp.async.bulk.wait_group.read 0" in after


def test_reduce_add_lowers_to_cp_reduce_and_utmaredg():
    built = driver.build(SourceFile("add.hk", ADD))
    assert ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
            in built.result.ptx)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" not in built.result.ptx
    sass = sass_instructions(built.result.cubin)[kernel_symbol("add_tile")]
    assert any(i.startswith("UTMAREDG.2D.ADD") for i in sass), sass
    assert not any(i.startswith("UTMASTG") for i in sass)


def test_gemm_splitk_sass_reduce_adds_each_subtile():
    """Each warpgroup's 8 subtiles of 64 x 32 f32: 8 UTMAREDG.2D.ADD in the code
    (one issuing thread per warpgroup runs them), no plain TMA store; the main
    loop is gemm_bf16's (4 HGMMA.64x256x16 per k-step)."""
    built = driver.build(driver.read_source(ROOT / "samples" / "gemm_splitk.hk"))
    sass = sass_instructions(built.result.cubin)[kernel_symbol("gemm_splitk")]
    assert sum(i.startswith("UTMAREDG.2D.ADD") for i in sass) == 8
    assert not any(i.startswith("UTMASTG") for i in sass)
    assert sum(i.startswith("HGMMA.64x256x16.F32.BF16") for i in sass) >= 4
    assert built.result.resources.spill_stores == 0


BULK = """\
kernel bulk_add(X: f32[M], V: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared buf: f32[BM]
    bulk buf <- X[tile.m]
    bulk V[tile.m] += buf
}
"""

REFUSED = [
    case("reduce_add_into_shared", ADD, [("tma buf <- X[tile.m, tile.n]",
                                          "tma buf += X[tile.m, tile.n]")],
         "tma buf +=", "'+=' adds a shared tile into a global tensor"),
    case("reduce_add_of_fp8", ADD.replace("f32", "e4m3").replace("BN = 32", "BN = 128"), [],
         "tma Y", "a TMA reduce-add adds f32, f16, bf16, i32 elements, not e4m3"),
    case("tma_copy_with_equals", ADD, [("+= buf", "= buf")], "= buf",
         "'tma DST <- SRC'", "'tma T[i, j] += buf'"),
    # what a copy takes after its destination: '<-' or '+=' ('=' is always refused)
    case("tma_copy_with_minus_equals", ADD, [("+= buf", "-= buf")], "-= buf",
         "unexpected '-'; expected '+=', '.', '<-', '[', '^'"),
    case("tile_added_without_tma", ADD, [("tma Y[tile.m, tile.n] +=", "Y[tile.m, tile.n] +=")],
         "Y[tile.m, tile.n] +=", "'+=' into 'Y' is a TMA reduce-add of a shared buffer: "
         "tma Y[...] += buf"),
    case("bulk_reduce_add", BULK, [], "+= buf", "a reduce-add is a TMA copy's "
         "(cp.reduce.async.bulk.tensor): 'tma T[i] += buf'"),
    case("bulk_copy_with_equals", BULK, [("+= buf", "= buf")], "= buf",
         "a bulk copy is 'bulk DST <- SRC'"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", REFUSED)
def test_refused_reduce_add(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "i32"])
def test_reduce_add_takes_the_types_ptx_adds(dtype) -> None:
    driver.check(SourceFile("add.hk", ADD.replace("f32", dtype)))


def test_i32_reduce_add_is_an_exact_integer_add_that_wraps():
    """The .s32 add of cp.reduce.async.bulk.tensor is an integer add: exact past
    2^24 (f32 would round 2^24 + 3 to 2^24 + 4) and wrapping past 2^31, in the
    simulator's blocks as in its numpy reference (`check`, a ragged shape)."""
    source = SourceFile("iadd.hk", ADD.replace("f32", "i32").replace(" swizzle 128B", ""))
    x = np.ones((70, 40), np.int32)
    x[1] = 2 ** 31 - 1
    y = np.full((70, 40), 2 ** 24 + 2, np.int32)
    y[1] = 5
    out = hopperc.simulate(source, {"X": x, "Y": y})
    want = np.full((70, 40), 2 ** 24 + 3, np.int64)
    want[1] = -2 ** 31 + 4
    np.testing.assert_array_equal(out["Y"], want)
    report = driver.simulate(source, None, {"M": 70, "N": 40}, seeds=2, search=10)
    assert report.ok, [line for f in report.findings for line in f.lines()]


READ_BACK = """\
kernel add_then_read(X: f32[M, N], Y: f32[M, N], Z: f32[M, N])
    tile(BM = 64, BN = 32) grid(m: M / BM, n: N / BNS) threads 128
{
    shared buf: f32[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] += buf
    tma buf <- Y[tile.m, tile.n]
    tma Z[tile.m, tile.n] <- buf
}
"""


def test_reading_back_a_blocks_own_adds_waits_for_their_completion():
    """The plain wait_group (not .read) before the load of the box the block added
    into: its adds are then complete; `check` is clean."""
    source = SourceFile("r.hk", READ_BACK.replace("BNS", "BN"))
    text = print_kernel(driver.lower(driver.check(source)))
    reload = text.index("tma.load buf <- Y")
    assert "cp.async.bulk.wait_group 0" in text[text.index("tma.reduce-add"):reload]
    report = driver.simulate(source, None, {"M": 100, "N": 40}, seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_negative_reading_back_what_other_blocks_add_is_refused():
    """With a second grid axis the box is added into by two blocks: the front end
    refuses the read (nothing orders the other block's adds before it)."""
    text = READ_BACK.replace("BNS", "BN, s: 2")
    expect_error(text, "tma buf <- Y", ["another block may store", "another tile.s"])
