"""fold_zero_into_first_product: `acc = 0` before a product loop becomes scale-d 0
on the loop's first product; the registers are zeroed only on a path where the
loop may not run."""
from tests.conftest import filecheck, ir_after
from tests.passes.kernels import MMA_FUSED_LOOP, MMA_MANUAL, MMA_UNREAD, WG_HEADER

PASS = "fold_zero_into_first_product"

# A trip count no tensor map bounds: `n` may be 0, so acc = 0 must survive on that path.
SCALAR_TRIPS = """kernel k(A: bf16[M, K], B: bf16[N, K], Y: bf16[M, N], n: i32)
    tile(BM = 64, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    shared sy: bf16[BM, BN]
    acc: f32[BM, BN] = 0
    for k in 0 .. n {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
    }
    sy = bf16(acc)
    tma Y[tile.m, tile.n] <- sy
}
"""

# The loop reads acc before its product: the zeros are used, nothing to fold.
READ_BEFORE_PRODUCT = WG_HEADER + """    acc: f32[BM, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc = acc * 0.5
        acc += sa @ sb^T
    }
    sy = bf16(acc)
    tma Y[tile.m, tile.n] <- sy
}
"""

# Reset between two loops: the second loop's first product overwrites too.
RESET_BETWEEN_LOOPS = WG_HEADER + """    acc: f32[BM, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
    }
    sy = bf16(acc)
    acc = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb2 <- B2[tile.n, k]
        acc += sa @ sb2^T
    }
    sy = bf16(acc)
    tma Y[tile.m, tile.n] <- sy
}
"""


def test_front_end_zeroes_the_accumulator():
    assert "acc: f32[64, 64] wgmma = 0" in ir_after(MMA_UNREAD, "front-end")


def test_constant_trip_count_drops_the_zeroing(tmp_path):
    """0 .. 4 runs: the registers are never zeroed, the first product overwrites."""
    filecheck(ir_after(MMA_UNREAD, PASS), """
CHECK: acc: f32[64, 64] wgmma = undefined
CHECK-NEXT: for k in 0 .. 4:
CHECK-NEXT: wgmma acc += sa @ sb^T (m64n64k64, overwrites when k == 0)
CHECK-NOT: acc = 0
""", tmp_path)


def test_tile_count_of_a_mapped_dimension_runs_at_least_once(tmp_path):
    """K is a dimension of A's tensor map, so K / BK >= 1: no zero path; each
    of the two accumulators is folded into its own product."""
    out = ir_after(MMA_FUSED_LOOP, PASS)
    assert "<= 0" not in out
    filecheck(out, """
CHECK: acc1: f32[64, 64] wgmma = undefined
CHECK-NEXT: acc2: f32[64, 64] wgmma = undefined
CHECK-NEXT: for k in 0 .. K / 64:
CHECK: wgmma acc1 += sa @ sb^T (m64n64k64, overwrites when k == 0)
CHECK-NEXT: wgmma acc2 += sa @ sb2^T (m64n64k64, overwrites when k == 0)
""", tmp_path)


def test_loop_that_may_not_run_zeroes_after_it(tmp_path):
    """n may be 0: the zeroing moves after the loop, on the path where it ran no
    iteration (before it, it would join the wgmma chain: C7515)."""
    filecheck(ir_after(SCALAR_TRIPS, PASS), """
CHECK: acc: f32[64, 64] wgmma = undefined
CHECK-NEXT: for k in 0 .. n:
CHECK: wgmma acc += sa @ sb^T (m64n64k64, overwrites when k == 0)
CHECK-NEXT: if n <= 0:
CHECK-NEXT: acc = 0
CHECK-NEXT: st.shared sy = bf16(acc)
""", tmp_path)


def test_accumulator_read_before_the_product_keeps_its_zeros(tmp_path):
    out = ir_after(READ_BEFORE_PRODUCT, PASS)
    assert "acc: f32[64, 64] wgmma = 0" in out and "overwrites" not in out


def test_reset_between_loops_is_folded_into_the_second_loop(tmp_path):
    out = ir_after(RESET_BETWEEN_LOOPS, PASS)
    assert out.count("overwrites when k == 0") == 2
    assert "acc = 0" not in out


def test_manual_code_is_left_as_written():
    out = ir_after(MMA_MANUAL, PASS)
    assert "acc: f32[64, 64] wgmma = 0" in out and "overwrites" not in out
