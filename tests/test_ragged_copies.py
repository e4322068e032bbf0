"""Ragged boxes: a tma copy's `START : END` index (element coordinates, clipped
at END). The front end's rules, each refused at the index with its reason, the
IR it builds, and the code it generates (checked against the derivation in
hopperc/runtime/ragged_view.py)."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir.explain import schedule
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import statement
from test_diagnostics import expect_error
from tests.conftest import ROOT

ROWS = """\
kernel rows(X: bf16[M, N], Y: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- LOAD
    tma STORE <- buf
}
"""


def rows(load: str = "X[s + tile.m * BM : e, tile.n]",
         store: str = "Y[s + tile.m * BM : e, tile.n]", header: str = "") -> str:
    text = ROWS.replace("LOAD", load).replace("STORE", store)
    return text.replace("X: bf16[M, N]", header) if header else text


def copies(text: str) -> list[ir.AsyncLoad | ir.AsyncStore]:
    kernel = driver.check(SourceFile("t.hk", text))
    return [s for s in walk(kernel.body) if isinstance(s, (ir.AsyncLoad, ir.AsyncStore))]


def test_ragged_copy_keeps_start_as_its_coordinate_and_end_as_its_bound():
    load, store = copies(rows())
    for copy in (load, store):
        assert copy.ragged == ir.RaggedBound(0, ir.Scalar(ir.ScalarKind.PARAM, "e"))
        start, column = copy.coords
        assert statement_coords(copy) == "s + tile.m * 64 : e, tile.n * 64"
        assert column == ir.ScalarOp("*", ir.Scalar(ir.ScalarKind.TILE, "n"), ir.const(64))
    assert load.nbytes == 64 * 64 * 2  # the whole box arrives, zeros past END included


def statement_coords(copy) -> str:
    text = statement(copy)
    return text[text.index("[", text.index(copy.tensor)) + 1:text.index("]", text.index(
        copy.tensor))]


def test_middle_dimension_of_a_rank_three_tensor():
    text = rows("X[tile.n, s : e, 0]", "Y[tile.n, s : e, 0]",
                "X: bf16[B, M, N]").replace("Y: bf16[M, N]", "Y: bf16[B, M, N]")
    load, _ = copies(text)
    assert load.ragged.dim == 1 and load.box == (1, 64, 64)


REFUSED = [
    pytest.param(rows("X[s : e, 0 : 64]"), "0 : 64", ["at most one START : END"],
                 id="two_ragged_indices"),
    pytest.param(rows("X[tile.m, s : e]"), "s : e]", ["innermost dimension"],
                 id="innermost_dimension"),
    pytest.param(rows("X[0, s : e, 0, 0]", "Y[0, 0 + tile.m, 0, 0]", "X: bf16[A, B, M, N]")
                 .replace("Y: bf16[M, N]", "Y: bf16[A, B, M, N]"), "s : e",
                 ["at most 3 dimensions", "'X' has 4"], id="rank_four"),
    pytest.param("""\
kernel narrow(X: bf16[M, 36], Y: bf16[M, 36], s: i32, e: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared buf: bf16[BM, 32] swizzle 64B
    tma buf <- X[s : e, 0]
    tma Y[tile.m, 0] <- buf
}
""", "s : e", ["stride (72 bytes)", "multiple of 16"],
        id="stride_not_a_multiple_of_16_bytes"),
]


@pytest.mark.parametrize("text, marker, keywords", REFUSED)
def test_refused_at_the_index(text, marker, keywords):
    expect_error(text, marker, keywords)


def test_bulk_copy_refuses_a_ragged_index():
    text = """\
