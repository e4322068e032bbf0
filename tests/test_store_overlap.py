"""A shared-memory write that reads, in the same statement, bytes other threads
of the statement write is refused at its line; reading one's own elements is
not (frontend/overlap.py)."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile

KERNEL = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared s8: e4m3[BM, BN] reuses sx
    shared sg: bf16[BM, BN] swizzle 128B reuses sx
    shared sn: bf16[BM, BN] reuses sx
    shared r: bf16[2, BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    STATEMENT
    tma Y[tile.m, tile.n] <- sx
}
"""


def build(statement: str):
    return driver.check(SourceFile("t.hk", KERNEL.replace("STATEMENT", statement)))


@pytest.mark.parametrize("statement, how", [
    ("sx = bf16(f32(sx^T) * 2.0)", "transposed"),
    ("s8 = e4m3(sx)", "through 'sx'"),           # 2-byte reads, 1-byte writes
    ("sx = sg^T", "through 'sg'"),
    ("sn = sx", "through 'sx'"),                  # same dtype, another swizzle
    ("r[0] = bf16(f32(r[1]^T))", "transposed"),
])
def test_reading_what_other_threads_overwrite_is_refused(statement, how):
    with pytest.raises(CompileError) as info:
        build(statement)
    err = info.value
    assert (err.span.line, err.span.col) == (10, 5)
    assert f"reading the same memory {how}" in err.message
    assert "Read into a register tile first" in err.message


@pytest.mark.parametrize("statement", [
    "sx = bf16(f32(sx) * 2.0)",           # each thread rewrites the element it read
    "sg = bf16(f32(sx) + 1.0)",           # another name for the same layout
    "r[0] = bf16(f32(r[1]) + 1.0)",       # another plane: disjoint bytes
    "sx = bf16(f32(sg) * f32(sx))",
])
def test_negative_reading_ones_own_elements_is_accepted(statement):
    build(statement)


def test_reading_into_registers_first_gets_a_barrier_and_passes_check():
    text = KERNEL.replace("STATEMENT", "t: f32[BM, BN] = f32(sx^T)\n    sx = bf16(t * 2.0)")
    report = driver.simulate(SourceFile("t.hk", text), seeds=4, search=200)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
