"""The hardware models the simulator is built from, one rule per test."""
from __future__ import annotations

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.layout import shared_layout
from hopperc.sim.barriers import MBarrier, NamedBarrier
from hopperc.sim.findings import Category, SimFailure
from hopperc.sim.memory import Agents, ShadowMemory, Site
from hopperc.sim.views import Place, SharedSpace, alias_root, element_lanes

SITE = Site("test access", None)
ALL = 0xFFFFFFFF  # every lane of a warp


def category(fn) -> Category:
    with pytest.raises(SimFailure) as info:
        fn()
    return info.value.finding.category


# ---------------------------------------------------------------- mbarrier
def initialized(count: int, carries_bytes: bool = False) -> MBarrier:
    barrier = MBarrier("b[0]", carries_bytes)
    barrier.init(count, (0, 0), {0: 1}, None)  # by warp 0 lane 0
    return barrier


def test_phase_completes_after_count_arrivals_and_flips_parity():
    barrier = initialized(2)
    assert barrier.passes(1) and not barrier.passes(0)  # fresh: parity 1 passes
    barrier.arrive((0, 0), {0: 1}, None)
    assert not barrier.passes(0)
    barrier.arrive((1, 0), {1: 5}, None)
    assert barrier.phase == 1 and barrier.passes(0) and not barrier.passes(1)
    clock = {2: 1}
    barrier.acquire(clock, 0, None)
    assert clock == {0: 1, 1: 5, 2: 1}  # the waiter takes both arrivals' clocks


def test_transaction_bytes_hold_the_phase_until_they_land():
    barrier = initialized(1, carries_bytes=True)
    barrier.in_flight = 1
    barrier.expect_tx(64)
    barrier.arrive((0, 0), {0: 1}, None)
    assert barrier.phase == 0
    barrier.complete_tx(64, {9: 1}, None)
    assert barrier.phase == 1 and barrier.released == {0: 1, 9: 1}


def test_arrival_after_the_count_is_an_overflow():
    barrier = initialized(1)
    barrier.expect_tx(64)
    barrier.arrive((0, 0), {0: 1}, None)
    assert category(lambda: barrier.arrive((1, 0), {1: 1}, None)) is Category.BARRIER_MISUSE


def test_same_thread_arriving_twice_in_a_phase_is_an_extra_arrival():
    barrier = initialized(2)
    barrier.arrive((0, 0), {0: 1}, None)
    with pytest.raises(SimFailure, match="extra arrival"):
        barrier.arrive((0, 0), {0: 2}, None)


def test_parity_1_on_a_fresh_data_barrier_is_misuse_but_not_on_an_empty_barrier():
    data = initialized(1, carries_bytes=True)
    with pytest.raises(SimFailure, match="parity misuse"):
        data.acquire({}, 1, None)
    initialized(8).acquire({}, 1, None)  # the producer's first pass over empty barriers


def test_use_before_the_init_is_visible():
    barrier = initialized(1)
    barrier.init_fenced(0, (0,), 1)
    with pytest.raises(SimFailure, match="initialization is visible"):
        barrier.usable("mbarrier.wait", {1: 3}, None, (1, 0))  # warp 1 never synchronized
    barrier.usable("mbarrier.wait", {0: 1, 1: 3}, None, (1, 0))


def test_init_reaches_other_threads_and_the_async_proxy_only_through_its_fence():
    barrier = initialized(1)
    barrier.usable("mbarrier.arrive", {0: 1}, None, (0, 0))  # the initializing thread itself
    for thread in ((1, 0), (0, 5), None):  # another warp, another lane, a TMA load's bytes
        with pytest.raises(SimFailure, match="no fence.mbarrier_init"):
            barrier.usable("use", {0: 1, 1: 3}, None, thread)
    barrier.init_fenced(0, (3,), 2)  # lane 3 fencing does not publish lane 0's init
    assert barrier.init_fence is None
    barrier.init_fenced(0, (0, 1), 2)
    with pytest.raises(SimFailure, match="no fence.mbarrier_init"):
        barrier.usable("use", {0: 1, 1: 3}, None, (1, 0))  # ordered after the init only
    barrier.usable("use", {0: 2, 1: 3}, None, (1, 0))
    barrier.usable("TMA load", {0: 2}, None)
    barrier.inval(None, waiters=0)
    barrier.init(1, (0, 0), {0: 3}, None)  # a new init needs a new fence
    with pytest.raises(SimFailure, match="no fence.mbarrier_init"):
        barrier.usable("TMA load", {0: 3}, None)


