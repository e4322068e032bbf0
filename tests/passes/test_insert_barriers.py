"""insert_barriers: named barriers scoped to the role, only at real hand-offs."""
import pytest

from tests.conftest import filecheck, ir_after
from tests.passes.kernels import (ALTERNATE_LOOP, COPY, DOUBLE_BUFFERED_PLANES, HEADER, LOAD_THEN_READ, MMA_FUSED_LOOP, OWN_ELEMENTS,
                                  OWN_ROWS_REUSED, OWN_ROWS_REUSED_OTHER_LAYOUT, OWN_ROWS_STORE,
                                  OWN_ROWS_THROUGH_WGMMA, OWN_ROWS_WHOLE_STORE,
                                  READ_THEN_REFILL, REWRITE_EACH_ITERATION, REWRITE_FIRST_LOOP,
                                  SLICE_WRITE_BESIDE_LOAD, STORE_LOOP, SUBTILE_EPILOGUE,
                                  TRANSPOSED_ELEMENTS, MATRIX_REWRITE_LOOP, OWN_ROWS_LOOP,
                                  REWRITE_LOOP, F32_HEADER,
                                  WRITE_THEN_STORE)

PASS = "insert_barriers"


def test_generic_write_handed_to_store(tmp_path):
    filecheck(ir_after(WRITE_THEN_STORE, PASS), """
CHECK: st.shared sy
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sy written by st.shared (t.hk:5), read by TMA store (t.hk:6)
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_negative_load_then_read_needs_only_the_wait():
    out = ir_after(LOAD_THEN_READ, PASS)
    assert "bar.sync 1" not in out  # the mbarrier wait orders the TMA write for every thread


def test_negative_load_then_store_by_the_same_thread():
    assert "bar.sync 1" not in ir_after(COPY, PASS)


def test_store_loop_gets_one_barrier_before_the_loop(tmp_path):
    filecheck(ir_after(STORE_LOOP, PASS), """
CHECK: st.shared sc
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: for i in 0 .. 2:
CHECK-NOT: bar.sync
CHECK: tma.store
""", tmp_path)


def test_rewrite_after_store_waits_then_barrier(tmp_path):
    filecheck(ir_after(REWRITE_EACH_ITERATION, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: sy read by TMA store (t.hk:7), written by st.shared (t.hk:6)
CHECK-NEXT: st.shared sy
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_read_then_refill_waits_for_the_readers(tmp_path):
    filecheck(ir_after(READ_THEN_REFILL, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: sx read by ld.shared (t.hk:7), written by TMA load (t.hk:6)
CHECK-NEXT: mbarrier.arrive.expect_tx
""", tmp_path)


