"""Reads of global memory another block (or role) may write are refused at the
read: nothing in a kernel orders one block's global writes before another
block's reads. A block's own boxes, and tensors the kernel never stores, are fine."""
import pytest

from hopperc import driver
from tests.conftest import source
from tests.test_diagnostics import expect_error

OWN_TILE = """\
kernel own(X: bf16[M, N], Y: bf16[M, N], Z: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- sx
    tma sx <- Y[tile.m, tile.n]
    tma Z[tile.m, tile.n] <- sx
}
"""

# The fused residual add + RMSNorm shape: a block owns rows tile.m and passes
# over them twice, storing column tiles j, then reading them back.
OWN_ROWS = """\
kernel rows(X: bf16[M, N], R: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        tma R[tile.m, j] <- sx
    }
    for k in 0 .. N / BN {
        tma sx <- R[tile.m, k]
        tma Y[tile.m, k] <- sx
    }
}
"""

SUBTILES = """\
kernel subtiles(X: bf16[M, N], Y: bf16[M, N], Z: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / (4 * BN)) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    for j in 0 .. 4 {
        tma sx <- X[tile.m, tile.n * 4 + j]
        tma Y[tile.m, tile.n * 4 + j] <- sx
    }
    for k in 0 .. 4 {
        tma sx <- Y[tile.m, tile.n * 4 + k]
        tma Z[tile.m, tile.n * 4 + k] <- sx
    }
}
"""


@pytest.mark.parametrize("text", [OWN_TILE, OWN_ROWS, SUBTILES],
                         ids=["own_tile", "own_rows", "own_subtiles"])
def test_negative_reading_boxes_the_block_stores_is_accepted(text):
    driver.check(source(text))


def test_negative_reading_a_tensor_never_stored_is_accepted():
    driver.check(source(OWN_TILE.replace("tma sx <- Y[tile.m, tile.n]", "tma sx <- X[0, 0]")))


def test_reading_another_tiles_box_is_refused_at_the_read():
    text = OWN_TILE.replace("tma sx <- Y[tile.m, tile.n]", "tma sx <- Y[tile.m, 0]")
    expect_error(text, "tma sx <- Y[tile.m, 0]",
                 ["another block may store", "line 6", "tile.n", "nothing in a kernel orders"])


def test_reading_a_column_of_tiles_in_a_loop_is_refused():
    text = OWN_TILE.replace("    tma sx <- Y[tile.m, tile.n]\n",
                            "    for k in 0 .. N / BN {\n        tma sx <- Y[tile.m, k]\n    }\n")
    expect_error(text, "tma sx <- Y[tile.m, k]", ["another block may store", "tile.n"])


def test_subtiles_reaching_past_the_blocks_own_are_refused():
    """k in 0 .. 5 reads subtile 4, the next block's first."""
    text = SUBTILES.replace("for k in 0 .. 4", "for k in 0 .. 5")
    expect_error(text, "tma sx <- Y[tile.m, tile.n * 4 + k]", ["another block may store"])


def test_reading_a_vector_other_blocks_store_is_refused():
    text = """\
kernel v(S: f32[N], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(n: N / BN) threads 128
{
    shared ss: f32[BN]
    shared sy: f32[BM, BN]
    ss = 1.0
    bulk S[tile.n] <- ss
    s: f32[BN] = S[0]
    sy = 1.0
    sy = sy * s[None, :]
    tma Y[0, tile.n] <- sy
}
"""
    expect_error(text, "sy = sy * s[None, :]", ["'S' that another block may store"])
    driver.check(source(text.replace("S[0]", "S[tile.n]")))


ROLES = """\
kernel ws(A: bf16[M, K], C: bf16[M, K])
    tile(BM = 64, BK = 64) grid(m: M / BM)
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sc: bf16[BM, BK] swizzle 128B
    role producer: warp regs 40 {
        tma sa <- C[tile.m, 0]
    }
    role consumer: warpgroup regs 232 {
        sc = 1.0
        tma C[tile.m, 0] <- sc
    }
}
"""


def test_reading_what_another_role_stores_is_refused():
    expect_error(ROLES, "tma sa <- C[tile.m, 0]", ["role 'consumer' stores", "another role"])


def test_negative_reading_boxes_apart_from_another_roles_stores_is_accepted():
    """The producer reads C's columns 64 .. 127 of the block's rows, the consumer
    stores columns 0 .. 63: no byte in common, whatever each role's progress."""
    text = ROLES.replace("tma sa <- C[tile.m, 0]", "tma sa <- C[tile.m, 1]")
    driver.check(source(text))
    expect_error(text.replace("tma sa <- C[tile.m, 1]", "tma sa <- C[tile.m + 1, 1]"),
                 "tma sa <- C[tile.m + 1, 1]", ["another block may store", "tile.m"])


def test_manual_code_waits_for_the_writes_with_bulk_wait():
    """`bulk.wait n` is the plain cp.async.bulk.wait_group n (`bulk.wait_read n`
    the .read form)."""
    from hopperc.ir import nodes as ir
    from hopperc.ir.accesses import walk
    text = """\
kernel m(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128 manual
{
    shared buf: bf16[BM, BN] swizzle 128B
    if thread == 0 {
        tma Y[tile.m, tile.n] <- buf
        bulk.commit
        bulk.wait_read 1
        bulk.wait 0
    }
}
"""
    waits = [s for s in walk(driver.check(source(text)).body) if isinstance(s, ir.BulkWaitRead)]
    assert [(w.pending, w.read) for w in waits] == [(1, True), (0, False)]


def test_a_coordinate_mixing_two_tile_axes_is_not_proven_apart():
    """Y[tile.m + tile.n, 0] is the same box for tiles (0, 1) and (1, 0): the other
    axis's term moves between tiles, so nothing proves the read apart from the
    other blocks' stores along m (or n)."""
    text = OWN_TILE.replace("tma Y[tile.m, tile.n] <- sx", "tma Y[tile.m + tile.n, 0] <- sx") \
        .replace("tma sx <- Y[tile.m, tile.n]", "tma sx <- Y[tile.m + tile.n, 0]")
    expect_error(text, "tma sx <- Y[tile.m + tile.n, 0]", ["another block may store"])
