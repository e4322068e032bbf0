"""Pingpong kernels (`persistent pingpong`): the warpgroups of the consumer role
take the block's tiles in turn, skip the ring stages of each other's tiles, and
hand the tensor cores on with named barriers."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT, filecheck, ir_after
from tests.sim import mutations as m

SAMPLE = ROOT / "samples" / "gemm_pingpong.hk"


def _text() -> str:
    return driver.read_source(SAMPLE).text


def _lowered(text: str | None = None):
    front_end = driver.check(SourceFile("gemm_pingpong.hk", text or _text()))
    return front_end, driver.lower(front_end)


def test_the_consumer_body_runs_in_turns_and_the_producer_walks_every_tile(tmp_path):
    filecheck(ir_after(_text(), "front-end"), """
CHECK: kernel gemm_pingpong threads 384 cluster [1, 1, 1] persistent pingpong
CHECK: role math warps 0..7
CHECK-NEXT: for tile in 0 .. (M / 64 * (N / 256) - block) / blocks:
CHECK-NEXT: take tile block + tile * blocks
CHECK-NEXT: if tile % 2 == wg:
CHECK: role load warps 8..11
CHECK-NEXT: for tile in 0 .. (M / 64 * (N / 256) - block) / blocks:
CHECK-NEXT: take tile block + tile * blocks
CHECK-NEXT: for k in 0 .. K / 64:
""", tmp_path)


def test_syncs_of_a_turn(tmp_path):
    """One warpgroup (4 warps) releases each stage; the warpgroup whose turn it
    is waits for the previous one before its main loop and hands over after
    it, on ids past the warpgroups' own (3, 4); the other skips K / 64 stages."""
    filecheck(ir_after(_text()), """
CHECK: mbarrier load_math_empty[4] arrivals 4
CHECK: if tile % 2 == wg:
CHECK: if tile > 0:
CHECK-NEXT: bar.sync 5 + (wg + 1) % 2, 256  (turn of 2 warpgroups: wait)
CHECK-NEXT: for k in 0 .. K / 64:
CHECK-NEXT: mbarrier.wait load_math_full
CHECK: advance load_math_math_stage mod 4
CHECK-NEXT: if tile + 1 < (M / 64 * (N / 256) - block) / blocks:
CHECK-NEXT: bar.arrive 5 + wg, 256  (turn of 2 warpgroups: hand over)
CHECK-NEXT: wgmma.wait_group 0
CHECK: else:
CHECK-NEXT: advance load_math_math_stage by (K / 64 > 0) * (K / 64) mod 4
CHECK-NEXT: one_thread per warpgroup:
CHECK-NEXT: cp.async.bulk.wait_group.read 0
""", tmp_path)


def test_the_epilogue_waits_inside_the_turn_not_before_it(tmp_path):
    """A plane rewritten in the warpgroup's next turn waits for its own store
    with `wait_group.read 1` inside the turn: the other warpgroups' turns do not
    pay for it, and no `read 0` runs per tile."""
    out = ir_after(_text())
    turn = out.index("if tile % 2 == wg:")
    assert "cp.async.bulk.wait_group.read 0" not in out[:turn].split("for tile in")[-1]
    filecheck(out[turn:], """
CHECK: wgmma.wait_group 0
CHECK: cp.async.bulk.wait_group.read 1
CHECK-SAME: why: sc read by TMA store (t.hk:25), written by st.shared (t.hk:24)
CHECK-NEXT: bar.sync 3 + wg, 128
CHECK-NEXT: st.shared sc[wg of 4] = bf16(acc[:, 0:64])
""", tmp_path)


@pytest.mark.parametrize("m_tiles, blocks", [(3, 1), (1, 1), (4, 2)])
def test_blocks_with_odd_even_and_single_tiles_check_clean(m_tiles, blocks):
    """3 tiles on one block: warpgroup 0 takes two, and the last tile hands over
    to nobody; 1 tile: no wait, no hand-over; 4 tiles on 2 blocks: one turn each."""
    front_end, lowered = _lowered()
    dims = dict(default_dims(lowered), M=64 * m_tiles, N=256)
    problem = make_problem(lowered, dims)
    problem.grid[:] = [{"@block": b, "@blocks": blocks} for b in range(blocks)]
    report = simulate(lowered, front_end, problem, 4, 100)
    assert report.ok, [f.headline() for f in report.findings]


def test_the_default_problem_gives_each_warpgroup_several_turns():
    front_end, lowered = _lowered()
    problem = make_problem(lowered, default_dims(lowered))
    assert problem.tiles == 9 and len(problem.grid) == 2  # 5 and 4 tiles per block
    assert problem.dims["K"] // 64 > 4  # a turn's loop wraps the 4-stage ring


def test_without_the_turn_barriers_the_warpgroups_break_the_ring():
    """Warpgroup 1 would wait on stages for its first tile at once: parity waits
    that pass on an older phase, and releases the producer miscounts."""
    front_end, lowered = _lowered()
    unordered = m.edit(lowered, m.remove(ir.IfThen, lambda s: any(
        isinstance(x, ir.TurnBarrier) for x in s.then.stmts)), limit=2)
    assert not any(isinstance(s, ir.TurnBarrier) for s in walk(unordered.body))
    report = simulate(unordered, front_end, make_problem(unordered, default_dims(unordered)),
                      4, 0, first_finding=True)
    assert report.findings and report.findings[0].category.value in ("deadlock", "race",
                                                                     "barrier misuse")