def test_roles_get_their_own_ids_and_thread_counts(tmp_path):
    text = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN)
{
    shared a: bf16[BM, BN]
    shared b: bf16[BM, BN]
    role first: warps 2 {
        a = 1.0
        tma Y[tile.m, tile.n] <- a
    }
    role second: warp {
        b = 2.0
        tma X[tile.m, tile.n] <- b
    }
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: role first warps 0..1:
CHECK: bar.sync 1, 64
CHECK: role second warps 2..2:
CHECK: bar.sync 2, 32
""", tmp_path)


def test_refill_after_wgmma_waits_then_barrier(tmp_path):
    """Each warp's wait_group covers its own part of the product: the TMA issuer
    refills sa only after every warp has waited."""
    filecheck(ir_after(MMA_FUSED_LOOP, PASS), """
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: wgmma.wait_group 0
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sa read by wgmma (t.hk:14), written by TMA load (t.hk:11)
CHECK-NEXT: mbarrier.arrive.expect_tx sa_sb_sb2_full[0]
""", tmp_path)


STORE_THEN_RELOAD = HEADER + """    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- sx
    tma sx <- X[tile.m, tile.n + 1]
    sy = sx
}
"""


def test_rearm_waits_until_every_waiter_passed(tmp_path):
    """Every thread waits on sx_full (a later read is everyone's). The issuer
    arms it again only after all of them passed the first wait: otherwise a
    slow thread would still wait on parity 0 when the barrier is past it."""
    filecheck(ir_after(STORE_THEN_RELOAD, PASS), """
CHECK: tma.store Y
CHECK: bar.sync 1, 128
CHECK-SAME: why: mbarrier sx_full waited on (t.hk:6), armed for the next phase by arrive.expect_tx (t.hk:8)
CHECK-NEXT: mbarrier.arrive.expect_tx sx_full[0]
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: tma.load sx
""", tmp_path)


def test_negative_issuer_alone_waits_so_rearming_needs_no_barrier():
    """A copy loop: only the issuer uses the data, so only it waits, and its
    own program order puts each wait before the next arm."""
    text = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        tma Y[tile.m, j] <- sx
    }
}
"""
    out = ir_after(text, PASS)
    assert "bar.sync 1" not in out
    assert "one_thread:  # t.hk:6\n      mbarrier.wait sx_full[0]" in out


def test_slices_of_one_buffer_are_tracked_apart(tmp_path):
    """Writing slice 0 does not order the load into slice 1: the barrier waits for
    the store of slice 0, after the load is issued."""
    filecheck(ir_after(SLICE_WRITE_BESIDE_LOAD, PASS), """
CHECK: st.shared two[0 of 2]
CHECK-NOT: bar.sync
CHECK: tma.load two[1 of 2]
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: two written by st.shared (t.hk:5), read by TMA store (t.hk:7)
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_own_rows_stored_per_warpgroup_meet_128_threads_at_a_time(tmp_path):
    """sa[wg] written by a warpgroup's threads, stored by that warpgroup's thread:
    bar.sync 2 + wg (ids 0 and 1 are the block's and the kernel's), 128 threads."""
    filecheck(ir_after(OWN_ROWS_STORE, PASS), """
CHECK: st.shared sa[wg of 2]
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-SAME: why: sa written by st.shared (t.hk:8), read by TMA store (t.hk:9)
CHECK-NEXT: tma.store Y[(2 * tile.m + wg) * 64, tile.n * 64] <- sa[wg of 2]
""", tmp_path)


def test_negative_a_whole_tile_store_meets_every_thread(tmp_path):
    """One thread stores both warpgroups' rows: all 256 threads must have written."""
    filecheck(ir_after(OWN_ROWS_WHOLE_STORE, PASS), """
CHECK: st.shared sa[wg of 2]
CHECK-NEXT: bar.sync 1, 256
CHECK-NEXT: tma.store Y[tile.m * 128, tile.n * 64] <- sa
""", tmp_path)


def test_own_rows_through_the_warpgroups_wgmma_and_store_stay_per_warpgroup(tmp_path):
    """Item 3e: rows a warpgroup wrote go to its own wgmma, its product to its own
    store, whose completion its issuer hands back before the rows are rewritten:
    every barrier is the warpgroup's."""
    out = ir_after(OWN_ROWS_THROUGH_WGMMA, PASS)
    assert "bar.sync 1," not in out
    filecheck(out, """
CHECK: st.shared sa[wg of 2]
CHECK: bar.sync 2 + wg, 128
CHECK-SAME: why: sa written by st.shared (t.hk:9), read by wgmma (t.hk:10)
CHECK: wgmma acc = sa[wg of 2]
CHECK: st.shared sy[wg of 2] = bf16(acc)
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-NEXT: tma.store
CHECK: cp.async.bulk.wait_group.read 0
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-SAME: why: sy read by TMA store (t.hk:12), written by st.shared (t.hk:13)
CHECK-NEXT: st.shared sy[wg of 2] = bf16((acc * 2))
""", tmp_path)


def test_own_rows_of_a_buffer_in_the_same_memory_and_layout(tmp_path):
    """sx reuses sy with sy's shape and swizzle: sx[wg] is sy[wg]'s bytes."""
    filecheck(ir_after(OWN_ROWS_REUSED, PASS), """
CHECK: bar.sync 2 + wg, 128
CHECK-SAME: why: sx read by ld.shared as 'sy' (t.hk:9), written by st.shared (t.hk:10)
CHECK-NEXT: st.shared sx(in sy)[wg of 2]
""", tmp_path)


def test_negative_own_rows_of_a_buffer_laid_out_otherwise(tmp_path):
    """sz row-major over sw's two column blocks: warpgroup 0's rows of sz hold
    warpgroup 1's rows of sw (the simulator finds the race if this barrier is
    narrowed), so every thread meets."""
    filecheck(ir_after(OWN_ROWS_REUSED_OTHER_LAYOUT, PASS), """
CHECK: bar.sync 1, 256
CHECK-SAME: why: sz read by ld.shared as 'sw' (t.hk:10), written by st.shared (t.hk:11)
CHECK-NEXT: st.shared sz(in sw)[wg of 2]
""", tmp_path)


def test_warpgroup_barrier_ids_follow_the_roles():
    """gemm_bf16: roles math (2 warpgroups) and load take ids 1 and 2; math's
    warpgroups take 3 and 4; the one-warp producer gets none."""
    from hopperc import driver
    from hopperc.passes.insert_barriers import warpgroup_barrier
    from tests.conftest import ROOT
    kernel = driver.check(driver.read_source(ROOT / "samples" / "gemm_bf16.hk"))
    math, load = kernel.roles
    assert warpgroup_barrier(kernel, math) == 3
    assert warpgroup_barrier(kernel, load) is None


def test_no_barrier_ahead_of_a_loop_whose_body_orders_the_same_hazard(tmp_path):
    """Item 3c: the body's barrier before its rewrite already follows the write
    before the loop on the first iteration: a barrier ahead of it would be paid
    for nothing. The loop runs 4 times, so no path skips the body."""
    filecheck(ir_after(REWRITE_FIRST_LOOP, PASS), """
CHECK: st.shared sy = bf16(0)
CHECK-NEXT: for i in 0 .. 4:
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: st.shared sy = bf16(1)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: tma.store
""", tmp_path)


def test_negative_a_loop_that_may_not_run_keeps_its_barrier_ahead(tmp_path):
    """With `0 .. N / 64` the loop may run zero times: the state after it is not
    the body's, so the barrier ahead of it stays (the later code relies on it)."""
    out = ir_after(REWRITE_FIRST_LOOP.replace("0 .. 4", "0 .. N / BN"), PASS)
    filecheck(out, """
CHECK: st.shared sy = bf16(0)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: for i in 0 .. N / 64:
""", tmp_path)


def test_a_thread_rereads_and_rewrites_its_own_elements_without_a_barrier(tmp_path):
    """Item 3d: the same [64, 64] grid over 128 threads in every statement, so
    each element stays with one thread: only the store's hand-off needs one."""
    out = ir_after(OWN_ELEMENTS, PASS)
    assert out.count("bar.sync 1, 128") == 1
    filecheck(out, """
CHECK: st.shared sx = z
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx written by st.shared (t.hk:7), read by TMA store (t.hk:10)
CHECK-NEXT: tma.store
""", tmp_path)


def test_negative_a_transposed_read_is_another_threads_element(tmp_path):
    filecheck(ir_after(TRANSPOSED_ELEMENTS, PASS), """
CHECK: y: f32[64, 64] wgmma = (ld.shared(sx^T) * 2)
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx read by ld.shared (t.hk:6), written by st.shared (t.hk:7)
CHECK-NEXT: st.shared sx = (y + 1)
""", tmp_path)


def test_negative_a_stmatrix_store_is_written_by_other_lanes(tmp_path):
    """A bf16 warpgroup tile is stored with stmatrix: lanes write rows that other
    lanes hold, so the rewrite after a read keeps its barrier."""
    text = HEADER + """    shared sx: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    y: f32[BM, BN] = f32(sx) * 2.0
    sx = bf16(y + 1.0)
    tma Y[tile.m, tile.n] <- sx
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: y: f32[64, 64]
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: st.shared sx = bf16((y + 1))
""", tmp_path)


def test_rearming_a_load_barrier_read_by_two_warpgroups_meets_every_thread(tmp_path):
    """The phase word every thread waited on is no warpgroup's rows: the arm for
    the next load waits for all 256 threads (this once raised KeyError)."""
    text = """kernel k(X: bf16[M, K], Y: bf16[M, K])
    tile(BM = 128, BK = 64) grid(m: M / BM) threads 256
{
    shared sx: bf16[BM, BK]
    tma sx <- X[tile.m, 0]
    for k in 1 .. K / BK {
        y: f32[64, BK] = f32(sx[wg])
        tma sx <- X[tile.m, k]
    }
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: y: f32[64, 64] wgmma = f32(ld.shared(sx[wg of 2]))
CHECK-NEXT: bar.sync 1, 256
CHECK-NEXT: mbarrier.arrive.expect_tx sx_full[0]
""", tmp_path)


