"""Two async writes of one global box in one block: bulk copies complete in any
order (only a plain cp.async.bulk.wait_group of the issuing thread completes
one, and a barrier hands that on to another thread), so the compiler waits
between them and the simulator finds the race where it does not
(tests/sim/hazards/add_then_store.hk, store_then_store.hk,
store_then_add_per_warpgroup.hk pass `check` in test_hazard_kernels.py)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.passes.insert_barriers import warpgroup_barrier
from hopperc.sim import memory
from hopperc.sim.findings import Category
from tests.sim import mutations as m
from tests.sim.test_hazard_kernels import HAZARDS, lowered, run


def _plain_wait(stmt: ir.Stmt) -> bool:
    return isinstance(stmt, ir.BulkWaitRead) and not stmt.read


@pytest.mark.parametrize("name, first, second", [
    ("add_then_store.hk", "TMA reduce-add from 'sa'", "TMA store from 'sb'"),
    ("store_then_store.hk", "TMA store from 'sa'", "TMA store from 'sb'"),
])
def test_second_write_of_a_box_before_the_first_completes_is_a_race(name, first, second):
    front_end, kernel = lowered(name)
    report = run(front_end, m.edit(kernel, m.remove(ir.BulkWaitRead, _plain_wait)))
    race = report.findings[0]
    assert race.category is Category.RACE, report.findings
    assert race.message.startswith(f"{second} (") and f"that {first} (" in race.message
    assert "complete in any order" in race.message


def test_negative_a_read_wait_does_not_complete_the_writes():
    """`.read` completes the store's reads of shared memory only: in place of the
    plain wait, the second store still races the first one's global writes."""
    front_end, kernel = lowered("add_then_store.hk")
    report = run(front_end, m.edit(kernel, lambda s: [replace(s, read=True)]
                                   if _plain_wait(s) else None))
    assert report.findings and report.findings[0].category is Category.RACE, report.findings
    assert "complete in any order" in report.findings[0].message


def test_another_warpgroups_write_needs_the_barrier_after_the_wait():
    """Each warpgroup's thread waits for its own store only: with the barrier of
    both warpgroups narrowed to each warpgroup's own, the other warpgroup's add
    meets a store its issuer has not seen complete."""
    front_end, kernel = lowered("store_then_add_per_warpgroup.hk")
    own = warpgroup_barrier(kernel, None)

    def narrowed(stmt):
        if isinstance(stmt, ir.NamedBarrier) and stmt.threads == 256 and stmt.id != 0:
            return [replace(stmt, id=own, threads=128, per_warpgroup=True)]
        return None

    report = run(front_end, m.edit(kernel, narrowed))
    race = report.findings[0]
    assert race.category is Category.RACE, report.findings
    assert race.span.line == 14 and "TMA store from 'sa part" in race.message


def test_bulk_writes_land_in_any_order(monkeypatch):
    """Without the race check and the wait, the two stores of one box land in
    either order across the seeded schedules: the first landing last leaves 1
    where the reference has 2, a wrong result (in-order completion would always
    agree with the reference)."""
    monkeypatch.setattr(memory.GlobalWrites, "write",
                        lambda self, write, clock: self.writes.setdefault(
                            write.tensor, []).append(write))
    front_end, kernel = lowered("store_then_store.hk")
    report = run(front_end, m.edit(kernel, m.remove(ir.BulkWaitRead, _plain_wait)), search=0)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT], report.findings


def test_negative_two_adds_of_one_box_need_no_wait():
    """Reduce-adds commute: with the store an add too, no plain wait is written,
    and `check` accepts the kernel."""
    text = (HAZARDS / "add_then_store.hk").read_text()
    both_add = text.replace("tma Y[2 * tile.m + 1, j] <- sb", "tma Y[2 * tile.m + 1, j] += sb")
    assert both_add != text
    source = SourceFile("add_then_add.hk", both_add)
    kernel = driver.lower(driver.check(source))
    assert not [s for s in walk(kernel.body) if _plain_wait(s)]
    report = driver.simulate(source, seeds=8, search=300)
    assert report.ok, [f.headline() for f in report.findings]
