"""split_boundary_iterations: a loop whose tile masks are affine in its
variable runs an interior part with each mask replaced by the operand it
selects there, and boundary parts with the body as written."""
from tests.conftest import filecheck, ir_after

PASS = "split_boundary_iterations"

HEAD = """kernel k(X: f32[M, N], Y: f32[M, 64]{params})
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{{
    shared sx: f32[BM, BN]
    shared sy: f32[BM, BN]
    acc: f32[BM, BN] = 0.0
    for j in 0 .. {trips} {{
        tma sx <- X[tile.m, j]
{body}    }}
    sy = acc
    tma Y[tile.m, 0] <- sy
}}
"""


def kernel(body: str, trips: str = "N / BN", params: str = "") -> str:
    return HEAD.format(body=body, trips=trips, params=params)


# keys past N (zero-filled by TMA) count 1
KEY_BOUND = kernel("        acc = acc + where(BN * j + col() < N, sx, 1.0)\n")
# row r of tile m takes columns up to BM * tile.m + r
CAUSAL = kernel("        acc = acc + where(BN * j + col() > BM * tile.m + row(), 0.0, sx)\n",
                trips="tile.m + 1")
BOTH = kernel("        x: f32[BM, BN] = where(BN * j + col() < N, sx, 1.0)\n"
              "        x = where(BN * j + col() > BM * tile.m + row(), 0.0, x)\n"
              "        acc = acc + x\n", trips="tile.m + 1")
# a window's left edge: columns more than 64 before the row are left out
WINDOW = kernel("        acc = acc + where(BN * j + col() < BM * tile.m + row() - 64, 0.0, sx)\n",
                trips="tile.m + 1")
SQUARE = kernel("        acc = acc + where(BN * j * j + col() < N, sx, 1.0)\n")
DATA = kernel("        acc = acc + where(sx > 0.5, sx, 1.0)\n")
RUNTIME = kernel("        acc = acc + where(BN * j + col() < kv_len, sx, 1.0)\n", trips="n",
                 params=", n: i32, kv_len: i32")
NO_MASK = kernel("        acc = acc + sx\n")


def test_key_bound_runs_an_interior_without_the_mask(tmp_path):
    """`64 j + col < N` holds for every column while 64 j + 63 < N: the interior
    stops at ceil((N - 63) / 64), and before the last iteration, ceil((N - 64) / 64), at least 0."""
    filecheck(ir_after(KEY_BOUND, PASS), """
CHECK: for j in 0 .. max((N - 64) / 64, 0):  (interior of 0 .. N / 64)
CHECK-NOT: where
CHECK: acc = (acc + ld.shared(sx))
CHECK: for j in max((N - 64) / 64, 0) .. N / 64:  (boundary of 0 .. N / 64)
CHECK: acc = (acc + where((((64 * j) + col()) < N), ld.shared(sx), 1))
CHECK-NOT: for j
CHECK: st.shared sy
""", tmp_path)


def test_copies_keep_the_loops_sync(tmp_path):
    """Both parts wait for their stage and step the ring the same way."""
    out = ir_after(KEY_BOUND, PASS)
    before = ir_after(KEY_BOUND, "elect_async_issue")
    loop = [line.strip() for line in before.splitlines() if "mbarrier.wait" in line]
    assert loop and all(out.count(line) == 2 * before.count(line) for line in loop)


def test_causal_diagonal_is_the_boundary(tmp_path):
    """`64 j + col > 64 m + row` is false for every element while
    64 j + 63 <= 64 m: the interior is 0 .. m, the diagonal tile the boundary
    (the loop's last, m = ceil((64 m - 62) / 64) for m >= 0)."""
    filecheck(ir_after(CAUSAL, PASS), """
CHECK: for j in 0 .. max((64 * tile.m - 62) / 64, 0):  (interior of 0 .. tile.m + 1)
CHECK: tma.load
CHECK-NOT: where
CHECK: acc = (acc + ld.shared(sx))
CHECK: for j in max((64 * tile.m - 62) / 64, 0) .. tile.m + 1:  (boundary
CHECK: where
""", tmp_path)


