"""complete_bulk_stores: one commit per run of stores, wait_group.read before reuse/exit."""
from tests.conftest import ROOT, filecheck, ir_after
from tests.passes.kernels import (COPY, HEADER, LOAD_THEN_READ, REWRITE_EACH_ITERATION,
                                  SUBTILE_EPILOGUE)

PASS = "complete_bulk_stores"


def test_store_commits_and_waits_before_exit(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: tma.store Y
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NOT: cp.async.bulk
""", tmp_path)


def test_consecutive_stores_share_one_commit():
    text = HEADER + """    shared a: bf16[BM, BN]
    a = 1.0
    tma Y[tile.m, tile.n] <- a
    tma X[tile.m, tile.n] <- a
}
"""
    out = ir_after(text, PASS)
    assert out.count("commit_group") == 1
    assert out.index("tma.store X") < out.index("commit_group")


def test_rewrite_in_next_iteration_waits_first(tmp_path):
    filecheck(ir_after(REWRITE_EACH_ITERATION, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-SAME: sy read by TMA store (t.hk:7), written by st.shared (t.hk:6)
CHECK-NEXT: st.shared sy
CHECK-NEXT: tma.store Y
CHECK-NEXT: cp.async.bulk.commit_group
CHECK: cp.async.bulk.wait_group.read 0
CHECK-SAME: released when the block exits
""", tmp_path)


def test_negative_no_store_nothing_inserted():
    assert "cp.async.bulk" not in ir_after(LOAD_THEN_READ, PASS)


def test_writes_through_another_name_wait_for_the_store(tmp_path):
    """`sy reuses sx`: a store reads sy, then sx is written element-wise and by
    a TMA load. Both writes touch the bytes the store may still be reading."""
    text = HEADER + """    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN] reuses sx
    sy = 1.0
    tma Y[tile.m, tile.n] <- sy
    sx = 2.0
    tma Y[tile.m, tile.n] <- sy
    tma sx <- X[tile.m, tile.n]
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: tma.store Y{{.*}} <- sy(in sx)
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-SAME: why: sx read by TMA store as 'sy' (t.hk:7), written by st.shared (t.hk:8)
CHECK-NEXT: st.shared sx = 2
CHECK: tma.store Y{{.*}} <- sy(in sx)
CHECK-NEXT: cp.async.bulk.commit_group
CHECK: cp.async.bulk.wait_group.read 0
CHECK-SAME: why: sx read by TMA store as 'sy' (t.hk:9), written by TMA load (t.hk:10)
CHECK-NEXT: tma.load sx
""", tmp_path)


def test_negative_stores_and_writes_of_different_planes_do_not_wait():
    """A store of plane 0 and a write of plane 1 touch different bytes."""
    text = HEADER + """    shared sc: bf16[2, BM, BN]
    sc[0] = 1.0
    tma Y[tile.m, tile.n] <- sc[0]
    sc[1] = 2.0
    tma X[tile.m, tile.n] <- sc[1]
}
"""
    out = ir_after(text, PASS)
    assert out.count("wait_group.read") == 1  # the one before exit


DOUBLE_BUFFERED = HEADER + """    shared sa: bf16[BM, BN]
    shared sb: bf16[BM, BN]
    for i in 0 .. 2 {
        sa = 1.0
        tma Y[tile.m, tile.n * 4 + 2 * i] <- sa
        sb = 2.0
        tma Y[tile.m, tile.n * 4 + 2 * i + 1] <- sb
    }
}
"""


