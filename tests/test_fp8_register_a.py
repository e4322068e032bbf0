"""fp8 A from registers: a warpgroup's e4m3/e5m2 [64, N] tile is held as wgmma's
register A fragment (layout.holds_fp8_fragment), its values computed in the
accumulator's layout and exchanged within each quad (prelude:
hk_fp8_a_fragment). The fragment itself is compared with CuTe's RS fp8 atoms in
tests/oracle (test_fragments.py::test_fp8_register_a_matches_cute_alayout);
here: the code around it, its SASS, the simulator's results and the refusals."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = ROOT / "bench" / "kernels" / "attention_fp8.hk"

# S = X W^T, P = e4m3 or e5m2 of S / 8, O += P V with V^T [64, N] (K-major B).
CHAIN = """kernel fp8_chain(X: {t}[M, 64], W: {t}[N, 64], Vt: {t}[64, N], Y: f32[M, 64])
    tile(BM = 64, BN = {bn}) grid(m: M / BM) threads 128
{{
    shared sx: {t}[BM, 64] swizzle 64B
    shared sw: {t}[BN, 64] swizzle 64B
    shared sv: {t}[64, BN] swizzle {sv_swizzle}
    shared sy: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    o: f32[64, 64] = 0
    for j in 0 .. N / BN {{
        tma sw <- W[j, 0]
        tma sv <- Vt[0, j]
        s: f32[64, BN] = sx @ sw^T
        {product}
    }}
    sy = o
    tma Y[tile.m, 0] <- sy
}}
"""
DECLARED = "pe: {t}[64, BN] = {t}(s * 0.125)\n        o += pe @ sv^T"
INLINE = "o += {t}(s * 0.125) @ sv^T"
NUMPY = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def chain(dtype: str = "e4m3", bn: int = 64, inline: bool = False) -> str:
    product = (INLINE if inline else DECLARED).format(t=dtype)
    swizzle = {32: "32B", 64: "64B", 128: "128B"}[bn]
    return CHAIN.format(t=dtype, bn=bn, sv_swizzle=swizzle, product=product)


def _inputs(dtype: str, m: int, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    fp8 = NUMPY[dtype]
    return {"X": rng.uniform(-2, 2, (m, 64)).astype(fp8),
            "W": rng.uniform(-2, 2, (n, 64)).astype(fp8),
            "Vt": rng.uniform(-2, 2, (64, n)).astype(fp8)}


@pytest.mark.parametrize("dtype, bn, inline", [("e4m3", 64, False), ("e5m2", 32, True),
                                               ("e4m3", 128, True)])
def test_chain_matches_float64_with_p_rounded(dtype, bn, inline):
    """O = fp8(X W^T / 8) V at ragged M and N (tiles past the end are zero): the
    simulator rounds P to the fp8 type as the kernel does, and the float64
    reference that rounds it the same way agrees to f32 accumulation error."""
    inputs = _inputs(dtype, 97, 3 * bn - 16)  # Vt's rows: multiples of 16 bytes
    got = hopperc.simulate(chain(dtype, bn, inline), inputs, schedules=1)["Y"]
    x, w, vt = (inputs[n].astype(np.float64) for n in ("X", "W", "Vt"))
    p = (x @ w.T * 0.125).astype(NUMPY[dtype]).astype(np.float64)
    np.testing.assert_allclose(got, p @ vt.T, rtol=1e-5, atol=1e-4)


def test_attention_matches_float64_within_fp8_error():
    """The FP8 attention forward at a ragged length against float64 attention
    (P unrounded): within e4m3's rounding of P (3 mantissa bits: at most a
    relative 2^-4 per element, averaged over the keys to less than 2^-6). The
    simulator holds P by position; where the exchange puts each value is the
    oracle's check (tests/oracle/test_fragments.py)."""
    rng = np.random.default_rng(1)
    h, length = 1, 208  # Vt's rows: multiples of 16 bytes
    q, k, v = (rng.uniform(-1, 1, (h, length, 128)).astype(ml_dtypes.float8_e4m3fn)
               for _ in range(3))
    vt = np.ascontiguousarray(np.swapaxes(v, 1, 2))
    got = hopperc.simulate(ATTENTION, {"Q": q, "K": k, "Vt": vt}, schedules=1)["O"]
    q64, k64, v64 = (a.astype(np.float64)[0] for a in (q, k, v))
    s = q64 @ k64.T / np.sqrt(128)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = p / p.sum(axis=1, keepdims=True) @ v64
    error = np.abs(got.astype(np.float64)[0] - want).max()
    assert error < 2 ** -6 * np.abs(v64).max(), error  # measured: 0.0047


def test_attention_checks_clean():
    report = driver.simulate(SourceFile(str(ATTENTION), ATTENTION.read_text()),
                             shapes={"H": 1, "L": 208}, seeds=2, search=50)
    assert report.ok, [f.headline() for f in report.findings]


def test_fence_follows_the_exchange():
    """The exchange writes the A registers: wgmma.fence comes after it and
    right before the wgmma (nothing between them writes a register the
    wgmma reads), as for a 16-bit register A."""
    cuda = driver.generate(SourceFile("c.hk", chain())).cuda
    gather = cuda.index("hk_fp8_a_fragment<32, hk_pack_e4m3x2>(u_pe, hk_fp8_values);")
    fence = cuda.index("wgmma.fence.sync.aligned", gather)
    wgmma = cuda.index("hk_wgmma_m64n64k32_f32_e4m3_e4m3_rs<", gather)
    assert gather < fence < wgmma
    between = cuda[fence:wgmma]
    assert "hk_fp8" not in between and "__shfl" not in between
    assert re.search(r"hk_wgmma_m64n64k32_f32_e4m3_e4m3_rs<\d>\(u_o, u_pe\[4\], u_pe\[5\], "
                     r"u_pe\[6\], u_pe\[7\]", cuda)


