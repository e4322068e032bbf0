"""Integer `/` and `%` mean the same on the GPU as in the front end's folding and
the simulator (ir/arith.py: `/` rounds up, `%` takes the divisor's sign) for
operands of any sign: data (tensor elements, scalar parameters) makes negative
numerators reachable, where C's truncating operators differ."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir.arith import INTEGER_OPS
from hopperc.codegen.scalars import RoleContext
from hopperc.codegen.scalars import scalar as cxx_scalar
from hopperc.ir import nodes as ir
from hopperc.sim.scalars import compile_scalar, scalar, wrap_i32
from tests.conftest import device_helper


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_signed_helpers_agree_with_the_simulators_operators(tmp_path):
    values = range(-13, 14)
    divisors = [b for b in range(-5, 6) if b != 0]
    program = "#include <cstdio>\n" + device_helper("hk_cdiv_signed") + \
        device_helper("hk_mod_signed") + """
int main() {
  for (int a = -13; a <= 13; ++a) for (int b = -5; b <= 5; ++b) if (b != 0)
    std::printf("%d %d\\n", hk_cdiv_signed(a, b), hk_mod_signed(a, b));
}
"""
    (tmp_path / "ops.cpp").write_text(program)
    subprocess.run(["g++", "-o", str(tmp_path / "ops"), str(tmp_path / "ops.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "ops")], capture_output=True, text=True, check=True)
    got = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    want = [(INTEGER_OPS["/"](a, b), INTEGER_OPS["%"](a, b)) for a in values for b in divisors]
    assert got == want
    assert (-1, 0) in got and (0, 3) in got  # -64 / 64 rounds up to -1; -5 % 4 is 3


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_wrapping_helpers_agree_with_the_simulators_wrap(tmp_path):
    """i32 + - *, negation and abs at the ends of the range: two's complement, as
    the simulator wraps them, with no undefined int overflow for a compiler to use."""
    edges = [-2 ** 31, -2 ** 31 + 1, -2, -1, 0, 1, 2, 2 ** 30, 2 ** 31 - 2, 2 ** 31 - 1]
    helpers = "".join(device_helper(f"hk_wrap_{op}") for op in ("add", "sub", "mul", "neg", "abs"))
    literals = ", ".join(f"{v}" if v > -2 ** 31 else "-2147483647 - 1" for v in edges)
    program = "#include <cstdio>\n" + helpers + f"""
int main() {{
  const int v[] = {{{literals}}};
  for (int a : v) {{
    std::printf("%d %d\\n", hk_wrap_neg(a), hk_wrap_abs(a));
    for (int b : v) std::printf("%d %d %d\\n", hk_wrap_add(a, b), hk_wrap_sub(a, b),
                                hk_wrap_mul(a, b));
  }}
}}
"""
    (tmp_path / "wrap.cpp").write_text(program)
    subprocess.run(["g++", "-O2", "-fsanitize=undefined", "-fno-sanitize-recover",
                    "-o", str(tmp_path / "wrap"), str(tmp_path / "wrap.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "wrap")], capture_output=True, text=True, check=True)
    got = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    want = []
    for a in edges:
        want.append((wrap_i32(-a), wrap_i32(abs(a))))
        want += [(wrap_i32(a + b), wrap_i32(a - b), wrap_i32(a * b)) for b in edges]
    assert got == want
    assert (-2 ** 31, -2 ** 31) in got  # -INT_MIN and abs(INT_MIN) are INT_MIN


# A scalar parameter's sum wraps in the simulator as in the C++ (hk_wrap_add).
SCALAR_WRAP = """
kernel scalar_wrap(X: bf16[M, 64], Y: bf16[M, 64], s: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared buf: bf16[BM, 64]
    if s + 1 > s {
        tma buf <- X[tile.m, 0]
        tma Y[tile.m, 0] <- buf
    }
}
"""


def test_a_scalar_parameters_sum_wraps_in_the_simulator_and_the_cxx():
    source = SourceFile("scalar_wrap.hk", SCALAR_WRAP)
    assert "(hk_wrap_add(u_s, 1) > u_s)" in driver.generate(source).cuda
    x = np.ones((64, 64), np.float32)
    for s, copied in ((5, True), (2 ** 31 - 1, False)):
        out = hopperc.simulate(source, {"X": x, "Y": np.zeros_like(x), "s": s})
        assert bool(out["Y"].any()) is copied


_S = ir.Scalar(ir.ScalarKind.PARAM, "s")
_N = ir.Scalar(ir.ScalarKind.DIM, "N")
_T = ir.Scalar(ir.ScalarKind.TILE, "m")
_OFFS = ir.TensorElement("OFFS", (_T,))


@pytest.mark.parametrize("expr, data", [
    (ir.ScalarOp("+", _S, ir.const(1)), True),
    (ir.ScalarOp("*", _OFFS, ir.const(65536)), True),
    (ir.ScalarOp("-", ir.ScalarOp("*", _N, _N), _T), False),
    (ir.ScalarOp("*", ir.ScalarOp("+", _T, ir.const(1)), _N), False),
])
def test_the_simulator_wraps_exactly_the_sums_the_cxx_wraps(expr, data):
    """`+ - *` wrap to i32 where a parameter or an element takes part: the C++
    computes those with hk_wrap_* and the simulator wraps them; the launch's
    sizes and coordinates stay exact (the host's grid is 64-bit arithmetic), and
    so does the simulator's launch-side evaluation of data (kernel_side=False)."""
    assert ("hk_wrap_" in cxx_scalar(expr, RoleContext(0, 128))) is data
    env = {"s": 2 ** 31 - 1, "N": 2 ** 16, "tile.m": 2 ** 16 - 1,
           "[OFFS]": np.full(2 ** 16, 2.0 ** 16, np.float32)}
    exact = scalar(expr, env, kernel_side=False)
    assert exact > 2 ** 31 - 1  # every case passes INT_MAX
    assert scalar(expr, env) == compile_scalar(expr)(env) == (wrap_i32(exact) if data else exact)


KERNEL = """
kernel signs(X: bf16[M, 64], Y: bf16[M, 64], OFFS: i32[G], s: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared buf: bf16[BM, 64] swizzle 128B
    if (OFFS[tile.m] - 64) / 64 + (OFFS[tile.m] - 3) % 4 + s % 2 > 0 {
        tma buf <- X[(tile.m + 3) / 2 + tile.m % 2, 0]
        tma Y[tile.m, 0] <- buf
    }
}
"""


def test_operands_that_may_be_negative_use_the_signed_forms():
    cuda = driver.generate(SourceFile("signs.hk", KERNEL)).cuda
    condition = next(line for line in cuda.splitlines()
                     if "hk_wrap_sub(hk_elem_OFFS(hk_tile_m), 64)" in line)
    assert "hk_cdiv_signed(hk_wrap_sub(hk_elem_OFFS(hk_tile_m), 64), 64)" in condition
    assert "hk_mod_signed(hk_wrap_sub(hk_elem_OFFS(hk_tile_m), 3), 4)" in condition
    assert "hk_mod_signed(u_s, 2)" in condition  # a scalar parameter may be negative
    # tile coordinates and constants are never negative: the plain, cheaper forms
    assert "hk_cdiv((hk_tile_m + 3), 2)" in cuda and "(hk_tile_m % 2)" in cuda
