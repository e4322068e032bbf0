"""complete_bulk_stores: one commit per run of stores, wait_group.read before reuse/exit."""
from tests.conftest import filecheck, ir_after
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
    groups after it, and only N = 1 completes it on both paths."""
    text = HEADER + """    shared sa: bf16[BM, BN]
    shared sb: bf16[BM, BN]
    shared sc: bf16[BM, BN]
    sa = 1.0
    tma Y[tile.m, tile.n] <- sa
    sb = 2.0
    tma Y[tile.m, tile.n] <- sb
    if tile.m > 0 {
        sc = 3.0
        tma Y[tile.m, tile.n] <- sc
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
