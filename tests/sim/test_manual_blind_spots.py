"""Hardware rules the model once missed, each on a hand-synchronized kernel
(tests/sim/manual/): the correct kernel is clean and one edit that breaks the
rule is reported, with its category, at the line of the use that breaks it."""
from __future__ import annotations

from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.sim.findings import Category

MANUAL = Path(__file__).parent / "manual"


def edited(name: str, line: int, old: str, new: str | None) -> SourceFile:
    """The kernel with `old` on `line` (1-based) replaced (`new` None: the line
    deleted)."""
    lines = (MANUAL / name).read_text().splitlines()
    assert old in lines[line - 1], lines[line - 1]
    if new is None:
        del lines[line - 1]
    else:
        lines[line - 1] = lines[line - 1].replace(old, new)
    return SourceFile(name, "\n".join(lines) + "\n")


def findings(source: SourceFile, seeds: int = 4, search: int = 100):
    return driver.simulate(source, seeds=seeds, search=search).findings


@pytest.mark.parametrize("name", ["manual_pipe.hk", "single_thread_copy.hk", "barrier_ids.hk",
                                  "three_stage_ring.hk"])
def test_correct_kernel_is_clean(name):
    report = driver.simulate(driver.read_source(MANUAL / name), seeds=4, search=300)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference" and max(report.max_error.values()) == 0


# ---------------------------------------------------------------- a proxy fence is per thread
@pytest.mark.parametrize("fencers, unfenced", [
    ("lane == 0", "lanes 1-31 of the lanes 0-31 that wrote it"),  # one elected lane per warp
    ("thread == 0", "no fence.proxy.async"),  # lane 0 of warp 0 only
])
def test_elected_proxy_fence_does_not_cover_the_other_writers(fencers, unfenced):
    """All 128 threads write `out` (line 27); only some fence before the TMA
    store reads it (line 31)."""
    found = findings(edited("manual_pipe.hk", 28, "fence.proxy.async",
                            f"if {fencers} {{ fence.proxy.async }}"), search=0)
    first = found[0]
    assert first.category is Category.MISSING_FENCE, first.headline()
    assert (first.span.line, first.related.line) == (27, 31), first.headline()
    assert unfenced in first.message, first.message


# ---------------------------------------------------------------- fence.mbarrier_init
def test_missing_init_fence_before_a_tma_load_on_the_barrier():
    """The initializing thread issues the load itself: program order is not
    enough, the TMA unit completes bytes on a barrier it may not see."""
    found = findings(edited("single_thread_copy.hk", 11, "fence.mbarrier_init", None))
    first = found[0]
    assert first.category is Category.BARRIER_MISUSE, first.headline()
    assert (first.span.line, first.related.line) == (12, 10), first.headline()
    assert "no fence.mbarrier_init" in first.message and "async proxy" in first.message


def test_missing_init_fence_before_other_threads_wait():
    """Thread 0 initializes the ring's barriers; the block barrier after the
    inits orders them, but without the fence they are not visible to others."""
    found = findings(edited("manual_pipe.hk", 16, "fence.mbarrier_init", None))
    first = found[0]
    assert first.category is Category.BARRIER_MISUSE, first.headline()
    assert "no fence.mbarrier_init" in first.message and "another thread" in first.message
    # the first use by another thread: the consumer's or the loader's first wait
    assert first.span.line in (19, 42) and first.related.line in (11, 12, 13, 14)


# ---------------------------------------------------------------- named barrier ids
def test_one_id_with_two_counts_in_concurrent_roles_is_misuse_in_every_schedule():
    """Without barrier 2 between them, the helper's `bar.sync 1, 64` and the math
    role's `bar.sync 1, 128` may run at the same time. Whichever order the
    schedule picks (the helper's 64 threads may even complete their barrier
    alone first), the uses are concurrent: misuse."""
    text = (MANUAL / "barrier_ids.hk").read_text().replace("        bar.sync 2, 192\n", "")
    source = SourceFile("barrier_ids.hk", text)
    for seed_count in (1, 2, 4):
        first = findings(source, seeds=seed_count, search=0)[0]
        assert first.category is Category.BARRIER_MISUSE, first.headline()
        assert "128" in first.message and "64" in first.message
        assert {first.span.line, first.related.line} == {13, 23}, first.headline()


# ---------------------------------------------------------------- default shapes wrap every ring
@pytest.mark.parametrize("line, old, new, categories, lines", [
    # the consumer's parity is right for rounds 0 and 1 only: in round 2 it waits
    # with parity 1, which either passes at once (then reads while the refill may
    # still land: a race at the load) or, once round 2's phase completed, waits
    # for a phase that never comes (deadlock)
    (23, "j % 6 >= 3", "j >= 3", {Category.DEADLOCK, Category.RACE}, {23, 49}),
    # the producer's empty-barrier parity goes wrong on round 2 in the same way:
    # it refills stage 0 while the consumer may still read round 1's data
    (46, "1 - (j % 6 >= 3)", "1 - (j >= 3)", {Category.RACE}, {49}),
])
def test_default_shapes_reach_the_third_round_of_a_manual_ring(line, old, new, categories,
                                                               lines):
    """A three-stage ring written by hand (no compiler pipeline) runs 2 x 3 + 1
    iterations by default, so a bug that shows only when a stage is filled for
    the third time is found without --shape."""
    source = edited("three_stage_ring.hk", line, old, new)
    report = driver.simulate(source, seeds=4, search=0)
    assert -(-report.problem.dims["N"] // 64) == 7 and report.problem.dims["N"] % 64  # ragged
    first = report.findings[0]
    assert first.category in categories and first.span.line in lines, first.headline()
    old_shape = driver.simulate(source, shapes={"N": 3 * 64}, seeds=4, search=300)
    assert old_shape.ok, "three iterations never wrap the ring: the bug stays hidden"
