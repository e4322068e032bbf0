"""i32 statements of integer operations run in 32-bit integers
(ir/integer_exprs.py, codegen/integers.py, sim/integer_values.py): argmax's
column as an i32 row vector (`i: i32[BM] = argmax(x)`), a running argmax over
column tiles, and i32 tiles' min / max, exact over the whole i32 range where
f32 holds integers only to 2^24; numpy references with ties, NaN and values
past 2^24; the C++ (int arithmetic), one NVRTC build, and `check`. An i32
statement with anything else in it keeps the f32 semantics."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import SourceFile
from tests.conftest import edit_error

BIG = 2 ** 30 + 1  # past 2^24: f32 would round BIG + 1 to BIG - 1 (its ulp there is 128)

# argmax's column as i32 in both layouts, offset past 2^24 by a scalar argument.
ARGMAX = """kernel argmax_index(X: f32[M, 64], W: f32[M, 256], A: i32[M], B: i32[M], base: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sw: f32[16, 256]
    tma sx <- X[tile.m, 0]
    tma sw <- W[tile.m, 0]
    x: f32[BM, 64] = sx
    i: i32[BM] = argmax(x)
    A[tile.m] = i + base
    w: f32[16, 256] = sw
    B[tile.m] = max(argmax(w) * 3 + base, base - 5)
}
"""

# The first maximum of each row over its column tiles: a tile's argmax replaces the
# running one only where the tile's maximum is larger (ties keep the earlier tile).
RUNNING = """kernel running_argmax(X: f32[M, N], A: i32[M], V: f32[M])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    best: f32[BM] = -inf
    arg: i32[BM] = 0
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        x: f32[BM, BN] = where(BN * j + col() < N, sx, -inf)
        top: f32[BM] = rowmax(x)
        arg = where(top > best, BN * j + argmax(x), arg)
        best = max(best, top)
    }
    A[tile.m] = arg
    V[tile.m] = best
}
"""

# i32 tiles from shared memory: their min / max and sums, exact past 2^24.
MINMAX = """kernel int_minmax(A: i32[M, 64], B: i32[M, 64], C: i32[M, 64], D: i32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sa: i32[BM, 64]
    shared sb: i32[BM, 64]
    tma sa <- A[tile.m, 0]
    tma sb <- B[tile.m, 0]
    a: i32[BM, 64] = sa
    c: i32[BM, 64] = max(a, sb) - min(a, sb)
    sa = c
    tma C[tile.m, 0] <- sa
    sb = where(a > sb, min(sb, a + 1), abs(-a))
    tma D[tile.m, 0] <- sb
}
"""


def _with_ties(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Small integers (ties in every row), a row with NaNs, an all-equal row, a
    row of -inf and one whose maximum is +inf twice."""
    x = np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)
    x[1, [7, 40]] = np.nan
    x[2] = 2.0
    x[3] = -np.inf
    x[4, [9, 33]] = np.inf
    return x


def test_argmax_as_i32_is_numpy_s_in_both_layouts_and_exact_past_2_24():
    x, w = _with_ties((100, 64), 1), _with_ties((100, 256), 2)
    out = hopperc.simulate(SourceFile("argmax.hk", ARGMAX), {"X": x, "W": w, "base": BIG})
    want_a = np.argmax(x, axis=1).astype(np.int64) + BIG
    np.testing.assert_array_equal(out["A"], want_a)
    rows = 16 * 2  # two blocks of the 16-row tiles: rows 0 .. 31 of W
    want_b = np.maximum(np.argmax(w[:rows], axis=1) * 3 + BIG, BIG - 5)
    np.testing.assert_array_equal(out["B"][:rows], want_b)
    assert float(np.float32(BIG + 1)) != BIG + 1  # the f32 path could not have held it


def test_a_running_argmax_over_column_tiles_is_numpy_s_first_maximum():
    x = np.random.default_rng(3).integers(-4, 5, size=(70, 200)).astype(np.float32)
    x[0, [5, 70, 150]] = 9.0      # ties in three tiles: the first tile's column
    x[1, [130, 190]] = 9.0        # ties inside the last, partial tile
    x[2] = -1.0                   # all equal: column 0
    out = hopperc.simulate(SourceFile("running.hk", RUNNING), {"X": x})
    np.testing.assert_array_equal(out["A"], np.argmax(x, axis=1))
    np.testing.assert_array_equal(out["V"], x.max(axis=1))


def test_i32_tiles_min_max_are_exact_past_2_24():
    rng = np.random.default_rng(4)
    a = rng.integers(-2 ** 30, 2 ** 30, size=(70, 64)).astype(np.int32)
    b = a + rng.integers(-3, 4, size=a.shape).astype(np.int32)  # neighbours: 1 apart
    out = hopperc.simulate(SourceFile("minmax.hk", MINMAX), {"A": a, "B": b})
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(out["C"], np.abs(a64 - b64))
    np.testing.assert_array_equal(out["D"], np.where(a64 > b64, np.minimum(b64, a64 + 1),
                                                     np.abs(a64)))


