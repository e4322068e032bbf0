"""Hardware-limit diagnostics: TMA boxes, wgmma shapes, register budgets,
shared memory, block and cluster sizes. Same method as test_diagnostics.py:
break one thing in a valid kernel and expect a located `CompileError`.
"""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from test_diagnostics import COPY, GEMM, ROLES, case, expect_error, mutate

LIMITS = [
    # TMA (cuTensorMapEncodeTiled) and bulk copies
    case("tma_box_dim_too_large", COPY, [("BM = 64", "BM = 512")], "tma buf <-",
         "TMA box dimension 512 is out of range", "between 1 and 256"),
    case("tma_inner_bytes_not_multiple_of_16", COPY,
         [("bf16[BM, BN] swizzle", "bf16[BM, 4] swizzle")],
         "tma buf <-", "TMA inner box dimension is 8 bytes", "multiple of 16 bytes"),
    # Rows wider than the swizzle span lie in column blocks, one TMA box each,
    # which a rank-3 box cannot follow; and they must be whole blocks.
    case("tma_wide_swizzled_planes", COPY,
         [("X: bf16[M, N]", "X: bf16[P, M, N]"), ("bf16[BM, BN] swizzle", "bf16[2, BM, 2 * BN] swizzle"),
          ("X[tile.m, tile.n]", "X[0, tile.m, tile.n]")],
         "tma buf <-", "laid out in 2 column blocks", "only for rank-2 buffers"),
    case("swizzled_rows_not_whole_spans", COPY, [("bf16[BM, BN] swizzle", "bf16[BM, 96] swizzle")],
         "shared buf", "rows of 192 bytes", "a multiple of 64"),
    case("tma_store_box_checked_too", COPY, [("Y: bf16[M, N]", "Y: bf16[M, 32]")], "tma Y[",
         "shape mismatch", "larger than 'Y'"),
    case("bulk_copy_not_1d", COPY, [("tma buf <- X", "bulk buf <- X")], "bulk buf <-",
         "a bulk copy moves a contiguous 1-D slice"),
    case("bulk_copy_bytes", COPY, [("X: bf16[M, N]", "X: bf16[N]"),
                                   ("    tma buf <- X[tile.m, tile.n]", "    bulk v <- X[tile.n]"),
                                   ("128B\n", "128B\n    shared v: bf16[4]\n")],
         "bulk v <-", "a bulk copy moves 8 bytes; it must be a multiple of 16"),
    case("tma_plane_off_128_bytes", COPY,
         [("BM = 64, BN = 64", "BM = 1, BN = 32"),
          ("buf: bf16[BM, BN] swizzle 128B", "buf: bf16[2, BM, BN] swizzle 64B"),
          ("tma buf <- X[tile.m, tile.n]", "tma buf[1] <- X[tile.m, tile.n]"),
          ("<- buf\n", "<- buf[1]\n")],
         "tma buf[1] <-", "a tma copy needs a shared address aligned to 128 bytes",
         "each part of 'buf' is 64 bytes"),
    case("tma_stage_off_128_bytes", COPY,
         [("BM = 64, BN = 64", "BM = 1, BN = 32"),
          ("buf: bf16[BM, BN] swizzle 128B", "buf: bf16[BM, BN] stages 2 swizzle 64B")],
         "tma buf <-", "a tma copy needs a shared address aligned to 128 bytes",
         "each stage of 'buf' is 64 bytes"),
    # wgmma.mma_async shapes
    case("wgmma_m_not_64", GEMM, [("BM = 64", "BM = 128")], "sa @ sb^T",
         "wgmma computes 64 rows per warpgroup", "M = 128"),
    case("wgmma_n_not_multiple_of_8", GEMM, [("BN = 64", "BN = 60")], "sa @ sb^T",
         "wgmma N = 60 is not supported", "multiple of 8 between 8 and 256"),
    case("wgmma_n_above_256", GEMM,
         [("BN = 64", "BN = 272"), ("        tma sb <- B[tile.n, k]\n", "")],
         "sa @ sb^T", "wgmma N = 272 is not supported"),
    case("wgmma_k_not_multiple_of_16", GEMM, [("BK = 64", "BK = 8")], "sa @ sb^T",
         "wgmma K = 8 is not a multiple of the instruction K (16 for bf16)"),
    case("wgmma_fp8_needs_k_major", GEMM, [("A: bf16", "A: e4m3"), ("B: bf16", "B: e4m3"),
                                           ("sa: bf16", "sa: e4m3"), ("sb: bf16", "sb: e4m3"),
                                           ("sa @ sb^T", "sa @ sa")],
         "sa @ sa", "fp8 wgmma needs K-major operands"),
    # tf32: f32 operands, K-major only (no transpose immediates), A from shared memory
    case("wgmma_tf32_needs_k_major", GEMM, [("A: bf16", "A: f32"), ("B: bf16", "B: f32"),
                                            ("sa: bf16", "sa: f32"), ("sb: bf16", "sb: f32"),
                                            ("BK = 64", "BK = 32"), ("sa @ sb^T", "sa^T @ sb^T")],
         "sa^T @ sb^T", "tf32 wgmma needs K-major operands", "a as [M, K]"),
    case("wgmma_register_a_tf32", GEMM, [("A: bf16", "A: f32"), ("B: bf16", "B: f32"),
                                         ("sa: bf16", "sa: f32"), ("sb: bf16", "sb: f32"),
                                         ("BK = 64", "BK = 32"),
                                         ("acc += sa @ sb^T", "a: f32[BM, BK] = sa * 2.0\n"
                                                              "        acc += a @ sb^T")],
         "a @", "a register A operand must be bf16, f16 or fp8",
         "tf32 wgmma reads A from shared memory"),
    case("wgmma_below_a_warpgroup", GEMM, [("threads 128", "threads 64")], "acc += sa",
         "wgmma runs on whole warpgroups"),
    case("wgmma_operand_not_swizzled", GEMM, [("sb: bf16[BN, BK] swizzle 128B",
                                               "sb: bf16[BN, BK]")],
         "sb^T", "wgmma reads 'sb' (B, K-major) from shared memory in a swizzled layout",
         "declare it with swizzle 128B"),
    case("wgmma_operand_rows_narrower_than_span", GEMM,
         [("sa: bf16[BM, BK]", "sa: bf16[BM, BK / 2]"), ("sb: bf16[BN, BK]", "sb: bf16[BN, BK / 2]")],
         "sa @", "'sa' has rows of 64 bytes (32 x bf16)", "with 128B swizzle reads rows of "
         "whole 128-byte spans", "a multiple of 64"),
    # Rows of several spans are column blocks wgmma steps through (K-major and
    # MN-major), but not in planes, and only whole spans (checked where declared).
    case("wgmma_wide_operand_in_planes", GEMM,
         [("sb: bf16[BN, BK] swizzle 128B", "sb: bf16[2, BN, 2 * BK] swizzle 128B"),
          ("BK = 64", "BK = 128"), ("sa @ sb^T", "sa @ sb[0]^T"), ("        tma sb <- B[tile.n, k]\n", ""),
          ("sa: bf16[BM, BK]", "sa: bf16[BM, 2 * BK]")],
         "sb[0]^T", "'sb' has rows of 512 bytes", "only from rank-2 buffers"),
    case("wgmma_operand_rows_not_whole_spans", GEMM,
         [("sa: bf16[BM, BK]", "sa: bf16[BM, 96]"), ("BK = 64", "BK = 96"),
          ("sb: bf16[BN, BK]", "sb: bf16[BN, 96]")],
         "shared sa", "'sa' has rows of 192 bytes", "a multiple of 64"),
    # A warpgroup's fp8 tile is wgmma's register A fragment: whole k-steps of 32
    # columns, read only as a product's A.
    case("wgmma_register_a_fp8_not_whole_k_steps", GEMM,
         [("A: bf16", "A: e4m3"), ("B: bf16", "B: e4m3"), ("sa: bf16", "sa: e4m3"),
          ("sb: bf16", "sb: e4m3"), ("BK = 64", "BK = 128"),
          ("acc += sa @ sb^T", "a: e4m3[BM, 48] = 1.0\n        acc += sa @ sb^T")],
         "a: e4m3[BM, 48]", "held as wgmma's register A fragment, in k-steps of 32 columns",
         "[64, 48] is not"),
    case("wgmma_register_a_fp8_read_elsewhere", GEMM,
         [("A: bf16", "A: e4m3"), ("B: bf16", "B: e4m3"), ("sa: bf16", "sa: e4m3"),
          ("sb: bf16", "sb: e4m3"), ("BK = 64", "BK = 128"),
          ("acc += sa @ sb^T", "a: e4m3[BM, BK] = e4m3(f32(sa))\n        acc += a @ sb^T\n"
                               "        b: f32[BM, BK] = f32(a) * 2.0")],
         "a) * 2.0", "'a' is a warpgroup's e4m3 tile, held as wgmma's register A fragment",
         "can only be the A of a product"),
    case("wgmma_b_not_shared", GEMM, [("acc += sa @ sb^T", "acc += sa @ acc")], "acc\n",
         "wgmma's B operand must be a shared buffer", nth=-1),
    case("wgmma_role_not_at_warpgroup_start", ROLES, [("warp regs 40", "warp"),
                                                      ("warpgroup regs 232", "warpgroup")],
         "acc: f32", "role 'consumer' issues wgmma but starts at warp 1", "multiple of 4"),
    # setmaxnreg budgets and the register file
    case("regs_not_multiple_of_8", ROLES, [("regs 40", "regs 44")], "role producer",
         "role 'producer' asks for 44 registers", "multiple of 8 between 24 and 256"),
    case("regs_below_24", ROLES, [("regs 40", "regs 16")], "role producer",
         "asks for 16 registers", "between 24 and 256"),
    case("regs_above_256", ROLES, [("regs 232", "regs 264")], "role consumer",
         "role 'consumer' asks for 264 registers", "between 24 and 256"),
    case("register_file_exceeded", ROLES, [("warpgroup regs 232", "warpgroup x2 regs 256")],
         "role consumer", f"register budgets need {40 * 128 + 256 * 256} registers",
         "40 x 128 (producer) + 256 x 256 (consumer)", "65536",
         f"role 'consumer' has the largest budget, {256 * 256}"),
    case("register_budget_on_some_roles", ROLES, [("warp regs 40", "warp")], "role producer",
         "role 'producer' has no register budget", "every role must"),
    case("threads_with_roles", ROLES, [("N / BN)\n", "N / BN) threads 160\n")], "threads 160",
         "'threads' is implied by the roles"),
    case("statement_outside_roles", ROLES, [("    role producer", "    acc: f32[BM, BN] = 0.0\n"
                                                                 "    role producer")],
         "acc: f32[BM, BN] = 0.0", "with roles, every statement belongs to a role"),
    # a buffer placed in another buffer's memory
    case("reuses_not_a_buffer", COPY, [("128B\n", "128B\n    shared v: bf16[BM, BN] reuses BM\n")],
         "BM\n", "'BM' is not a shared buffer"),
    case("reuses_larger_than_target", COPY,
         [("128B\n", "128B\n    shared v: f32[BM, BN] reuses buf\n")], "shared v",
         f"'v' needs {64 * 64 * 4} bytes but 'buf' has {64 * 64 * 2}"),
    case("reuses_stricter_alignment", COPY,
         [("swizzle 128B\n", "\n    shared v: bf16[BM, BN] swizzle 128B reuses buf\n")],
         "shared v", "'v' needs 1024-byte alignment but 'buf' is only 128-byte aligned"),
    case("reuses_a_reusing_buffer", COPY,
         [("128B\n", "128B\n    shared v: bf16[BM, BN] reuses buf\n"
                      "    shared w: bf16[BM, BN] reuses v\n")],
         "v\n", "'v' already reuses the memory of 'buf'; reuse 'buf'", nth=-1),
    # shared memory, block, grid and cluster
    case("shared_memory_exceeded", COPY, [("128B\n", "128B\n    shared big: f32[256, 256]\n")],
         "shared big", f"shared memory needs {64 * 64 * 2 + 256 * 256 * 4} bytes",
         f"more than the {227 * 1024} bytes (227 KB)"),
    case("block_size_not_multiple_of_32", COPY, [("threads 128", "threads 100")], "threads 100",
         "a block of 100 threads is not possible", "multiple of 32 up to 1024"),
    case("block_size_too_large", COPY, [("threads 128", "threads 2048")], "threads 2048",
         "a block of 2048 threads is not possible"),
    case("tile_does_not_split_over_threads", COPY,
         [("threads 128", "threads 96"), ("    tma Y", "    t: f32[2, 8] = 0.0\n    tma Y")],
         "t: f32", "a 2x8 tile does not split evenly over the 96 threads"),
    case("grid_too_many_axes", COPY, [("n: N / BN)", "n: N / BN, a: 1, b: 1)")], "b: 1",
         "a grid has at most 3 axes"),
    case("cluster_too_large", COPY, [("threads 128", "threads 128 cluster(4, 8)")],
         "cluster(4, 8)", "a cluster has 1 to 3 dimensions of at most 16 blocks"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", LIMITS)
def test_limit(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


def test_limit_from_define_is_located_at_the_use() -> None:
    """-D BM=512 passes the tile constant check but the TMA box it makes does not fit."""
    expect_error(COPY, "tma buf <-", ["TMA box dimension 512"], defines={"BM": 512})


INCLUSIVE = [
    pytest.param(mutate(COPY, ("BM = 64", "BM = 256")), id="tma_box_dim_256"),
    pytest.param(mutate(GEMM, ("BN = 64", "BN = 256")), id="wgmma_n_256"),
    pytest.param(mutate(COPY, ("BN = 64)", f"BN = 64, R = {227 * 1024 - 64 * 64 * 2})"),
                         ("128B\n", "128B\n    shared pad: e4m3[R]\n")), id="shared_227_kb"),
    pytest.param(mutate(ROLES, ("regs 40", "regs 24"), ("regs 232", "regs 256")), id="regs_24_256"),
    pytest.param(mutate(ROLES, ("warp regs 40", "warpgroup regs 256"), ("regs 232", "regs 256")),
                 id="register_file_full"),
    pytest.param(mutate(COPY, ("threads 128", "threads 1024")), id="block_1024"),
]


@pytest.mark.parametrize("text", INCLUSIVE)
def test_limits_are_inclusive(text: str) -> None:
    """The largest (or smallest) legal value of each limit compiles."""
    driver.check(SourceFile("ok.hk", text))


GEMM_ROLES = """kernel g(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])
    tile(BM = 128, BN = 256, BK = 64) grid(m: M / BM, n: N / BN)
{
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    shared sb: bf16[BN, BK] stages 2 swizzle 128B
    shared sc: bf16[BM, BN]
    role math: warpgroup x2 regs MATH {
        acc: f32[64, BN] = 0
        for k in 0 .. K / BK {
            acc += sa[wg] @ sb^T
        }
        sc[wg] = bf16(acc)
        tma C[tile.m, tile.n] <- sc
    }
    role load: LOAD {
        for k in 0 .. K / BK {
            tma sa <- A[tile.m, k]
            tma sb <- B[tile.n, k]
        }
    }
}
"""


@pytest.mark.parametrize("math, load, message", [
    ("24", "warp regs 40", "'acc' needs 128 registers per thread, more than the 24 role 'math' "
                           "has (regs 24)"),
    ("232", "warpgroup regs 24", None),
])
def test_a_tile_larger_than_its_roles_registers_is_refused(math, load, message):
    """ptxas cannot fit a 64x256 f32 accumulator (128 registers per thread) in a
    24-register role ('Insufficient registers'): a located error instead. Each
    warpgroup holds its own tile (128 threads)."""
    text = GEMM_ROLES.replace("MATH", math).replace("LOAD", load)
    if message is None:
        driver.build(SourceFile("g.hk", text))
        return
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("g.hk", text))
    assert message in info.value.message and info.value.span.line == 8


def test_a_tile_larger_than_the_launch_share_is_refused():
    text = """kernel k(X: f32[M, N]) threads 1024 {
    t: f32[64, 256] = 0.0
}
"""
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("k.hk", text))
    assert ("'t' needs 128 registers per thread, more than the 64 each of the block's 1024 "
            "threads has (65536 / 1024, rounded down to 8)") in info.value.message
    driver.check(SourceFile("k.hk", text.replace("256", "128")))  # 64 each: fits


# A resource overflow points at what overflows (frontend/limits.py): the shared buffer
# whose end crosses 227 KB in the declaration-order layout, the role with the largest
# budget when the register file's 64K is exceeded (one pool, no order), the tile too large for its role; the message
# gives the total and the limit, a note the largest contributors with their lines.
STAGES = mutate(GEMM, ("bf16[BM, BK] swizzle", "bf16[BM, BK] stages 16 swizzle"),
                ("bf16[BN, BK] swizzle", "bf16[BN, BK] stages 16 swizzle"))
OVERFLOWS = [
    pytest.param(STAGES, "shared sb", (f"shared memory needs {2 * 16 * 8192} bytes, more than "
                                       f"the {227 * 1024} bytes", f"'sb' ends at byte {2 * 16 * 8192}"),
                 "the largest buffers, in bytes: 'sa' 131072 (line 4, 16 stages of 8192), "
                 "'sb' 131072 (line 5, 16 stages of 8192)", id="shared_too_many_stages"),
    # The largest buffer comes first, so the small one after it crosses the limit.
    pytest.param(mutate(COPY, ("    shared buf", "    shared big: f32[224, 256]\n    shared buf")),
                 "shared buf", (f"shared memory needs {224 * 1024 + 8192} bytes",
                                f"'buf' ends at byte {224 * 1024 + 8192}"),
                 "the largest buffers, in bytes: 'big' 229376 (line 4), 'buf' 8192 (line 5)",
                 id="shared_crossed_by_a_small_buffer"),
    # A buffer that reuses another's memory takes none of its own.
    pytest.param(mutate(COPY, ("    shared buf", "    shared big: f32[224, 256]\n"
                                                 "    shared alias: f32[224, 256] reuses big\n"
                                                 "    shared buf")),
                 "shared buf", ("'buf' ends at byte",),
                 "the largest buffers, in bytes: 'big' 229376 (line 4), 'buf' 8192 (line 6)",
                 id="shared_reused_memory_not_counted"),
    # The register file is one pool: the largest budget, not the role declared last.
    pytest.param(mutate(ROLES, ("warp regs 40", "warpgroup x2 regs 160")),
                 "role producer", (f"register budgets need {160 * 256 + 232 * 128} registers",
                                   "more than the 65536",
                                   "role 'producer' has the largest budget, 40960"),
                 "the largest budgets, in registers: 'producer' 40960 (line 7, regs 160 x 256 "
                 "threads), 'consumer' 29696 (line 10, regs 232 x 128 threads)",
                 id="register_file_at_the_largest_budget_declared_first"),
    pytest.param(mutate(ROLES, ("warp regs 40", "warpgroup x2 regs 40"),
                        ("warpgroup regs 232", "warpgroup x2 regs 240")),
                 "role consumer", (f"register budgets need {40 * 256 + 240 * 256} registers",
                                   "role 'consumer' has the largest budget, 61440"),
                 "the largest budgets, in registers: 'consumer' 61440 (line 10, regs 240 x 256 "
                 "threads), 'producer' 10240 (line 7, regs 40 x 256 threads)",
                 id="register_file_at_the_largest_budget_declared_last"),
    pytest.param(mutate(ROLES, ("regs 232", "regs 168"),
                        ("= sa @ sb^T\n", "= sa @ sb^T\n        wide: f32[64, 512] = 0.0\n")),
                 "wide:", ("'wide' needs 256 registers per thread, more than the 168 role "
                           "'consumer' has (regs 168)",),
                 "the largest register tiles of role 'consumer', in registers per thread: "
                 "'wide' 256 (line 14), 'acc' 32 (line 13); all 2 together: 288",
                 id="tile_over_its_roles_regs"),
]


@pytest.mark.parametrize("text, marker, keywords, note", OVERFLOWS)
def test_overflow_points_at_the_culprit(text, marker, keywords, note) -> None:
    err = expect_error(text, marker, keywords)
    assert err.rule == "resource-limit" and err.notes == (note,)


def test_shared_overflow_by_the_compilers_additions_points_at_the_largest_buffer() -> None:
    """The buffers fit but not with the mbarriers: the largest buffer is the one to
    shrink."""
    fits = 227 * 1024 - 64 * 64 * 2
    text = mutate(COPY, ("BN = 64)", f"BN = 64, R = {fits})"),
                  ("    shared buf", "    shared pad: e4m3[R]\n    shared buf"),
                  ("    tma buf <-", "    mbarrier extra[4]\n    tma buf <-"))
    err = expect_error(text, "shared pad", [f"shared memory needs {227 * 1024 + 32} bytes",
                                            "the buffers fit", "'pad' is the largest"])
    assert err.notes == (f"the largest buffers, in bytes: 'pad' {fits} (line 4), "
                         "'buf' 8192 (line 5)",)
