"""complete_async_loads: expect_tx of the exact bytes, wait as late as possible."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, READ_THEN_REFILL

PASS = "complete_async_loads"


def test_expect_tx_exact_bytes_then_wait_before_use(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: mbarrier.arrive.expect_tx buf_full[0], 8192
CHECK-NEXT: tma.load buf
CHECK-NEXT: mbarrier.wait buf_full[0], parity phase_buf_full
CHECK-NEXT: flip phase_buf_full
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_expect_tx_counts_dtype_and_box():
    text = """kernel k(X: f32[M, N])
    tile(BM = 32, BN = 16) grid(m: M / BM, n: N / BN) threads 128
{
    shared s: f32[BM, BN]
    tma s <- X[tile.m, tile.n]
}
"""
    assert "expect_tx s_full[0], 2048" in ir_after(text, PASS)  # 32 * 16 * 4 bytes


def test_independent_work_overlaps_the_load(tmp_path):
    text = HEADER + """    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    sy = 2.0
    x: f32[BM, BN] = f32(sx)
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: tma.load sx
CHECK-NOT: mbarrier.wait
CHECK: st.shared sy
CHECK-NEXT: mbarrier.wait sx_full[0]
CHECK-NEXT: flip
CHECK-NEXT: x: f32
""", tmp_path)


def test_unused_load_waits_at_block_end(tmp_path):
    text = HEADER + """    shared sx: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
}
"""
    out = ir_after(text, PASS).rstrip().splitlines()
    assert out[-2].strip().startswith("mbarrier.wait sx_full[0]")
    assert out[-1].strip() == "flip phase_sx_full  # t.hk:5"


def test_load_in_loop_waits_in_the_loop(tmp_path):
    filecheck(ir_after(READ_THEN_REFILL, PASS), """
CHECK: for i in 0 .. 4:
CHECK-NEXT: mbarrier.arrive.expect_tx sx_full[0], 8192
CHECK-NEXT: tma.load sx
CHECK-NEXT: mbarrier.wait sx_full[0], parity phase_sx_full
CHECK-NEXT: flip phase_sx_full
CHECK-NEXT: x: f32
""", tmp_path)
