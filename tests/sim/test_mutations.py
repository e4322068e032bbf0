"""Each classic synchronization bug, planted in a correctly lowered sample, is
caught with its category and at the statement it concerns."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from tests.sim import mutations as m

SAMPLES = Path(__file__).parents[2] / "samples"


@lru_cache(maxsize=None)
def compiled(sample: str) -> tuple[ir.Kernel, ir.Kernel]:
    front_end = driver.check(driver.read_source(SAMPLES / sample))
    return front_end, driver.lower(front_end)


def run(sample: str, mutate, seeds: int = 4, search: int = 0):
    front_end, lowered = compiled(sample)
    kernel = mutate(lowered)
    return simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), seeds, search)


# (sample, mutation, category, line of the statement reported, words in the message)
CASES = {
    "remove_proxy_fence": ("gemm_bf16.hk", m.remove_proxy_fence, Category.MISSING_FENCE, 28,
                           "no fence.proxy.async"),
    "remove_producer_proxy_fence": ("two_producers.hk", lambda k: m.remove_proxy_fence(
        k, role="load_x"), Category.MISSING_FENCE, 21, "generic proxy"),
    "share_full_barrier": ("two_producers.hk", m.share_full_barrier, Category.BARRIER_MISUSE,
                           21, "arrival overflow on load_x_add_full"),
    "drop_wait_before_release": ("gemm_bf16.hk", m.drop_wait_before_release, Category.RACE,
                                 34, "may still read"),
    "release_before_wgmma_completes": ("gemm_bf16.hk", m.release_before_wgmma_completes,
                                       Category.RACE, 34, "may still read"),
    "wrong_parity": ("gemm_bf16.hk", m.wrong_parity, Category.BARRIER_MISUSE, 25,
                     "parity misuse"),
    "expect_tx_too_small": ("gemm_bf16.hk", lambda k: m.wrong_expect_tx(k, -16384),
                            Category.BARRIER_MISUSE, 35, "more transaction bytes"),
    "expect_tx_too_large": ("gemm_bf16.hk", lambda k: m.wrong_expect_tx(k, 16),
                            Category.BARRIER_MISUSE, 25, "16 more transaction bytes"),
    # without the waits the first subtile's plane is rewritten under its store
    "drop_bulk_wait_read": ("gemm_bf16.hk", m.drop_bulk_wait, Category.RACE, 28,
                            "may still read"),
    "drop_exit_bulk_wait": ("gemm_relu.hk", m.drop_bulk_wait, Category.RACE, 25,
                            "block exits while TMA store"),
    "wrong_named_barrier_count": ("gemm_bf16.hk", m.wrong_named_barrier_count,
                                  Category.BARRIER_MISUSE, 28, "bar.sync 1, 128"),
    "extra_arrival": ("gemm_bf16.hk", m.extra_arrival, Category.BARRIER_MISUSE, 25,
                      "extra arrival"),
}


@pytest.mark.parametrize("name", CASES)
def test_mutation_is_caught(name):
    sample, mutate, category, line, words = CASES[name]
    report = run(sample, mutate)
    assert report.findings, f"{name} went unnoticed"
    first = report.findings[0]
    assert first.category is category, first.headline()
    assert first.span.line == line, first.headline()
    assert words in first.message, first.message


def test_stale_tile_is_a_wrong_result():
    """Loading k-tile 0 in every iteration is well synchronized but computes the
    wrong product: only the comparison with the reference can tell."""
    def first_k_tile(kernel):
        def fn(s):
            if isinstance(s, ir.AsyncLoad):
                return [replace(s, coords=(s.coords[0], ir.const(0)))]
            return None
        return m.edit(kernel, fn, limit=2)
    report = run("gemm_bf16.hk", first_k_tile, seeds=2)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 29  # the first store of C
    assert "C differs from the numpy reference" in report.findings[0].message


def test_wrong_result_names_the_store_that_wrote_the_element():
    """Y is written by two TMA stores (lines 10 and 12); only the second one's
    source is wrong, so the finding points at line 12, not at Y's first store."""
    path = Path(__file__).parent / "hazards" / "slice_write_beside_load.hk"
    front_end = driver.check(driver.read_source(path))
    lowered = driver.lower(front_end)

    def second_store_from_plane_0(s):
        if isinstance(s, ir.AsyncStore) and s.span.line == 12:
            return [replace(s, src=replace(s.src, part=replace(s.src.part, index=ir.const(0))))]
        return None
    kernel = m.edit(lowered, second_store_from_plane_0, limit=1)
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 2, 0)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 12


