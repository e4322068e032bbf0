"""Kernels built around one synchronization hazard each (tests/sim/hazards/):
the compiler's synchronization passes the simulator, and taking out the sync
that guards the hazard is caught."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.sim import mutations as m

HAZARDS = Path(__file__).parent / "hazards"
KERNELS = sorted(HAZARDS.glob("*.hk"))


def lowered(name: str) -> tuple[ir.Kernel, ir.Kernel]:
    front_end = driver.check(driver.read_source(HAZARDS / name))
    return front_end, driver.lower(front_end)


def run(front_end: ir.Kernel, kernel: ir.Kernel, seeds: int = 8, search: int = 300):
    return simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), seeds, search)


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_hazard_kernel_passes_check(path):
    report = driver.simulate(driver.read_source(path), seeds=8, search=300)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
    assert report.reference == "numpy reference"


def _phase_barrier(stmt: ir.Stmt) -> bool:
    return isinstance(stmt, ir.NamedBarrier) and stmt.reason is not None \
        and stmt.reason.subject.startswith("mbarrier ")


def test_rearm_before_every_waiter_passed_is_a_deadlock():
    """Without the barrier between the waits of one phase and the next arm, a
    slow thread still waits on the old parity after the barrier moved past it."""
    front_end, kernel = lowered("store_then_reload.hk")
    broken = m.edit(kernel, m.remove(ir.NamedBarrier, _phase_barrier))
    report = run(front_end, broken)
    assert any(f.category is Category.DEADLOCK for f in report.findings), report.findings


def test_every_thread_waiting_on_an_issuer_only_phase_is_a_deadlock():
    """The hang the issuer-only wait avoids: every thread waits in a copy loop."""
    front_end, kernel = lowered("copy_loop.hk")

    def everyone_waits(stmt):
        """one_thread { for { arm, load, wait, flip, store } } becomes
        for { one_thread { arm, load }, wait, flip, one_thread { store } }."""
        if not (isinstance(stmt, ir.OneThread) and isinstance(stmt.body.stmts[0], ir.ForLoop)):
            return None
        loop = stmt.body.stmts[0]
        inner = loop.body.stmts
        at = next(i for i, s in enumerate(inner) if isinstance(s, ir.MBarrierWait))
        body = (ir.OneThread(ir.Block(inner[:at]), stmt.span), *inner[at:at + 2],
                ir.OneThread(ir.Block(inner[at + 2:]), stmt.span))
        return [ir.ForLoop(loop.var, loop.start, loop.stop, ir.Block(body), loop.span)]

    broken = m.edit(kernel, everyone_waits)
    report = run(front_end, broken, seeds=16, search=1000)
    assert any(f.category is Category.DEADLOCK for f in report.findings), report.findings


@pytest.mark.parametrize("name, remove", [
    ("manual_write_then_store.hk", ir.ProxyFence),
    ("store_then_manual_write.hk", ir.BulkWaitRead),
    ("store_from_reused_memory.hk", ir.BulkWaitRead),
])
def test_removing_the_first_inserted_sync_is_caught(name, remove):
    """The syncs the compiler writes around a manual block, and before a write
    through another name of memory a store still reads, are needed."""
    front_end, kernel = lowered(name)
    broken = m.edit(kernel, m.remove(remove, lambda s: s.reason is not None))
    assert not run(front_end, broken).ok


def test_waiting_for_too_few_store_groups_is_a_race():
    """double_buffered_stores rewrites sa after `wait_group.read 1`; with 2 the
    older store from sa may still be reading while the threads overwrite it."""
    front_end, kernel = lowered("double_buffered_stores.hk")

    def shallow(stmt: ir.Stmt):
        if isinstance(stmt, ir.BulkWaitRead) and stmt.pending == 1:
            return [ir.BulkWaitRead(2, stmt.span, stmt.reason, stmt.views)]
        return None

    broken = m.edit(kernel, shallow)
    report = run(front_end, broken)
    assert any(f.category is Category.RACE for f in report.findings), report.findings


@pytest.mark.parametrize("name, subject", [
    ("transposed_rewrite_loop.hk", "sx"),  # (r, c) read by the thread holding (c, r)
    ("row_vector_of_shared.hk", "sv"),  # a row vector's rows on other threads
    ("matrix_rewrite_loop.hk", "sx"),  # the transposed read before the stmatrix rewrites
])
def test_element_wise_accesses_of_other_threads_race_without_their_barrier(name, subject):
    """Where the elements change threads between two accesses, each barrier
    between them is needed: without any one, a race."""
    front_end, kernel = lowered(name)
    ours = [s for s in walk(kernel.body) if isinstance(s, ir.NamedBarrier)
            and s.reason is not None and s.reason.subject == subject
            and "TMA" not in s.reason.before + s.reason.after]
    assert ours
    for barrier in ours:
        broken = m.edit(kernel, m.remove(ir.NamedBarrier, lambda s: s is barrier))
        report = run(front_end, broken, seeds=4, search=100)
        assert any(f.category is Category.RACE for f in report.findings), report.findings


def test_releasing_a_vector_ring_stage_before_its_broadcast_read_is_a_race():
    """vector_ring reads its 1-D stage (ss[:, None]) after the product's wait: a
    release ahead of that read lets the refill overwrite values still to be read."""
    front_end, kernel = lowered("vector_ring.hk")

    def early_release(stmt: ir.Stmt):
        if not isinstance(stmt, ir.ForLoop):
            return None
        body = list(stmt.body.stmts)
        at = next((i for i, s in enumerate(body) if isinstance(s, ir.StageRelease)), None)
        if at is None:
            return None
        body[at - 1], body[at] = body[at], body[at - 1]
        return [replace(stmt, body=ir.Block(tuple(body)))]

    report = run(front_end, m.edit(kernel, early_release))
    assert any(f.category is Category.RACE and "into 'ss stage" in f.message
               for f in report.findings), report.findings


def _plain_wait_as_read(stmt: ir.Stmt):
    """Today's lowering before the rule: wait_group.read where the stores' global
    writes must be complete."""
    if isinstance(stmt, ir.BulkWaitRead) and not stmt.read:
        return [replace(stmt, read=True)]
    return None


@pytest.mark.parametrize("name", ["residual_store_then_reload.hk",
                                  "store_then_global_vector.hk"])
def test_reading_what_a_store_may_still_write_is_a_race(name):
    """A TMA load or ld.global of the box a TMA store wrote, after only
    wait_group.read: the store's global writes may not have landed."""
    front_end, kernel = lowered(name)
    assert any(isinstance(s, ir.BulkWaitRead) and not s.read for s in walk(kernel.body))
    report = run(front_end, m.edit(kernel, _plain_wait_as_read))
    assert any(f.category is Category.RACE and "global memory" in f.message
               for f in report.findings), report.findings