def test_rewrite_waits_only_for_its_own_older_store(tmp_path):
    """At `sa = 1.0` of the next iteration the groups in flight are sa's (older) and
    sb's (younger): wait_group.read 1 completes sa's and lets sb's go on reading;
    likewise at `sb = 2.0`. Only the exit waits for all (0)."""
    out = ir_after(DOUBLE_BUFFERED, PASS)
    filecheck(out, """
CHECK: for i in 0 .. 2:
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-SAME: sa read by TMA store (t.hk:8), written by st.shared (t.hk:7)
CHECK-NEXT: st.shared sa
CHECK-NEXT: tma.store
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-SAME: sb read by TMA store (t.hk:10), written by st.shared (t.hk:9)
CHECK-NEXT: st.shared sb
CHECK-NEXT: tma.store
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-SAME: released when the block exits
""", tmp_path)
    assert out.count("wait_group.read 0") == 1


def test_a_store_read_by_both_groups_waits_for_both(tmp_path):
    """Both stores read sa: rewriting it must wait for the younger one too (0)."""
    text = HEADER + """    shared sa: bf16[BM, BN]
    sa = 1.0
    tma Y[tile.m, tile.n] <- sa
    tma X[tile.m, tile.n] <- sa
    sa = 2.0
    tma Y[tile.m, tile.n] <- sa
    shared sb: bf16[BM, BN]
    sb = 3.0
    tma X[tile.m, tile.n] <- sb
    sa = 4.0
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: st.shared sa = 2
CHECK: st.shared sb = 3
CHECK-NEXT: tma.store X
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-NEXT: st.shared sa = 4
""", tmp_path)


def test_a_wait_after_a_branch_counts_the_groups_every_path_leaves_younger(tmp_path):
    """One path commits one more group than the other: sa's group then has 1 or 2
    groups after it, and only N = 1 completes it on both paths. (The stores
    write three different boxes: none waits for another's global writes.)"""
    text = HEADER + """    shared sa: bf16[BM, BN]
    shared sb: bf16[BM, BN]
    shared sc: bf16[BM, BN]
    sa = 1.0
    tma Y[tile.m, 3 * tile.n] <- sa
    sb = 2.0
    tma Y[tile.m, 3 * tile.n + 1] <- sb
    if tile.m > 0 {
        sc = 3.0
        tma Y[tile.m, 3 * tile.n + 2] <- sc
    }
    sa = 4.0
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: if tile.m > 0:
CHECK: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-NEXT: st.shared sa = 4
""", tmp_path)


def test_warpgroup_planes_at_different_offsets_wait_only_on_reuse(tmp_path):
    """sc[2 + wg] is another plane than sc[wg] for every warpgroup (offsets are
    multiples of the warpgroups): its write waits for nothing; the rewrite of
    sc[wg] waits for sc[wg]'s store only, sc[2 + wg]'s may go on."""
    out = ir_after(SUBTILE_EPILOGUE, PASS)
    filecheck(out, """
CHECK: tma.store Y{{.*}} <- sc[wg of 4]
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: st.shared sc[2 + wg of 4]
CHECK: tma.store Y{{.*}} <- sc[2 + wg of 4]
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-SAME: why: sc read by TMA store (t.hk:11), written by st.shared (t.hk:14)
CHECK-NEXT: st.shared sc[wg of 4]
""", tmp_path)


RELOAD = HEADER.replace("Y: bf16[M, N]", "Y: bf16[M, N], R: bf16[M, N]") + """    shared sx: bf16[BM, BN]
    shared sr: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    tma R[tile.m, tile.n] <- sx
    tma sr <- R[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- sr
}
"""


def test_reload_of_a_stored_tile_waits_for_its_global_writes(tmp_path):
    """A TMA load of the box a store wrote: the plain wait (its writes), not .read."""
    filecheck(ir_after(RELOAD, PASS), """
CHECK: tma.store R
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NOT: tma.load
CHECK: cp.async.bulk.wait_group 0
CHECK-SAME: why: global R written by TMA store (t.hk:7), read by TMA load (t.hk:8)
CHECK-NEXT: tma.load sr <- R
""", tmp_path)


def test_negative_a_load_of_another_tensor_does_not_wait_for_the_writes():
    out = ir_after(RELOAD.replace("tma sr <- R[", "tma sr <- X["), PASS)
    assert "wait_group 0" not in out and out.count("wait_group.read") == 1  # at exit only