def _loop_body(text: str) -> list[sm.Instruction]:
    built = driver.build(SourceFile("k.hk", text))
    assert built.result.resources.spill_stores == 0
    (code,) = sm.functions(built.result.cubin).values()
    return sm.loop_holding(code, "QGMMA").body(code)


# hk_fp8_quad_exchange's byte_perm selectors: lanes of the lower and upper half of a
# quad pick bytes (lo, hi) with (0x5410, 0x7632) and (0x1054, 0x3276).
PRMT_SELECTORS = {0x5410, 0x7632, 0x1054, 0x3276}


def _registers(operands: str) -> list[str]:
    return [o.removesuffix(".reuse") for o in operands.split(",")]


def _exchange_sels(body: list[sm.Instruction]) -> tuple[list[tuple[str, str, str]],
                                                        list[tuple[str, int]]]:
    """The SELs of the fp8 exchange in a loop, each recognised, any other failing:
    per exchange a swap of its register pair by the lane's parity (`odd ? y : x`
    and `odd ? x : y`: two SELs of the same two registers, swapped, on one
    predicate), returned as (predicate, first, second) per SEL; and a PRMT
    selector chosen by the lane's half of its quad, where ptxas rematerializes it
    in the loop (`SEL R, R, 0x5410, P`), returned as (destination, selector), each
    feeding the selector operand of a PRMT."""
    sels = []
    for i in body:
        if i.base == "SEL":
            dst, a, b, p = _registers(i.operands)
            sels.append((dst, *((b, a, p[1:]) if p.startswith("!") else (a, b, p))))
    prmt_selectors = {_registers(i.operands)[2] for i in body if i.base == "PRMT"}
    pairs = [(p, a, b) for _, a, b, p in sels if not b.startswith("0x")]
    swaps = [(p, a, b) for p, a, b in pairs if (p, b, a) in pairs and a != b]
    selectors = [(d, int(b, 16)) for d, _, b, _ in sels if b.startswith("0x")]
    assert swaps == pairs, f"a SEL that swaps no register pair: {pairs}"
    assert all(d in prmt_selectors and v in PRMT_SELECTORS for d, v in selectors), \
        (selectors, prmt_selectors)
    assert len(selectors) + len(pairs) == len(sels)
    return swaps, selectors


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2"])
def test_exchange_costs_one_shuffle_and_one_prmt_per_register(dtype):
    """Per k-step of P (4 A registers of 4 bytes): 8 F2FP (two values each),
    4 SHFL, 4 PRMT and 4 SEL (which of its two pairs a lane sends), FA3's
    permute_Aregs_fp8 count; the register-A product is QGMMA from registers."""
    body = _loop_body(chain(dtype))
    found = Counter(i.base for i in body)
    steps = 64 // 32
    assert found["QGMMA"] == 2 * steps  # S = X W^T and O += P V
    assert (found["SHFL"], found["PRMT"], found["SEL"]) == (4 * steps,) * 3
    assert found["F2FP"] == 8 * steps
    swaps, selectors = _exchange_sels(body)
    assert (len(swaps), selectors) == (4 * steps, [])  # the selectors stay in registers


def test_attention_exchange_in_sass():
    """The FP8 attention's loop: per 128-key tile 4 k-steps of P (16 SHFL of the
    exchange; the row maximum's 4 more), 16 PRMT, 16 SEL swapping 8 register
    pairs, 32 F2FP, 4 + 4 QGMMA, no spill. Where ptxas rematerializes a lane's two
    PRMT selectors in the loop rather than keeping them in registers, each is a
    SEL of an exchange selector feeding the PRMTs; no other SEL."""
    body = _loop_body(ATTENTION.read_text())
    found = Counter(i.base for i in body)
    swaps, selectors = _exchange_sels(body)
    assert found["QGMMA"] == 8
    assert (found["PRMT"], len(swaps), found["F2FP"]) == (16, 16, 32)
    # at most one rematerialized selector of lo (0x5410 / 0x1054) and one of hi
    assert len(selectors) == len({v in (0x5410, 0x1054) for _, v in selectors})
    assert found["SHFL"] == 16 + 4


@pytest.mark.parametrize("text, message", [
    ("pe: e4m3[64, 48] = e4m3(s)", "k-steps of 32 columns; [64, 48] is not"),
    ("pe: e4m3[64, BN] = e4m3(s)\n        t: f32[64, BN] = f32(pe) * 2.0",
     "'pe' is a warpgroup's e4m3 tile, held as wgmma's register A fragment"),
    ("pe: e4m3[64, BN] = e4m3(s)\n        sy = f32(pe[:, 0 : 64])",
     "'pe' is a warpgroup's e4m3 tile"),
])
def test_fp8_tile_refusals_point_at_the_line(text, message):
    source = chain().replace(DECLARED.format(t="e4m3"), text)
    with pytest.raises(CompileError) as caught:
        driver.check(SourceFile("c.hk", source))
    assert message in str(caught.value)
    assert caught.value.span.line == 14 + text.count("\n")
