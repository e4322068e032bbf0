"""How a warpgroup's wgmma-layout tile reaches shared memory: stmatrix.x4 where
every lane stores, into layouts whose 8x8 matrices take one wavefront each
when swizzled; shared-memory wavefronts replayed from the layout's addresses
(ir/banks.py). The mapping itself is checked against CuTe in
tests/oracle/test_stmatrix.py."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile, read_source
from hopperc.ir.dtypes import Swizzle
from hopperc.ir.banks import tile_store_wavefronts, wavefronts

ROOT = Path(__file__).resolve().parent.parent


def test_wavefronts_count_distinct_words_per_bank():
    assert wavefronts([(4 * lane, 4) for lane in range(32)]) == 1  # one word per bank
    assert wavefronts([(4 * (lane // 2), 4) for lane in range(32)]) == 1  # shared words broadcast
    assert wavefronts([(128 * lane, 4) for lane in range(32)]) == 32  # all in bank 0
    assert wavefronts([(16 * i, 16) for i in range(8)]) == 1  # 8 rows of 16 B side by side
    assert wavefronts([(512 * i, 16) for i in range(8)]) == 8  # 8 rows 512 B apart


def epilogue_buffer(sample: str):
    kernel = driver.check(read_source(ROOT / "samples" / f"{sample}.hk"))
    return next(b for b in kernel.buffers if b.name == "sc")


def test_gemm_bf16_epilogue_takes_one_wavefront_per_matrix():
    """A warp stores 16 rows x 256 columns as four 64-column subtiles, each into a
    64 x 64 plane (128-byte rows): 4 stmatrix.x4, 16 matrices of 8 rows x 16 B
    per subtile. 128B-swizzled, the 8 rows of a matrix sit in 8 different 16-byte
    bank groups: 16 wavefronts per subtile, 64 in all, CUTLASS's figure.
    Unswizzled, the 128-byte rows all start in bank 0: 8 wavefronts per matrix.
    Element-wise 16-bit stores into the swizzled plane take one wavefront each,
    but there are 32 of them per subtile, one per element slot."""
    buf = epilogue_buffer("gemm_bf16")
    assert buf.swizzle is Swizzle.B128 and buf.shape == (4, 64, 64)
    assert 4 * tile_store_wavefronts(buf, 0, 64, by_matrix=True) == 64
    assert 4 * tile_store_wavefronts(replace(buf, swizzle=Swizzle.NONE), 0, 64,
                                     by_matrix=True) == 512
    assert 4 * tile_store_wavefronts(buf, 0, 64, by_matrix=False) == 128


def test_gemm_bf16_subtiles_overlap_their_stores():
    """Four subtiles per warpgroup, each stmatrix'd, fenced, handed over by the
    warpgroup's barrier and stored; the third and fourth rewrite a plane after
    `wait_group.read 1` (DEPBAR.LE SB0, 0x1), leaving the previous subtile's
    store in flight, and a barrier hands the wait to the warpgroup."""
    built = driver.build(read_source(ROOT / "samples" / "gemm_bf16.hk"))
    from hopperc.backend import sass_metrics as sm
    (code,) = sm.functions(built.result.cubin).values()
    last = max(k for k, i in enumerate(code) if i.base == "HGMMA")
    ops = [f"{i.opcode} {i.operands}".strip() for i in code[last + 1:]
           if i.base in ("STSM", "FENCE", "BAR", "UTMASTG", "DEPBAR")]
    subtile = ["STSM.16.M88.4"] * 4 + ["FENCE.VIEW.ASYNC.S", "BAR.SYNC.DEFER_BLOCKING",
                                       "UTMASTG.2D"]
    reuse = ["DEPBAR.LE SB0,0x1", "BAR.SYNC.DEFER_BLOCKING"]
    shape = [op.split(" ")[0] if not op.startswith("DEPBAR") else op for op in ops]
    # the ring's hand-off barrier (256 threads) comes first, the exit's wait last
    assert shape == (["BAR.SYNC.DEFER_BLOCKING"] + subtile * 2 + reuse + subtile + reuse
                     + subtile + ["DEPBAR.LE SB0,0x0"])
    barriers = [op for op in ops if op.startswith("BAR")]
    assert barriers[0] == "BAR.SYNC.DEFER_BLOCKING 0x1,0x100"
    # the rest name the warpgroup's id (a register) and its 128 threads
    assert len(barriers) == 7 and all(re.fullmatch(r"BAR\.SYNC\.DEFER_BLOCKING R\d+,0x80", b)
                                      for b in barriers[1:])


def stores(cuda: str) -> tuple[int, int]:
    return cuda.count("hk_stmatrix_x4(hk_smem_base"), cuda.count("hk_st_shared_u16(hk_smem_base")


@pytest.mark.parametrize("sample", ["gemm_bf16", "gemm_chain", "gemm_relu", "mlp_two_mma"])
def test_gemm_epilogues_store_with_stmatrix(sample):
    cuda = driver.generate(read_source(ROOT / "samples" / f"{sample}.hk")).cuda
    matrix, element = stores(cuda)
    assert matrix >= 1 and element == 0


def test_tiles_reading_global_vectors_store_element_wise():
    """A bias row read from global memory in the stored value: ptxas would hoist
    all its loads above the unrolled stmatrix stores and spill (measured on
    gemm_bias_relu when its bias was a global vector)."""
    path = ROOT / "tests" / "sim" / "kernels" / "gemm_epilogue_loads.hk"
    assert stores(driver.generate(read_source(path)).cuda) == (0, 1)


def test_a_bias_staged_in_shared_memory_keeps_stmatrix():
    """gemm_bias_relu reads its bias from a 1-D shared buffer, 64 values per
    subtile (sbias[None, 64 j : 64 j + 64]): shared loads are short, nothing
    spills, and each of the four subtiles is stored with stmatrix. Subtile j
    reads the bias from element 64 j on."""
    cuda = driver.generate(read_source(ROOT / "samples" / "gemm_bias_relu.hk")).cuda
    assert stores(cuda) == (4, 0)
    offsets = re.findall(r"\(hk_c(?: \+ (\d+))?\) \* 4u", cuda)
    assert offsets == ["", "64", "128", "192"]


_PACKED = """\
kernel packed(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 256
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    shared sc: bf16[BM, BN] swizzle 128B
    tma sa <- A[tile.m, 0]
    tma sb <- B[tile.n, 0]
    acc: f32[64, BN] = sa[wg] @ sb^T
    STORE
    tma C[tile.m, tile.n] <- sc
}
"""


def test_a_bf16_tile_is_stored_from_its_packed_registers():
    """`sc[wg] = cb` of a bf16 tile: stmatrix takes cb's registers as they are.
    Register 4 hk_i + m holds slots 8 hk_i + 2m (low half) and + 1, the two slots
    the element path packs into stmatrix operand m (hk_pack_bf16x2(lo, hi) puts lo
    in the low half), so both store the same matrices, the tile without
    unpacking and repacking each pair."""
    def cuda(store):
        return driver.generate(SourceFile("k.hk", _PACKED.replace("STORE", store))).cuda
    whole = cuda("cb: bf16[64, BN] = bf16(acc)\n    sc[wg] = cb")
    assert stores(whole) == (1, 0)
    assert re.search(r"hk_stmatrix_x4\([^;]*u_cb\[4 \* hk_i\], u_cb\[4 \* hk_i \+ 1\],[^;]*"
                     r"u_cb\[4 \* hk_i \+ 2\], u_cb\[4 \* hk_i \+ 3\]\);", whole)
    assert "hk_set_half(u_cb[hk_k / 2], hk_k % 2," in whole  # slot k: register k / 2, half k % 2
    by_value = cuda("sc[wg] = bf16(acc)")
    for m in range(4):
        assert (f"hk_pack_bf16x2(hk_value(8 * hk_i + {2 * m}), "
                f"hk_value(8 * hk_i + {2 * m + 1}))") in by_value
    converted = cuda("cb: bf16[64, BN] = bf16(acc)\n    sc[wg] = bf16(f32(cb) * 2.0)")
    assert "u_cb[4 * hk_i]" not in converted  # an expression of it: the element path


def test_hand_synchronized_code_stores_element_wise():
    """In manual code each thread's fences cover the elements it stores itself, as
    the user reasoned; a warp-collective store would change whose writes they are."""
    path = ROOT / "tests" / "sim" / "manual" / "manual_pipe.hk"
    manual = driver.generate(read_source(path)).cuda
    assert stores(manual) == (0, 1)
    text = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    x: f32[BM, BN] = f32(sx)
    sy = bf16(x * 2.0)
    tma Y[tile.m, tile.n] <- sy
}
"""
    assert stores(driver.generate(SourceFile("k.hk", text)).cuda) == (1, 0)


def test_wide_swizzled_round_trip_checks_clean():
    """Column-block TMA copies and a stmatrix store into reused memory: no race,
    no missing fence, Y exact. (Not a mutation kernel: its barrier between a
    warpgroup's read of its rows and its rewrite of them, now the warpgroup's
    own bar.sync, could go entirely: each warp reads and rewrites only its own
    16 rows, in one layout. Removing it is no hazard.)"""
    report = driver.simulate(read_source(ROOT / "tests" / "sim" / "layouts"
                                         / "wide_swizzled_round_trip.hk"), seeds=8, search=300)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