def test_negative_a_load_of_another_box_of_the_stored_tensor_does_not_wait():
    """R[tile.m, 1] and R[tile.m, 0] are a whole box apart (one block's own tiles)."""
    text = RELOAD.replace("tma R[tile.m, tile.n] <- sx", "tma R[tile.m, 0] <- sx") \
        .replace("tma sr <- R[tile.m, tile.n]", "tma sr <- R[tile.m, 1]") \
        .replace("grid(m: M / BM, n: N / BN)", "grid(m: M / BM)").replace("tile.n", "0")
    out = ir_after(text, PASS)
    assert "wait_group 0" not in out


def test_ld_global_of_a_stored_vector_waits_for_its_writes(tmp_path):
    text = """kernel k(S: f32[N], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(n: N / BN) threads 128
{
    shared ss: f32[BN]
    shared sy: f32[BM, BN]
    ss = 1.0
    bulk S[tile.n] <- ss
    s: f32[BN] = S[tile.n]
    sy = sy * s[None, :]
    tma Y[0, tile.n] <- sy
}
"""
    filecheck(ir_after(text, "insert_barriers"), """
CHECK: bulk.store S
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group 0
CHECK-SAME: why: global S written by bulk store (t.hk:7), read by ld.global (t.hk:9)
CHECK-NEXT: bar.sync 1, 128
CHECK-NEXT: st.shared sy
""", tmp_path)


def test_negative_gemm_epilogue_keeps_the_read_wait():
    """No global read of what is stored: only `.read` waits, as before."""
    out = ir_after(DOUBLE_BUFFERED, PASS)
    assert "wait_group " not in out.replace("wait_group.read", "")


PLANES_BY_LOOP = HEADER + """    shared sd: bf16[2, BM, BN]
    for i in 0 .. 2 {
        for j in 0 .. 2 {
            sd[j] = 1.0
            tma Y[tile.m, tile.n * 4 + 2 * i + j] <- sd[j]
        }
    }
}
"""


def test_a_plane_chosen_by_a_loop_variable_waits_for_the_older_plane_only(tmp_path):
    """At sd[j] the stores in flight are of sd[j - 1] (younger) and sd[j - 2] or,
    entering the inner loop, sd[1] then sd[0] of the outer iteration before:
    wait_group.read 1 completes the one of sd[j]; none ahead of the loop."""
    out = ir_after(PLANES_BY_LOOP, PASS)
    filecheck(out, """
CHECK: for i in 0 .. 2:
CHECK-NEXT: for j in 0 .. 2:
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-NEXT: st.shared sd[j of 2]
""", tmp_path)
    assert out.count("wait_group.read 0") == 1  # at exit


def test_a_plane_alternating_by_a_remainder_waits_for_the_older_plane_only(tmp_path):
    text = HEADER + """    shared sd: bf16[2, BM, BN]
    for i in 0 .. N / BN {
        sd[i % 2] = 1.0
        tma Y[tile.m, i] <- sd[i % 2]
    }
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: for i in
CHECK-NEXT: cp.async.bulk.wait_group.read 1
CHECK-NEXT: st.shared sd[i % 2 of 2]
""", tmp_path)


def test_negative_a_plane_rewritten_every_iteration_waits_for_all(tmp_path):
    """sd[0] every iteration: its own store of the previous iteration is the youngest."""
    text = PLANES_BY_LOOP.replace("sd[j] = 1.0", "sd[0] = 1.0")
    filecheck(ir_after(text, PASS), """
CHECK: for j in 0 .. 2:
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: st.shared sd[0 of 2]
""", tmp_path)


def test_negative_a_plane_one_ahead_is_the_youngest_store(tmp_path):
    """sd[(i + 1) % 2] stored, then sd[i % 2] written: in the next iteration the
    plane written is the one stored just before, so nothing may stay in flight."""
    text = HEADER + """    shared sd: bf16[2, BM, BN]
    for i in 0 .. N / BN {
        sd[i % 2] = 1.0
        tma Y[tile.m, i] <- sd[(i + 1) % 2]
    }
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: for i in
CHECK-NEXT: cp.async.bulk.wait_group.read 0
""", tmp_path)


