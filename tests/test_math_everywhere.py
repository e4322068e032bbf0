"""Every math function in every kind of element-wise expression: a tile, a
register row vector (both layouts), a store of one to global memory, an f32
scalar; the simulator's value against numpy in float64, the C++ each becomes,
and one NVRTC build of them all in row vectors (docs/language.md §8 lists each
function's PTX and accuracy)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import SourceFile

# function -> (float64 reference, arguments that are inside its domain)
FUNCTIONS = {
    "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sqrt": np.sqrt, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": np.vectorize(math.erf),
    "sin": np.sin, "cos": np.cos, "relu": lambda x: np.maximum(x, 0),
}


def _kernel(function: str) -> str:
    """`function` of a tile, of row vectors of both layouts, stored, and of an f32
    scalar; positive arguments (log, sqrt and rsqrt need them), below 8 (exp)."""
    return f"""kernel math_{function}(X: f32[M, 64], W: f32[M, 256], S: f32[4],
                   Y: f32[M, 64], R: f32[M], E: f32[M], V: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{{
    shared sx: f32[BM, 64]
    shared sw: f32[16, 256]
    tma sx <- X[tile.m, 0]
    tma sw <- W[tile.m, 0]
    c: f32 = {function}(S[1])
    x: f32[BM, 64] = sx
    r: f32[BM] = {function}(rowmax(x)) + c
    R[tile.m] = r
    V[tile.m] = {function}(rowsum(x) * 0.0625)
    w: f32[16, 256] = sw
    e: f32[16] = {function}(rowmax(w))
    E[tile.m] = e
    sx = {function}(x)
    tma Y[tile.m, 0] <- sx
}}
"""


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_each_function_in_every_expression_kind_against_float64(function):
    rng = np.random.default_rng(len(function))
    x = rng.uniform(0.1, 7.0, (70, 64)).astype(np.float32)
    w = rng.uniform(0.1, 7.0, (70, 256)).astype(np.float32)
    s = np.array([0.0, 0.75, 0.0, 0.0], dtype=np.float32)
    out = hopperc.simulate(SourceFile(f"{function}.hk", _kernel(function)),
                           {"X": x, "W": w, "S": s})
    f = FUNCTIONS[function]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    c = f(np.float64(0.75))
    # the simulator is f32 numpy: within a few f32 ulps of float64
    np.testing.assert_allclose(out["Y"], f(x64), rtol=4e-6, atol=1e-7)
    np.testing.assert_allclose(out["R"], f(x64.max(axis=1)) + c, rtol=4e-6, atol=1e-6)
    # the argument as the simulator sums it (numpy's f32 order), so that only the
    # function's error is compared
    mean = (x.sum(axis=1, dtype=np.float32) * np.float32(0.0625)).astype(np.float64)
    np.testing.assert_allclose(out["V"], f(mean), rtol=4e-6, atol=1e-7)
    # E: block b's 16-row tile of W (rows 16 b ..), stored to the same elements
    blocks = -(-70 // 64)
    np.testing.assert_allclose(out["E"][:16 * blocks], f(w64[:16 * blocks].max(axis=1)),
                               rtol=4e-6, atol=1e-7)


def test_each_function_builds_in_row_vectors_and_scalars():
    """One NVRTC build: every function of a row vector of each layout, and of a
    scalar, with the C++ each becomes."""
    body = "\n".join(f"    R{i}[tile.m] = {f}(rowmax(x)) + {f}(S[{i % 4}])\n"
                     f"    E{i}[tile.m] = {f}(rowmax(w))" for i, f in enumerate(sorted(FUNCTIONS)))
    outs = ", ".join(f"R{i}: f32[M], E{i}: f32[M]" for i in range(len(FUNCTIONS)))
    text = f"""kernel all_math(X: f32[M, 64], W: f32[M, 256], S: f32[4], {outs})
    tile(BM = 64) grid(m: M / BM) threads 128
{{
    shared sx: f32[BM, 64]
    shared sw: f32[16, 256]
    tma sx <- X[tile.m, 0]
    tma sw <- W[tile.m, 0]
    x: f32[BM, 64] = sx
    w: f32[16, 256] = sw
{body}
}}
"""
    source = SourceFile("all_math.hk", text)
    cuda = driver.generate(source).cuda
    for code in ("fabsf(", "__expf(", "hk_ex2(", "hk_lg2(", "rsqrtf(", "sqrtf(", "hk_tanh(",
                 "hk_sigmoid(", "erff(", "hk_sin(", "hk_cos(", "fmaxf("):
        assert code in cuda, code
    built = driver.build(source)
    ptx = built.result.ptx
    for instruction in ("ex2.approx.ftz.f32", "lg2.approx.ftz.f32", "tanh.approx.f32",
                        "sin.approx.ftz.f32", "cos.approx.ftz.f32", "rsqrt.approx",
                        "sqrt.rn.f32", "rcp.approx.ftz.f32"):
        assert instruction in ptx, instruction
    assert built.result.resources.spill_stores == 0