def test_a_partial_store_wait_is_handed_to_every_writer(tmp_path):
    """Plane 1 is rewritten after `wait_group.read 1`, which completes plane 1's
    older store for the issuing thread only: the other writers wait at a barrier.
    (Both planes are one memory; the wait names the store sources it completes.)"""
    filecheck(ir_after(DOUBLE_BUFFERED_PLANES, PASS), """
CHECK: st.shared sc[0 of 2] = 1
CHECK: cp.async.bulk.wait_group.read 1
CHECK-SAME: why: sc read by TMA store (t.hk:9), written by st.shared (t.hk:8)
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sc read by TMA store (t.hk:9), written by st.shared (t.hk:8)
CHECK-NEXT: st.shared sc[1 of 2] = 2
""", tmp_path)


def test_per_warpgroup_planes_meet_128_threads_at_a_time(tmp_path):
    """sc[wg] and sc[2 + wg] are each warpgroup's own planes: the hand-offs to the
    store and back after the partial wait are the warpgroup's barrier."""
    out = ir_after(SUBTILE_EPILOGUE, PASS)
    assert "bar.sync 1, 256" not in out
    filecheck(out, """
CHECK: st.shared sc[wg of 4] = bf16(acc[:, 0:32])
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK: st.shared sc[2 + wg of 4] = bf16(acc[:, 32:64])
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK: cp.async.bulk.wait_group.read 1
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-SAME: why: sc read by TMA store (t.hk:11), written by st.shared (t.hk:14)
CHECK-NEXT: st.shared sc[wg of 4]
""", tmp_path)