def test_inval_with_a_half_done_phase():
    barrier = initialized(2)
    barrier.arrive((0, 0), {0: 1}, None)
    with pytest.raises(SimFailure, match="half done"):
        barrier.inval(None, waiters=0)


# ---------------------------------------------------------------- named barriers
def test_named_barrier_releases_at_its_thread_count_and_joins_clocks():
    bar = NamedBarrier(1)
    first = bar.arrive(0, 64, ("s", 0), {0: 3}, None)
    assert bar.generation == 0
    second = bar.arrive(1, 64, ("s", 0), {1: 7}, None)
    assert first is second and bar.generation == 1 and first.clock == {0: 3, 1: 7}


def test_warps_of_one_meeting_split_over_generations():
    bar = NamedBarrier(1)
    bar.arrive(0, 32, ("s", 0), {0: 1}, None)
    with pytest.raises(SimFailure, match="split over two barrier generations"):
        bar.arrive(1, 32, ("s", 0), {1: 1}, None)


def test_named_barrier_thread_counts_must_agree():
    bar = NamedBarrier(2)
    bar.arrive(0, 128, ("s", 0), {0: 1}, None)
    assert category(lambda: bar.arrive(1, 64, ("t", 0), {1: 1}, None)) is \
        Category.BARRIER_MISUSE


# ---------------------------------------------------------------- memory
def memory():
    agents = Agents()
    warp0, warp1 = agents.add("warp 0", True), agents.add("warp 1", True)
    tma = agents.add("TMA load", False)
    return ShadowMemory(8, agents), warp0, warp1, tma


def test_read_of_an_unordered_write_is_a_race():
    mem, w0, w1, _ = memory()
    chunks = np.arange(4)
    mem.write(w0, {w0: 2}, chunks, SITE)
    assert category(lambda: mem.read(w1, {w1: 1}, chunks, SITE)) is Category.RACE
    mem.read(w1, {w1: 1, w0: 2}, chunks, SITE)  # ordered by a barrier: fine


def test_async_read_of_generic_write_needs_the_writer_fence():
    mem, w0, _, tma = memory()
    chunks = np.arange(2)
    mem.write(w0, {w0: 2}, chunks, SITE)
    assert category(lambda: mem.read(tma, {w0: 2, tma: 1}, chunks, SITE)) is \
        Category.MISSING_FENCE
    mem.fence(w0, {w0: 2}, ALL)  # fence after the write (same clock), before the hand-off
    mem.read(tma, {w0: 3, tma: 1}, chunks, SITE)


def test_a_proxy_fence_covers_only_the_lanes_that_run_it():
    mem, w0, _, tma = memory()
    chunks = np.arange(2)
    mem.write(w0, {w0: 2}, chunks, SITE, np.array([0b0011, 0b1100], dtype=np.uint32))
    mem.fence(w0, {w0: 2}, 0b0001)  # one elected lane
    with pytest.raises(SimFailure, match="lanes 1-3 of the lanes 0-3 that wrote it"):
        mem.read(tma, {w0: 3, tma: 1}, chunks, SITE)
    mem.fence(w0, {w0: 3}, 0b1110)  # the other writers fence too: every write is covered
    mem.read(tma, {w0: 4, tma: 1}, chunks, SITE)


def test_async_write_over_generic_reads_needs_a_fence_between():
    mem, w0, w1, tma = memory()
    chunks = np.arange(2)
    mem.write(tma, {tma: 1}, chunks, SITE)
    mem.read(w0, {w0: 4, tma: 1}, chunks, SITE)
    load = mem.agents.add("TMA load 2", False)
    assert category(lambda: mem.write(load, {w0: 4, w1: 2, tma: 1, load: 1}, chunks, SITE)) is \
        Category.MISSING_FENCE
    mem.fence(w1, {w1: 2, w0: 4}, 1)  # the issuing thread fences after the hand-off
    mem.write(load, {w0: 4, w1: 2, tma: 1, load: 1}, chunks, SITE)


