"""initialize_mbarriers: one thread inits every compiler-owned barrier, once."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, WRITE_THEN_STORE, WS_GEMM

PASS = "initialize_mbarriers"


def test_one_thread_inits_fences_then_one_block_barrier(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: one_thread:
CHECK-NEXT: mbarrier.init buf_full[0], 1
CHECK-NEXT: fence.mbarrier_init.release.cluster
CHECK-NEXT: bar.sync 0, 128
CHECK: tma.load buf
""", tmp_path)


def test_two_buffers_share_one_prologue():
    """Loaded apart (one barrier each), initialized in one prologue."""
    text = HEADER + """    shared a: bf16[BM, BN]
    shared b: bf16[BM, BN]
    tma a <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- a
    tma b <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- b
}
"""
    out = ir_after(text, PASS)
    assert out.count("bar.sync 0, 128") == 1 and out.count("fence.mbarrier_init") == 1
    assert "mbarrier.init a_full[0], 1" in out and "mbarrier.init b_full[0], 1" in out


def test_pipeline_stages_are_initialized_before_the_role_split(tmp_path):
    """3 stages: full barriers count the producer's one arrive.expect_tx; empty
    barriers count one arrival per consumer warp (2 warpgroups = 8 warps)."""
    out = ir_after(WS_GEMM, PASS)
    assert out.count("mbarrier.init") == 6
    filecheck(out, """
CHECK: one_thread:
CHECK-NEXT: mbarrier.init load_math_full[0], 1
CHECK-NEXT: mbarrier.init load_math_full[1], 1
CHECK-NEXT: mbarrier.init load_math_full[2], 1
CHECK-NEXT: mbarrier.init load_math_empty[0], 8
CHECK-NEXT: mbarrier.init load_math_empty[1], 8
CHECK-NEXT: mbarrier.init load_math_empty[2], 8
CHECK-NEXT: fence.mbarrier_init.release.cluster
CHECK-NEXT: bar.sync 0, 384
CHECK-NEXT: role math
""", tmp_path)


def test_negative_no_barrier_no_prologue():
    out = ir_after(WRITE_THEN_STORE, PASS)
    assert "mbarrier" not in out and "bar.sync" not in out
