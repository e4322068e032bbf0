"""insert_proxy_fences: fence generic -> async hand-offs, before the barrier, hoisted."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import (BRANCH_WRITE_THEN_STORE, COPY, CROSS_WRITE_BEFORE_LOOP, HEADER,
                                  LOAD_THEN_READ, WRITE_HANDED_OVER_EARLY,
                                  MMA_CHAIN, MMA_GENERIC_OPERAND, READ_THEN_REFILL,
                                  REWRITE_EACH_ITERATION, REWRITE_FIRST_LOOP,
                                  SLICE_WRITE_BESIDE_LOAD, STORE_LOOP, WRITE_THEN_STORE)

PASS = "insert_proxy_fences"


def test_fence_in_writers_before_the_handoff_barrier(tmp_path):
    filecheck(ir_after(WRITE_THEN_STORE, PASS), """
CHECK: st.shared sy
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: why: sy written by st.shared (t.hk:5), read by TMA store (t.hk:6)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_negative_async_to_async(tmp_path):
    assert "fence.proxy" not in ir_after(COPY, PASS)


def test_negative_async_write_then_generic_read(tmp_path):
    assert "fence.proxy" not in ir_after(LOAD_THEN_READ, PASS)


def test_store_loop_gets_one_hoisted_fence(tmp_path):
    out = ir_after(STORE_LOOP, PASS)
    assert out.count("fence.proxy.async") == 1
    filecheck(out, """
CHECK: st.shared sc
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: for i in 0 .. 2:
CHECK-NOT: fence
""", tmp_path)


def test_write_in_one_branch_then_store_after_join(tmp_path):
    out = ir_after(BRANCH_WRITE_THEN_STORE, PASS)
    fence = next(line for line in out.splitlines() if "fence.proxy" in line)
    assert fence.startswith("  fence"), "the fence sits after the join, not in the branch"
    filecheck(out, """
CHECK: if flag > 0:
CHECK-NEXT: st.shared sy
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: sy written by st.shared (t.hk:7), read by TMA store (t.hk:9)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_rewrite_each_iteration_fences_each_handoff(tmp_path):
    out = ir_after(REWRITE_EACH_ITERATION, PASS)
    assert out.count("fence.proxy.async") == 1  # inside the loop: one per hand-off
    filecheck(out, """
CHECK: for i in 0 .. 4:
CHECK: st.shared sy
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store
""", tmp_path)


def test_generic_read_then_async_refill(tmp_path):
    filecheck(ir_after(READ_THEN_REFILL, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: sx read by ld.shared (t.hk:7), written by TMA load (t.hk:6)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: mbarrier.arrive.expect_tx
""", tmp_path)


def test_negative_tma_load_then_wgmma(tmp_path):
    """async -> async: the mbarrier wait orders them, no fence."""
    assert "fence.proxy" not in ir_after(MMA_CHAIN, PASS).split("st.shared sy")[0]


def test_generic_write_of_a_wgmma_operand(tmp_path):
    filecheck(ir_after(MMA_GENERIC_OPERAND, PASS), """
CHECK: st.shared sa = 1
CHECK: fence.proxy.async.shared::cta
CHECK-SAME: why: sa written by st.shared (t.hk:9), read by wgmma (t.hk:10)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: wgmma acc = sa @ sb^T
""", tmp_path)


def test_writes_in_manual_code_are_fenced_before_an_automatic_store(tmp_path):
    """The compiler writes nothing inside a manual block, but sees its accesses:
    the automatic store after it gets the fence (in every thread, after the
    block) and the hand-off barrier."""
    text = HEADER + """    shared sx: bf16[BM, BN]
    manual {
        sx = 1.0
    }
    tma Y[tile.m, tile.n] <- sx
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: manual:
CHECK-NEXT: st.shared sx = 1
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: why: sx written by st.shared (t.hk:6), read by TMA store (t.hk:8)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_an_async_read_in_manual_code_is_fenced_before_the_block(tmp_path):
    text = HEADER + """    shared sx: bf16[BM, BN]
    sx = 1.0
    manual {
        elect {
            tma Y[tile.m, tile.n] <- sx
        }
    }
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sx = 1
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: manual:
""", tmp_path)


def test_slices_of_one_buffer_are_fenced_apart(tmp_path):
    """The load into slice 1 needs no fence after st.shared into slice 0; the
    store of slice 0 does."""
    filecheck(ir_after(SLICE_WRITE_BESIDE_LOAD, PASS), """
CHECK: st.shared two[0 of 2]
CHECK-NOT: fence.proxy
CHECK: tma.load two[1 of 2]
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: why: two written by st.shared (t.hk:5), read by TMA store (t.hk:7)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_no_fence_ahead_of_a_loop_whose_body_fences_before_its_store(tmp_path):
    """Item 3c: the fence before the store in the body also covers the write
    before the loop (fence.proxy.async orders all the thread's earlier writes)."""
    filecheck(ir_after(REWRITE_FIRST_LOOP, PASS), """
CHECK: st.shared sy = bf16(0)
CHECK-NEXT: for i in 0 .. 4:
CHECK-NOT: fence.proxy.async
CHECK: st.shared sy = bf16(1)
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store
""", tmp_path)


def test_a_write_handed_over_by_an_earlier_barrier_is_fenced_before_it(tmp_path):
    """Each thread's fence must precede the barrier after which the issuer may
    read: here the one before the transposed read, not the store."""
    filecheck(ir_after(WRITE_HANDED_OVER_EARLY, PASS), """
CHECK: st.shared sx = bf16((y * 2))
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: why: sx written by st.shared (t.hk:8), read by TMA store (t.hk:10)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: t: f32[64, 64]
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_a_warpgroup_barrier_does_not_hand_over_another_warpgroups_write(tmp_path):
    """The loop's fence sits before bar.sync 2 + wg, which orders only each
    warpgroup's own rows; warpgroup 1's write into warpgroup 0's rows before the
    loop is fenced before the block barrier ahead of the loop."""
    filecheck(ir_after(CROSS_WRITE_BEFORE_LOOP, "insert_proxy_fences"), """
CHECK: st.shared sz(in sy)[wg of 4]
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 256
CHECK-NEXT: for i in 0 .. 4:
""", tmp_path)


def test_a_write_handed_over_before_manual_code_is_fenced_before_that_barrier(tmp_path):
    """The barrier before the manual region hands sx over; no barrier follows the
    region, so the fence goes before that barrier, not after the region."""
    text = """kernel k(X: f32[M, 64], Y: f32[M, 64], Z: f32[M, 64])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    shared sz: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    sx = sx * 2.0
    manual {
        sz = sx^T
    }
    tma Y[tile.m, 0] <- sx
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sx = (ld.shared(sx) * 2)
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: manual:
CHECK-NOT: fence.proxy.async
CHECK: tma.store Y
""", tmp_path)
