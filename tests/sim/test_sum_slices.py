"""samples/sum_slices.hk, a "last block finishes" reduction through a counter
(`n: i32 = signal F[i]`, ir.Count): float64 numpy on ragged shapes whichever
block arrives last, `check` clean with the blocks interleaved, the syncs
order_semaphores writes around the counter (each taken out or weakened is a
finding at the counter or at the last block's reads), and the SASS."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.codegen.semaphores import COUNT_SLOT_BYTES
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.sim.explore import simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import make_problem
from tests.conftest import ROOT
from tests.sim.mutations import edit, remove

SAMPLE = ROOT / "samples" / "sum_slices.hk"
COUNT, LAST_READ = 28, 32
SHAPES = {"P": 5, "M": 100, "N": 72, "PARTS": 3, "TM": 2, "TN": 2}


@pytest.mark.parametrize("p, m, n, parts", [(5, 100, 72, 3), (7, 70, 132, 2)])
def test_matches_float64_numpy_on_ragged_shapes(p, m, n, parts):
    x = np.random.default_rng(p).standard_normal((p, m, n)).astype(np.float32)
    tm, tn = -(-m // 64), -(-n // 64)
    out = hopperc.simulate(driver.read_source(SAMPLE), {"X": x},
                           shapes={"PARTS": parts, "TM": tm, "TN": tn}, schedules=3)
    want = x.astype(np.float64).sum(0)
    assert np.all(np.abs(out["Y"] - want) <= p * 2 ** -23 * np.abs(x).sum(0))
    np.testing.assert_array_equal(out["F"], np.full((tm, tn), parts))


def _lowered() -> ir.Kernel:
    return driver.lower(driver.check(driver.read_source(SAMPLE)))


def _findings(kernel: ir.Kernel, seeds: int = 6):
    problem = make_problem(kernel, SHAPES)
    return simulate(kernel, driver.check(driver.read_source(SAMPLE)), problem, seeds,
                    100).findings


def test_check_is_clean_on_a_ragged_shape_with_blocks_interleaved():
    report = driver.simulate(driver.read_source(SAMPLE), shapes=SHAPES, seeds=4, search=60)
    assert report.ok, [f.headline() for f in report.findings]
    assert len(report.problem.grid) == 12 and report.reference == "numpy reference"


def test_the_pass_makes_the_counter_acq_rel_fenced_and_broadcast():
    stmts = [s for s in _walk(_lowered().body)]
    count = next(i for i, s in enumerate(stmts) if isinstance(s, ir.Count))
    assert stmts[count].acquire
    after = [type(s) for s in stmts[count + 1:count + 4]]
    assert after == [ir.GlobalProxyFence, ir.NamedBarrier, ir.CountRead]
    before = [type(s) for s in stmts[count - 4:count]]
    assert before == [ir.OneThread, ir.BulkWaitRead, ir.NamedBarrier, ir.OneThread]


def _walk(block: ir.Block):
    for s in block.stmts:
        yield s
        for field in ("body", "then", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, ir.Block):
                yield from _walk(inner)


def test_negative_a_release_only_counter_leaves_the_partials_unordered():
    weak = edit(_lowered(), lambda s: [replace(s, acquire=False)]
                if isinstance(s, ir.Count) else None)
    (finding, *_) = _findings(weak)
    assert finding.category in (Category.RACE, Category.MISSING_FENCE)
    assert LAST_READ in {finding.span.line, getattr(finding.related, "line", None)}


def test_negative_no_proxy_fence_after_the_counter_is_a_missing_fence():
    (finding, *_) = _findings(edit(_lowered(), remove(ir.GlobalProxyFence)))
    assert finding.category is Category.MISSING_FENCE and finding.span.line == LAST_READ


def test_negative_no_barrier_before_the_slot_read_is_a_race_at_the_counter():
    lowered = _lowered()
    stmts = list(_walk(lowered.body))
    count = next(i for i, s in enumerate(stmts) if isinstance(s, ir.Count))
    barrier = stmts[count + 2]
    (finding, *_) = _findings(edit(lowered, lambda s: [] if s is barrier else None))
    assert finding.category is Category.RACE and finding.span.line == COUNT
    assert "shared-memory slot" in finding.message


def test_negative_no_completion_of_the_partial_store_is_a_race():
    lowered = edit(_lowered(), remove(ir.BulkWaitRead, lambda s: not s.read
                                      and s.span.line == COUNT))
    (finding, *_) = _findings(lowered)
    assert finding.category in (Category.RACE, Category.WRONG_RESULT)


def test_sass_has_the_acq_rel_atom_and_the_proxy_fence():
    built = driver.build(driver.read_source(SAMPLE))
    assert "atom.acq_rel.gpu.global.add.s32" in built.result.ptx
    assert "fence.proxy.async.global" in built.result.ptx
    (code,) = sm.functions(built.result.cubin).values()
    opcodes = [i.opcode for i in code]
    atom = opcodes.index(next(op for op in opcodes if op.startswith("ATOMG.E.ADD.S32.STRONG.GPU")))
    assert "MEMBAR.ALL.GPU" in opcodes[atom - 4:atom]  # the release
    assert "CCTL.IVALL" in opcodes[atom + 1:atom + 3]  # the acquire: L1 invalidated
    assert any(op.startswith("FENCE.VIEW.ASYNC.G") for op in opcodes[atom:atom + 6])
    assert built.result.resources.spill_stores == 0
    assert built.result.resources.shared_bytes == COUNT_SLOT_BYTES  # the slot, static


@pytest.mark.parametrize("line, message", [
    ("x: f32 = signal F[0]", "a counter's value is i32, not f32"),
    ("x: i32 = signal Y[0, 0]", "flags are i32 elements"),
    ("x: i32 = signal F[lane]", "differs between the block's threads"),
    ("manual { x: i32 = signal F[0] }", "'signal' is automatic code"),
])
def test_negative_bad_counters_are_refused_at_their_line(line, message):
    source = f"""kernel k(Y: f32[M, 64], F: i32[T])
    tile(BM = 64) grid(m: M / BM) threads 128
{{
    {line}
}}
"""
    with pytest.raises(CompileError) as error:
        driver.check(SourceFile("k.hk", source))
    assert message in str(error.value) and error.value.span.line == 4


# The block that counts last stores its own tile: which one that is depends on
# the schedule, so in some schedule it is not the reference's (grid order).
WHO_IS_LAST = """kernel who(X: f32[M, N], F: i32[T], Y: f32[M, 64])
    tile(BM = 64, BN = 64) grid(m: M / BM, p: N / BN) threads 128
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, tile.p]
    n: i32 = signal F[tile.m]
    if n == N / BN - 1 {
        tma Y[tile.m, 0] <- sx
    }
}
"""


def test_the_counters_value_is_the_schedules():
    report = driver.simulate(SourceFile("who.hk", WHO_IS_LAST),
                             shapes={"M": 64, "N": 192, "T": 1}, seeds=8, search=0)
    assert [f.category for f in report.findings][:1] == [Category.WRONG_RESULT]


# Two counters in a loop reuse the block's slot: each count's barrier before its
# atom keeps the slot's next store after every thread's read of the last.
COUNT_TWICE = """kernel twice(X: f32[M, N], W: f32[P, M, N], F: i32[T, 2], Y: f32[M, N])
    tile(BM = 64, BN = 64, P = 2) grid(m: M / BM, p: P) threads 128
{
    shared sx: f32[BM, BN]
    for j in 0 .. 2 {
        tma sx <- X[tile.m, j]
        tma W[tile.p, tile.m, j] <- sx
        n: i32 = signal F[tile.m, j]
        if n == P - 1 {
            tma sx <- W[0, tile.m, j]
            tma Y[tile.m, j] <- sx
        }
    }
}
"""


def test_counters_in_a_loop_check_clean():
    report = driver.simulate(SourceFile("twice.hk", COUNT_TWICE),
                             shapes={"M": 100, "N": 128, "T": 2}, seeds=6, search=40)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference"
