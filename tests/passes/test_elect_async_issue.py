"""elect_async_issue: one elected thread issues copies, arms and waits for bulk groups."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER

PASS = "elect_async_issue"


def test_issue_sequences_are_elected_together(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: one_thread:  # t.hk:5
CHECK-NEXT: mbarrier.arrive.expect_tx
CHECK-NEXT: tma.load
CHECK-NEXT: mbarrier.wait
CHECK: one_thread:
CHECK-NEXT: tma.store
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: cp.async.bulk.wait_group.read 0
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