kernel flat(X: f32[N], Y: f32[N], s: i32, e: i32)
    tile(B = 256) grid(i: N / B) threads 128
{
    shared buf: f32[B]
    bulk buf <- X[s : e]
    bulk Y[tile.i] <- buf
}
"""
    expect_error(text, "s : e", ["bulk copy", "tma copy"])


def test_ragged_index_in_a_loop_of_a_one_role_ring_keeps_its_end():
    """pipeline_one_role_rings issues the loads ahead: both START and END name
    the iteration the load is for (the prologue's k, the loop's k + 2)."""
    text = open(ROOT / "samples" / "gemm_one_role.hk").read().replace(
        "kernel gemm_one_role(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])",
        "kernel ring(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N], e: i32)").replace(
        "tma sa <- A[tile.m, k]", "tma sa <- A[tile.m * BM + k : e + k, k]")
    kernel = driver.lower(driver.check(SourceFile("t.hk", text)))
    loads = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.ragged]
    ends = []
    for load in loads:
        start, end = statement_coords(load).split(", ")[0].split(" : ")
        assert start.replace("tile.m * 128 + ", "") == end.replace("e + ", ""), (start, end)
        ends.append(end)
    assert ends == ["e + k", "e + (k + 2)"]


def test_generated_copy_uses_the_view_coordinates():
    """Innermost first: the column, ROWS - END' + START, END', ROWS, with END'
    clamped to [0, M] once per copy (runtime/ragged_view.py)."""
    code = driver.generate(SourceFile("t.hk", rows())).cuda
    end = "const int hk_ragged_end = min(max(u_e, 0), u_M);"
    assert code.count(end) == 2
    coords = ('"r"((hk_tile_n * 64)), "r"((1073741824 - hk_ragged_end) + '
              'hk_wrap_add(u_s, (hk_tile_m * 64))), "r"(hk_ragged_end), "r"(1073741824)')
    assert code.count(coords) == 2
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile" in code
    assert "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group" in code


def test_sass_issues_the_view_copies():
    """A rank-2 tensor's ragged copies go through its 4-D view (UTMALDG.4D /
    UTMASTG.4D), a rank-3 tensor's through its 5-D one; the copies of the
    rows kernel are its only TMA instructions."""
    built = driver.build(SourceFile("t.hk", rows()))
    (code,) = sm.functions(built.result.cubin).values()
    assert [i.opcode for i in code if i.base in ("UTMALDG", "UTMASTG")] == [
        "UTMALDG.4D", "UTMASTG.4D"]
    planes = rows("X[s : e, tile.m, tile.n]", "Y[s : e, tile.m, tile.n]",
                  "X: bf16[B, M, N]").replace("Y: bf16[M, N]", "Y: bf16[B, M, N]").replace(
        "bf16[BM, BN] swizzle", "bf16[2, 32, BN] swizzle")
    built = driver.build(SourceFile("t.hk", planes))
    (code,) = sm.functions(built.result.cubin).values()
    assert [i.opcode for i in code if i.base in ("UTMALDG", "UTMASTG")] == [
        "UTMALDG.5D", "UTMASTG.5D"]


def test_ragged_load_a_cluster_shares_stays_each_blocks_own():
    """B's box is the same for both blocks of a cluster along m, so it would be
    multicast; ragged, it stays each block's own, and explain says why."""
    text = (ROOT / "samples" / "gemm_multicast.hk").read_text().replace(
        "C: bf16[M, N])", "C: bf16[M, N], e: i32)").replace(
        "tma sb <- B[tile.n, k]", "tma sb <- B[tile.n * BN : e, k]")
    kernel = driver.lower(driver.check(SourceFile("t.hk", text)))
    loads = {s.tensor: s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad)}
    assert loads["B"].multicast == 1 and isinstance(loads["B"].unicast, ir.RaggedUnicast)
    assert loads["A"].multicast == 1 and loads["A"].unicast is None  # varies along m
    notes = "\n".join(schedule(kernel))
    assert "B's loads into sb" in notes and "its box is ragged" in notes


AGAIN = """\
kernel again(X: bf16[M, N], Y: bf16[M, N], e: i32)
    tile(BM = 64, BN = 64) grid(one: 1) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    shared back: bf16[BM, BN] swizzle 128B
    tma buf <- X[0, 0]
    tma Y[STORE, 0] <- buf
    tma back <- Y[1, 0]
    tma X[1, 0] <- back
}
"""


@pytest.mark.parametrize("store, waits", [("0 : e", True), ("0", False)],
                         ids=["ragged", "negative_whole_box"])
def test_ragged_store_is_taken_as_anywhere_along_its_rows(store, waits):
    """complete_bulk_stores: Y's box 1 is apart from box 0, but a ragged store's
    rows are not known, so the load of Y[1, 0] waits for its writes."""
    kernel = driver.lower(driver.check(SourceFile("t.hk", AGAIN.replace("STORE", store))))
    printed = [statement(s) for s in walk(kernel.body)]
    load = next(i for i, s in enumerate(printed) if s.startswith("tma.load back"))
    assert ("cp.async.bulk.wait_group 0" in printed[load - 1]) is waits


READ_BACK = """\
kernel back(X: bf16[M, N], Y: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    shared back: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    tma STORE <- buf
    tma back <- Y[tile.m, tile.n]
}
"""


def test_another_tiles_ragged_store_may_reach_the_box_a_block_reads():
    """global_reads: Y[tile.m, tile.n] is the block's own box for a plain store
    at the same coordinates, not for a ragged one (another tile's START : END
    may reach it)."""
    driver.check(SourceFile("t.hk", READ_BACK.replace("STORE", "Y[tile.m, tile.n]")))
    expect_error(READ_BACK.replace("STORE", "Y[s + tile.m * BM : e, tile.n]"),
                 "tma back <- Y", ["another block may store"])
