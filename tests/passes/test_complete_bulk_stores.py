"""complete_bulk_stores: one commit per run of stores, wait_group.read before reuse/exit."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, LOAD_THEN_READ, REWRITE_EACH_ITERATION

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
