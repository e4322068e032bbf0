"""The mutation engine makes the mutants it says it makes."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.printer import print_kernel
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category, Finding
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT
from tests.mutation.engine import mutants, verdict

TMA_COPY = ROOT / "samples" / "tma_copy.hk"
PIPE = ROOT / "tests" / "sim" / "manual" / "manual_pipe.hk"


def lowered(path) -> ir.Kernel:
    return driver.lower(driver.check(driver.read_source(path)))


def kinds(kernel: ir.Kernel) -> list[str]:
    return [type(s).__name__ for s in walk(kernel.body)]


def test_a_removal_takes_out_that_statement_and_nothing_else():
    kernel = lowered(TMA_COPY)
    (mutant,) = [m for m in mutants(kernel, "tma_copy.hk")
                 if m.id == "tma_copy.hk:-:10:remove:BulkWaitRead#1"]
    before, after = kinds(kernel), kinds(mutant.kernel)
    before.remove("BulkWaitRead")
    assert after == before


def test_each_operator_changes_what_it_names():
    kernel = lowered(PIPE)
    by_id = {m.id: m for m in mutants(kernel, "manual_pipe.hk")}
    text = print_kernel(by_id["manual_pipe.hk:math:20:parity:MBarrierWait#1"].kernel)
    assert "mbarrier.wait full[j % 2], parity 1 - (j % 4 >= 2)" in text
    text = print_kernel(by_id["manual_pipe.hk:math:14:count+1:MBarrierInit#1"].kernel)
    assert "mbarrier.init empty[0], 129" in text
    text = print_kernel(by_id["manual_pipe.hk:load:45:tx/2:MBarrierExpectTx#1"].kernel)
    assert "full[j % 2], 8192 // 2" in text
    text = print_kernel(by_id["manual_pipe.hk:math:29:threads-32:NamedBarrier#1"].kernel)
    assert text.count("bar.sync 1, 96") == 1 and text.count("bar.sync 1, 128") == 1
    # index1 of the load is its destination plane, index2 its barrier
    load = print_kernel(by_id["manual_pipe.hk:load:46:index2:AsyncLoad#1"].kernel)
    assert "ring[j % 2 of 2]" in load and "on full[(j % 2 + 1) % 2]" in load
    plane = print_kernel(by_id["manual_pipe.hk:load:46:index1:AsyncLoad#1"].kernel)
    assert "ring[(j % 2 + 1) % 2 of 2]" in plane and "on full[j % 2]" in plane


def test_ids_are_stable_and_unique():
    first = [m.id for m in mutants(lowered(PIPE), "manual_pipe.hk")]
    assert first == [m.id for m in mutants(lowered(PIPE), "manual_pipe.hk")]
    assert len(set(first)) == len(first)


def test_verdict_needs_the_category_and_a_line_of_the_mutated_statement():
    kernel = lowered(TMA_COPY)
    (mutant,) = [m for m in mutants(kernel, "tma_copy.hk")
                 if m.id == "tma_copy.hk:-:10:remove:BulkWaitRead#1"]
    span = next(s.span for s in walk(kernel.body) if isinstance(s, ir.AsyncStore))
    assert verdict(mutant, []) == "missed"
    assert verdict(mutant, [Finding(Category.RACE, "m", span)]) == "caught"
    assert verdict(mutant, [Finding(Category.DEADLOCK, "m", span)]) == "elsewhere"
    elsewhere = type(span)(span.file, 1, 1, 1, 2)
    assert verdict(mutant, [Finding(Category.RACE, "m", elsewhere)]) == "elsewhere"


@pytest.mark.parametrize("path, count", [
    (ROOT / "samples" / "gemm_multicast.hk", 3),
    (ROOT / "tests" / "sim" / "hazards" / "cluster_rows.hk", 2),
])
def test_narrowing_a_cluster_hand_off_to_cta_scope_is_caught(path, count):
    """Each remote release (.release.cluster) and the producer's wait on the
    multicast ring's empty barrier (.acquire.cluster), narrowed to .cta, is a
    race: the other block's release then orders nothing before the refill of
    its stage (PTX: a release and an acquire synchronize only when each one's
    scope holds the other's thread)."""
    kernel = lowered(path)
    front_end = driver.check(driver.read_source(path))
    scoped = [m for m in mutants(kernel, path.name) if m.operator == "scope-cta"]
    assert len(scoped) == count
    for mutant in scoped:
        report = simulate(mutant.kernel, front_end,
                          make_problem(mutant.kernel, default_dims(mutant.kernel)), 4, 100,
                          first_finding=True)
        assert verdict(mutant, report.findings) == "caught", (
            mutant.id, [f.headline() for f in report.findings])


def test_a_plain_bulk_wait_is_weakened_to_read_and_that_is_caught():
    """The plain wait before a reload of a stored box becomes wait_group.read:
    the simulator reports the load of global memory the store may still write."""
    path = ROOT / "tests" / "sim" / "hazards" / "residual_store_then_reload.hk"
    front_end = driver.check(driver.read_source(path))
    kernel = driver.lower(front_end)
    by_id = {m.id: m for m in mutants(kernel, path.name)}
    mutant = by_id["residual_store_then_reload.hk:-:15:read:BulkWaitRead#1"]
    text = print_kernel(mutant.kernel)
    assert "cp.async.bulk.wait_group 0" not in text and "wait_group.read 0" in text
    report = simulate(mutant.kernel, front_end, make_problem(kernel, default_dims(kernel)),
                      4, 100, first_finding=True)
    assert verdict(mutant, report.findings) == "caught", report.findings


def test_a_sync_of_a_split_loop_is_mutated_in_every_part():
    """The parts of a loop split at its boundary iterations copy the syncs the
    passes placed before the split: one mutant removes the wait from both."""
    from hopperc.diagnostics import SourceFile
    from tests.passes.test_split_boundary_iterations import KEY_BOUND
    kernel = driver.lower(driver.check(SourceFile("key_bound.hk", KEY_BOUND)))
    found = [m for m in mutants(kernel, "key_bound.hk") if m.operator == "remove"
             and "MBarrierWait" in m.id]
    assert [m.id for m in found] == ["key_bound.hk:-:8:remove:MBarrierWait#1"]
    assert kinds(kernel).count("MBarrierWait") == 2
    assert kinds(found[0].kernel).count("MBarrierWait") == 0
