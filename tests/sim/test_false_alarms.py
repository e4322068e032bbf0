"""What the checker must not report: a named-barrier id whose generations are
met at one statement by warpgroups taking turns, and NaN where the reference
has NaN. Each with the finding that must stay (`negative_` the other way)."""
from __future__ import annotations

import numpy as np

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.sim.barriers import NamedBarrier
from hopperc.sim.explore import Report, _compare
from hopperc.sim.findings import Category

# Each warpgroup meets its own 128 threads at `bar.sync 1, 128` in its turn;
# the block barrier at the end of each turn orders the turns (and, after the
# issuer's plain wait, one turn's store of Y's box before the next one's).
TURNS = """\
kernel turns(Y: f32[M, N]) tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 256 manual
{
    shared sy: f32[2, BM, BN]
    for t in 0 .. 2 {
        if wg == t {
            sy[wg] = 1.0 + f32(t)
            fence.proxy.async
            bar.sync 1, 128
            if thread == 128 * t {
                tma Y[tile.m, tile.n] <- sy[wg]
                bulk.commit
                bulk.wait 0
            }
        }
        bar.sync 2, 256
    }
}
"""


def simulate(text: str, name: str):
    return driver.simulate(SourceFile(name, text), seeds=8, search=300)


def test_one_statement_met_in_turns_by_two_warpgroups_is_two_generations():
    report = simulate(TURNS, "turns.hk")
    assert report.ok, [f.headline() for f in report.findings]


def test_negative_turns_not_ordered_split_the_statement_over_generations():
    report = simulate(TURNS.replace("        bar.sync 2, 256\n", ""), "turns.hk")
    split = [f for f in report.findings if "split over two barrier generations" in f.message]
    assert split and split[0].category is Category.BARRIER_MISUSE and split[0].span.line == 8


def test_named_barrier_generation_ordered_after_the_last_one_is_its_own():
    bar = NamedBarrier(1)
    bar.arrive(0, 32, ("s", 0), {0: 1}, None)
    bar.arrive(1, 32, ("s", 0), {0: 1, 1: 4}, None)  # warp 1 saw warp 0's arrival
    assert bar.generation == 2


RSQRT = """\
kernel inv_sqrt(X: f32[M, N], Y: f32[M, N]) tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN)
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, tile.n]
    sx = rsqrt(sx)
    tma Y[tile.m, tile.n] <- sx
}
"""


def test_nan_where_the_reference_has_nan_is_equal():
    report = driver.simulate(SourceFile("inv_sqrt.hk", RSQRT), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.max_error["Y"] == 0.0


def compare(got: list[float], want: list[float]) -> Report:
    kernel = driver.lower(driver.check(SourceFile("inv_sqrt.hk", RSQRT)))
    report = Report(None)
    writers = {"Y": np.full((1, len(got)), None, dtype=object)}
    _compare(kernel, {"Y": np.array([got], np.float32)}, {"Y": np.array([want], np.float32)},
             writers, "seed 0", report)
    return report


def test_equal_infinities_and_nans_match():
    assert compare([np.nan, np.inf, -np.inf, 1.0], [np.nan, np.inf, -np.inf, 1.0]).ok


def test_negative_nan_where_the_reference_has_a_number_is_a_wrong_result():
    for got, want in (([np.nan], [0.5]), ([0.5], [np.nan]), ([np.inf], [-np.inf])):
        report = compare(got, want)
        assert [f.category for f in report.findings] == [Category.WRONG_RESULT], (got, want)
