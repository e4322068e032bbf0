"""`sl = v` / `sl[wg] = v`: a register row vector into a 1-D shared buffer
(ir.SharedStore with a row_layout: each row written by one thread that holds
it), then `tma L[...] <- sl`. The front end, the syncs the passes write (proxy
fence by the writers and a barrier before the TMA store, wait_group.read before
the buffer is written again), the simulator (values against numpy, check clean,
and each sync's absence found), the C++ and one NVRTC build's SASS."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import edit_error
from tests.sim import mutations as m

# A warpgroup's rows (Layout.ROWS): a row maximum, zero where the label is 1.
ROWS = """kernel rows_through_shared(X: f32[M, 64], T: i32[M], L: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sl: f32[BM]
    tma sx <- X[tile.m, 0]
    t: i32[BM] = T[tile.m]
    x: f32[BM, 64] = sx
    sl = where(t == 1, 0.0, rowmax(x))
    tma L[tile.m] <- sl
}
"""

# Two warpgroups, each its 64 rows of a 128-row tile into its block of sl.
GROUPS = """kernel rows_per_group(X: f32[M, 64], L: f32[M])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 64]
    shared sl: f32[BM]
    tma sx <- X[tile.m, 0]
    x: f32[64, 64] = sx[wg]
    sl[wg] = rowmax(x) * 2.0
    tma L[tile.m] <- sl
}
"""

# Rows that span the 4 warps (Layout.EVERY_ROW), stored as bf16.
WIDE = """kernel wide_rows(X: f32[M, 256], L: bf16[M])
    tile(BM = 16) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 256]
    shared sl: bf16[BM]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 256] = sx
    sl = bf16(rowsum(x))
    tma L[tile.m] <- sl
}
"""

# The buffer written again each iteration: its TMA store must have read it first.
LOOP = """kernel rows_each_tile(X: f32[M, N], L: f32[NB, M])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    shared sl: f32[BM]
    for j in 0 .. N / BN {
        tma sx <- X[tile.m, j]
        x: f32[BM, BN] = sx
        sl = rowmax(x)
        tma L[j, tile.m] <- sl
    }
}
"""


def test_each_layout_stores_its_rows():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 3, (100, 64)).astype(np.float32)
    t = rng.integers(0, 3, 100).astype(np.int32)
    out = hopperc.simulate(SourceFile("rows.hk", ROWS), {"X": x, "T": t})
    np.testing.assert_array_equal(out["L"], np.where(t == 1, 0.0, x.max(axis=1)))
    out = hopperc.simulate(SourceFile("groups.hk", GROUPS), {"X": x})
    np.testing.assert_array_equal(out["L"], x.max(axis=1) * 2)
    w = rng.normal(0, 1, (40, 256)).astype(np.float32)
    out = hopperc.simulate(SourceFile("wide.hk", WIDE), {"X": w})
    np.testing.assert_allclose(out["L"].astype(np.float64), w.astype(np.float64).sum(axis=1),
                               rtol=2 ** -8, atol=1e-4)  # one bf16 rounding


def test_a_buffer_stored_every_iteration():
    x = np.random.default_rng(3).normal(0, 1, (72, 200)).astype(np.float32)  # 16-byte rows of L
    out = hopperc.simulate(SourceFile("loop.hk", LOOP), {"X": x}, shapes={"NB": 4})
    padded = np.pad(x, ((0, 0), (0, 56)))  # the last tile's columns past N load as 0
    want = padded.reshape(72, 4, 64).max(axis=2).T
    np.testing.assert_array_equal(out["L"], want)


@pytest.mark.parametrize("text", [ROWS, GROUPS, WIDE, LOOP],
                         ids=["rows", "groups", "wide", "loop"])
def test_check_is_clean(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_the_passes_fence_and_barrier_before_the_store_and_wait_before_the_rewrite():
    lowered = driver.lower(driver.check(SourceFile("loop.hk", LOOP)))
    kinds = [type(s).__name__ for s in walk(lowered.body)
             if isinstance(s, (ir.SharedStore, ir.ProxyFence, ir.NamedBarrier,
                               ir.AsyncStore, ir.BulkWaitRead))]
    store = kinds.index("SharedStore")
    # wait_group.read (and a barrier) before sl is written again, then the
    # writers' fence and a barrier before the TMA store reads it
    assert kinds[store - 2:store + 4] == ["BulkWaitRead", "NamedBarrier", "SharedStore",
                                          "ProxyFence", "NamedBarrier", "AsyncStore"]
    (row_store,) = [s for s in walk(lowered.body) if isinstance(s, ir.SharedStore)]
    assert row_store.row_layout is ir.Layout.ROWS and row_store.row_threads == 128


def _lose(text: str, kind: type, where=lambda s: True):
    front_end = driver.check(SourceFile("k.hk", text))
    lowered = driver.lower(front_end)
    target = next(s for s in walk(lowered.body) if isinstance(s, kind) and where(s))
    broken = m.edit(lowered, m.remove(kind, lambda s: s is target))
    return simulate(broken, front_end, make_problem(broken, default_dims(broken)), 2, 30,
                    first_finding=True).findings


def test_negative_without_the_writers_fence_check_finds_it():
    findings = _lose(ROWS, ir.ProxyFence)
    assert findings and findings[0].category is Category.MISSING_FENCE
    assert findings[0].span.line == 9 and "read by TMA store" in findings[0].message


def test_negative_without_the_barrier_the_store_races():
    findings = _lose(ROWS, ir.NamedBarrier, lambda s: s.span.line == 10)
    assert findings and findings[0].category is Category.RACE


def test_negative_without_the_read_wait_the_rewrite_races():
    findings = _lose(LOOP, ir.BulkWaitRead, lambda s: s.span.line == 9)
    assert findings and findings[0].category is Category.RACE


def test_one_lane_per_row_stores_to_shared_and_builds():
    source = SourceFile("rows.hk", ROWS)
    cuda = driver.generate(source).cuda
    assert "if (hk_t % 4 < 2) hk_st_shared_f32(" in cuda
    built = driver.build(source)
    (code,) = sm.functions(built.result.cubin).values()
    bases = [i.base for i in code]
    assert "STS" in bases and "UTMASTG" in bases
    sts = bases.index("STS")  # the row store, then the writers' fence and the TMA store
    fence = bases.index("FENCE", sts)
    assert fence < bases.index("UTMASTG", fence)
    assert built.result.resources.spill_stores == 0
    wide = driver.build(SourceFile("wide.hk", WIDE))
    assert "st.shared.u16" in wide.result.ptx or "st.shared.b16" in wide.result.ptx


@pytest.mark.parametrize("text, old, new, line, message", [
    (ROWS, "shared sl: f32[BM]", "shared sl: f32[32]", 9,
     "a row vector of 64 rows is stored to the 32 elements of 'sl'"),
    (ROWS, "sl = where(t == 1, 0.0, rowmax(x))", "sl = i32(rowmax(x))", 9,
     "dtype mismatch: the value is i32 but 'sl' is f32"),
    (ROWS, "sl = where(t == 1, 0.0, rowmax(x))", "sl = sl + rowmax(x)", 9,
     "this row vector's store to 'sl' reads the same memory"),
    (GROUPS, "sl[wg] = rowmax(x)", "sl = rowmax(x)", 8,
     "2 warpgroups each hold their own tiles; read or write this warpgroup's rows with sl[wg]"),
])
def test_diagnostics(text, old, new, line, message):
    error = edit_error(text, old, new)
    assert message in error.message and error.span.line == line