def test_per_warpgroup_store_issued_once_loses_rows():
    """gemm_relu stores each warpgroup's rows from that warpgroup's thread; issued
    by the role's one thread, warpgroup 1's rows of C are never written."""
    def issued_once(s):
        if isinstance(s, ir.OneThread) and s.per_warpgroup:
            return [replace(s, per_warpgroup=False)]
        return None
    report = run("gemm_relu.hk", lambda k: m.edit(k, issued_once, limit=1), seeds=2)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 25  # the store of C


def test_a_warpgroup_barrier_where_warpgroups_share_memory_races():
    """gemm_relu refills sa after both warpgroups' wgmma read it: a barrier per
    warpgroup lets warpgroup 0's thread load over rows warpgroup 1 still reads."""
    def per_warpgroup(s):
        if isinstance(s, ir.NamedBarrier) and s.id == 1:
            return [replace(s, id=2, threads=128, per_warpgroup=True)]
        return None
    report = run("gemm_relu.hk", lambda k: m.edit(k, per_warpgroup, limit=1), search=50)
    assert report.findings and report.findings[0].category is Category.RACE, \
        [f.headline() for f in report.findings]


def test_a_cross_warpgroup_write_is_fenced_before_the_barrier_that_hands_it_over():
    """Warpgroup 1 writes rows of sy[0] before a loop whose own barriers are each
    warpgroup's: the fence before the block barrier ahead of the loop is the one
    that counts (the loop's fence runs after that hand-off)."""
    from tests.passes.kernels import CROSS_WRITE_BEFORE_LOOP
    front_end = driver.check(SourceFile("cross.hk", CROSS_WRITE_BEFORE_LOOP))
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered))
    assert simulate(lowered, front_end, problem, 4, 100).ok

    def first_fence(s):
        return [] if isinstance(s, ir.ProxyFence) else None
    report = simulate(m.edit(lowered, first_fence), front_end, problem, 4, 100)
    assert report.findings and report.findings[0].category is Category.MISSING_FENCE


def test_exhaustive_search_alone_catches_a_race():
    report = run("gemm_bf16.hk", m.drop_wait_before_release, seeds=0, search=50)
    assert report.findings and report.findings[0].category is Category.RACE
    assert report.findings[0].schedule.startswith("exhaustive search")


def test_correct_kernel_has_no_findings_under_the_same_schedules():
    """The negative control for the cases above."""
    for sample in ("gemm_bf16.hk", "two_producers.hk"):
        assert run(sample, lambda k: k, seeds=4, search=50).ok


def test_subtile_from_the_wrong_columns_is_a_wrong_result():
    """The second subtile stored from columns 0:32 instead of 32:64: the elements
    land in Y's second 32-column block, and the store that wrote them is blamed."""
    path = Path(__file__).parent / "hazards" / "subtile_planes_per_warpgroup.hk"
    front_end = driver.check(driver.read_source(path))
    lowered = driver.lower(front_end)

    def first_columns(s):
        if isinstance(s, ir.SharedStore) and s.span.line == 15:
            return [replace(s, value=ir.Convert(s.value.dtype, ir.TileRef("acc", (0, 32))))]
        return None
    kernel = m.edit(lowered, first_columns, limit=1)
    assert kernel != lowered
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 2, 0)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 16  # the store of the second subtile


def test_bias_slice_of_the_wrong_subtile_is_a_wrong_result():
    """gemm_bias_relu's third subtile (the third copy of its epilogue's loop) adding
    the bias of columns 0:64 instead of 128:192: the store of that subtile (line 24)
    is blamed."""
    def first_bias(s):
        if isinstance(s, ir.SharedStore) and _rebias(s.value) != s.value:
            return [replace(s, value=_rebias(s.value))]
        return None
    report = run("gemm_bias_relu.hk", lambda k: m.edit(k, first_bias, limit=1), seeds=2)
    assert [f.category for f in report.findings] == [Category.WRONG_RESULT]
    assert report.findings[0].span.line == 24


def _rebias(value):
    """`value` with its shared bias read from elements 0:64."""
    match value:
        case ir.SharedRead(elements=(128, 192)):
            return replace(value, elements=(0, 64))
        case ir.Convert(operand=operand):
            return replace(value, operand=_rebias(operand))
        case ir.Elementwise(args=args):
            return replace(value, args=tuple(_rebias(a) for a in args))
    return value