@pytest.mark.parametrize("text", [ARGMAX, RUNNING, MINMAX], ids=["argmax", "running", "minmax"])
def test_check_is_clean(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_integer_statements_become_int_arithmetic_and_build():
    source = SourceFile("minmax.hk", MINMAX)
    cuda = _kernel_body(driver.generate(source).cuda)
    assert "(max(u_a[hk_k], hk_ld_shared_i32(" in cuda
    assert "min(u_a[hk_k], hk_ld_shared_i32(" in cuda
    assert ") ? 1 : 0)) != 0 ? (min(hk_ld_shared_i32(" in cuda  # an integer comparison
    assert "hk_f32_to_i32(" not in cuda and "hk_i32_to_f32(" not in cuda  # no f32 on the way
    built = driver.build(source)
    assert "max.s32" in built.result.ptx and "min.s32" in built.result.ptx
    assert built.result.resources.spill_stores == 0
    argmax = driver.generate(SourceFile("argmax.hk", ARGMAX)).cuda
    # both layouts' argmax give the int column (the partials across warps hold it as
    # f32, exact: a tile's columns are far below 2^24)
    assert "int hk_v[1] = {};" in argmax and argmax.count("return hk_i; }()") == 2
    built = driver.build(SourceFile("argmax.hk", ARGMAX))
    assert built.result.resources.spill_stores == 0


def test_negative_an_i32_statement_with_a_division_keeps_f32_semantics():
    """`(a + 1) / 2` on i32 tiles is an f32 division rounded to nearest even once
    written, as documented: 3 / 2 = 1.5 -> 2, 5 / 2 = 2.5 -> 2."""
    text = MINMAX.replace("max(a, sb) - min(a, sb)", "(a + 1) / 2")
    a = np.array([[2, 4, -4, 6] * 16] * 64, dtype=np.int32)
    out = hopperc.simulate(SourceFile("half.hk", text), {"A": a, "B": a})
    np.testing.assert_array_equal(out["C"][0, :4], [2, 2, -2, 4])
    assert "hk_f32_to_i32(" in _kernel_body(driver.generate(SourceFile("half.hk", text)).cuda)


# Sums that pass 2^31 - 1: `a + 1 > a` is 0 there, as two's complement wraps it,
# where int arithmetic in C++ would let NVRTC fold it to 1 (overflow is undefined).
WRAP = """kernel wraps(X: i32[M, 64], Y: i32[M, 64], s: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: i32[BM, 64]
    tma sx <- X[tile.m, 0]
    a: i32[BM, 64] = sx
    b: i32[BM, 64] = where(a + 1 > a, 1, 0) + where(s + 1 > s, 2, 0) + 4 * (a * 2 < 0)
    sx = where(col() == 1, -a, where(col() == 2, abs(a), b))
    tma Y[tile.m, 0] <- sx
}
"""


def test_i32_sums_products_negation_and_abs_wrap_in_the_simulator():
    x = np.full((64, 64), 5, np.int32)
    x[0], x[1], x[2] = 2 ** 31 - 1, -2 ** 31, 2 ** 30
    out = hopperc.simulate(SourceFile("wraps.hk", WRAP), {"X": x, "s": 2 ** 31 - 1})
    y = out["Y"]
    # a + 1 wraps at 2^31 - 1 (and so does s + 1): the comparisons are false;
    # (2^31 - 1) * 2 wraps to -2
    assert y[0, 0] == 4 and y[3, 0] == 1
    assert y[2, 0] == 1 + 4  # 2^30 * 2 wraps to -2^31
    assert y[1, 1] == -2 ** 31 and y[1, 2] == -2 ** 31  # -INT_MIN, abs(INT_MIN)
    assert y[0, 1] == -(2 ** 31 - 1) and y[0, 2] == 2 ** 31 - 1


def test_i32_arithmetic_is_unsigned_in_the_cxx_and_comparisons_stay_signed():
    source = SourceFile("wraps.hk", WRAP)
    cuda = _kernel_body(driver.generate(source).cuda)
    assert "hk_wrap_add(u_a[hk_k], 1)) > (u_a[hk_k])" in cuda
    assert "hk_wrap_neg(u_a[hk_k])" in cuda and "hk_wrap_abs(u_a[hk_k])" in cuda
    assert "hk_wrap_mul(u_a[hk_k], 2)" in cuda
    for plain in (" + ", " - ", " * ", "(-u_a", "abs(u_a"):
        assert plain not in cuda.split("u_b[hk_k] = ")[1].split(";")[0]
    ptx = driver.build(source).result.ptx
    # `a + 1 > a` and `s + 1 > s` survive as tests against 2^31 - 1 (a signed int
    # comparison of the wrapped sum), not as a constant 1
    assert re.search(r"setp\.ne\.s32\s+%p\d+, %r\d+, 2147483647;", ptx)
    assert re.search(r"setp\.eq\.s32\s+%p\d+, %r\d+, 2147483647;", ptx)


def _kernel_body(cuda: str) -> str:
    """The generated kernel without the prelude's helpers."""
    return cuda[cuda.index("__global__"):]


@pytest.mark.parametrize("old, new, message", [
    ("i: i32[BM] = argmax(x)", "i: bf16[BM] = argmax(x)",
     "a register vector is f32 or i32 with at most 64 values"),
    ("i: i32[BM] = argmax(x)", "i: i32[BM] = argmax(x) + rowmax(x)",
     "dtype mismatch: the value is f32 but the target is i32"),
    ("A[tile.m] = i + base", "A[tile.m] = f32(i) + 0.5",
     "dtype mismatch: the value is f32 but 'A' is i32"),
])
def test_diagnostics(old, new, message):
    error = edit_error(ARGMAX, old, new)
    assert message in error.message
    assert error.span.line == next(n for n, line in enumerate(
        ARGMAX.replace(old, new).splitlines(), 1) if new in line)