def test_ld_global_without_the_hand_off_of_the_plain_wait_is_a_race():
    """The issuing thread's plain wait completes the writes for it alone."""
    front_end, kernel = lowered("store_then_global_vector.hk")
    broken = m.edit(kernel, m.remove(ir.NamedBarrier, lambda s: s.reason is not None
                                      and s.reason.subject == "global S"))
    report = run(front_end, broken)
    assert any(f.category is Category.RACE and "ld.global" in f.message
               for f in report.findings), report.findings


def test_a_loop_variable_plane_waiting_for_too_few_stores_is_a_race():
    """planes_by_loop_variable rewrites sd[j] after `wait_group.read 1`; with 2
    the store of sd[j] two stores ago may still be reading it."""
    front_end, kernel = lowered("planes_by_loop_variable.hk")

    def shallow(stmt: ir.Stmt):
        if isinstance(stmt, ir.BulkWaitRead) and stmt.pending == 1:
            return [replace(stmt, pending=2)]
        return None

    report = run(front_end, m.edit(kernel, shallow))
    assert any(f.category is Category.RACE for f in report.findings), report.findings


def _consumer_loop_from(start: int):
    """The consumer's key loop (`for j in 1 .. L / BN`) starting at `start`."""
    def fn(stmt: ir.Stmt):
        if isinstance(stmt, ir.ForLoop) and stmt.start == ir.const(1):
            return [replace(stmt, start=ir.const(start))]
        return None
    return fn


def test_a_ring_read_once_more_than_it_is_filled_is_a_deadlock():
    """ring_read_sites reads K and V 1 + (L / 64 - 1) times each, once per fill;
    from j = 0 its loop reads each once more, and that read waits for a fill
    the producer never makes."""
    front_end, kernel = lowered("ring_read_sites.hk")
    report = run(front_end, m.edit(kernel, _consumer_loop_from(0)))
    assert any(f.category is Category.DEADLOCK for f in report.findings), report.findings


def test_a_read_site_that_does_not_step_the_ring_reads_a_stale_fill():
    """Without the step after the read before the loop, the loop's first read
    takes K's stage 0 again: the fill the first read took (its phase already
    complete, so nothing waits), or the producer's refill of it."""
    front_end, kernel = lowered("ring_read_sites.hk")
    prologue = next(s for s in walk(kernel.body) if isinstance(s, ir.StageAdvance)
                    and s.span.line == 14)
    report = run(front_end, m.edit(kernel, m.remove(ir.StageAdvance, lambda s: s == prologue)))
    assert any(f.category is Category.RACE and "sk stage" in f.message
               for f in report.findings), report.findings


def test_a_ring_read_once_less_than_it_is_filled_is_caught():
    """From j = 2 the loop reads each ring once less than it is filled, and its
    first iteration, which takes V's first fill, releases the previous read's
    stage as if an earlier read of V had taken one: the producer refills the
    stage that product still reads, and the counts drift into a deadlock."""
    front_end, kernel = lowered("ring_read_sites.hk")
    report = run(front_end, m.edit(kernel, _consumer_loop_from(2)))
    assert any(f.category is Category.RACE and "sv stage" in f.message
               for f in report.findings), report.findings