def test_without_the_skip_a_warpgroup_reads_the_other_tiles_stages():
    front_end, lowered = _lowered()
    unskipped = m.edit(lowered, m.remove(ir.StageAdvance, lambda s: s.by is not None))
    report = simulate(unskipped, front_end, make_problem(unskipped, default_dims(unskipped)),
                      4, 0, first_finding=True)
    assert report.findings


def test_sass_has_the_structure_of_a_pingpong_gemm():
    """As CUTLASS's pingpong kernel: before the main loop, a predicated
    `BAR.SYNC R, 0x100` (wait for the other warpgroup's turn); after it, a
    predicated `BAR.ARV R, 0x100` and then the `wait_group 0`; inside the main
    loop no barrier, fence or wait 0."""
    built = driver.build(driver.read_source(SAMPLE))
    (code,) = sm.functions(built.result.cubin).values()
    loop = next(lp for lp in sm.loops(code) if any(i.base == "HGMMA" for i in lp.body(code)))
    body = loop.body(code)
    assert not any(i.base in ("BAR", "MEMBAR", "FENCE") for i in body)
    assert not any(i.opcode.startswith("WARPGROUP.DEPBAR") and i.operands.endswith("0x0")
                   for i in body)
    text = [f"{i.opcode} {i.operands}" for i in code]
    first_mma = next(n for n, i in enumerate(code) if i.base == "HGMMA")
    waits = [n for n, t in enumerate(text[:first_mma]) if re.match(r"BAR\.SYNC\S* R\d+,0x100", t)]
    assert waits, "no turn wait before the main loop"
    after = text[code.index(body[-1]) + 1:]
    arrive = next(n for n, t in enumerate(after) if re.match(r"BAR\.ARV R\d+,0x100", t))
    flush = next(n for n, t in enumerate(after) if t.startswith("WARPGROUP.DEPBAR.LE gsb0,0x0"))
    assert arrive < flush


def test_explain_describes_the_turns(hopperc_cli):
    proc = hopperc_cli("explain", str(SAMPLE))
    assert proc.returncode == 0, proc.stderr
    assert "pingpong: role 'math' takes tiles in turn" in proc.stdout


BIAS = (("C: bf16[M, N])", "bias: f32[N], C: bf16[M, N])"),
        ("    shared sc: bf16[4, 64, 64] swizzle 128B\n",
         "    shared sc: bf16[4, 64, 64] swizzle 128B\n    shared sbias: f32[BN]\n"),
        ("        acc: f32[BM, BN] = 0\n", "        tma sbias <- bias[tile.n]\n        acc: f32[BM, BN] = 0\n"),
        ("bf16(acc[:, 64 * s : 64 * s + 64])",
         "bf16(acc[:, 64 * s : 64 * s + 64] + sbias[None, 64 * s : 64 * s + 64])"))

PINGPONG_ERRORS = [
    ((("persistent pingpong", "pingpong"),),
     "'pingpong' alternates the tiles a persistent block takes; add 'persistent'", 12),
    ((("role math: warpgroup x2 regs 232", "role math: warpgroup regs 232"),),
     "'pingpong' needs exactly one role of two or more warpgroups", 12),
    # a bias loaded once per tile for the whole role: its reload waits for every reader
    (BIAS, "in a pingpong kernel each warpgroup works on its own tile, but this needs a "
           "barrier of the whole role ('sbias'", 20),
    ((("for k in 0 .. K / BK {", "for k in 0 .. K / BK + tile.m {"),),
     "with bounds that do not depend on the tile", 21),
]


@pytest.mark.parametrize("edits, message, line", PINGPONG_ERRORS)
def test_diagnostics(edits, message, line):
    text = _text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    with pytest.raises(CompileError) as info:
        driver.build(SourceFile("p.hk", text))
    assert message in info.value.message
    assert info.value.span.line == line


def test_specialize_composes_with_pingpong():
    """gemm_pipelined's role-free loop, 64 rows per tile, persistent and in turns:
    the compiler's consumer role takes the turns and the check is clean."""
    text = driver.read_source(ROOT / "samples" / "gemm_pipelined.hk").text
    for old, new in (("tile(BM = 128,", "tile(BM = 64,"), (" reuses sa", ""),
                     ("threads 256 specialize", "threads 256 persistent pingpong specialize"),
                     ("acc += sa[wg] @ sb^T", "acc += sa @ sb^T"), ("2 * tile.m + wg", "tile.m")):
        assert old in text
        text = text.replace(old, new)
    front_end = driver.check(SourceFile("pipelined_pingpong.hk", text))
    lowered = driver.lower(front_end)
    assert lowered.specialized and lowered.pingpong
    report = simulate(lowered, front_end, make_problem(lowered, default_dims(lowered)), 4, 100)
    assert report.ok, [f.headline() for f in report.findings]


def test_pingpong_composes_with_a_multicast_cluster():
    """On clusters of two along m, B is multicast; a stage is read by one
    warpgroup per block, so each empty barrier counts 4 warps of each of the 2
    blocks; the cluster checks clean."""
    text = _text().replace("persistent pingpong", "cluster(2, 1) persistent pingpong")
    front_end, lowered = _lowered(text)
    assert lowered.pipelines[0].consumer_arrivals == 8
    assert any(isinstance(s, ir.AsyncLoad) and s.multicast == 2 for s in walk(lowered.body))
    problem = make_problem(lowered, default_dims(lowered))
    assert problem.cluster == 2
    report = simulate(lowered, front_end, problem, 4, 50)
    assert report.ok, [f.headline() for f in report.findings]
