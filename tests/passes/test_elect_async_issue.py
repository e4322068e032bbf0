"""elect_async_issue: one elected thread issues copies, arms and waits for bulk groups."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, OWN_ROWS_THROUGH_WGMMA, WS_GEMM

PASS = "elect_async_issue"


def test_issue_sequences_are_elected_together(tmp_path):
    """The issuer's own wait for its load joins the elected block around it."""
    filecheck(ir_after(COPY, PASS), """
CHECK: one_thread:  # t.hk:5
CHECK-NEXT: mbarrier.arrive.expect_tx
CHECK-NEXT: tma.load
CHECK-NEXT: mbarrier.wait
CHECK-NEXT: flip
CHECK-NEXT: tma.store
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NOT: one_thread
""", tmp_path)


def test_negative_manual_code_is_left_alone():
    text = HEADER + """    shared s: bf16[BM, BN]
    mbarrier bar[1]
    manual {
        tma s <- X[tile.m, tile.n] via bar[0]
    }
}
"""
    out = ir_after(text, PASS)
    assert "one_thread" not in out
    assert "tma.load s <- X[tile.m * 64, tile.n * 64] (8192 B) on bar[0]" in out


def test_a_producer_loop_runs_in_one_elected_block(tmp_path):
    """Wait for the empty stage, arm, load: all by the issuer, elected once."""
    filecheck(ir_after(WS_GEMM, PASS), """
CHECK: role load
CHECK-NEXT: setmaxnreg.dec 40
CHECK-NEXT: one_thread:
CHECK-NEXT: for k in 0 .. K / 64:
CHECK-NEXT: mbarrier.wait load_math_empty[load_math_load_stage]
CHECK-NEXT: mbarrier.arrive.expect_tx
CHECK-NEXT: tma.load sa
CHECK-NEXT: tma.load sb
CHECK-NEXT: advance load_math_load_stage
CHECK-NOT: one_thread:
""", tmp_path)


def test_stores_that_name_wg_are_issued_by_each_warpgroup(tmp_path):
    """The loads stay with the role's one thread; each warpgroup's thread issues,
    commits and waits for its own rows' stores (bulk groups are per thread)."""
    filecheck(ir_after(OWN_ROWS_THROUGH_WGMMA, PASS), """
CHECK: one_thread:  # t.hk:7
CHECK-NEXT: mbarrier.arrive.expect_tx sa_full
CHECK: one_thread per warpgroup:
CHECK-NEXT: tma.store Y[(2 * tile.m + wg) * 64, tile.n * 64] <- sy[wg of 2]
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NEXT: bar.sync 2 + wg, 128
CHECK: one_thread per warpgroup:
CHECK-NEXT: tma.store Y[(2 * tile.m + wg) * 64, (tile.n + 1) * 64]
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
CHECK-NOT: one_thread
""", tmp_path)
