"""The simulator's fast paths compute what the plain model computes: compiled
scalars, shared reads by slice, and runs without data (the exhaustive search)
that make every access check a run with data makes."""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.sim.barriers import MBarrier
from hopperc.sim.explore import program
from hopperc.sim.findings import Category, SimFailure
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.schedule import MODES, Chooser, run_block
from hopperc.sim.scalars import compile_scalar, scalar
from hopperc.sim.views import Place, SharedSpace
from tests.sim import mutations as m
from tests.sim.test_manual_kernels import variant
from tests.sim.test_mutations import compiled

K = ir.ScalarKind


def leaf(kind: ir.ScalarKind, name: str = "", value: int = 0) -> ir.Scalar:
    return ir.Scalar(kind, name, value)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "==", "!=", "<", "<=", ">",
                                ">=", "and", "or"])
def test_compiled_scalar_agrees_with_the_tree_walk(op):
    env = {"K": 576, "tile.m": 3, "@lane": 5, "@thread": 37, "k": 7, "phase": 1}
    operands = [leaf(K.CONST, value=-5), leaf(K.CONST, value=4), leaf(K.DIM, "K"),
                leaf(K.TILE, "m"), leaf(K.BUILTIN, "lane"), leaf(K.BUILTIN, "thread"),
                leaf(K.LOOP, "k"), leaf(K.CARRIED, "phase")]
    for left in operands:
        for right in operands:
            if op in ("/", "//", "%") and scalar(right, env) == 0:
                continue
            for expr in (ir.ScalarOp(op, left, right), ir.ScalarOp(op, ir.ScalarOp("not", left),
                                                                  right)):
                assert compile_scalar(expr)(env) == scalar(expr, env), expr


def test_shared_read_by_slice_matches_the_element_map():
    kernel = compiled("gemm_bf16.hk")[1]  # sa: 4 stages of 128 x 64, 128B swizzle
    space = SharedSpace(kernel)
    space.data["sa"][...] = np.arange(space.data["sa"].size).reshape(space.data["sa"].shape)
    for stage in range(4):
        for part, parts in ((None, 1), (1, 2), (3, 4)):
            for transposed in (False, True):
                place = Place("sa", stage, part, parts, transposed)
                flat, _ = space.index(place)
                assert np.array_equal(space.read(place),
                                      space.data["sa"].reshape(-1)[flat]), place


def findings_with_and_without_data(front_end, lowered, seeds=range(8)):
    """For each seeded schedule of block 0: the finding with data, and without."""
    prog = program(lowered)
    problem = make_problem(lowered, default_dims(lowered))
    pairs = []
    for seed in seeds:
        found = []
        for tensors in (problem.fresh_tensors(), None):
            try:
                run_block(prog, problem.env(problem.grid[0]), tensors,
                          Chooser(MODES[seed % len(MODES)], seed), 0)
                found.append(None)
            except SimFailure as failure:
                finding = failure.finding
                found.append((finding.category, finding.span, finding.related, finding.message,
                              failure.trace))
        pairs.append(found)
    return pairs


@pytest.mark.parametrize("bug, category", [
    # a wgmma operand read (run_product) racing the producer's refill
    ("drop_wait_before_release", Category.RACE),
    # an ld.shared in element-wise code before the load's phase completes
    ("manual: no wait before the read", Category.RACE),
    # a st.shared while the previous TMA store may still read
    ("manual: no bulk wait", Category.RACE),
])
def test_a_run_without_data_reports_what_a_run_with_data_reports(bug, category):
    if bug == "drop_wait_before_release":
        front_end, lowered = compiled("gemm_bf16.hk")
        lowered = m.drop_wait_before_release(lowered)
    else:
        line, old = (20, "mbarrier.wait full[j % 2], j % 4 >= 2") if "read" in bug else \
            (24, "bulk.wait_read 0")
        front_end = driver.check(variant(line, old, ""))
        lowered = driver.lower(front_end)
    pairs = findings_with_and_without_data(front_end, lowered)
    assert any(with_data is not None and with_data[0] is category for with_data, _ in pairs)
    for with_data, without in pairs:
        assert with_data == without


def test_a_correct_kernel_runs_clean_with_and_without_data():
    front_end, lowered = compiled("gemm_bf16.hk")
    assert findings_with_and_without_data(front_end, lowered, range(4)) == [[None, None]] * 4


def _ready_barrier(count: int, fenced: bool = True) -> MBarrier:
    barrier = MBarrier("full[0]", carries_bytes=False)
    barrier.init(count, (0, 0), {0: 1}, None)
    if fenced:
        barrier.init_fenced(0, (0,), 2)
    return barrier


def _lane_by_lane(barrier: MBarrier, lanes, clock: dict, trace: deque) -> None:
    for lane in lanes:
        barrier.usable("mbarrier.arrive", clock, None, (1, lane))
        trace.append("arrives")
        barrier.arrive(("warp 1", lane), clock, None)
        clock[1] += 1


@pytest.mark.parametrize("count", [64, 32])  # the phase goes on / completes at the last lane
def test_a_warps_arrivals_in_one_call_are_its_lanes_arrivals(count):
    lanes = tuple(range(32))
    one, each = _ready_barrier(count), _ready_barrier(count)
    one_clock, each_clock = {0: 3, 1: 5, 7: 1}, {0: 3, 1: 5, 7: 1}
    one_trace, each_trace = deque(maxlen=14), deque(maxlen=14)
    assert one.arrive_warp("warp 1", 1, lanes, one_clock, None, one_trace, "arrives")
    _lane_by_lane(each, lanes, each_clock, each_trace)
    assert one_clock == each_clock and one_trace == each_trace
    assert vars(one) == vars(each)


@pytest.mark.parametrize("count, fenced, arrived", [
    (16, True, ()),  # overflow at lane 16: the phase waits only for its bytes
    (64, True, (5,)),  # lane 5 arrives twice in the phase
    (64, False, ()),  # no fence.mbarrier_init: the init is not visible to lane 0
])
def test_a_warps_arrivals_that_fail_at_some_lane_are_left_to_the_lanes(count, fenced, arrived):
    barrier = _ready_barrier(count, fenced)
    barrier.expect_tx(64)
    for lane in arrived:
        barrier.arrive(("warp 1", lane), {0: 3, 1: 1}, None)
    before, clock, trace = dict(vars(barrier)), {0: 3, 1: 5}, deque(maxlen=14)
    assert not barrier.arrive_warp("warp 1", 1, tuple(range(32)), clock, None, trace, "x")
    assert vars(barrier) == before and clock == {0: 3, 1: 5} and not trace
    with pytest.raises(SimFailure) as failure:
        _lane_by_lane(barrier, range(32), clock, trace)
    assert failure.value.finding.category is Category.BARRIER_MISUSE


def test_search_keeps_its_pending_schedules_linear_in_a_runs_length():
    """A run with n choice points leaves O(n) pending schedules; each is a
    node naming its run's node and one choice, so long runs (gemm_bf16 over
    48 k-steps: thousands of choice points each) cost megabytes, not the
    gigabytes that a copied prefix per pending schedule (or per run) took."""
    import tracemalloc

    from hopperc.sim.explore import Report, _search
    from tests.conftest import ROOT
    lowered = driver.lower(driver.check(driver.read_source(ROOT / "samples" / "gemm_bf16.hk")))
    problem = make_problem(lowered, {**default_dims(lowered), "K": 64 * 48})
    report = Report(problem)
    tracemalloc.start()
    try:
        _search(program(lowered), problem, 20, report)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok and report.exhaustive == 20
    assert peak < 64 << 20, peak
