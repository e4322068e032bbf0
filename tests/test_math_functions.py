"""`exp2`, `log2`, `log`, `rsqrt`, `tanh`, `sigmoid`, `erf`, `sin`, `cos`, the `inf`
literal, comparisons, `where` and the element coordinates `row()` / `col()` in
element-wise code: what the front end accepts, the C++ they become, and what the
simulator computes for them."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.sim.tile_values import elementwise
from tests.conftest import edit_error

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
    assert "hk_ex2((fmaxf(" in cuda and "rsqrtf((fabsf(" in cuda
    assert "(-__int_as_float(0x7f800000))" in cuda  # -inf: no literal NVRTC would misread
    built = driver.build(source)
    resources = built.result.resources
    assert resources is not None and resources.spill_stores == resources.spill_loads == 0
    assert "ex2.approx.ftz.f32" in built.result.ptx  # one MUFU.EX2, no range fix-up


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


def test_log2_and_log_follow_numpy_with_log2_of_zero_minus_infinity():
    """The simulator's lg2.approx.ftz: log2(0) is -inf (and of -0 too, the
    instruction flushing to zero), log2(inf) inf, a negative number NaN; log is
    log2(x) * ln 2 as the kernel computes it, within f32 rounding of np.log."""
    x = np.array([[0.0, -0.0, 0.25, 1.0, 3.0, np.inf, -2.0]], dtype=np.float32)
    got = elementwise(ir.Elementwise("log2", (ir.TileRef("x"),)), x.shape, DType.F32,
                      lambda name: x, None, {}, int)
    assert got.dtype == np.float32
    assert (got[0, :2] == -np.inf).all() and got[0, 5] == np.inf and np.isnan(got[0, 6])
    np.testing.assert_array_equal(got[0, 2:5], np.log2(x[0, 2:5]))
    natural = elementwise(ir.Elementwise("log", (ir.TileRef("x"),)), x.shape, DType.F32,
                          lambda name: x, None, {}, int)
    assert natural[0, 0] == -np.inf
    np.testing.assert_allclose(natural[0, 2:5], np.log(x[0, 2:5].astype(np.float64)), rtol=1e-6)


LOGS = """kernel row_logs(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = abs(sx) + 1.0
    sx = log2(x) - log(x)
    tma Y[tile.m, 0] <- sx
}
"""


def test_log2_and_log_become_one_mufu_lg2_each_and_check_clean():
    source = SourceFile("row_logs.hk", LOGS)
    cuda = driver.generate(source).cuda
    assert "(hk_lg2(u_x[hk_k]) - (hk_lg2(u_x[hk_k]) * 0.693147" in cuda
    built = driver.build(source)
    assert "lg2.approx.ftz.f32" in built.result.ptx
    assert built.result.resources.spill_stores == 0
    report = driver.simulate(source, seeds=1, search=20)
    assert report.ok and report.reference == "numpy reference"


def test_check_is_clean_against_the_reference():
    report = driver.simulate(SourceFile("rows_exp.hk", KERNEL), seeds=2, search=50)
    assert report.ok and report.reference == "numpy reference"


@pytest.mark.parametrize("old, new, message", [
    ("shared sx: f32[BM, 64]\n    tma sx <- X[tile.m, 0]",
     "shared inf: f32[BM, 64]\n    tma inf <- X[tile.m, 0]",
     "'inf' is a built-in name and cannot be redeclared"),
    ("exp2(", "softplus(", "unknown function 'softplus' (known: abs, argmax, col(), cos, erf, exp, "
                           "exp2, log, log2, max, min, relu, row(), rowmax, rowmin, rowsum, "
                           "rsqrt, sigmoid, sin, sqrt, tanh, where"),
    ("exp2(max(sx, -inf) * 0.5)", "log2(sx, 2.0)", "log2() takes 1 argument"),
    ("exp2(max(sx, -inf) * 0.5)", "erf(sx, 2.0)", "erf() takes 1 argument"),
])
def test_diagnostics(old, new, message):
    assert message in edit_error(KERNEL, old, new).message


MASK = """kernel causal_mask(S: f32[M, N], Y: f32[M, N])
    tile(BM = 64, BN = 32) grid(m: M / BM, n: N / BN) threads 128
{
    shared ss: f32[BM, BN]
    tma ss <- S[tile.m, tile.n]
    s: f32[BM, BN] = where(BN * tile.n + col() > BM * tile.m + row(), -inf, ss)
    ss = exp2(s) * (s >= 0.0)
    tma Y[tile.m, tile.n] <- ss
}
"""


def test_a_causal_mask_compares_global_rows_and_columns():
    """row() and col() are the element's coordinates in the tile; with the tile's
    offsets they give a causal mask. What the simulator's reference computes is
    checked against numpy written out here (element (i, j) is masked where j > i)."""
    from hopperc.sim.problem import make_problem
    from hopperc.sim.reference import expected_outputs
    front_end = driver.check(SourceFile("mask.hk", MASK))
    problem = make_problem(driver.lower(front_end), {"M": 128, "N": 128})
    got = expected_outputs(front_end, problem)["Y"]
    s = problem.inputs["S"]
    i, j = np.indices(s.shape)
    masked = np.where(j > i, -np.inf, s)
    np.testing.assert_allclose(got, np.exp2(masked) * (masked >= 0), rtol=1e-6)
    assert got[0, 1] == 0 and (got[np.triu_indices(128, 1)] == 0).all()


def test_comparisons_where_and_coordinates_in_cuda():
    cuda = driver.generate(SourceFile("mask.hk", MASK)).cuda
    # the coordinates compare as ints (exact past 2^24), never through f32
    assert "static_cast<float>(hk_c)" not in cuda and "static_cast<float>(hk_r)" not in cuda
    assert "hk_c)) > (hk_wrap_add(" in cuda and "static_cast<int>(hk_tile_m)), hk_r))" in cuda
    assert "? 1.0f : 0.0f)" in cuda and ") != 0.0f ? (" in cuda
    assert driver.build(SourceFile("mask.hk", MASK)).result.resources.spill_stores == 0
    report = driver.simulate(SourceFile("mask.hk", MASK), seeds=2, search=20)
    assert report.ok


@pytest.mark.parametrize("old, new, message", [
    ("col()", "col(ss)", "col() takes no arguments: it is the element's col"),
    ("-inf, ss)", "-inf)", "where() takes 3 arguments"),
])
def test_mask_diagnostics(old, new, message):
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("mask.hk", MASK.replace(old, new, 1)))
    assert message in info.value.message


ACTIVATIONS = """kernel activations(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    sx = tanh(x) + sigmoid(x) * sin(x) - cos(x) + erf(x)
    tma Y[tile.m, 0] <- sx
}
"""


def test_activations_become_one_mufu_each_and_erf_the_math_library_s():
    """tanh, sin and cos are one approximate instruction each, sigmoid an ex2 and
    a reciprocal, erf the library's erff (NVRTC provides it with no header)."""
    source = SourceFile("activations.hk", ACTIVATIONS)
    cuda = driver.generate(source).cuda
    assert ("(((hk_tanh(u_x[hk_k]) + (hk_sigmoid(u_x[hk_k]) * hk_sin(u_x[hk_k]))) - "
            "hk_cos(u_x[hk_k])) + erff(u_x[hk_k]))") in cuda
    built = driver.build(source)
    ptx = built.result.ptx
    for instruction in ("tanh.approx.f32", "sin.approx.ftz.f32", "cos.approx.ftz.f32",
                        "rcp.approx.ftz.f32", "ex2.approx.ftz.f32"):
        assert instruction in ptx, instruction
    assert built.result.resources.spill_stores == 0
    report = driver.simulate(source, seeds=1, search=20)
    assert report.ok and report.reference == "numpy reference"


