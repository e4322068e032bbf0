"""wait_wgmma_batches: the fewest, weakest waits that keep wgmma race-free."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import (MMA_BIAS_RELU, MMA_CHAIN, MMA_FUSED_LOOP, MMA_REGISTER_A,
                                  MMA_TWO_BATCHES, MMA_UNREAD, WS_GEMM)

PASS = "wait_wgmma_batches"


def test_chain_flushes_before_each_relu(tmp_path):
    """D1 = A@B; relu(D1); D2 = A@B2; relu(D2): two flushes, one before each relu."""
    out = ir_after(MMA_CHAIN, PASS)
    assert out.count("wgmma.wait_group") == 2
    filecheck(out, """
CHECK: wgmma d1 = sa @ sb^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: d1 written by wgmma (t.hk:11), read by element-wise code (t.hk:12)
CHECK-NEXT: o1: f32[64, 64] wgmma = relu(d1)
CHECK: wgmma d2 = sa @ sb2^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: d2 written by wgmma (t.hk:13), read by element-wise code (t.hk:14)
CHECK-NEXT: o2: f32[64, 64] wgmma = relu(d2)
""", tmp_path)


def test_fused_loop_gets_one_flush(tmp_path):
    """Two products fused in one loop, then relu of both: one flush after the loop."""
    out = ir_after(MMA_FUSED_LOOP, PASS)
    after_loop = out.split("o1: f32")[0].rsplit("wgmma.commit_group", 1)[1]
    assert after_loop.count("wgmma.wait_group") == 1
    filecheck(out, """
CHECK: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: acc1 written by wgmma (t.hk:14), read by element-wise code (t.hk:17)
CHECK-NEXT: o1: f32[64, 64] wgmma = relu(acc1)
CHECK-NEXT: o2: f32[64, 64] wgmma = relu(acc2)
""", tmp_path)


def test_refill_in_the_loop_waits_for_the_batch_reading_it(tmp_path):
    """One stage: the next iteration's TMA load overwrites what the batch reads."""
    filecheck(ir_after(MMA_FUSED_LOOP, PASS), """
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: sa read by wgmma (t.hk:14), written by TMA load (t.hk:11)
CHECK-NEXT: mbarrier.arrive.expect_tx sa_sb_sb2_full[0]
CHECK-NEXT: tma.load sa
""", tmp_path)


def test_bias_then_relu_flushes_once_before_the_bias(tmp_path):
    """mma, + bias, relu: one flush, nothing between the bias add and the relu."""
    out = ir_after(MMA_BIAS_RELU, PASS)
    assert out.count("wgmma.wait_group") == 1
    filecheck(out, """
CHECK: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-NEXT: acc = (acc + Bias[tile.n * 64 ..] per col)
CHECK-NEXT: st.shared sy = bf16(relu(acc))
""", tmp_path)


def test_older_batch_is_read_while_the_younger_stays_in_flight(tmp_path):
    """d1 is read first: wait_group 1 completes it and leaves d2's batch running."""
    filecheck(ir_after(MMA_TWO_BATCHES, PASS), """
CHECK: wgmma d2 = sa @ sb2^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 1
CHECK-SAME: why: d1 written by wgmma (t.hk:11), read by element-wise code (t.hk:13)
CHECK-NEXT: o: f32[64, 64] wgmma = relu(d1)
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: d2 written by wgmma (t.hk:12), read by element-wise code (t.hk:14)
CHECK-NEXT: o = (o + d2)
""", tmp_path)


def test_register_a_is_not_rewritten_while_read(tmp_path):
    filecheck(ir_after(MMA_REGISTER_A, PASS), """
CHECK: wgmma acc = a @ sb^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: a read by wgmma (t.hk:11), written by element-wise code (t.hk:12)
CHECK-NEXT: a = bf16(0)
CHECK-NOT: wgmma.wait_group
""", tmp_path)


def test_negative_a_loop_of_products_waits_only_when_the_role_ends(tmp_path):
    """Products on one accumulator are ordered by the hardware: nothing in the loop."""
    out = ir_after(MMA_UNREAD, PASS)
    assert out.count("wgmma.wait_group") == 1
    filecheck(out, """
CHECK: for k in 0 .. 4:
CHECK-NEXT: wgmma acc += sa @ sb^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: sa read by wgmma (t.hk:12), shared memory released when the block exits
""", tmp_path)


def test_stage_release_waits_for_the_previous_batch_only(tmp_path):
    """Steady state: this iteration's batch stays in flight (wait_group 1) while
    the stage the previous batch read is released; one flush after the loop,
    for the epilogue's read of acc (one tile per block: no release of the last
    stage, which no later load would wait for)."""
    out = ir_after(WS_GEMM, PASS)
    assert out.count("wgmma.wait_group") == 2
    filecheck(out, """
CHECK: for k in 0 .. K / 64:
CHECK: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 1
CHECK-SAME: why: load_math stage read by wgmma (t.hk:10), released to the producer (t.hk:10)
CHECK-NEXT: if k > 0:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_empty[(load_math_math_stage + 2) % 3]
CHECK-NEXT: advance load_math_math_stage
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: acc written by wgmma (t.hk:10), read by element-wise code (t.hk:12)
CHECK-NEXT: st.shared sc[wg of 2] = bf16(acc)
""", tmp_path)


def test_a_one_stage_ring_waits_for_the_batch_before_its_release():
    """With one stage the ring releases this iteration's stage (there is no
    other), so the batch just issued completes first: wait_group 0."""
    out = ir_after(WS_GEMM.replace("stages 3", "stages 1"), PASS)
    loop = out.split("for k in 0 .. K / 64:")[1].split("st.shared")[0]
    assert "wgmma.wait_group 0" in loop and "wgmma.wait_group 1" not in loop


def test_a_ring_read_at_several_sites_overlaps_the_softmax_with_the_previous_p_v(tmp_path):
    """bench/kernels/mha_fwd_overlap.hk (FlashAttention-3's intra-warpgroup
    overlap): iteration j issues S_j and P_{j-1} V_{j-1}, waits with
    `wait_group 1` before the softmax reads S_j (P V still in flight) and with
    `wait_group 0` only before O is rescaled. The releases of the previous
    reads' stages wait for nothing: a product's lag counts its ring's steps
    (one per read), and the products that read those stages completed in the
    previous iteration."""
    from tests.conftest import ROOT
    text = (ROOT / "bench" / "kernels" / "mha_fwd_overlap.hk").read_text()
    out = ir_after(text, PASS)
    filecheck(out, """
CHECK: for j in 1 .. L / 128:
CHECK-NOT: wgmma.wait_group
CHECK: wgmma s = sq[wg of 2] @ sk{stage load_math_sk_math_stage}^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sk_empty[(load_math_sk_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: mbarrier.wait load_math_sv_full[load_math_sv_math_stage]
CHECK-NEXT: wgmma o += pb @ sv{stage load_math_sv_math_stage}
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: if j > 1:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[(load_math_sv_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: wgmma.wait_group 1
CHECK-SAME: why: s written by wgmma
CHECK-NEXT: x = where(
CHECK-NEXT: m_new: f32[64] rows =
CHECK-NEXT: p = exp2(
CHECK-NEXT: alpha: f32[64] rows =
CHECK-NEXT: l_parts = (
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: o written by wgmma
CHECK-NEXT: o = (o * alpha[:, None])
CHECK-NEXT: pb = bf16(p)
CHECK-NEXT: m = m_new
CHECK-NEXT: advance load_math_sk_math_stage
CHECK-NEXT: advance load_math_sv_math_stage
""", tmp_path)