def test_key_bound_and_diagonal_intersect(tmp_path):
    out = ir_after(BOTH, PASS)
    filecheck(out, """
CHECK: for j in 0 .. max(min((64 * tile.m - 62) / 64, (N - 63) / 64), 0):  (interior
CHECK: x: f32[64, 64] {{.*}}= ld.shared(sx)
CHECK-NOT: x = x
CHECK-NOT: where
CHECK: (boundary of
CHECK: x: f32[64, 64] {{.*}}= where
CHECK: x = where
""", tmp_path)


def test_window_edge_is_a_prefix_boundary(tmp_path):
    """`64 j + col < 64 m + row - 64` is false for every element once
    64 j >= 64 m + 63 - 64: the interior starts there (and after the first
    iteration), the masked part first."""
    filecheck(ir_after(WINDOW, PASS), """
CHECK: for j in 0 .. min(max(1, (64 * tile.m - 1) / 64), tile.m + 1):  (boundary of 0 .. tile.m + 1)
CHECK: where
CHECK: for j in min(max(1, (64 * tile.m - 1) / 64), tile.m + 1) .. tile.m + 1:  (interior
CHECK-NOT: where
CHECK: acc = (acc + ld.shared(sx))
CHECK-NOT: for j
""", tmp_path)


def test_runtime_bounds(tmp_path):
    filecheck(ir_after(RUNTIME, PASS), """
CHECK: for j in 0 .. max(min(n - 1, (kv_len - 63) / 64), 0):  (interior of 0 .. n)
CHECK: for j in max(min(n - 1, (kv_len - 63) / 64), 0) .. n:  (boundary of 0 .. n)
""", tmp_path)


def test_negative_condition_not_affine_in_the_loop_is_not_split():
    for text in (SQUARE, DATA):
        out = ir_after(text, PASS)
        assert "interior" not in out and out == ir_after(text, "elect_async_issue")


def test_mask_in_a_branch_never_taken_does_not_bound_the_interior(tmp_path):
    """`if 0 { }` (a constant the tile sets, CAUSAL = 0) never runs its mask."""
    text = kernel("        x: f32[BM, BN] = where(BN * j + col() < N, sx, 1.0)\n"
                  "        if 0 > 1 {\n"
                  "            x = where(BN * j + col() > BM * tile.m + row(), 0.0, x)\n"
                  "        }\n"
                  "        acc = acc + x\n")
    filecheck(ir_after(text, PASS), """
CHECK: for j in 0 .. max((N - 64) / 64, 0):  (interior of 0 .. N / 64)
""", tmp_path)


def test_negative_loop_without_masks_is_not_split():
    assert ir_after(NO_MASK, PASS) == ir_after(NO_MASK, "elect_async_issue")


def test_first_iteration_that_overwrites_is_a_boundary_of_its_own(tmp_path):
    """bench/kernels/mha_fwd_overlap.hk: O = 0 folds into the loop's first P V
    (scale-d 0 when j == 1, codegen renders that iteration apart), so iteration 1
    is a prefix part with the body as written; the interior and the key-bound
    boundary after it never run j == 1, and their P V accumulates."""
    from tests.conftest import ROOT
    text = (ROOT / "bench" / "kernels" / "mha_fwd_overlap.hk").read_text()
    filecheck(ir_after(text, PASS), """
CHECK: for j in 1 .. min(2, L / 128):  (boundary of 1 .. L / 128)
CHECK: wgmma o += pb @ sv{{.*}}(m64n64k128, overwrites when j == 1)
CHECK: x = where(
CHECK: for j in min(2, L / 128) .. max((L - 128) / 128, min(2, L / 128)):  (interior of 1 .. L / 128)
CHECK-NOT: overwrites
CHECK-NOT: where(
CHECK: for j in max((L - 128) / 128, min(2, L / 128)) .. L / 128:  (boundary of 1 .. L / 128)
CHECK-NOT: overwrites
CHECK: x = where(
""", tmp_path)
