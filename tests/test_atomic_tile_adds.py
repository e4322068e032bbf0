"""`C[R0 : R1, C0 : C1] += acc`: a warpgroup's wgmma accumulator tile added to
global memory (ir.GlobalRowStore with `columns`): each thread adds its pairs of
adjacent columns with one vector red (`red.global.add.v2.f32`, `.noftz.bf16x2`),
one element at a time where a pair straddles the ragged end. Blocks add in any
order (split-K); an add racing a plain store of the same element is found."""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.sim.findings import Category
from tests.conftest import edit_error

# Split-K without staging: block (m, n, s) multiplies K tile s and adds its two
# warpgroups' 64 x BN partials into C.
SPLIT_K = """kernel split_k_add(A: bf16[M, K], B: bf16[N, K], C: f32[M, N])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN, s: K / BK) threads 256
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    tma sa <- A[tile.m, tile.s]
    tma sb <- B[tile.n, tile.s]
    acc: f32[64, BN] = sa[wg] @ sb^T
    C[BM * tile.m + 64 * wg : M, BN * tile.n : N] += acc
}
"""
ADD = "C[BM * tile.m + 64 * wg : M, BN * tile.n : N] += acc"
# The same with a K loop per split, warp-specialized (also scored by the mutation run).
SPLIT_K_LOOP = Path(__file__).parent / "sim" / "kernels" / "split_k_tile_adds.hk"


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


def _inputs(m: int, n: int, k: int):
    rng = np.random.default_rng(3)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((n, k)).astype(np.float32),
            rng.standard_normal((m, n)).astype(np.float32))


def test_split_k_blocks_add_their_partials_at_a_ragged_shape():
    a, b, c = _inputs(130, 100, 192)  # 2 x 2 x 3 blocks, both ends ragged
    got = hopperc.simulate(SourceFile("splitk.hk", SPLIT_K), {"A": a, "B": b, "C": c},
                           schedules=2)["C"]
    want = c + _bf16(a) @ _bf16(b).T
    # 3 f32 adds per element in some order, each term a 64-long f32 dot product
    bound = 8 * 2 ** -24 * (np.abs(c) + np.abs(_bf16(a)) @ np.abs(_bf16(b)).T)
    assert got.shape == (130, 100) and np.all(np.abs(got - want) <= bound)


def test_the_warp_specialized_split_k_kernel_matches_numpy():
    a, b, c = _inputs(150, 70, 328)  # K: 6 tiles, the last ragged, 3 per split
    source = driver.read_source(SPLIT_K_LOOP)
    got = hopperc.simulate(source, {"A": a, "B": b, "C": c}, schedules=2)["C"]
    want = c + _bf16(a) @ _bf16(b).T
    bound = 8 * 2 ** -24 * (np.abs(c) + np.abs(_bf16(a)) @ np.abs(_bf16(b)).T) * 6
    assert np.all(np.abs(got - want) <= bound)
    report = driver.simulate(source, shapes={"M": 150, "N": 70, "K": 328}, seeds=2,
                             search=50)
    assert report.ok, [f.headline() for f in report.findings]
    built = driver.build(source)
    assert built.result.resources.spill_stores == 0
    (code,) = sm.functions(built.result.cubin).values()
    assert sum(i.opcode.startswith("REDG.E.ADD.F32x2") for i in code) == 2 * 16


def test_a_bf16_tensor_takes_the_converted_tile():
    text = SPLIT_K.replace("C: f32[M, N]", "C: bf16[M, N]").replace(
        ADD, "C[BM * tile.m + 64 * wg : M, BN * tile.n : N] += bf16(acc)")
    a, b, _ = _inputs(70, 66, 128)
    c = np.zeros((70, 66), dtype=np.float32)
    got = hopperc.simulate(SourceFile("splitk.hk", text), {"A": a, "B": b, "C": c})["C"]
    want = _bf16(a) @ _bf16(b).T
    bound = 2 ** -6 * (np.abs(_bf16(a)) @ np.abs(_bf16(b)).T)  # two bf16 roundings
    assert np.all(np.abs(got - want) <= bound)
    built = driver.build(SourceFile("splitk.hk", text))
    assert "red.global.add.noftz.bf16x2" in built.result.ptx
    (code,) = sm.functions(built.result.cubin).values()
    assert any(i.opcode.startswith("REDG.E.ADD.BF16x2") for i in code)


def test_check_is_clean_on_ragged_shapes():
    report = driver.simulate(SourceFile("splitk.hk", SPLIT_K),
                             shapes={"M": 130, "N": 100, "K": 192}, seeds=2, search=50)
    assert report.ok, [f.headline() for f in report.findings]
    assert "C" in report.max_error


