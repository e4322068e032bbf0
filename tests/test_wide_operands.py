"""wgmma operands whose rows are wider than one swizzle span: column blocks one
span wide (ir/layout.py), read K-major (each k-step's descriptor starts in its
column block) and MN-major (LBO steps between column blocks). The descriptors
themselves are compared with CuTe's in tests/oracle (gmma_cases.py, products named `kw`/`mnw`
for wide K / MN); here: the code, its SASS, and the simulator's results."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs

LOG2E_OVER_SQRT_128 = 0.1275174308

# Q K^T over head dim 128 (K-major, 2 column blocks; each warpgroup's rows of sq a
# part inside both blocks) and P V with V [BN, 128] (MN-major B, N = 128, register
# A); the output through stmatrix into a wide buffer and one TMA store.
ATTENTION = f"""kernel attention_wide(Q: bf16[L, 128], K: bf16[L, 128], V: bf16[L, 128],
                       O: bf16[L, 128])
    tile(BM = 128, BN = 64) grid(m: L / BM)
{{
    shared sq: bf16[BM, 128] swizzle 128B
    shared sk: bf16[BN, 128] stages 2 swizzle 128B
    shared sv: bf16[BN, 128] stages 2 swizzle 128B
    shared so: bf16[BM, 128] swizzle 128B
    role math: warpgroup x2 regs 240 {{
        tma sq <- Q[tile.m, 0]
        o: f32[64, 128] = 0
        m: f32[64] = -inf
        l: f32[64] = 0.0
        for j in 0 .. L / BN {{
            s: f32[64, BN] = sq[wg] @ sk^T
            mn: f32[64] = max(m, rowmax(s))
            p: f32[64, BN] = exp2(s * {LOG2E_OVER_SQRT_128} - mn[:, None] * {LOG2E_OVER_SQRT_128})
            alpha: f32[64] = exp2(m * {LOG2E_OVER_SQRT_128} - mn * {LOG2E_OVER_SQRT_128})
            l = l * alpha + rowsum(p)
            o = o * alpha[:, None]
            m = mn
            pb: bf16[64, BN] = bf16(p)
            o += pb @ sv
        }}
        so[wg] = bf16(o / l[:, None])
        tma O[tile.m, 0] <- so
    }}
    role load: warp regs 24 {{
        for j in 0 .. L / BN {{
            tma sk <- K[j, 0]
            tma sv <- V[j, 0]
        }}
    }}
}}
"""

# acc[64, BN] = A B over K in steps of BK, A K-major ([M, K], "sa") or MN-major
# ([K, M], "sa^T"), B K-major ([N, K], "sb^T") or MN-major ([K, N], "sb"), the
# result stored through `sc`.
GEMM = """kernel gemm(A: {t}{a_dims}, B: {t}{b_dims}, C: bf16[M, N])
    tile(BM = 64, BN = {bn}, BK = {bk}) grid(m: M / BM, n: N / BN) threads 128
{{
    shared sa: {t}{a_tile} swizzle {swizzle}
    shared sb: {t}{b_tile} swizzle {swizzle}
    shared sc: bf16[BM, BN]{c_swizzle}
    acc: f32[BM, BN] = 0.0
    for k in 0 .. K / BK {{
        tma sa <- A{a_coords}
        tma sb <- B{b_coords}
        acc += {a_expr} @ {b_expr}
    }}
    sc = bf16(acc)
    tma C[tile.m, tile.n] <- sc
}}
"""


def gemm(bn: int, bk: int, k_major: bool, dtype: str = "bf16", swizzle: str = "128B",
         c_swizzle: str = "", a_k_major: bool = True) -> str:
    a = (("[M, K]", "[BM, BK]", "[tile.m, k]", "sa") if a_k_major
         else ("[K, M]", "[BK, BM]", "[k, tile.m]", "sa^T"))
    b = (("[N, K]", "[BN, BK]", "[tile.n, k]", "sb^T") if k_major
         else ("[K, N]", "[BK, BN]", "[k, tile.n]", "sb"))
    return GEMM.format(t=dtype, bn=bn, bk=bk, a_dims=a[0], a_tile=a[1], a_coords=a[2],
                       a_expr=a[3], b_dims=b[0], b_tile=b[1], b_coords=b[2], b_expr=b[3],
                       swizzle=swizzle, c_swizzle=c_swizzle and f" swizzle {c_swizzle}")


def _loop(source: str, mma: str = "HGMMA") -> list:
    built = driver.build(SourceFile("t.hk", source))
    (code,) = sm.functions(built.result.cubin).values()
    return sm.loop_holding(code, mma).body(code)


def test_k_major_steps_cross_column_blocks_and_mn_major_steps_rows():
    """sq[wg]: [64, 128] rows of the 128-row buffer's two 16 KB column blocks:
    k-steps 0-3 advance 32 bytes in block 0, 4-7 the same in block 1 (+1024
    16-byte units). sv [64, 128] MN-major: a k-step is 16 rows (128 units), and
    LBO, the stride between its two column blocks along N, is 64 x 128 bytes."""
    built = driver.build(SourceFile("a.hk", ATTENTION))
    cuda, offsets = built.generated.cuda, built.generated.launch.buffer_offsets
    sq = offsets["sq"] // 16
    # sq's offset, then its warpgroup's part (64 rows of 128 bytes = 512 units)
    steps = re.findall(rf"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ {sq}u \+ [^,]* \* 512u"
                       r"(?: \+ (\d+)u)?, 1024u, 1ull\)", cuda)
    assert [int(s or 0) for s in steps] == [0, 2, 4, 6, 1024, 1026, 1028, 1030]
    # sv's offset, then its stage (16 KB = 1024 units)
    sv = re.findall(rf"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ {offsets['sv'] // 16}u \+ "
                    r"[^,]* \* 1024u(?: \+ (\d+)u)?, 1024u, 1ull(?:, (\d+)u)?\)", cuda)
    assert sv == [(advance, "8192") for advance in ("", "128", "256", "384")]
    assert "stmatrix.sync.aligned" in built.result.ptx  # so[wg] = ...: wide rows too


@pytest.mark.parametrize("length", [256, 192])
def test_wide_attention_matches_float64(length):
    """The reference the simulator's results are compared with (below) is
    attention itself: Q K^T over both column blocks, P V over V's."""
    front_end = driver.check(SourceFile("a.hk", ATTENTION))
    problem = make_problem(driver.lower(front_end), {"L": length})
    got = expected_outputs(front_end, problem)["O"]
    q, k, v = (problem.inputs[n].astype(np.float64) for n in "QKV")
    s = q @ k.T / np.sqrt(128)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = p / p.sum(axis=1, keepdims=True) @ v
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


