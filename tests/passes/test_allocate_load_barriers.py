"""allocate_load_barriers: one mbarrier per buffer a role loads for itself."""
import pytest

from hopperc.diagnostics import CompileError
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, LOAD_THEN_READ, WRITE_THEN_STORE

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


def test_staged_buffer_is_rejected_with_location():
    text = HEADER + """    shared s: bf16[BM, BN] stages 2
    tma s <- X[tile.m, tile.n]
}
"""
    with pytest.raises(CompileError, match="2 stages, but one role both loads") as info:
        ir_after(text, PASS)
    assert info.value.span.line == 5


def test_wait_not_yet_placed():
    assert "mbarrier.wait" not in ir_after(LOAD_THEN_READ, PASS)
