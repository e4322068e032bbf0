"""TMA reduce-add (`tma T[i, j] += buf`) in the simulator, and samples/gemm_splitk.hk.

The reduce-add's adds land when the store completes, in any order between blocks;
its staging buffer follows a store's rules; a plain store or read of an element
another block adds into is a race (sim/block_accesses.py)."""
from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.dtypes import DType
from hopperc.sim.block_accesses import BlockAccesses
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category, SimFailure
from hopperc.sim.memory import Site
from hopperc.sim.problem import make_problem
from tests.conftest import ROOT
from tests.sim import mutations as m

SAMPLE = ROOT / "samples" / "gemm_splitk.hk"
F32_EPS = 2.0 ** -24

# One warpgroup; split s takes K tiles s * per .. on, the last split what is left.
SPLIT_K = """kernel split_k(A: bf16[M, K], B: bf16[N, K], C: f32[M, N])
    tile(BM = 64, BN = 64, BK = 64, SPLITS = 2) grid(m: M / BM, n: N / BN, s: SPLITS)
    threads 128
{
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    shared sb: bf16[BN, BK] stages 2 swizzle 128B
    shared sc: f32[BM, BN]
    per: i32 = K / BK / SPLITS
    acc: f32[BM, BN] = 0
    for k in 0 .. min(per, K / BK - tile.s * per) {
        tma sa <- A[tile.m, tile.s * per + k]
        tma sb <- B[tile.n, tile.s * per + k]
        acc += sa @ sb^T
    }
    sc = acc
    STORE
}
"""
REDUCE = "tma C[tile.m, tile.n] += sc"


def _kernel(store: str = REDUCE) -> SourceFile:
    return SourceFile("split_k.hk", SPLIT_K.replace("STORE", store))


def _lowered(source: SourceFile) -> tuple[ir.Kernel, ir.Kernel]:
    front_end = driver.check(source)
    return front_end, driver.lower(front_end)


def _findings(front_end, lowered, dims, seeds=2, search=0):
    report = simulate(lowered, front_end, make_problem(lowered, dims), seeds, search)
    return report.findings


def _float64_reference(a, b, c0):
    """C0 + A @ B^T in float64, with the bound of f32 sums of K products of bf16
    values (exact in f32) and of the splits' adds, in any order."""
    a64, b64 = (x.astype(np.float64) for x in (a, b))
    want = c0.astype(np.float64) + a64 @ b64.T
    scale = np.abs(c0) + np.abs(a64) @ np.abs(b64).T
    return want, scale


def test_split_k_adds_every_split_into_c_against_float64():
    """K = 200 (4 K tiles, the last partial) over 2 splits; C starts nonzero and
    keeps its values: the kernel adds into it."""
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (100, 200)).astype(np.float32)
    b = rng.uniform(-1, 1, (72, 200)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (100, 72)).astype(np.float32)
    out = hopperc.simulate(_kernel(), {"A": a, "B": b, "C": c0})
    bf = [x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b)]
    want, scale = _float64_reference(*bf, c0)
    assert (np.abs(out["C"] - want) <= 2 * (200 + 3) * F32_EPS * scale).all()


@pytest.mark.parametrize("k", [264, 328])
def test_gemm_splitk_sample_against_float64(k):
    """samples/gemm_splitk.hk at ragged M, N and K, both warpgroups, SPLITS = 4:
    K = 264 is 5 K tiles, runs of 2, 2, 1 and none (the last split is empty: it
    adds nothing); K = 328 is 6, runs of 2, 2, 2 and none."""
    rng = np.random.default_rng(k)
    m_rows, n_cols = 150, 260
    a, b = (rng.uniform(-1, 1, (n, k)).astype(np.float32) for n in (m_rows, n_cols))
    c0 = rng.uniform(-1, 1, (m_rows, n_cols)).astype(np.float32)
    out = hopperc.simulate(SAMPLE, {"A": a, "B": b, "C": c0})
    bf = [x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b)]
    want, scale = _float64_reference(*bf, c0)
    assert (np.abs(out["C"] - want) <= 2 * (k + 5) * F32_EPS * scale).all()