def test_wide_attention_passes_check_with_exact_results():
    report = driver.simulate(SourceFile("a.hk", ATTENTION), shapes={"L": 256}, seeds=2,
                             search=100)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.max_error == {"O": 0.0}


WIDE_PRODUCTS = {  # name: (N, BK, B K-major, dtype, swizzle of A and B, swizzle of C,
    #                          A K-major)
    "n176_k_major": (176, 128, True, "bf16", "128B", "", True),
    "n256_mn_major": (256, 64, False, "bf16", "128B", "128B", True),
    "n256_k_major": (256, 128, True, "bf16", "128B", "128B", True),
    "e4m3_k256": (128, 256, True, "e4m3", "128B", "128B", True),
    "f16_64B_k_and_mn": (64, 64, False, "f16", "64B", "128B", True),
    "f16_64B_mn_major_a": (64, 32, True, "f16", "64B", "128B", False),
}


@pytest.mark.parametrize("name", WIDE_PRODUCTS)
def test_wide_products_up_to_n256_build_and_compute(name):
    """m64n176 and m64n256, fp8 K over two spans, f16 with 64B spans (A's K and
    B's N two spans each; an MN-major A's M of two spans): ptxas takes them (HGMMA of that N, one per k-step, no
    spill), and the simulated results are A B (the numpy reference, itself
    checked against float64)."""
    bn, bk, k_major, dtype, swizzle, c_swizzle, a_k_major = WIDE_PRODUCTS[name]
    source = SourceFile("g.hk", gemm(bn, bk, k_major, dtype, swizzle, c_swizzle, a_k_major))
    built = driver.build(source)
    assert built.result.resources.spill_stores == 0
    fp8 = dtype == "e4m3"
    k_step, mma = (32, "QGMMA") if fp8 else (16, "HGMMA")  # SASS names fp8 wgmma QGMMA
    found = [i.opcode for i in _loop(source.text, mma) if i.base == mma]
    assert len(found) == bk // k_step
    assert all(op.startswith(f"{mma}.64x{bn}x{k_step}.F32") for op in found), found
    shapes = {"M": 64, "N": bn, "K": 2 * bk}
    report = driver.simulate(source, shapes=shapes, seeds=1, search=20)
    assert report.ok and report.max_error == {"C": 0.0}, report.findings
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), shapes)
    a, b = (problem.inputs[n].astype(np.float64) for n in "AB")
    want = (a if a_k_major else a.T) @ (b.T if k_major else b)
    got = expected_outputs(front_end, problem)["C"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


def test_wide_product_adds_only_descriptor_arithmetic_per_k_step():
    """K = 128 (two column blocks) against K = 64 (one span), N = 128: 8 against
    4 HGMMA.64x128x16 per iteration, two TMA boxes more; everything else that
    differs is uniform descriptor arithmetic (UIADD3, UMOV), at most 2 per
    added k-step (the block jump is a constant like any k-step's advance)."""
    narrow = Counter(i.opcode for i in _loop(gemm(128, 64, True)))
    wide = Counter(i.opcode for i in _loop(gemm(128, 128, True)))
    assert narrow["HGMMA.64x128x16.F32.BF16"] == 4 and wide["HGMMA.64x128x16.F32.BF16"] == 8
    assert wide["UTMALDG.2D"] - narrow["UTMALDG.2D"] == 2
    assert set((wide - narrow).keys()) <= {"HGMMA.64x128x16.F32.BF16", "UTMALDG.2D", "UIADD3",
                                           "UMOV"}
    assert not narrow - wide
    assert (wide - narrow)["UIADD3"] + (wide - narrow)["UMOV"] <= 2 * 4


def test_wide_mn_major_product_costs_no_more_per_k_step():
    """B [64, 128] MN-major (two column blocks, LBO) against B [64, 64] (one
    span), K = 64: the same 4 k-steps, now HGMMA.64x128x16, one TMA box more, and
    at most one uniform instruction more per k-step (measured: 3 per iteration,
    the second box's coordinates and the descriptor's other low word)."""
    narrow = Counter(i.opcode for i in _loop(gemm(64, 64, False)))
    wide = Counter(i.opcode for i in _loop(gemm(128, 64, False)))
    assert narrow["HGMMA.64x64x16.F32.BF16"] == wide["HGMMA.64x128x16.F32.BF16"] == 4
    assert wide["UTMALDG.2D"] - narrow["UTMALDG.2D"] == 1
    assert set((wide - narrow).keys()) <= {"HGMMA.64x128x16.F32.BF16", "UTMALDG.2D", "UIADD3",
                                           "UMOV"}
    assert set((narrow - wide).keys()) == {"HGMMA.64x64x16.F32.BF16"}
    assert (wide - narrow)["UIADD3"] + (wide - narrow)["UMOV"] <= 4


def test_wide_attention_products_in_sass():
    """Per iteration: S = Q K^T over head dim 128 is 8 m64n64k16 (one product),
    O += P V over 64 keys with N = 128 is 4 m64n128k16."""
    found = Counter(i.opcode for i in _loop(ATTENTION) if i.base == "HGMMA")
    assert found == {"HGMMA.64x64x16.F32.BF16": 8, "HGMMA.64x128x16.F32.BF16": 4}


def test_converted_register_a_is_the_tile_a_user_would_declare():
    """`o += bf16(p) @ sv` is `pb: bf16[64, BN] = bf16(p)` then `o += pb @ sv`: the
    same SASS, instruction for instruction; the hidden tile's name does not take
    a user's (`p_bf16` is declared, so it is `p_bf162`)."""
    one_statement = ATTENTION.replace("            pb: bf16[64, BN] = bf16(p)\n", "") \
        .replace("o += pb @ sv", "p_bf16: f32[64] = l\n            o += bf16(p) @ sv")
    assert "bf16(p) @ sv" in one_statement

    def sass(text: str) -> list[str]:
        built = driver.build(SourceFile("a.hk", text))
        (code,) = sm.functions(built.result.cubin).values()
        return [i.opcode + " " + i.operands for i in code]

    assert sass(one_statement) == sass(ATTENTION.replace(
        "o += pb @ sv", "p_bf16: f32[64] = l\n            o += pb @ sv"))
    assert "u_p_bf162" in driver.generate(SourceFile("a.hk", one_statement)).cuda


SIBLINGS = """kernel k(Q: bf16[M, 64], K: bf16[N, 64], V: bf16[N, 64], W: bf16[128, 64], O: f32[M, 64])
    tile(BM = 64, BN = 64) grid(m: M / BM)
{
    shared sq: bf16[BM, 64] swizzle 128B
    shared sk: bf16[BN, 64] swizzle 128B
    shared sv: bf16[BN, 64] swizzle 128B
    shared sw: bf16[128, 64] swizzle 128B
    shared so: f32[BM, 64]
    tma sq <- Q[tile.m, 0]
    tma sk <- K[0, 0]
    tma sv <- V[0, 0]
    tma sw <- W[0, 0]
    s: f32[64, BN] = sq @ sk^T
    o: f32[64, 64] = 0
    for j in 0 .. 2 {
        o += bf16(s * 0.5) @ sv
    }
    t: f32[64, 128] = sq @ sw^T
    o += bf16(t * 0.25) @ sw
    LATER
    so = o
    tma O[tile.m, 0] <- so
}
"""


@pytest.mark.parametrize("later", ["", "a_bf16: bf16[64, 64] = bf16(s)"])
def test_converted_register_a_names_are_the_kernels_own(later):
    """Two conversions in sibling blocks get two names (they differ in shape), and
    neither is a name the source declares later: the kernel checks clean."""
    text = SIBLINGS.replace("LATER", later)
    lowered = driver.lower(driver.check(SourceFile("k.hk", text)))
    names = [s.name for s in walk(lowered.body) if isinstance(s, ir.TileDef)
             and s.name.startswith("a_bf16")]
    assert len(names) == len(set(names)) == 2 + bool(later)
    report = driver.simulate(SourceFile("k.hk", text), seeds=1, search=5)
    assert report.ok, [f.headline() for f in report.findings]
