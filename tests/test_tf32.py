"""tf32 wgmma: f32 operands in shared memory run as `.tf32` (K-major only, k = 8,
no transpose immediates), and the simulator reads them at tf32 precision."""
from __future__ import annotations

import re

import numpy as np

from hopperc import driver
from hopperc.backend.cubin_tools import sass_instructions
from hopperc.codegen.names import kernel_symbol
from hopperc.diagnostics import SourceFile
from hopperc.ir.dtypes import DType
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from hopperc.sim.values import matrix_product, to_tf32
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "gemm_tf32.hk"

# 32 f32 = 128 bytes of K per row: one 128B span, four k8 steps of 32 bytes.
TF32_GEMM = """kernel tf32_gemm(A: f32[M, K], B: f32[N, K], C: f32[M, N])
    tile(BM = 64, BN = 64, BK = 32) grid(m: M / BM, n: N / BN) threads 128
{
    shared sa: f32[BM, BK] swizzle 128B
    shared sb: f32[BN, BK] swizzle 128B
    shared sc: f32[BM, BN]
    acc: f32[BM, BN] = 0.0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
    }
    sc = acc
    tma C[tile.m, tile.n] <- sc
}
"""


def test_f32_operands_run_as_tf32_k8_steps_of_32_bytes():
    """One m64n64k8 .tf32 form without transpose immediates (PTX ISA: only f16/bf16
    take them); each k-step moves both descriptors 32 bytes (2 units) along K; the
    build has no spills, and ptxas emits HGMMA with .TF32."""
    built = driver.build(SourceFile("t.hk", TF32_GEMM))
    cuda, ptx = built.generated.cuda, built.result.ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32" in ptx
    assert re.search(r"\.tf32\.tf32 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1; \}", ptx)
    for buffer in ("sa", "sb"):
        unit = built.generated.launch.buffer_offsets[buffer] // 16
        steps = re.findall(rf"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ {unit}u \+ (\d+)u, "
                           r"1024u, 1ull\)", cuda)
        # the loop's first iteration is rendered apart: the same steps twice
        assert steps == ["2", "4", "6"] * 2, (buffer, steps)
    assert built.result.resources.spill_stores == 0
    sass = sass_instructions(built.result.cubin)[kernel_symbol("tf32_gemm")]
    hgmma = [i for i in sass if i.startswith("HGMMA")]
    assert hgmma and all(".TF32" in i for i in hgmma), hgmma


def test_tf32_keeps_ten_mantissa_bits_toward_zero():
    one = np.float32(1.0)
    x = np.array([1 + 2 ** -10, 1 + 2 ** -11 + 2 ** -20, -(1 + 2 ** -11), np.inf, -np.inf],
                 dtype=np.float32)
    got = to_tf32(x)
    assert got[0] == 1 + 2 ** -10 and got[1] == one and got[2] == -one
    assert np.isinf(got[3:]).all()
    assert np.isnan(to_tf32(np.array([np.nan], dtype=np.float32)))[0]


def test_the_product_of_f32_operands_reads_them_as_tf32():
    """Low mantissa bits of f32 operands do not reach the product; 16-bit inputs'
    values are exact already and pass unchanged."""
    a = np.full((1, 4), 1 + 2 ** -12, dtype=np.float32)
    b = np.ones((4, 1), dtype=np.float32)
    assert matrix_product(a, b, DType.F32)[0, 0] == 4.0
    assert matrix_product(a, b, DType.BF16)[0, 0] == np.float32(4 * (1 + 2 ** -12))


def test_matches_float64_within_tf32_error_at_ragged_shapes():
    """Ragged M, N and K (zero-filled K tail): the reference equals float64 of the
    truncated inputs, and differs from float64 of the f32 inputs by at most tf32's
    error, 2^-10 relative per operand."""
    front_end = driver.check(SourceFile("t.hk", TF32_GEMM))
    problem = make_problem(driver.lower(front_end), {"M": 97, "N": 72, "K": 80})
    got = expected_outputs(front_end, problem)["C"]
    a, b = (problem.inputs[t].astype(np.float64) for t in ("A", "B"))
    exact = a @ b.T
    truncated = to_tf32(problem.inputs["A"]).astype(np.float64) @ \
        to_tf32(problem.inputs["B"]).astype(np.float64).T
    np.testing.assert_allclose(got, truncated, rtol=2 ** -22, atol=1e-6)
    bound = 2 * 2 ** -10 * (np.abs(a) @ np.abs(b).T)
    assert (np.abs(got - exact) <= bound + 1e-6).all()
    assert not np.array_equal(got, exact.astype(np.float32))  # the truncation shows


def test_check_is_clean():
    report = driver.simulate(SourceFile("t.hk", TF32_GEMM), None, {"M": 97, "N": 72, "K": 80},
                             seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_sample_matches_float64_within_tf32_error():
    """samples/gemm_tf32.hk at ragged shapes (partial tiles on every axis, K's last
    span zero-filled): the reference is float64 of the tf32 inputs; float64 of the
    f32 inputs is within tf32's error of it."""
    front_end = driver.check(driver.read_source(SAMPLE))
    problem = make_problem(driver.lower(front_end), {"M": 136, "N": 200, "K": 104})
    got = expected_outputs(front_end, problem)["C"]
    a, b = (problem.inputs[t] for t in ("A", "B"))
    tf32 = to_tf32(a).astype(np.float64) @ to_tf32(b).astype(np.float64).T
    np.testing.assert_allclose(got, tf32, rtol=2 ** -22, atol=1e-6)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert (np.abs(got - exact) <= 2 * 2 ** -10 * (np.abs(a) @ np.abs(b).T) + 1e-6).all()


def test_sample_check_is_clean():
    """Both warpgroups, the ring wrapping (8 k-blocks through 4 stages), ragged."""
    report = driver.simulate(driver.read_source(SAMPLE), None, {"M": 200, "N": 136, "K": 256},
                             seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]
