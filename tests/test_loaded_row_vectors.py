"""A loaded vector named alone in a row vector's statement (`t: i32[BM] =
T[tile.m]`, then `where(t == -100, 0.0, loss)`): its value per row, as a
register row vector's, in every expression form (arithmetic, comparisons,
casts, min/max, where), in declarations, updates and stores to global memory;
a 1-D shared buffer too. In a tile's statement it still needs a broadcast."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import tile_operands, walk
from hopperc.ir.global_accesses import written_tensors
from tests.conftest import ROOT, edit_error

# A warpgroup's rows (Layout.ROWS): loaded i32 labels and f32 scales, and a
# TMA-loaded 1-D shared buffer, each named alone.
ROWS = """kernel loaded_rows(X: f32[M, 64], T: i32[M], S: f32[M], Q: f32[M], R: f32[M], C: i32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sq: f32[BM]
    tma sx <- X[tile.m, 0]
    tma sq <- Q[tile.m]
    t: i32[BM] = T[tile.m]
    s: f32[BM] = S[tile.m]
    x: f32[BM, 64] = sx
    a: f32[BM] = rowmax(x) * s + f32(t)
    a = max(a, sq) - min(s, -sq)
    R[tile.m] = where(t == 3, 0.0, a / abs(s))
    C[tile.m] = i32(where(t >= 2, rowsum(x), f32(t)))
}
"""

# Rows spread over all four warps (Layout.EVERY_ROW): 16 rows of 256 columns.
EVERY_ROW = """kernel loaded_wide(X: f32[M, 256], T: i32[M], R: f32[M])
    tile(BM = 16) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 256]
    tma sx <- X[tile.m, 0]
    t: i32[BM] = T[tile.m]
    x: f32[BM, 256] = sx
    R[tile.m] = where(t != 0, rowmax(x) + f32(t), -1.0)
}
"""


def _inputs(rows: int, cols: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"X": rng.normal(0, 4, (rows, cols)).astype(np.float32),
            "T": rng.integers(0, 5, rows).astype(np.int32),
            "S": rng.uniform(0.5, 2, rows).astype(np.float32) * rng.choice([-1, 1], rows),
            "Q": rng.normal(0, 4, rows).astype(np.float32)}


def test_each_expression_form_reads_the_loaded_vector_per_row():
    inputs = _inputs(100, 64, 3)  # a partial second tile: rows past M read 0
    out = hopperc.simulate(SourceFile("rows.hk", ROWS), inputs)
    x, t, s, q = (inputs[n].astype(np.float64) for n in "XTSQ")
    a = x.max(axis=1) * s + t
    a = np.maximum(a, q) - np.minimum(s, -q)
    np.testing.assert_allclose(out["R"], np.where(t == 3, 0.0, a / np.abs(s)), rtol=1e-6,
                               atol=1e-5)
    sums = x.sum(axis=1)
    want_c = np.where(t >= 2, sums, t)
    # i32() rounds to nearest; a sum near a half is left to rounding
    exact = np.abs(want_c - np.round(want_c)) < 0.49
    np.testing.assert_array_equal(out["C"][exact], np.round(want_c[exact]).astype(np.int32))


def test_rows_spanning_warps_read_the_loaded_vector_per_row():
    inputs = _inputs(40, 256, 4)
    out = hopperc.simulate(SourceFile("wide.hk", EVERY_ROW), {k: inputs[k] for k in "XT"})
    x, t = inputs["X"], inputs["T"]
    want = np.where(t != 0, x.max(axis=1) + t, -1.0).astype(np.float32)
    np.testing.assert_array_equal(out["R"], want)


@pytest.mark.parametrize("text", [ROWS, EVERY_ROW], ids=["rows", "every_row"])
def test_check_is_clean(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_the_loaded_vector_is_read_once_into_registers_at_its_declaration():
    lowered = driver.lower(driver.check(SourceFile("rows.hk", ROWS)))
    copies = [s for s in walk(lowered.body) if isinstance(s, ir.TileDef)
              and isinstance(s.init, ir.GlobalVector)]
    assert [(c.name, c.layout, c.init.tensor, c.init.axis, c.init.length) for c in copies] == \
        [("t_rows", ir.Layout.ROWS, "T", "rows", 64), ("s_rows", ir.Layout.ROWS, "S", "rows", 64)]
    (store,) = [s for s in walk(lowered.body)
                if isinstance(s, ir.GlobalRowStore) and s.tensor == "R"]
    operands = list(tile_operands(store.value))
    assert not [e for e in operands if isinstance(e, ir.GlobalVector)]
    assert {e.name for e in operands if isinstance(e, ir.TileRef)} >= {"t_rows", "s_rows"}
    (update,) = [s for s in walk(lowered.body) if isinstance(s, ir.TileAssign) and s.name == "a"]
    assert any(isinstance(e, ir.SharedRead) and e.broadcast == "rows"
               for e in tile_operands(update.value))


def test_codegen_reads_each_slots_row_of_the_tensor_and_builds():
    source = SourceFile("rows.hk", ROWS)
    cuda = driver.generate(source).cuda
    # the slot's row (hk_r) indexes the tensor, bounded by its extent
    assert "const int hk_i = ((hk_tile_m * 64)) + hk_r; return hk_i < u_M" in cuda
    built = driver.build(source)
    assert "ld.global.nc" in built.result.ptx
    assert built.result.resources.spill_stores == 0


# Loaded vectors alone, stored as a register copy of them would be (`u: f32[BM] = t`):
# to global memory directly, and into a 1-D shared buffer then by TMA, and a 1-D
# shared buffer alone to global memory; over 128 threads (a warpgroup's rows,
# Layout.ROWS) and over 32 (every row in every thread, two rows per thread).
ALONE = """kernel loaded_alone(T: i32[M], S: f32[M], R: f32[M], Q: f32[M], P: f32[M])
    tile(BM = 64) grid(m: M / BM) threads THREADS
{
    shared sl: f32[BM]
    shared sq: f32[BM]
    tma sq <- S[tile.m]
    t: i32[BM] = T[tile.m]
    s: f32[BM] = S[tile.m]
    R[tile.m] = where(t == 3, 0.0, s)
    sl = s
    tma Q[tile.m] <- sl
    P[tile.m] = sq + 1.0
}
"""


@pytest.mark.parametrize("threads", [128, 32])
def test_loaded_vectors_alone_are_stored_to_global_and_shared_memory(threads):
    source = SourceFile("alone.hk", ALONE.replace("THREADS", str(threads)))
    inputs = _inputs(100, 1, 6)
    out = hopperc.simulate(source, {k: inputs[k] for k in "TS"})
    t, s = inputs["T"], inputs["S"]
    np.testing.assert_array_equal(out["R"], np.where(t == 3, 0.0, s).astype(np.float32))
    np.testing.assert_array_equal(out["Q"], s)
    np.testing.assert_array_equal(out["P"], s.astype(np.float32) + np.float32(1))
    layout = ir.Layout.ROWS if threads == 128 else ir.Layout.EVERY_ROW
    lowered = driver.lower(driver.check(source))
    stores = [st for st in walk(lowered.body) if isinstance(st, ir.GlobalRowStore)]
    assert [(st.tensor, st.layout, st.threads) for st in stores] == [
        ("R", layout, threads), ("P", layout, threads)]
    report = driver.simulate(source, None, {"M": 100}, seeds=2, search=10)
    assert report.ok, [f.headline() for f in report.findings]
    assert driver.build(source).result.resources.spill_stores == 0


@pytest.mark.parametrize("old, new, line, message", [
    ("x: f32[BM, 64] = sx", "x: f32[BM, 64] = sx + t", 10,
     "vector 't' needs a broadcast: t[:, None] (one value per row) or t[None, :] (per column)"),
    ("t: i32[BM] = T[tile.m]", "t: i32[32] = T[tile.m]", 11,
     "shape mismatch in '+': [64] and [32]"),
    ("where(t == 3,", "where(t[:, None] == 3,", 13,
     "'t' is one value per row in a row vector's statement: name it alone, t"),
    ("a = max(a, sq)", "a = max(a, sq[:, None])", 12,
     "'sq' is one value per row in a row vector's statement: name it alone, sq"),
    ("where(t == 3, 0.0, a / abs(s))", "where(2 == 3, 0.0, 1.0)", 13,
     "the value names no row vector: store a register row vector (m: f32[64] = rowmax(s)), "
     "a loaded vector (t: f32[BM] = T[tile.m]) or an expression of them"),
    ("tma sx <- X[tile.m, 0]", "tma sx <- X[tile.m, 0]\n    shared sl: f32[1, BM]", 13,
     "shape mismatch: the value is a row vector of 64 rows but 'sl' is [1, 64]; a row vector "
     "is stored to a 1-D view of as many elements (shared sl: f32[64])"),
])
def test_diagnostics(old, new, line, message):
    text = ROWS
    if "shared sl" in new:  # an expression of row vectors into a 2-D view
        text = text.replace("    a = max(a, sq)", "    sl = where(t == 1, 0.0, rowmax(x))\n"
                                                 "    a = max(a, sq)")
    error = edit_error(text, old, new)
    assert message in error.message
    assert error.span.line == line


# One vector read per row over a warpgroup's tile and alone in a row statement,
# per column over the same tile, and per row over a row-major [32, 64] tile whose
# rows its threads do not hold (the tensor read where it is used).
MIXED = """kernel mixed_uses(X: f32[M, 64], T: f32[M], R: f32[M], Y: f32[M, 64], Z: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sz: f32[32, 64]
    tma sx <- X[tile.m, 0]
    t: f32[BM] = T[tile.m]
    h: f32[32] = T[tile.m]
    x: f32[BM, 64] = sx * t[:, None] + t[None, :]
    R[tile.m] = rowsum(x) + t
    sx = x
    tma Y[tile.m, 0] <- sx
    tma sz <- X[tile.m, 0]
    sz = sz - h[:, None]
    tma Z[tile.m, 0] <- sz
}
"""


def test_each_use_reads_the_registers_or_where_they_do_not_hold_its_rows_the_tensor():
    lowered = driver.lower(driver.check(SourceFile("mixed.hk", MIXED)))
    copies = {s.name: s.layout for s in walk(lowered.body) if isinstance(s, ir.TileDef)
              and isinstance(s.init, ir.GlobalVector)}
    # h's only use goes with a [32, 64] tile whose rows span no warps: no copy of it
    assert copies == {"t_rows": ir.Layout.ROWS}
    (x,) = [s for s in walk(lowered.body) if isinstance(s, ir.TileDef) and s.name == "x"]
    reads = list(tile_operands(x.init))
    assert ir.RowValues("t_rows") in reads
    assert [(r.axis, r.length) for r in reads if isinstance(r, ir.GlobalVector)] == [("cols", 64)]
    (sz,) = [s for s in walk(lowered.body) if isinstance(s, ir.SharedStore)
             and s.dst.buffer == "sz"]
    assert [(r.axis, r.length) for r in tile_operands(sz.value)
            if isinstance(r, ir.GlobalVector)] == [("rows", 32)]

    rng = np.random.default_rng(5)
    inputs = {"X": rng.normal(0, 1, (70, 64)).astype(np.float32),
              "T": rng.normal(0, 1, 70).astype(np.float32)}
    out = hopperc.simulate(SourceFile("mixed.hk", MIXED), inputs)
    x, t = (inputs[n].astype(np.float64) for n in "XT")
    padded = np.concatenate([t, np.zeros(128 - 70)])  # past the tensor's end: 0
    per_column = np.stack([padded[64 * (r // 64):64 * (r // 64) + 64] for r in range(70)])
    want = x * t[:, None] + per_column
    np.testing.assert_allclose(out["Y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["R"], want.sum(axis=1) + t, rtol=1e-4, atol=1e-4)


# Column indices and labels past 2^24, where f32 holds only even integers.
PICK = """kernel pick(X: f32[M, 64], T: i32[M], P: f32[M], base: i32)
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    t: i32[BM] = T[tile.m]
    hit: f32[BM, 64] = where(base + col() == t[:, None], sx, 0.0)
    P[tile.m] = rowsum(hit)
}
"""


def test_integer_comparisons_in_an_f32_statement_are_exact_past_2_24():
    base = 2 ** 24 + 1
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (70, 64)).astype(np.float32)
    columns = rng.integers(0, 64, 70)
    out = hopperc.simulate(SourceFile("pick.hk", PICK),
                           {"X": x, "T": (base + columns).astype(np.int32), "base": base})
    # in f32 base + c and base + c + 1 round alike for even c: a row would pick two
    np.testing.assert_array_equal(out["P"], x[np.arange(70), columns])


def test_integer_comparisons_compile_to_int_compares():
    cuda = driver.generate(SourceFile("pick.hk", PICK)).cuda
    # base + col() wraps past 2^31 (codegen/integers.py), compared as signed ints
    assert "((hk_wrap_add(static_cast<int>(u_base), hk_c)) == (u_t_rows[(hk_k / 2) % 2]) ? " \
        "1.0f : 0.0f" in cuda
    built = driver.build(SourceFile("pick.hk", PICK))
    (code,) = sm.functions(built.result.cubin).values()
    ops = {i.base for i in code}
    assert "ISETP" in ops and "I2FP" not in ops and "FSETP" not in ops


def test_cross_entropy_loop_keeps_labels_in_registers_and_reads_words_of_the_tile():
    """The interior of the column loop: no global load (the labels were loaded
    before it), the label compared in ints (ISETP, no I2FP / FSETP), the bf16 tile
    read one 32-bit LDS per pair of columns (16 per 64 x 64 tile and thread's 32
    elements), none 16 bits wide."""
    path = ROOT / "samples" / "cross_entropy.hk"
    built = driver.build(driver.read_source(path))
    (code,) = sm.functions(built.result.cubin).values()
    interior = next(f for f in sm.source_loops(code, built.generated.kernel)
                    if f.part == "interior")
    ops, names = [i.base for i in interior.own], [i.opcode for i in interior.own]
    assert "LDG" not in ops and "I2FP" not in ops and "FSETP" not in ops
    assert ops.count("ISETP") == 32
    assert names.count("LDS") == 16 and not any(n.startswith("LDS.U16") for n in names)
    assert built.result.resources.spill_stores == 0


@pytest.mark.parametrize("text", [MIXED, PICK], ids=["mixed", "pick"])
def test_check_is_clean_with_registers_and_fallbacks(text):
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_negative_a_vector_read_per_column_only_gets_no_registers():
    text = MIXED.replace("sx * t[:, None] + t[None, :]", "sx + t[None, :]").replace(
        "rowsum(x) + t", "rowsum(x)")
    lowered = driver.lower(driver.check(SourceFile("columns.hk", text)))
    assert [s.name for s in walk(lowered.body) if isinstance(s, ir.TileDef)
            and isinstance(s.init, ir.GlobalVector)] == []


def test_rows_spanning_warps_hold_every_row_in_every_thread():
    lowered = driver.lower(driver.check(SourceFile("wide.hk", EVERY_ROW)))
    (copy,) = [s for s in walk(lowered.body) if isinstance(s, ir.TileDef)
               and isinstance(s.init, ir.GlobalVector)]
    assert (copy.name, copy.layout, copy.shape) == ("t_rows", ir.Layout.EVERY_ROW, (16,))
    (store,) = [s for s in walk(lowered.body) if isinstance(s, ir.GlobalRowStore)]
    assert not [e for e in tile_operands(store.value) if isinstance(e, ir.GlobalVector)]


# The kernel writes S after `s` is declared: `s` names S's elements, read where
# used (after the store), in its per-row and per-column uses alike.
STORED = """kernel stored(X: f32[M, N], S: f32[M], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    shared ss: f32[BM]
    tma sx <- X[tile.m, 0]
    s: f32[BM] = S[tile.m]
    ss = 1.5
    bulk S[tile.m] <- ss
    sx = sx * s[:, None]
    tma Y[tile.m, 0] <- sx
}
"""
STORED_MIXED = STORED.replace("sx * s[:, None]", "sx * s[:, None] + s[None, :]")
STORED_MANUAL = STORED.replace("    sx = sx * s[:, None]\n", """    manual {
        x: f32[BM, BN] = sx * s[:, None]
        sx = x
    }