# The documented error bounds of the kernel's forms (docs/language.md, element-wise
# math): relative for tanh and sigmoid, absolute for sin and cos within 2 pi, ulps of
# f32 for erff.
F32_ULP = 2.0 ** -23


def test_the_simulator_computes_the_activations_within_their_documented_error():
    """The simulator's f32 values against float64 math, over the range activations
    see and their limits; each is within the bound the kernel's form documents (the
    simulator is nearer: within 2 f32 ulps, its roundings in f32)."""
    x = np.concatenate([np.linspace(-6, 6, 97), [-100.0, -20.0, 20.0, 100.0],
                        [-2 * math.pi, 2 * math.pi, 0.0]]).astype(np.float32)[None, :]
    exact = x.astype(np.float64)

    def value(op: str) -> np.ndarray:
        got = elementwise(ir.Elementwise(op, (ir.TileRef("x"),)), x.shape, DType.F32,
                          lambda name: x, None, {}, int)
        assert got.dtype == np.float32
        return got.astype(np.float64)

    everywhere, near_pi = np.ones(x.shape, bool), np.abs(exact) <= 2 * math.pi
    tiny = 2.0 ** -126  # sigmoid below f32's smallest normal is flushed to 0 (x < -87)
    checks = {  # op: float64 value, relative and absolute error, where the bound holds
        "tanh": (np.tanh(exact), 2.0 ** -11, 0.0, everywhere),
        "sigmoid": (1 / (1 + np.exp(-exact)), 4 * F32_ULP, tiny, everywhere),
        "erf": (np.vectorize(math.erf)(exact), 2 * F32_ULP, 0.0, everywhere),
        "sin": (np.sin(exact), 0.0, 2.0 ** -20.5, near_pi),
        "cos": (np.cos(exact), 0.0, 2.0 ** -20.5, near_pi),
    }
    for op, (want, rel, absolute, where) in checks.items():
        got, want = value(op)[where], want[where]
        error = np.abs(got - want)
        assert (error <= rel * np.abs(want) + absolute).all(), (op, error.max())
        assert (error <= 2 * F32_ULP * np.maximum(np.abs(want), 2.0 ** -3) + tiny).all(), op
    limits = np.array([[-np.inf, np.inf]], dtype=np.float32)
    for op, want in (("tanh", [-1, 1]), ("sigmoid", [0, 1]), ("erf", [-1, 1])):
        got = elementwise(ir.Elementwise(op, (ir.TileRef("x"),)), limits.shape, DType.F32,
                          lambda name: limits, None, {}, int)
        assert got.tolist() == [want], op
    sigmoid = value("sigmoid")[0, 97:99]  # x = -100: 0 (flushed); x = -20: e^-20, not 0
    assert sigmoid[0] == 0 and sigmoid[1] == pytest.approx(math.exp(-20), rel=4 * F32_ULP)