def test_a_readers_own_fence_before_its_release_orders_its_reads_before_the_refill():
    """The reading thread fences after its reads and then releases the stage (its
    clock reaches the producer through the release and wait): the TMA load that
    refills it needs no fence of the producer's (drop_implied_refill_fences)."""
    mem, w0, w1, tma = memory()
    chunks = np.arange(2)
    mem.write(tma, {tma: 1}, chunks, SITE)
    mem.read(w0, {w0: 4, tma: 1}, chunks, SITE)
    mem.fence(w0, {w0: 5, tma: 1}, ALL)  # the reader's fence, before its release
    load = mem.agents.add("TMA load 2", False)
    mem.write(load, {w0: 6, w1: 2, tma: 1, load: 1}, chunks, SITE)


def test_write_while_an_earlier_reader_may_still_read_is_a_race():
    mem, w0, w1, _ = memory()
    chunks = np.arange(3)
    mem.write(w0, {w0: 1}, chunks, SITE)
    mem.read(w1, {w1: 5, w0: 1}, chunks, SITE)
    with pytest.raises(SimFailure, match="may still read"):
        mem.write(w0, {w0: 2}, chunks, SITE)


# ---------------------------------------------------------------- layout
def test_wgmma_layout_ownership_matches_the_fragment_formula():
    """Slot k of lane l of warp w holds row 16w + l/4 + 8((k/2)%2), column
    8(k/4) + 2(l%4) + k%2 (the per_element loop of code generation)."""
    lanes = element_lanes((64, 32), 128, 1)
    for lane in range(32):
        for k in range(16):
            row = 16 + lane // 4 + 8 * ((k // 2) % 2)
            col = 8 * (k // 4) + 2 * (lane % 4) + k % 2
            assert lanes[row, col] == lane
    assert (lanes[:16] == -1).all() and (lanes[32:] == -1).all()


def test_row_major_ownership_spreads_consecutive_elements_over_lanes():
    lanes = element_lanes((4, 64), 64, 1)  # 256 elements over 2 warps
    assert lanes[0, 32] == 0 and lanes[0, 63] == 31 and lanes[0, 0] == -1
    assert (lanes >= 0).sum() == 128


def test_swizzled_chunks_of_a_reusing_buffer_overlap_its_target():
    a = ir.SharedBuffer("a", ir.DType.BF16, (64, 64), 2, ir.Swizzle.B128, None)
    c = ir.SharedBuffer("c", ir.DType.BF16, (64, 128), 1, ir.Swizzle.NONE, None, reuses="a")
    kernel = ir.Kernel("k", (), (), (), (), (1, 1, 1), 128, (), (a, c), (), ir.Block(), None)
    space = SharedSpace(kernel)
    assert shared_layout((a, c), 0)[0] == {"a": 0, "c": 0}
    stage1 = set(space.region(Place("a", 1, None, 1, False)).tolist())
    assert stage1 == set(range(512, 1024))  # 8 KB per stage, 16-byte chunks
    row0 = space.index(Place("a", 0, None, 1, False))[1][1]  # row 1: swizzled by 1
    assert row0[:8].tolist() == [9] * 8 and row0[8:16].tolist() == [8] * 8
    assert set(space.region(Place("c", 0, None, 1, False)).tolist()) == set(range(1024))


def test_a_reusing_buffer_of_the_same_dtype_reads_its_targets_data():
    """`kc: bf16[2, 64, 64] swizzle 128B reuses k` of a `bf16[64, 128]` k: plane p
    is k's column block p (the same addresses), so what k holds kc reads, and what
    kc writes k reads, as in shared memory. Another dtype keeps its own data (the
    model does not reinterpret bytes)."""
    k = ir.SharedBuffer("k", ir.DType.BF16, (64, 128), 1, ir.Swizzle.B128, None)
    kc = ir.SharedBuffer("kc", ir.DType.BF16, (2, 64, 64), 1, ir.Swizzle.B128, None,
                         reuses="k")
    kf = ir.SharedBuffer("kf", ir.DType.F32, (64, 64), 1, ir.Swizzle.NONE, None, reuses="k")
    kernel = ir.Kernel("k", (), (), (), (), (1, 1, 1), 128, (), (k, kc, kf), (), ir.Block(),
                       None)
    space = SharedSpace(kernel)
    values = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    space.write(Place("k", 0, None, 1, False), values)
    for plane in range(2):
        got = space.read(Place("kc", 0, plane, 2, False))
        assert np.array_equal(got, values[:, 64 * plane:64 * plane + 64])
    assert np.array_equal(space.read(Place("kc", 0, 1, 2, True)), values[:, 64:].T)
    space.write(Place("kc", 0, 0, 2, False), np.full((64, 64), -1.0, np.float32))
    assert (space.read(Place("k", 0, None, 1, False))[:, :64] == -1).all()
    assert (space.read(Place("kf", 0, None, 1, False)) == 0).all()


def test_buffers_of_one_dtype_share_data_whatever_the_reused_buffers_dtype():
    """Two bf16 buffers reusing an f32 one are two names for the same bf16 values:
    the larger holds the data (the smaller lies within it); the f32 one keeps its own."""
    a = ir.SharedBuffer("a", ir.DType.F32, (64, 64), 1, ir.Swizzle.NONE, None)
    b = ir.SharedBuffer("b", ir.DType.BF16, (64, 64), 1, ir.Swizzle.NONE, None, reuses="a")
    c = ir.SharedBuffer("c", ir.DType.BF16, (64, 128), 1, ir.Swizzle.NONE, None, reuses="a")
    kernel = ir.Kernel("k", (), (), (), (), (1, 1, 1), 128, (), (a, b, c), (), ir.Block(), None)
    assert [alias_root(kernel, n) for n in "abc"] == [None, c, None]
    space = SharedSpace(kernel)
    values = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    space.write(Place("b", 0, None, 1, False), values)
    assert np.array_equal(space.read(Place("c", 0, None, 1, False))[:32], values.reshape(32, 128))
    space.write(Place("c", 0, None, 1, False), np.full((64, 128), 3.0, np.float32))
    assert (space.read(Place("b", 0, None, 1, False)) == 3).all()
    assert (space.read(Place("a", 0, None, 1, False)) == 0).all()


def test_a_read_through_another_dtype_than_the_last_write_is_a_finding():
    memory = ShadowMemory(4, Agents())
    agent = memory.agents.add("warp 0", True)
    clock = {agent: 1}
    bf16 = Site("st.shared of 'sc'", None)
    memory.write(agent, clock, np.array([0, 1, 2, 3]), bf16, dtype=ir.DType.BF16)
    memory.write(agent, clock, np.array([0, 1]), SITE, dtype=ir.DType.F32)
    memory.read(agent, clock, np.array([0, 1]), SITE, ir.DType.F32)  # rewritten as f32
    with pytest.raises(SimFailure) as info:
        memory.read(agent, clock, np.array([1, 2]), SITE, ir.DType.F32)
    assert info.value.finding.category is Category.WRONG_RESULT
    assert "reads as f32 the bytes written as bf16 by st.shared of 'sc'" in \
        info.value.finding.message
    memory.read(agent, clock, np.array([2, 3]), SITE, ir.DType.BF16)


# sc and sb are bf16 names of sa's bytes: sc reads what the TMA load wrote through sb.
SIBLINGS = """kernel siblings(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sa: f32[BM, BN]
    shared sb: bf16[BM, BN] reuses sa
    shared sc: bf16[BM, BN] reuses sa
    shared sy: bf16[BM, BN]
    tma sb <- X[tile.m, 0]
    sy = bf16(f32(sc) * 2.0)
    tma Y[tile.m, 0] <- sy
}
"""

# sa (f32) is read back after sc (bf16, over the same bytes) was written.
REINTERPRETED = """kernel reinterpreted(X: f32[M, N], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sa: f32[BM, BN]
    shared sb: f32[BM, BN]
    shared sc: bf16[BM, BN] reuses sa
    tma sa <- X[tile.m, 0]
    t: f32[BM, BN] = sa * 2.0
    sc = bf16(t)
    sb = sa
    tma Y[tile.m, 0] <- sb
}
"""


def test_a_sibling_reads_what_another_sibling_of_its_dtype_wrote():
    x = (np.arange(70 * 64).reshape(70, 64) % 7 + 1).astype(np.float32)
    out = hopperc.simulate(SourceFile("siblings.hk", SIBLINGS), {"X": x})
    np.testing.assert_array_equal(out["Y"].astype(np.float32), 2 * x)
    report = driver.simulate(SourceFile("siblings.hk", SIBLINGS), seeds=2, search=20)
    assert report.ok, [f.headline() for f in report.findings]


def test_negative_check_finds_bytes_read_through_another_dtype_than_written():
    report = driver.simulate(SourceFile("reinterpreted.hk", REINTERPRETED), seeds=2, search=20)
    (finding,) = report.findings
    assert finding.category is Category.WRONG_RESULT
    assert (finding.span.line, finding.related.line) == (10, 9)
    assert "reads as f32 the bytes written as bf16" in finding.message