""")


@pytest.mark.parametrize("text, per_column", [(STORED, 0.0), (STORED_MIXED, 1.5),
                                               (STORED_MANUAL, 0.0)],
                         ids=["per_row", "per_row_and_column", "in_manual_code"])
def test_a_vector_of_a_tensor_the_kernel_writes_reads_it_where_used(text, per_column):
    rng = np.random.default_rng(8)
    inputs = {"X": rng.normal(0, 1, (64, 64)).astype(np.float32),
              "S": rng.normal(0, 1, 64).astype(np.float32)}
    out = hopperc.simulate(SourceFile("stored.hk", text), inputs)
    np.testing.assert_allclose(out["Y"], inputs["X"].astype(np.float64) * 1.5 + per_column,
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out["S"], np.full(64, 1.5, np.float32))


@pytest.mark.parametrize("text", [STORED, STORED_MIXED, STORED_MANUAL],
                         ids=["per_row", "per_row_and_column", "in_manual_code"])
def test_negative_no_register_copy_of_a_tensor_the_kernel_writes(text):
    lowered = driver.lower(driver.check(SourceFile("stored.hk", text)))
    assert written_tensors(lowered.body) == {"S", "Y"}
    assert [s.name for s in walk(lowered.body) if isinstance(s, ir.TileDef)
            and isinstance(s.init, ir.GlobalVector)] == []
    # the use reads S's rows where it is (no copy was made: nothing else reads them)
    per_row = [e for s in walk(lowered.body) if isinstance(s, (ir.TileDef, ir.SharedStore))
               for e in tile_operands(s.init if isinstance(s, ir.TileDef) else s.value)
               if isinstance(e, ir.GlobalVector) and e.axis == "rows"]
    assert [e.tensor for e in per_row] == ["S"]
    report = driver.simulate(SourceFile("stored.hk", text), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("sample, written", [
    ("gemm_splitk", {"C"}), ("cross_entropy", {"Loss"}), ("layernorm", {"Y", "Mean", "Rstd"}),
    ("attention_bwd", {"DQ", "DK", "DV"}), ("gemm_streamk", {"C", "W", "F"})])
def test_written_tensors_are_those_a_store_reduce_add_row_store_or_flag_names(sample, written):
    lowered = driver.lower(driver.check(driver.read_source(ROOT / "samples" / f"{sample}.hk")))
    assert written_tensors(lowered.body) == written


# Two loops declare their own `t`: the first reads it per column only, the second per row.
SCOPED = """kernel scoped(X: f32[M, 64], T: f32[M], Y: f32[M, 64], Z: f32[M, 64])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sy: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    for i in 0 .. 1 {
        t: f32[BM] = T[tile.m]
        sy = sx + t[None, :]
        tma Y[tile.m, 0] <- sy
    }
    for j in 0 .. 1 {
        t: f32[BM] = T[tile.m]
        x: f32[BM, 64] = sx
        sx = x * t[:, None]
        tma Z[tile.m, 0] <- sx
    }
}
"""


def test_only_the_declarations_own_uses_decide_its_copy():
    """The first loop's `t` is read per column only: no copy of it is made (the
    second loop's per-row use is of another vector), so the second's is `t_rows`."""
    lowered = driver.lower(driver.check(SourceFile("scoped.hk", SCOPED)))
    copies = [(s.name, s.span.line) for s in walk(lowered.body) if isinstance(s, ir.TileDef)
              and isinstance(s.init, ir.GlobalVector)]
    assert copies == [("t_rows", 13)]
