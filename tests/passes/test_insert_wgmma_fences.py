"""insert_wgmma_fences: a wgmma.fence wherever other instructions touched a
wgmma's registers since the last one, hoisted out of loops that allow it."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import (MMA_AFTER_STORE, MMA_CHAIN, MMA_FUSED_LOOP, MMA_MANUAL, MMA_REGISTER_A,
                                  MMA_SITES, MMA_UNREAD, WG_HEADER)

PASS = "insert_wgmma_fences"


def test_fence_before_the_product_that_defines_a_tile(tmp_path):
    """d2 = sa @ sb2^T overwrites d2, but ptxas may reuse registers other code
    wrote for it (o1's): a fence before it, or ptxas injects one (C7519)."""
    filecheck(ir_after(MMA_CHAIN, PASS), """
CHECK: d1: f32[64, 64] wgmma = undefined
CHECK: mbarrier.wait sa_sb_full[0]
CHECK: wgmma.fence
CHECK-NEXT: wgmma d1 = sa @ sb^T
CHECK: d2: f32[64, 64] wgmma = undefined
CHECK: wgmma.fence
CHECK-SAME: why: d2 declared, its registers last written by other code (t.hk:13), used by wgmma (t.hk:13)
CHECK-NEXT: wgmma d2 = sa @ sb2^T
""", tmp_path)


def test_loop_of_products_is_fenced_once_before_the_loop(tmp_path):
    out = ir_after(MMA_UNREAD, PASS)
    assert out.count("wgmma.fence") == 1
    filecheck(out, """
CHECK: wgmma.fence
CHECK-NEXT: for k in 0 .. 4:
CHECK-NEXT: wgmma acc += sa @ sb^T
""", tmp_path)


def test_product_after_a_wait_that_completed_its_accumulator_is_fenced(tmp_path):
    """The refill wait hands acc1 back to the threads: the next products start a
    new chain (ptxas would inject the fence otherwise)."""
    out = ir_after(MMA_FUSED_LOOP, PASS)
    loop = out[out.index("for k"):out.index("o1: f32")]
    assert loop.count("wgmma.fence") == 1
    filecheck(loop, """
CHECK: wgmma.wait_group 0
CHECK: mbarrier.wait sa_sb_sb2_full[0]
CHECK: wgmma.fence
CHECK-NEXT: wgmma acc1 += sa @ sb^T
CHECK-NEXT: wgmma acc2 += sa @ sb2^T
CHECK-NEXT: wgmma.commit_group
""", tmp_path)


def test_product_issued_after_an_mbarrier_wait_is_fenced(tmp_path):
    """S's fence in the loop comes after p and o were last written, but V's full
    wait comes between it and P V: ptxas orders no fence across the wait's retry
    loop, so P V gets its own after it (else ptxas injects one, C7519;
    tests/test_wgmma_codegen.py builds the kernel)."""
    out = ir_after(MMA_SITES, PASS)
    loop = out[out.index("for j in 1"):out.index("wgmma.wait_group 0", out.index("for j in 1"))]
    assert loop.count("wgmma.fence") == 2
    filecheck(loop, """
CHECK: wgmma.fence
CHECK-NEXT: wgmma s = sq @ sk
CHECK-NEXT: wgmma.commit_group
CHECK: wgmma.fence
CHECK-SAME: why: o issued after an mbarrier wait's retry loop
CHECK-NEXT: wgmma o += p @ sv
""", tmp_path)


def test_product_issued_after_one_threads_store_is_fenced(tmp_path):
    """d2's registers are fenced before its first product and touched by no other
    code, but d1's TMA store runs in one elected thread behind a branch between
    them: ptxas orders no fence across the branch's join (it injects one, C7519;
    tests/test_wgmma_codegen.py builds the kernel), so the product gets its own."""
    out = ir_after(MMA_AFTER_STORE, PASS)
    assert out.count("wgmma.fence") == 3
    filecheck(out, """
CHECK: wgmma d2 = sa @ sb2^T
CHECK: tma.store Y
CHECK-NEXT: cp.async.bulk.commit_group
CHECK-NEXT: wgmma.fence
CHECK-SAME: why: d2 issued after one thread's code (a branch) (t.hk:14), used by wgmma (t.hk:15)
CHECK-NEXT: wgmma d2 += sa @ sb^T
""", tmp_path)


def test_negative_store_before_the_fence_needs_no_other(tmp_path):
    """The same store before d2's first product: that product's fence follows it."""
    out = ir_after(MMA_AFTER_STORE.replace(
        "    d2: f32[BM, BN] = sa @ sb2^T\n    sy = bf16(d1)\n    tma Y[tile.m, tile.n] <- sy\n",
        "    sy = bf16(d1)\n    tma Y[tile.m, tile.n] <- sy\n    d2: f32[BM, BN] = sa @ sb2^T\n"),
        PASS)
    assert out.count("wgmma.fence") == 2
    filecheck(out, """
CHECK: tma.store Y
CHECK: wgmma.fence
CHECK-NEXT: wgmma d2 = sa @ sb2^T
CHECK-NEXT: wgmma d2 += sa @ sb^T
""", tmp_path)


def test_register_a_written_by_element_wise_code_is_fenced(tmp_path):
    filecheck(ir_after(MMA_REGISTER_A, PASS), """
CHECK: a: bf16[64, 64] wgmma = bf16
CHECK: wgmma.fence
CHECK-SAME: why: a written by element-wise code (t.hk:10), used by wgmma (t.hk:11)
CHECK-NEXT: wgmma acc = a @ sb^T
""", tmp_path)


def test_negative_consecutive_products_share_one_fence():
    text = WG_HEADER + """    tma sa <- A[tile.m, 0]
    tma sb <- B[tile.n, 0]
    acc: f32[BM, BN] = sa @ sb^T
    acc += sa @ sb^T
    acc += sa @ sb^T
}
"""
    assert ir_after(text, PASS).count("wgmma.fence") == 1


def test_negative_manual_code_keeps_only_its_own_fence():
    out = ir_after(MMA_MANUAL, PASS)
    assert out.count("wgmma.fence") == 1 and "why" not in out.split("manual:")[1]