def test_a_load_that_rewrites_a_store_source_and_reads_its_box_waits_plainly(tmp_path):
    """tma sx <- R[...] both overwrites sx (read by the store) and reads R (written
    by it): one plain wait covers both."""
    text = RELOAD.replace("tma sr <- R[tile.m, tile.n]", "tma sx <- R[tile.m, tile.n]") \
        .replace("tma Y[tile.m, tile.n] <- sr", "tma Y[tile.m, tile.n] <- sx")
    filecheck(ir_after(text, PASS), """
CHECK: tma.store R
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NOT: wait_group.read
CHECK: cp.async.bulk.wait_group 0
CHECK-SAME: why: global R written by TMA store (t.hk:7), read by TMA load (t.hk:8)
CHECK-NEXT: tma.load sx <- R
""", tmp_path)


def test_negative_loads_past_every_store_in_flight_do_not_wait(tmp_path):
    """R[tile.m, j] is loaded while the stores of R[tile.m, j - 1], j - 2, ... are in
    flight: every one of them, however old, lies before it."""
    text = HEADER.replace("Y: bf16[M, N]", "Y: bf16[M, N], R: bf16[M, N]").replace(
        "grid(m: M / BM, n: N / BN)", "grid(m: M / BM)") + """    shared sx: bf16[BM, BN]
    shared so: bf16[BM, BN]
    for j in 0 .. N / BN {
        tma sx <- R[tile.m, j]
        so = sx
        tma R[tile.m, j] <- so
    }
}
"""
    out = ir_after(text, PASS)
    assert "wait_group.read" in out
    assert not [line for line in out.splitlines() if "cp.async.bulk.wait_group " in line]


F32 = HEADER.replace("bf16", "f32")


def test_a_store_after_an_add_into_its_box_waits_for_the_adds(tmp_path):
    """Bulk copies complete in any order: the store waits for the add's global
    writes (plain wait), not only for its shared reads."""
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    sa = 1.0
    tma Y[tile.m, tile.n] += sa
    sb = 2.0
    tma Y[tile.m, tile.n] <- sb
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: tma.reduce-add Y
CHECK-NEXT: cp.async.bulk.commit_group
CHECK: st.shared sb
CHECK-NEXT: cp.async.bulk.wait_group 0
CHECK-SAME: why: global Y written by TMA reduce-add (t.hk:7), written by TMA store (t.hk:9)
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_an_add_after_a_store_of_its_box_waits_for_the_store(tmp_path):
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    sa = 1.0
    tma Y[tile.m, tile.n] <- sa
    sb = 2.0
    tma Y[tile.m, tile.n] += sb
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sb
CHECK-NEXT: cp.async.bulk.wait_group 0
CHECK-SAME: why: global Y written by TMA store (t.hk:7), written by TMA reduce-add (t.hk:9)
CHECK-NEXT: tma.reduce-add Y
""", tmp_path)


def test_stores_of_one_box_in_one_run_are_committed_apart_and_waited(tmp_path):
    """One group for both would leave their order free: the first is committed
    on its own and completed before the second is issued."""
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    sa = 1.0
    sb = 2.0
    tma Y[tile.m, tile.n] <- sa
    tma X[tile.m, tile.n] <- sa
    tma Y[tile.m, tile.n] <- sb
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: tma.store Y{{.*}} <- sa
CHECK-NEXT: tma.store X{{.*}} <- sa
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-SAME: why: global Y written by TMA store (t.hk:8), written by TMA store (t.hk:10)
CHECK-NEXT: cp.async.bulk.wait_group 0
CHECK-NEXT: tma.store Y{{.*}} <- sb
CHECK-NEXT: cp.async.bulk.commit_group
""", tmp_path)


