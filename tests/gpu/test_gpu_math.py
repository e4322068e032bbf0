"""The element-wise functions on the GPU within the error docs/language.md
documents for each (from the PTX ISA and CUDA's erff table), against float64."""
import math

import pytest

import hopperc

pytestmark = pytest.mark.gpu
ULP = 2.0 ** -23  # an f32 ulp relative to the value, at most

KERNEL = """kernel apply(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    sx = {expr}
    tma Y[tile.m, 0] <- sx
}}
"""


def _bound(name: str, x, want):
    """The largest documented |GPU - exact| at each x (|x| <= 2 pi)."""
    return {"tanh": 2.0 ** -11 * want.abs(),
            # ex2 (2 ulps) and rcp (1) and a rounding, and the rounding of x log2 e
            "sigmoid": (6 + x.abs() / 2) * ULP * want.abs(),
            "erf": 2.5 * ULP * want.abs(),  # 2 ulps from the rounded value
            "sin": 2.0 ** -20.5, "cos": 2.0 ** -20.5,
            # erff's 2 ulps and 1 + erf's rounding near 1, times x / 2 (cancelling for x < -3)
            "gelu": ULP * (2 * x.abs() + 4 * want.abs())}[name]


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "erf", "sin", "cos", "gelu"])
def test_the_function_is_within_its_documented_error(name, torch):
    expr = "x * 0.5 * (1.0 + erf(x * 0.7071067811865476))" if name == "gelu" else f"{name}(x)"
    kernel = hopperc.compile(KERNEL.format(expr=expr))
    end = 0.999 * 2 * math.pi  # inside [-2 pi, 2 pi] after rounding to f32
    x = torch.linspace(-end, end, 128 * 64, device="cuda").reshape(128, 64)
    y = torch.full_like(x, float("nan"))
    kernel(x, y)
    torch.cuda.synchronize()
    exact = x.double()
    reference = torch.nn.functional.gelu if name == "gelu" else getattr(torch, name)
    want = reference(exact)  # nn.GELU's default: the exact, erf form
    error = (y.double() - want).abs()
    assert bool((error <= _bound(name, exact, want)).all()), (name, float(error.max()))
