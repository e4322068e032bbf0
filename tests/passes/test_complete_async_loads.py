"""complete_async_loads: expect_tx of the exact bytes, wait as late as possible."""
import pytest

from tests.conftest import filecheck, ir_after
from tests.passes.kernels import COPY, HEADER, READ_THEN_REFILL

PASS = "complete_async_loads"


def test_expect_tx_exact_bytes_then_wait_before_use(tmp_path):
    """Only the issuer uses the data (its own TMA store): only it waits."""
    filecheck(ir_after(COPY, PASS), """
CHECK: mbarrier.arrive.expect_tx buf_full[0], 8192
CHECK-NEXT: tma.load buf
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.wait buf_full[0], parity phase_buf_full
CHECK-NEXT: flip phase_buf_full
CHECK-NEXT: tma.store Y
""", tmp_path)


def test_every_thread_waits_when_any_thread_reads(tmp_path):
    """The TMA store is the issuer's, but the element-wise read is everyone's:
    every thread waits on every phase of the barrier, the first one included."""
    text = HEADER + """    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- sx
    tma sx <- X[tile.m, tile.n + 1]
    sy = sx
}
"""
    out = ir_after(text, PASS)
    lines = out.splitlines()
    waits = [i for i, line in enumerate(lines) if "mbarrier.wait sx_full[0]" in line]
    assert len(waits) == 2
    assert all("one_thread" not in lines[i - 1] for i in waits)
    filecheck(out, """
CHECK: tma.load sx
CHECK-NEXT: mbarrier.wait sx_full[0]
CHECK-NEXT: flip
CHECK-NEXT: tma.store Y
""", tmp_path)


@pytest.mark.parametrize("manual, issuer_alone", [
    ("sy = sx", False),       # hand-written code reads the data: everyone waits
    ("bar.sync 1, 128", True),  # it does not touch sx: the issuer still waits alone
])
def test_manual_code_that_reads_the_data_makes_everyone_wait(manual, issuer_alone):
    text = HEADER + f"""    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- sx
    manual {{
        {manual}
    }}
}}
"""
    lines = ir_after(text, PASS).splitlines()
    wait = next(i for i, line in enumerate(lines) if "mbarrier.wait sx_full" in line)
    assert ("one_thread" in lines[wait - 1]) is issuer_alone


def test_loads_into_disjoint_slices_share_one_phase(tmp_path):
    """Two loads into different planes of one buffer are in flight together:
    one arm with both loads' bytes, no wait between them, one wait."""
    text = HEADER + """    shared sx: bf16[2, BM, BN]
    shared sy: bf16[BM, BN]
    tma sx[0] <- X[tile.m, tile.n]
    tma sx[1] <- X[tile.m, tile.n + 1]
    sy = sx[0] + sx[1]
}
"""
    out = ir_after(text, PASS)
    assert out.count("mbarrier.arrive.expect_tx") == 1
    assert out.count("mbarrier.wait") == 1
    filecheck(out, """
CHECK: mbarrier.arrive.expect_tx sx_full[0], 16384
CHECK-NEXT: tma.load sx[0 of 2]
CHECK-NEXT: tma.load sx[1 of 2]
CHECK-NEXT: mbarrier.wait sx_full[0]
CHECK-NEXT: flip
CHECK-NEXT: st.shared sy
""", tmp_path)


def test_overlapping_loads_wait_for_the_first(tmp_path):
    """A second load into the same bytes must not race the first: it waits,
    and re-arms the barrier for its own phase."""
    text = HEADER + """    shared sx: bf16[2, BM, BN]
    shared sy: bf16[BM, BN]
    tma sx[1] <- X[tile.m, tile.n]
    tma sx[1] <- X[tile.m, tile.n + 1]
    sy = sx[1]
}
"""
    filecheck(ir_after(text, PASS), """
CHECK: mbarrier.arrive.expect_tx sx_full[0], 8192
CHECK-NEXT: tma.load sx[1 of 2]
CHECK-NEXT: mbarrier.wait sx_full[0]
CHECK-NEXT: flip
CHECK-NEXT: mbarrier.arrive.expect_tx sx_full[0], 8192
CHECK-NEXT: tma.load sx[1 of 2]
CHECK-NEXT: mbarrier.wait sx_full[0]
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
