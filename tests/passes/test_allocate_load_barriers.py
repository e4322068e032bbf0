"""allocate_load_barriers: one mbarrier per loaded buffer, initialized once."""
import pytest

from hopperc.diagnostics import CompileError
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, LOAD_THEN_READ, WRITE_THEN_STORE

PASS = "allocate_load_barriers"


def test_load_gets_barrier_and_one_time_init(tmp_path):
    filecheck(ir_after(COPY, PASS), """
CHECK: mbarrier buf_full[1]
CHECK: phase phase_buf_full
CHECK: one_thread:
CHECK-NEXT: mbarrier.init buf_full[0], 1
CHECK-NEXT: fence.mbarrier_init.release.cluster
CHECK-NEXT: bar.sync 0, 128
CHECK: tma.load buf <- X[tile.m * 64, tile.n * 64] (8192 B) on buf_full[0]
""", tmp_path)


def test_two_buffers_share_one_prologue(tmp_path):
    text = HEADER + """    shared a: bf16[BM, BN]
    shared b: bf16[BM, BN]
    tma a <- X[tile.m, tile.n]
    tma b <- Y[tile.m, tile.n]
}
"""
    out = ir_after(text, PASS)
    assert out.count("bar.sync 0, 128") == 1
    assert "mbarrier.init a_full[0], 1" in out and "mbarrier.init b_full[0], 1" in out


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


def test_staged_buffer_is_rejected_with_location():
    text = HEADER + """    shared s: bf16[BM, BN] stages 2
    tma s <- X[tile.m, tile.n]
}
"""
    with pytest.raises(CompileError, match="2 stages") as info:
        ir_after(text, PASS)
    assert info.value.span.line == 5


def test_wait_not_yet_placed():
    assert "mbarrier.wait" not in ir_after(LOAD_THEN_READ, PASS)