def test_gemm_splitk_sample_checks_clean_on_ragged_shapes():
    report = driver.simulate(driver.read_source(SAMPLE), None, {"M": 150, "N": 260, "K": 264},
                             seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_split_k_checks_clean():
    report = driver.simulate(_kernel(), None, {"M": 100, "N": 72, "K": 200}, seeds=2, search=40)
    assert report.ok, [line for f in report.findings for line in f.lines()]


def test_negative_plain_store_of_one_split_meets_the_others_adds():
    """Split 0 stores its partial plainly, the others add: the blocks are not
    ordered, so C keeps whichever lands last. A race, at the second access."""
    front_end, lowered = _lowered(_kernel(
        f"if tile.s == 0 {{\n        tma C[tile.m, tile.n] <- sc\n    }} else {{\n        "
        f"{REDUCE}\n    }}"))
    findings = _findings(front_end, lowered, {"M": 100, "N": 72, "K": 200})
    assert findings and findings[0].category is Category.RACE, findings
    assert "another block stores" in findings[0].message
    assert "reduce-add" in findings[0].message


def test_missing_wait_before_the_staging_plane_is_rewritten_is_a_race():
    """The sample's `wait_group.read 1` before a plane is rewritten, removed: the
    st.shared of the next subtile into that plane races the reduce-add reading it."""
    front_end, lowered = _lowered(driver.read_source(SAMPLE))
    mutated = m.edit(lowered, m.remove(ir.BulkWaitRead, lambda s: s.read and s.pending == 1))
    findings = _findings(front_end, mutated, {"M": 136, "N": 260, "K": 264})
    assert findings and findings[0].category is Category.RACE, findings
    assert findings[0].span.line == 39 and "reduce-add" in findings[0].message, findings[0].message


def test_missing_wait_before_exit_is_a_race():
    front_end, lowered = _lowered(_kernel())
    mutated = m.edit(lowered, m.remove(ir.BulkWaitRead))
    findings = _findings(front_end, mutated, {"M": 100, "N": 72, "K": 200})
    assert findings and findings[0].category is Category.RACE, findings
    assert "block exits while TMA reduce-add" in findings[0].message


def test_reduce_add_turned_into_a_store_is_a_wrong_result():
    """C starts random in `check`, so a split that overwrites C shows."""
    front_end, lowered = _lowered(_kernel())
    mutated = m.edit(lowered, lambda s: [replace(s, reduce_add=False)]
                     if isinstance(s, ir.AsyncStore) else None)
    report = simulate(mutated, front_end, make_problem(mutated, {"M": 100, "N": 72, "K": 200}),
                      2, 0)
    assert report.findings, "a plain store went unnoticed"


SITE_A, SITE_B = Site("TMA reduce-add from 'sc'", None), Site("TMA load of 'C'", None)


def _accesses() -> BlockAccesses:
    return BlockAccesses({"C": np.zeros((4, 8), np.float32)}, {"C": DType.F32})


def test_reduce_adds_of_two_blocks_meet_freely():
    record = _accesses()
    for block in (0, 1, 2):
        record.box(block, "C", (0, 0), (2, 8), None, True, SITE_A, "stores")
    record.box(3, "C", (2, 0), (2, 8), None, True, SITE_A, "stores")
    record.box(3, "C", (2, 0), (2, 8), None, False, SITE_B, "reads")  # its own adds only


def test_negative_plain_read_of_another_blocks_adds_is_a_race():
    record = _accesses()
    record.box(0, "C", (2, 0), (2, 8), None, True, SITE_A, "stores")
    record.box(1, "C", (0, 0), (2, 8), None, False, SITE_B, "reads")  # other rows
    with pytest.raises(SimFailure) as caught:
        record.box(1, "C", (1, 4), (2, 2), None, False, SITE_B, "reads")
    finding = caught.value.finding
    assert finding.category is Category.RACE
    assert "reads element [2, 4] of 'C', which another block adds into" in finding.message


def test_negative_reduce_after_another_blocks_plain_store_is_a_race():
    record = _accesses()
    record.box(3, "C", (0, 0), (4, 8), (0, 2), False, SITE_B, "stores")  # rows 0-1 only
    record.box(4, "C", (2, 0), (2, 8), None, True, SITE_A, "stores")
    with pytest.raises(SimFailure):
        record.box(4, "C", (1, 0), (1, 8), None, True, SITE_A, "stores")


def _orders(terms: np.ndarray, more: int = 64) -> list[np.float32]:
    """f32 sums of `terms` added one at a time in several orders: ascending and
    descending by magnitude, as given, reversed, and `more` random orders."""
    rng = np.random.default_rng(0)
    by_size = terms[np.argsort(np.abs(terms), kind="stable")]
    orders = [terms, terms[::-1], by_size, by_size[::-1]] + \
        [rng.permutation(terms) for _ in range(more)]
    sums = []
    for order in orders:
        total = np.float32(0)
        for term in order:
            total = np.float32(total + term)
        sums.append(total)
    return sums


def _slack_of(terms: np.ndarray) -> float:
    """The record's slack for an element whose first value is terms[0], into
    which the rest are added."""
    record = BlockAccesses({"C": terms[:1].reshape(1, 1)}, {"C": DType.F32})
    for term in terms[1:]:
        record.added("C", (0, 0), term.reshape(1, 1), None)
    return float(record.slack("C")[0, 0])


@pytest.mark.parametrize("terms", [
    np.array([3e7, 1.0, -3e7, 0.25, 7.0], np.float32),
    np.array([1.0] + [F32_EPS] * 16, np.float32),
    np.random.default_rng(1).standard_normal(40).astype(np.float32) * 1e3,
], ids=["cancelling", "one_and_ulp_halves", "normal"])
def test_any_order_of_the_adds_is_within_the_slack(terms):
    """The f32 sums of the same adds in different orders (the reduce-adds of
    different blocks land in any order) differ by no more than the comparison
    allows."""
    sums = [float(s) for s in _orders(terms)]
    assert max(sums) - min(sums) <= _slack_of(terms)


def test_the_slack_is_no_looser_than_twice_the_worst_order():
    """1 followed by sixteen halves of its ulp (2^-24 each): added largest first,
    each half is a tie that rounds to even (the sum stays 1); added smallest first
    they sum exactly to 2^-20, which then survives. That spread is (n - 1) u
    sum|x| (to within 16 u), half the documented bound 2 (n - 1) u sum|x|: the
    slack is at most twice it, not a multiple of it."""
    terms = np.array([1.0] + [F32_EPS] * 16, np.float32)
    sums = [float(s) for s in _orders(terms, more=0)]
    spread = max(sums) - min(sums)
    assert spread == 16 * F32_EPS
    assert _slack_of(terms) <= 2.001 * spread


RAGGED_ADD = """kernel ragged_add(X: f32[M, N], Y: f32[M, N], e: i32)
    tile(BM = 64, BN = 32) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: f32[BM, BN] swizzle 128B
    tma buf <- X[tile.m * BM : e, tile.n]
    tma Y[tile.m * BM : e, tile.n] += buf
}
"""


def test_ragged_reduce_add_leaves_the_rows_past_end_as_they_were():
    rng = np.random.default_rng(2)
    x, y0 = (rng.uniform(-1, 1, (100, 40)).astype(np.float32) for _ in range(2))
    out = hopperc.simulate(SourceFile("r.hk", RAGGED_ADD), {"X": x, "Y": y0, "e": 70})
    np.testing.assert_array_equal(out["Y"][:70], y0[:70] + x[:70])
    np.testing.assert_array_equal(out["Y"][70:], y0[70:])


def test_the_mutation_engine_turns_a_reduce_add_into_a_store_and_check_catches_it():
    """With its only reduce-add a plain store, the splits of a tile store the same
    elements of C: a race between blocks, at the store's line (run in order, each
    split would also overwrite C, which starts random: a wrong result)."""
    from tests.mutation.engine import mutants, verdict

    front_end, lowered = _lowered(_kernel())
    (mutant,) = [x for x in mutants(lowered, "split_k.hk") if ":store:AsyncStore" in x.id]
    (store,) = [s for s in walk(mutant.kernel.body) if isinstance(s, ir.AsyncStore)]
    assert not store.reduce_add
    report = simulate(mutant.kernel, front_end, make_problem(lowered, {"M": 100, "N": 72,
                                                                        "K": 200}),
                      2, 0, first_finding=True)
    race = report.findings[0]
    assert race.category is Category.RACE and "which another block also stores" in race.message
    assert race.span.line == store.span.line
    assert verdict(mutant, report.findings) == "caught", report.findings
