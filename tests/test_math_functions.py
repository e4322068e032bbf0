"""`exp2`, `rsqrt` and the `inf` literal in element-wise code: what the front
end accepts, the C++ they become, and what the simulator computes for them."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.sim.values import elementwise

KERNEL = """kernel rows_exp(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    y: f32[BM, 64] = exp2(max(sx, -inf) * 0.5) + rsqrt(abs(sx) + 1.0)
    sx = y
    tma Y[tile.m, 0] <- sx
}
"""


def test_the_functions_and_infinity_become_cuda_math_and_build():
    source = SourceFile("rows_exp.hk", KERNEL)
    cuda = driver.generate(source).cuda
    assert "exp2f((fmaxf(" in cuda and "rsqrtf((fabsf(" in cuda
    assert "(-__int_as_float(0x7f800000))" in cuda  # -inf: no literal NVRTC would misread
    resources = driver.build(source).result.resources
    assert resources is not None and resources.spill_stores == resources.spill_loads == 0


def test_the_simulator_computes_them_as_numpy_does():
    x = np.array([[-3.0, 0.0, 0.5, 10.0]], dtype=np.float32)

    def value(expr: ir.TileExpr) -> np.ndarray:
        return elementwise(expr, x.shape, DType.F32, lambda name: x, None, {}, int)

    def call(op: str, *args) -> ir.Elementwise:
        return ir.Elementwise(op, args)

    tile = ir.TileRef("x")
    np.testing.assert_allclose(value(call("exp2", tile)), 2.0 ** x)
    np.testing.assert_allclose(value(call("rsqrt", call("+", tile, ir.Literal(4.0)))),
                               1 / np.sqrt(x + 4))
    assert (value(call("max", tile, ir.Literal(-math.inf))) == x).all()
    assert (value(call("min", tile, ir.Literal(math.inf))) == x).all()


def test_check_is_clean_against_the_reference():
    report = driver.simulate(SourceFile("rows_exp.hk", KERNEL), seeds=2, search=50)
    assert report.ok and report.reference == "numpy reference"


@pytest.mark.parametrize("old, new, message", [
    ("shared sx: f32[BM, 64]\n    tma sx <- X[tile.m, 0]",
     "shared inf: f32[BM, 64]\n    tma inf <- X[tile.m, 0]",
     "'inf' is a built-in name and cannot be redeclared"),
    ("exp2(", "tanh(", "unknown function 'tanh' (known: abs, exp, exp2, max, min, relu, rsqrt"),
])
def test_diagnostics(old, new, message):
    assert old in KERNEL
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("k.hk", KERNEL.replace(old, new, 1)))
    assert message in info.value.message
