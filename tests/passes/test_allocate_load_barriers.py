"""allocate_load_barriers: one mbarrier per buffer a role loads for itself, shared by
buffers always loaded together and first used together."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import (COPY, HEADER, LOAD_THEN_READ, MMA_CHAIN, MMA_FUSED_LOOP,
                                  WRITE_THEN_STORE)

PASS = "allocate_load_barriers"


def test_load_gets_its_own_barrier_with_one_arrival(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: mbarrier buf_full[1] arrivals 1
CHECK: carried phase_buf_full
CHECK: tma.load buf <- X[tile.m * 64, tile.n * 64] (8192 B) on buf_full[0]
""", tmp_path)


def test_negative_initialization_is_left_to_the_next_pass():
    out = ir_after(COPY, PASS)
    assert "mbarrier.init" not in out and "bar.sync" not in out


def test_fresh_name_when_taken():
    text = HEADER + """    shared sx_full: bf16[BM, BN]
    shared sx: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
}
"""
    assert "mbarrier sx_full2[1]" in ir_after(text, PASS)


def test_negative_no_load_no_barrier():
    out = ir_after(WRITE_THEN_STORE, PASS)
    assert "mbarrier" not in out and "bar.sync" not in out
    assert out == ir_after(WRITE_THEN_STORE, "front-end")


def test_wait_not_yet_placed():
    assert "mbarrier.wait" not in ir_after(LOAD_THEN_READ, PASS)


def test_buffers_loaded_and_used_together_share_one_barrier(tmp_path):
    """sa, sb, sb2 are loaded back to back and read by one batch of products:
    one barrier, so one arm and one wait per k-step."""
    out = ir_after(MMA_FUSED_LOOP, PASS)
    assert out.count("mbarrier ") == 1
    filecheck(out, """
CHECK: mbarrier sa_sb_sb2_full[1] arrivals 1
CHECK: tma.load sa <- {{.*}} on sa_sb_sb2_full[0]
CHECK-NEXT: tma.load sb <- {{.*}} on sa_sb_sb2_full[0]
CHECK-NEXT: tma.load sb2 <- {{.*}} on sa_sb_sb2_full[0]
""", tmp_path)


def test_negative_a_buffer_used_later_keeps_its_own_barrier(tmp_path):
    """sb2 is first read by the second product, after the first one's relu: on
    a shared barrier the first product would wait for a load it does not read."""
    filecheck(ir_after(MMA_CHAIN, PASS), """
CHECK: mbarrier sa_sb_full[1] arrivals 1
CHECK: mbarrier sb2_full[1] arrivals 1
CHECK: tma.load sb2 <- {{.*}} on sb2_full[0]
""", tmp_path)


def test_negative_a_buffer_also_loaded_alone_keeps_its_own_barrier():
    """a and b are loaded and used together once, but a is loaded alone later:
    sharing would arm the later phase for b's bytes too."""
    text = HEADER + """    shared a: bf16[BM, BN]
    shared b: bf16[BM, BN]
    shared c: bf16[BM, BN]
    tma a <- X[tile.m, tile.n]
    tma b <- Y[tile.m, tile.n]
    c = bf16(f32(a) + f32(b))
    tma a <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- a
}
"""
    out = ir_after(text, PASS)
    assert "mbarrier a_full[1]" in out and "mbarrier b_full[1]" in out
    together = text.replace("    tma a <- X[tile.m, tile.n]\n    tma Y", "    tma Y")
    assert "mbarrier a_b_full[1]" in ir_after(together, PASS)
