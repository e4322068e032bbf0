"""Integer `/` and `%` mean the same on the GPU as in the front end's folding and
the simulator (ir/arith.py: `/` rounds up, `%` takes the divisor's sign) for
operands of any sign: data (tensor elements, scalar parameters) makes negative
numerators reachable, where C's truncating operators differ."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir.arith import INTEGER_OPS
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
    condition = next(line for line in cuda.splitlines() if "hk_elem_OFFS(hk_tile_m) - 64" in line)
    assert "hk_cdiv_signed((hk_elem_OFFS(hk_tile_m) - 64), 64)" in condition
    assert "hk_mod_signed((hk_elem_OFFS(hk_tile_m) - 3), 4)" in condition
    assert "hk_mod_signed(u_s, 2)" in condition  # a scalar parameter may be negative
    # tile coordinates and constants are never negative: the plain, cheaper forms
    assert "hk_cdiv((hk_tile_m + 3), 2)" in cuda and "(hk_tile_m % 2)" in cuda