GELU = """kernel gelu(X: f32[M, 64], Y: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    sx = x * 0.5 * (1.0 + erf(x * 0.7071067811865476))
    tma Y[tile.m, 0] <- sx
}
"""


def test_exact_gelu_written_with_erf_is_nn_gelu():
    """nn.GELU's default (no tanh approximation) as a kernel writes it: the
    reference's output against x / 2 (1 + erf(x / sqrt 2)) in float64, over the bend
    and both tails. Where 1 + erf cancels (x < -3) the error is absolute: the f32
    roundings of erf and of 1 + erf near 1, times x / 2."""
    from hopperc.sim.problem import make_problem
    from hopperc.sim.reference import expected_outputs
    front_end = driver.check(SourceFile("gelu.hk", GELU))
    problem = make_problem(driver.lower(front_end), {"M": 64})
    problem.inputs["X"] = np.linspace(-8, 8, 64 * 64, dtype=np.float32).reshape(64, 64)
    x = problem.inputs["X"].astype(np.float64)
    want = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    got = expected_outputs(front_end, problem)["Y"].astype(np.float64)
    assert (np.abs(got - want) <= F32_ULP * (np.abs(x) + 2 * np.abs(want))).all()
    bend = np.abs(x) <= 1
    np.testing.assert_allclose(got[bend], want[bend], rtol=4 * F32_ULP)


CLAMP = """kernel clamp_below(X: i32[M, 64], Y: i32[M, 64], k: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: i32[BM, 64]
    c: i32 = max(min(k, 3), -2)
    tma sx <- X[tile.m, 0]
    sx = max(sx, c)
    tma Y[tile.m, 0] <- sx
}
"""


@pytest.mark.parametrize("k", [-7, 1, 9])
def test_integer_min_and_max_of_scalars_are_integer_operations(k):
    """`min` / `max` of i32 scalars are C++'s integer min / max (constants fold);
    of an i32 tile they run in f32 like all element-wise math, exact within 2^24."""
    from hopperc.sim.problem import make_problem
    from hopperc.sim.reference import expected_outputs
    source = SourceFile("clamp.hk", CLAMP)
    assert "max(min(u_k, 3), -2)" in driver.generate(source).cuda
    front_end = driver.check(source)
    problem = make_problem(driver.lower(front_end), {"M": 64})
    problem.scalars["k"] = k
    x = problem.inputs["X"] = np.arange(-2048, 2048, dtype=np.int32).reshape(64, 64) % 13 - 6
    np.testing.assert_array_equal(expected_outputs(front_end, problem)["Y"],
                                  np.maximum(x, min(max(k, -2), 3)))


def test_integer_min_max_fold_and_check_their_arguments():
    # an i32 statement of integer operations: int max (ir/integer_exprs.py), the
    # scalar folded to 3 + k (which wraps: k is a parameter, any i32)
    assert "max(hk_ld_shared_i32(hk_smem_base + 0u + static_cast<unsigned>(" \
        "((hk_r) * 64 + (hk_c)) * 4)), static_cast<int>(hk_wrap_add(3, u_k)))" in driver.generate(SourceFile(
            "c.hk", CLAMP.replace("max(min(k, 3), -2)", "max(-1, 4 - 1) + k"))).cuda
    assert "max() takes 2 arguments" in edit_error(CLAMP, "max(min(k, 3), -2)",
                                                   "max(k)").message
    assert driver.simulate(SourceFile("clamp.hk", CLAMP), seeds=1, search=10).ok
