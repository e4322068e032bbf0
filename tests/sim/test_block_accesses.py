"""Plain stores across blocks (sim/block_accesses.py): two blocks storing one
element, or one reading what another stores, race (nothing orders blocks);
blocks storing disjoint elements, and blocks reading a tensor nobody stores,
do not. Reduce-adds across blocks: tests/sim/test_gemm_splitk.py."""
from __future__ import annotations

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir.dtypes import DType
from hopperc.sim.block_accesses import BlockAccesses
from hopperc.sim.findings import Category, SimFailure
from hopperc.sim.memory import Site
from tests.sim.test_gemm_splitk import SPLIT_K

STORE, LOAD = Site("TMA store from 'sc'", None), Site("TMA load of 'C'", None)


def _record() -> BlockAccesses:
    tensors = {"C": np.zeros((4, 8), np.float32), "A": np.zeros((4, 8), np.float32)}
    return BlockAccesses(tensors, {}, {"C"})


def test_two_blocks_storing_one_element_race():
    record = _record()
    record.box(0, "C", (0, 0), (2, 8), None, False, STORE, "stores")
    record.box(1, "C", (2, 0), (2, 8), None, False, STORE, "stores")  # other rows
    with pytest.raises(SimFailure) as caught:
        record.box(2, "C", (1, 6), (2, 4), None, False, STORE, "stores")
    finding = caught.value.finding
    assert finding.category is Category.RACE
    assert "stores element [1, 6] of 'C', which another block also stores" in finding.message


def test_negative_one_block_storing_an_element_twice_is_its_own_order():
    """Within a block the order is the wait_group's (memory.GlobalWrites)."""
    record = _record()
    record.box(0, "C", (0, 0), (4, 8), None, False, STORE, "stores")
    record.box(0, "C", (0, 0), (4, 8), None, False, STORE, "stores")
    record.box(0, "C", (0, 0), (4, 8), None, False, LOAD, "reads")


def test_reading_what_another_block_stores_races():
    record = _record()
    record.box(0, "C", (0, 0), (2, 8), None, False, LOAD, "reads")
    record.box(1, "C", (0, 0), (2, 8), None, False, LOAD, "reads")  # reads meet freely
    with pytest.raises(SimFailure) as caught:
        record.box(2, "C", (1, 0), (1, 8), None, False, STORE, "stores")
    assert "stores element [1, 0] of 'C', which another block reads" in \
        caught.value.finding.message


def test_negative_a_box_clipped_at_the_tensors_end_writes_only_inside():
    """Two ragged boxes of 4 rows, one ending at row 2 (its END), the other
    starting there: the rows past END are not written, so they do not meet."""
    record = _record()
    record.box(0, "C", (0, 0), (4, 8), (0, 2), False, STORE, "stores")
    record.box(1, "C", (2, 0), (4, 8), None, False, STORE, "stores")  # rows past 4: outside


def test_negative_tensors_nobody_stores_are_not_recorded():
    record = _record()
    for block in range(3):
        record.box(block, "A", (0, 0), (4, 8), None, False, LOAD, "reads")
    assert ("A", "reads") not in record.who


def test_row_stores_of_two_blocks_to_one_element_race():
    record = _record()
    record.elements(0, "C", (np.array([0, 0]), np.array([1, 2])), STORE)
    with pytest.raises(SimFailure):
        record.elements(1, "C", (np.array([3, 0]), np.array([3, 2])), STORE)


def test_split_k_storing_its_partials_plainly_is_a_race_at_the_store():
    """Every split stores C's tile with `<-`: the reference, running the blocks in
    the same order, agrees with the last one, but two blocks store each element."""
    text = SPLIT_K.replace("STORE", "tma C[tile.m, tile.n] <- sc")
    report = driver.simulate(SourceFile("sk.hk", text), None, {"M": 100, "N": 72, "K": 200},
                             seeds=2, search=0)
    race = report.findings[0]
    assert race.category is Category.RACE, report.findings
    assert race.span.line == text.splitlines().index("    tma C[tile.m, tile.n] <- sc") + 1
    assert "which another block also stores" in race.message


ROW_MAX = """kernel row_max(X: f32[M, N], L: f32[M])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, tile.n]
    x: f32[BM, BN] = sx
    v: f32[BM] = rowmax(x)
    L[tile.m] = v
}
"""


def test_a_row_vector_stored_by_every_column_block_is_a_race():
    report = driver.simulate(SourceFile("rm.hk", ROW_MAX), None, {"M": 100, "N": 132},
                             seeds=2, search=0)
    assert report.findings and report.findings[0].category is Category.RACE, report.findings
    assert report.findings[0].span.line == 8
    assert "st.global of 'L'" in report.findings[0].message


def test_negative_a_row_vector_stored_by_one_block_per_row_checks_clean():
    text = ROW_MAX.replace("grid(m: M / BM, n: N / BN)", "grid(m: M / BM)") \
        .replace("X[tile.m, tile.n]", "X[tile.m, 0]")
    report = driver.simulate(SourceFile("rm.hk", text), None, {"M": 100, "N": 64},
                             seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


def test_negative_the_reduce_add_record_keeps_its_tensors():
    """A reduced tensor is recorded whether or not `stored` names it."""
    record = BlockAccesses({"C": np.zeros((2, 2), np.float32)}, {"C": DType.F32})
    record.box(0, "C", (0, 0), (2, 2), None, True, STORE, "stores")
    with pytest.raises(SimFailure):
        record.box(1, "C", (0, 0), (1, 1), None, False, STORE, "stores")