RELOAD_AFTER_STORE = HEADER + """
    shared sx: bf16[BM, BN] swizzle 128B
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        sx = bf16(f32(sx) * 2.0)
        tma Y[tile.m, j] <- sx
    }
}
"""


def test_a_store_completed_before_the_next_load_needs_no_barrier(tmp_path):
    """Thread 0 completes the previous tile's store of sx (wait_group.read 0),
    then issues the load of the next tile; every thread waits for that load's
    phase before it writes sx, so the store is done for them: no barrier before
    the write (the one after it hands the write to the store; the proxy fence
    and the elected issuer come in later passes)."""
    filecheck(ir_after(RELOAD_AFTER_STORE, PASS), """
CHECK: for j in 0 .. N / 64:
CHECK: cp.async.bulk.wait_group.read 0
CHECK-NEXT: tma.load sx
CHECK-NEXT: mbarrier.wait sx_full[0]
CHECK-NEXT: flip
CHECK-NEXT: st.shared sx
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx written by st.shared
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_a_store_still_running_at_the_write_gets_its_barrier(tmp_path):
    """Without a load between the store and the rewrite, nothing but a barrier
    hands thread 0's completion of the store to the other threads."""
    text = RELOAD_AFTER_STORE.replace("        tma sx <- X[tile.m, j]\n", "").replace(
        "    for j in", "    tma sx <- X[tile.m, 0]\n    for j in")
    filecheck(ir_after(text, PASS), """
CHECK: for j in 0 .. N / 64:
CHECK: cp.async.bulk.wait_group.read 0
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx read by TMA store
CHECK-NEXT: st.shared sx
""", tmp_path)


@pytest.mark.parametrize("text", [REWRITE_LOOP, ALTERNATE_LOOP, OWN_ROWS_LOOP],
                         ids=["one_tile", "two_tiles_alternated", "own_rows_per_warpgroup"])
def test_a_loop_rewriting_each_threads_own_elements_gets_no_barrier(text):
    """Iteration i's writes and iteration i + 1's reads and writes put every
    element on the same thread: only the store's hand-off after the loop."""
    lines = ir_after(text, PASS).splitlines()
    barriers = [i for i, line in enumerate(lines) if "bar.sync 1," in line]
    assert len(barriers) == 1
    assert "read by TMA store" in lines[barriers[0]] and "tma.store" in lines[barriers[0] + 1]


def test_stmatrix_rewrites_of_one_view_need_no_barrier_between_them(tmp_path):
    """Each lane writes the rows it addresses, the same in every iteration: the
    one barrier (for the element-wise read before the loop, whose elements other
    lanes' rows overwrite) goes before the loop, not in it."""
    filecheck(ir_after(MATRIX_REWRITE_LOOP, PASS), """
CHECK: st: f32[64, 64] wgmma = f32(ld.shared(sx))
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx read by ld.shared (t.hk:6), written by st.shared (t.hk:9)
CHECK-NEXT: for i in 0 .. 4:
CHECK-NEXT: st = ((st * 0.5) + 1)
CHECK-NEXT: st.shared sx = bf16(st)
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: read by TMA store
""", tmp_path)


def test_negative_a_loop_that_reads_back_stmatrix_rows_keeps_its_barrier(tmp_path):
    """Rereading element-wise what stmatrix wrote: other lanes wrote those rows."""
    text = MATRIX_REWRITE_LOOP.replace("st = st * 0.5 + 1.0", "st = f32(sx) * 0.5 + 1.0")
    filecheck(ir_after(text, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sx written by st.shared (t.hk:9), read by ld.shared (t.hk:8)
""", tmp_path)


def test_negative_a_store_of_another_layout_after_stmatrix_rows_keeps_its_barrier(tmp_path):
    """The same memory as a row-major [16, 256] tile ('sr' reuses 'sx'), stored
    per element: its bytes lie on other threads than the stmatrix rows'."""
    text = MATRIX_REWRITE_LOOP.replace(
        "    shared sx: bf16[BM, BN]\n",
        "    shared sx: bf16[BM, BN]\n    shared sr: bf16[16, 256] reuses sx\n").replace(
        "    tma Y[tile.m, tile.n] <- sx\n", "    sr = bf16(f32(sr) + 1.0)\n"
                                         "    tma Y[tile.m, tile.n] <- sx\n")
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sx = bf16(st)
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sr written by st.shared as 'sx' (t.hk:10), read by ld.shared (t.hk:12)
CHECK-NEXT: st.shared sr(in sx)
""", tmp_path)


@pytest.mark.parametrize("body", [
    "t: f32[BM, BN] = sx^T * 0.5\n        sx = t + 1.0",
    "sr = sr * 0.5\n        sx = sx + 1.0",
], ids=["transposed_read", "another_layout_of_the_memory"])
def test_negative_a_loop_through_a_view_of_other_threads_keeps_its_barriers(body):
    """Element (r, c) read by the thread that holds (c, r), or the same bytes as
    a row-major [16, 256] tile ('sr' reuses 'sx') on other threads: each
    rewrite waits for the other threads' accesses before it."""
    text = REWRITE_LOOP.replace("sx = sx * 0.5 + 1.0", body).replace(
        "    shared sx: f32[BM, BN]\n",
        "    shared sx: f32[BM, BN]\n    shared sr: f32[16, 256] reuses sx\n")
    body_ir = ir_after(text, PASS).split("for i in 0 .. 4:")[1].split("tma.store")[0]
    assert body_ir.count("bar.sync 1, 128") == 3, body_ir  # two per iteration, one for the store


def test_negative_a_row_vector_of_a_shared_vector_is_read_by_other_threads(tmp_path):
    """A 1-D view written per element (value i on thread i) and read as a row
    vector (rows in the quads of their warp): the grids look alike, the threads
    differ."""
    text = F32_HEADER.replace("X: f32[M, N]", "X: f32[M, N], V: f32[64]") + """    shared sv: f32[BN]
    tma sv <- V[0]
    tma sx <- X[tile.m, tile.n]
    sv = sv * 2.0
    m: f32[BM] = sv
    sx = sx + m[:, None]
    tma Y[tile.m, tile.n] <- sx
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sv = (ld.shared(sv) * 2)
CHECK-NEXT: bar.sync 1, 128
CHECK-SAME: why: sv written by st.shared (t.hk:8), read by ld.shared (t.hk:9)
CHECK-NEXT: m: f32[64] rows = ld.shared(sv)
""", tmp_path)