def test_the_wait_for_an_earlier_write_leaves_younger_groups_running(tmp_path):
    """The store of Y's box waits for Y's older store, not for X's younger one."""
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    shared sc: f32[BM, BN]
    sa = 1.0
    tma Y[tile.m, tile.n] <- sa
    sb = 2.0
    tma X[tile.m, tile.n] <- sb
    sc = 3.0
    tma Y[tile.m, tile.n] <- sc
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: st.shared sc
CHECK-NEXT: cp.async.bulk.wait_group 1
CHECK-SAME: why: global Y written by TMA store (t.hk:8), written by TMA store (t.hk:12)
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_negative_adds_into_one_box_do_not_wait():
    """Reduce-adds commute: only the exit's `.read` wait."""
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    sa = 1.0
    sb = 2.0
    tma Y[tile.m, tile.n] += sa
    tma Y[tile.m, tile.n] += sb
}
"""
    out = ir_after(text, PASS)
    assert out.count("commit_group") == 1 and "wait_group " not in out.replace(
        "wait_group.read", "")


def test_negative_stores_of_different_boxes_of_one_tensor_share_a_group():
    text = F32 + """    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    sa = 1.0
    sb = 2.0
    tma Y[tile.m, 2 * tile.n] <- sa
    tma Y[tile.m, 2 * tile.n + 1] <- sb
}
"""
    out = ir_after(text, PASS)
    assert out.count("commit_group") == 1 and "wait_group " not in out.replace(
        "wait_group.read", "")


def test_another_warpgroups_write_of_the_box_waits_and_meets(tmp_path):
    """Each warpgroup's thread waits for its own store; the barrier of both
    warpgroups then hands that on to the other's add (a warpgroup's own barrier
    would not)."""
    text = (ROOT / "tests/sim/hazards/store_then_add_per_warpgroup.hk").read_text()
    filecheck(ir_after(text, "insert_barriers"), """
CHECK: tma.store Y
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group 0
CHECK-SAME: why: global Y written by TMA store (t.hk:13), written by TMA reduce-add (t.hk:14)
CHECK-NEXT: bar.sync 1, 256
CHECK-NEXT: tma.reduce-add Y
""", tmp_path)


def test_negative_a_warpgroups_rewrite_of_its_own_box_needs_no_barrier_of_both(tmp_path):
    """Each warpgroup stores Y[2 * tile.m + wg, ...] twice: the second store waits
    (plain, leaving the other plane's store running) for its own thread's first
    one; no other warpgroup's box meets it, so no barrier of both warpgroups."""
    text = (ROOT / "tests/sim/hazards/subtile_planes_per_warpgroup.hk").read_text()
    filecheck(ir_after(text, "insert_barriers"), """
CHECK: st.shared sc[wg of 4] = bf16((acc[:, 0:32] * 2))
CHECK-NEXT: cp.async.bulk.wait_group 1
CHECK-SAME: why: global Y written by TMA store (t.hk:14), written by TMA store (t.hk:18)
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_negative_a_persistent_blocks_next_tile_does_not_wait_for_its_last_store():
    """Different tiles write different boxes (where they meet, the blocks that take
    them race, a `check` finding): gemm_persistent's epilogue waits `.read` only."""
    out = ir_after((ROOT / "samples/gemm_persistent.hk").read_text(), PASS)
    assert "cp.async.bulk.wait_group.read 1" in out
    assert "cp.async.bulk.wait_group " not in out


def test_negative_a_store_before_a_signal_is_complete_after_it():
    """gemm_streamk stores its partial W[tile.b, ...] then signals (order_semaphores
    waits `wait_group 0` before the release): the next work unit's store of the
    same box waits for nothing more."""
    out = ir_after((ROOT / "samples/gemm_streamk.hk").read_text(), PASS)
    assert "global W written by TMA store" not in out
    assert "red.release.gpu.global.add.s32 F[t]" in out
