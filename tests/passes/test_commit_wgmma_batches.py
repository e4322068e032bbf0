"""commit_wgmma_batches: one commit_group per run of products."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import MMA_CHAIN, MMA_FUSED_LOOP, MMA_MANUAL

PASS = "commit_wgmma_batches"


def test_each_product_alone_is_its_own_batch(tmp_path):
    filecheck(ir_after(MMA_CHAIN, PASS), """
CHECK: wgmma d1 = sa @ sb^T
CHECK-NEXT: wgmma.commit_group
CHECK-SAME: why: d1 written by wgmma (t.hk:11), 1 product tracked as one batch
CHECK: wgmma d2 = sa @ sb2^T
CHECK-NEXT: wgmma.commit_group
""", tmp_path)


def test_fused_products_share_one_commit(tmp_path):
    out = ir_after(MMA_FUSED_LOOP, PASS)
    assert out.count("wgmma.commit_group") == 1
    filecheck(out, """
CHECK: for k in
CHECK: wgmma acc1 += sa @ sb^T
CHECK-NEXT: wgmma acc2 += sa @ sb2^T
CHECK-NEXT: wgmma.commit_group
CHECK-SAME: acc1, acc2 written by wgmma (t.hk:14), 2 products tracked as one batch
""", tmp_path)


def test_negative_manual_products_are_left_as_written():
    out = ir_after(MMA_MANUAL, PASS)
    assert out.count("wgmma.commit_group") == 1  # the user's own, not a second one
    assert "why:" not in out.split("manual:")[1]
