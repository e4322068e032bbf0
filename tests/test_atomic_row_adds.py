"""`T[i, START : END] += v`: a register row vector added to global memory
(ir.GlobalRowStore with atomic=True, one red.global.add per row). Blocks of a
grid add to the same elements in any order; the simulator adds them in its
schedule's order, compares within the rounding another order may give, and
finds an add racing a plain store of the same element."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.dtypes import DType
from hopperc.sim.findings import Category
from hopperc.sim.values import added_tolerance
from tests.conftest import edit_error

# Each block sums its 64 x 64 tile's rows; the blocks along n add into S.
ROW_SUMS = """kernel row_sums(X: bf16[M, N], S: f32[M])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    x: f32[BM, BN] = f32(sx)
    S[BM * tile.m : M] += rowsum(x)
}
"""
ADD = "S[BM * tile.m : M] += rowsum(x)"


def test_blocks_add_their_partial_sums_into_one_vector():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((97, 200)).astype(np.float32)  # ragged: 2 x 4 blocks
    got = hopperc.simulate(SourceFile("sums.hk", ROW_SUMS), {"X": x}, schedules=3)["S"]
    want = x.astype(ml_dtypes.bfloat16).astype(np.float64).sum(axis=1)
    bound = 4 * 2 ** -22 * np.abs(x).sum(axis=1)
    assert got.shape == (97,) and np.all(np.abs(got - want) <= bound)


def test_adds_start_from_the_tensors_values():
    x = np.ones((64, 128), dtype=np.float32)
    s = np.full(64, 10.0, dtype=np.float32)
    got = hopperc.simulate(SourceFile("sums.hk", ROW_SUMS), {"X": x, "S": s})["S"]
    np.testing.assert_array_equal(got, np.full(64, 138.0))


def test_check_is_clean_on_ragged_shapes():
    report = driver.simulate(SourceFile("sums.hk", ROW_SUMS), shapes={"M": 97, "N": 200},
                             seeds=4, search=200)
    assert report.ok, [f.headline() for f in report.findings]
    assert "S" in report.max_error


def test_the_tolerance_allows_another_order_of_rounded_adds():
    adds, magnitude = np.array([3.0]), np.array([8.0])
    assert added_tolerance(DType.F32, adds, magnitude)[0] == 3 * 2 * 2 ** -20 * 8.0
    assert added_tolerance(DType.BF16, np.array([0.0]), magnitude)[0] == 0.0


def test_codegen_is_one_predicated_red_per_row_and_no_barrier():
    source = SourceFile("sums.hk", ROW_SUMS)
    cuda = driver.generate(source).cuda
    assert "hk_red_global_add_f32(u_S + 0LL + hk_e" in cuda
    built = driver.build(source)
    assert "@hk_p red.global.add.f32" in built.result.ptx
    (code,) = sm.functions(built.result.cubin).values()
    reds = [i for i in code if i.base == "REDG"]
    assert len(reds) == 1 and reds[0].opcode.startswith("REDG.E.ADD.F32")
    plain = driver.build(SourceFile("sums.hk", ROW_SUMS.replace("+=", "=")))
    (stores,) = sm.functions(plain.result.cubin).values()
    barriers = [i.opcode for i in code if i.base in ("BAR", "MEMBAR")]
    assert barriers == [i.opcode for i in stores if i.base in ("BAR", "MEMBAR")]
    assert not [i for i in code if i.base in ("STG", "ATOMG")]


def test_integer_adds_are_red_s32():
    source = SourceFile("sums.hk", ROW_SUMS.replace("S: f32[M]", "S: i32[M]").replace(
        ADD, "S[BM * tile.m : M] += i32(rowsum(x))"))
    (code,) = sm.functions(driver.build(source).result.cubin).values()
    assert [i.opcode for i in code if i.base == "REDG"][0].startswith("REDG.E.ADD.S32")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_a_16_bit_add_is_a_compare_and_swap_loop_on_sm90(dtype):
    """One 16-bit element per lane: red.global.add.noftz.bf16 / .f16 exist in PTX, but
    ptxas makes them an ATOMG.E.CAS loop (only the packed x2 forms are native), which
    docs/language.md tells users (add in f32 where they can)."""
    source = SourceFile("sums.hk", ROW_SUMS.replace("S: f32[M]", f"S: {dtype}[M]").replace(
        ADD, f"S[BM * tile.m : M] += {dtype}(rowsum(x))"))
    built = driver.build(source)
    assert f"red.global.add.noftz.{dtype}" in built.result.ptx
    (code,) = sm.functions(built.result.cubin).values()
    assert any(i.opcode.startswith("ATOMG.E.CAS") for i in code)
    assert not any(i.base == "REDG" for i in code)


def test_the_store_keeps_its_atomic_flag_through_the_passes():
    lowered = driver.lower(driver.check(SourceFile("sums.hk", ROW_SUMS)))
    (store,) = [s for s in walk(lowered.body) if isinstance(s, ir.GlobalRowStore)]
    assert store.atomic and store.span.line == 7


def test_warpgroups_add_to_the_same_rows_without_a_race():
    two = """kernel two_adds(X: f32[M, 64], R: f32[M])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[64, 64] = sx[wg]
    R[64 * tile.m : M] += rowmax(x)
}
"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    got = hopperc.simulate(SourceFile("two.hk", two), {"X": x}, schedules=2)["R"]
    m = x.max(axis=1)
    want = np.zeros(128)  # both warpgroups add to rows 0 .. 63 of the one tile
    want[:64] = m[:64] + m[64:]
    np.testing.assert_allclose(got, want, rtol=2 ** -20)


def test_negative_an_add_racing_a_plain_store_of_the_same_rows_is_a_race():
    # Warpgroup 0 stores rows 0 .. 63 while warpgroup 1 adds to them, unordered.
    text = """kernel mixed(X: f32[M, 64], R: f32[M])
    tile(BM = 128) grid(m: M / BM) threads 256
{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    x: f32[64, 64] = sx[wg]
    R[BM * tile.m + 64 * wg : M] = rowmax(x)
    R[BM * tile.m : M] += rowmax(x)
}
"""
    report = driver.simulate(SourceFile("mixed.hk", text), shapes={"M": 128}, seeds=4,
                             search=50)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races, [f.headline() for f in report.findings]
    assert "nothing orders the two stores" in races[0].message
    assert {races[0].span.line, races[0].related.line} == {7, 8}


@pytest.mark.parametrize("old, new, message", [
    ("S: f32[M]", "S: e4m3[M]", "'S' is e4m3: a row vector is added (red.global.add) to a "
                                "tensor of f32, bf16, f16 or i32"),
    ("S: f32[M]", "S: bf16[M]", "dtype mismatch: the value is f32 but 'S' is bf16"),
    (ADD, "S[BM * tile.m : M] += x", "the value stored to a tensor is a register row vector"),
])
def test_diagnostics(old, new, message):
    assert message in edit_error(ROW_SUMS, old, new).message