def test_codegen_adds_pairs_with_one_vector_red_and_no_spills():
    built = driver.build(SourceFile("splitk.hk", SPLIT_K))
    pairs = 64 * 64 // 128 // 2  # a thread's slots of the 64 x 64 tile, two at a time
    # a whole, aligned tile's untested pairs, then the tested ones of another
    assert built.result.ptx.count("red.global.add.v2.f32") == 2 * pairs
    (code,) = sm.functions(built.result.cubin).values()
    vector = [k for k, i in enumerate(code) if i.opcode.startswith("REDG.E.ADD.F32x2")]
    # the scalar reds: the fallback of a pair at a ragged end or misaligned
    scalar = [i for i in code if i.base == "REDG" and not i.opcode.startswith("REDG.E.ADD.F32x2")]
    assert len(vector) == 2 * pairs and len(scalar) == 2 * pairs
    # The untested pairs' addresses differ by constants folded into the REDGs'
    # offsets: hardly anything between them.
    assert vector[pairs - 1] - vector[0] + 1 <= pairs + 8
    assert not [i for i in code if i.base in ("STG", "ATOMG")]
    resources = built.result.resources
    assert resources.spill_stores == resources.spill_loads == 0


def test_warpgroups_add_to_the_same_tile_without_a_race():
    text = SPLIT_K.replace(ADD, "C[BM * tile.m : M, BN * tile.n : N] += acc")
    a, b, _ = _inputs(128, 64, 64)
    c = np.zeros((128, 64), dtype=np.float32)
    got = hopperc.simulate(SourceFile("two.hk", text), {"A": a, "B": b, "C": c},
                           schedules=2)["C"]
    product = _bf16(a) @ _bf16(b).T
    want = np.zeros((128, 64))
    want[:64] = product[:64] + product[64:]  # both warpgroups add to rows 0 .. 63
    np.testing.assert_allclose(got, want, rtol=2 ** -16, atol=2 ** -16)


def test_negative_a_plain_store_racing_the_adds_is_a_race():
    # Each warpgroup's row sums go to the first row of the elements its adds reach.
    text = SPLIT_K.replace(ADD, ADD + "\n    C[BM * tile.m + 64 * wg, BN * tile.n : N] = "
                                      "rowsum(acc)")
    report = driver.simulate(SourceFile("mixed.hk", text), shapes={"M": 128, "N": 64, "K": 64},
                             seeds=4, search=50)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races, [f.headline() for f in report.findings]
    assert "red.global.add of 'C'" in races[0].message
    assert "nothing orders the two stores" in races[0].message
    assert {races[0].span.line, races[0].related.line} == {9, 10}


@pytest.mark.parametrize("old, new, message, column", [
    ("C: f32[M, N]", "C: e4m3[M, N]", "'C' is e4m3: a register tile is added "
                                      "(red.global.add) to a tensor of f32, bf16 or f16", 5),
    ("C: f32[M, N]", "C: bf16[M, N]", "dtype mismatch: the value is f32 but 'C' is bf16", 5),
    ("+= acc", "+= acc[:, 0 : 32]", "shape mismatch: the value is [64, 32] but 'acc' is "
                                    "[64, 64]", 54),
    ("+= acc", "+= rowsum(acc)", "adds a warpgroup's register tile", 54),
    ("C[BM * tile.m + 64 * wg : M, BN", "C[0, BM * tile.m + 64 * wg : M, BN",
     "'C' has rank 2: give one index per dimension", 5),
])
def test_diagnostics(old, new, message, column):
    error = edit_error(SPLIT_K, old, new)
    assert message in error.message
    assert (error.span.line, error.span.col) == (9, column)


def test_a_row_major_tile_is_refused():
    text = """kernel rows(X: f32[M, N], C: f32[M, N])
    tile(BM = 32, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, tile.n]
    x: f32[BM, BN] = sx
    C[BM * tile.m : M, BN * tile.n : N] += x
}
"""
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("rows.hk", text))
    assert "'x' is not in the wgmma accumulator layout" in info.value.message
    assert info.value.span.line == 7


# Split 0 stores its row sums where the later splits add, in turn by the flag.
SERIAL = """kernel serial_split_k(A: bf16[M, K], B: bf16[N, K], C: f32[M, N], F: i32[MT, NT])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN, s: K / BK) threads 256
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    tma sa <- A[tile.m, tile.s]
    tma sb <- B[tile.n, tile.s]
    acc: f32[64, BN] = sa[wg] @ sb^T
    wait F[tile.m, tile.n] >= tile.s
    if tile.s == 0 {
        C[BM * tile.m + 64 * wg, BN * tile.n : N] = rowsum(acc)
    } else {
        C[BM * tile.m + 64 * wg : M, BN * tile.n : N] += acc
    }
    signal F[tile.m, tile.n]
}
"""
SERIAL_SHAPES = {"M": 130, "N": 100, "K": 192, "MT": 2, "NT": 2}


def test_a_flag_orders_a_store_before_other_blocks_adds():
    report = driver.simulate(SourceFile("serial.hk", SERIAL), shapes=SERIAL_SHAPES, seeds=2,
                             search=50)
    assert report.ok, [f.headline() for f in report.findings]


def test_negative_without_the_flag_a_store_races_other_blocks_adds():
    text = SERIAL.replace("    wait F[tile.m, tile.n] >= tile.s\n", "")
    report = driver.simulate(SourceFile("serial.hk", text), shapes=SERIAL_SHAPES, seeds=4,
                             search=50)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races, [f.headline() for f in report.findings]
    assert "by block" in races[0].message and "nothing orders the two stores" in \
        races[0].message
    assert {races[0].span.line, races[0].related.line} == {10, 12}
