"""order_product_turns: in a `turns` loop the role's warpgroups issue their
products in turn (bench/kernels/mha_fwd_turns.hk: two warpgroups, 64 query rows
each, S = Q K^T and P V in every iteration), through a ring of named barriers
whose every arrival meets one sync."""
from __future__ import annotations

from dataclasses import replace

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.passes.order_product_turns import order_product_turns
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT, filecheck, ir_after
from tests.sim import mutations as m

PASS = "order_product_turns"
TURNS = driver.read_source(ROOT / "bench" / "kernels" / "mha_fwd_turns.hk").text
PLAIN = driver.read_source(ROOT / "bench" / "kernels" / "mha_fwd.hk").text
THREE = (("tile(BM = 128", "tile(BM = 192"), ("warpgroup x2 regs 240", "warpgroup x3 regs 160"),
         ("2 * tile.m + wg", "3 * tile.m + wg"))
PERSISTENT = (("grid(m: L / BM, h: H)", "grid(m: L / BM, h: H) persistent"),)


def _edited(edits) -> str:
    text = TURNS
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    return text


def _lowered(text: str):
    front_end = driver.check(SourceFile("t.hk", text))
    return front_end, driver.lower(front_end)


def _findings(front_end, kernel: ir.Kernel, seeds: int = 4, search: int = 0) -> list:
    problem = make_problem(kernel, default_dims(kernel))
    return simulate(kernel, front_end, problem, seeds, search, first_finding=True).findings


def test_the_turn_spans_the_first_product_to_the_last(tmp_path):
    """Warpgroup 1 hands over once before the loop (if it runs); in the loop each
    warpgroup waits before S and hands over after P V's commit, warpgroup 1 not
    in the last iteration; ids past the warpgroups' own (3, 4)."""
    assert "bar.arrive" not in ir_after(TURNS, "order_pingpong_turns")
    filecheck(ir_after(TURNS, PASS), """
CHECK: role math
CHECK: if 0 < L / 128 and wg == 1:
CHECK-NEXT: bar.arrive 5 + wg, 256  (turn of 2 warpgroups: hand over)
CHECK-SAME: why: the tensor cores free before the loop, taken first by warpgroup 0's products (t.hk:
CHECK-NEXT: for j in 0 .. L / 128 turns:
CHECK: mbarrier.wait load_math_sk_full
CHECK-NEXT: bar.sync 5 + (wg + 1) % 2, 256  (turn of 2 warpgroups: wait)
CHECK-NEXT: wgmma s = sq[wg of 2] @ sk
CHECK-NOT: bar.
CHECK: wgmma o += pb @ sv
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: if wg != 1 or j + 1 < L / 128:
CHECK-NEXT: bar.arrive 5 + wg, 256  (turn of 2 warpgroups: hand over)
CHECK-NOT: bar.arrive
CHECK: role load
CHECK-NOT: bar.
""", tmp_path)


def test_with_the_products_together_the_softmax_is_outside_the_turn(tmp_path):
    """mha_fwd_turns_lag: S of tile j and P V of tile j - 1 hold the turn; tile j's
    softmax runs after the hand-over, under the other warpgroup's products."""
    lag = driver.read_source(ROOT / "bench" / "kernels" / "mha_fwd_turns_lag.hk").text
    filecheck(ir_after(lag, PASS), """
CHECK: for j in 0 .. L / 128 + 1 turns:
CHECK-NEXT: bar.sync 5 + (wg + 1) % 2, 256
CHECK-NEXT: if j < L / 128:
CHECK: wgmma s = sq[wg of 2] @ sk
CHECK: if j > 0:
CHECK: wgmma o += pb @ sv
CHECK: if wg != 1 or j + 1 < L / 128 + 1:
CHECK-NEXT: bar.arrive 5 + wg, 256
CHECK-NEXT: if j < L / 128:
CHECK-NEXT: x: f32[64, 128] wgmma = where
""", tmp_path)


def test_negative_a_loop_without_turns_gets_no_turn_barrier():
    _, lowered = _lowered(PLAIN)
    assert order_product_turns(lowered) is lowered
    assert not any(isinstance(s, ir.TurnBarrier) for s in walk(lowered.body))


def test_three_warpgroups_pass_the_turn_round(tmp_path):
    filecheck(ir_after(_edited(THREE), PASS), """
CHECK: if 0 < L / 128 and wg == 2:
CHECK-NEXT: bar.arrive 6 + wg, 256
CHECK: bar.sync 6 + (wg + 2) % 3, 256  (turn of 3 warpgroups: wait)
CHECK: if wg != 2 or j + 1 < L / 128:
CHECK-NEXT: bar.arrive 6 + wg, 256
""", tmp_path)


@pytest.mark.parametrize("edits", [(), THREE, PERSISTENT], ids=["two", "three", "persistent"])
def test_checks_clean(edits):
    front_end, lowered = _lowered(_edited(edits))
    if edits == PERSISTENT:  # blocks run the loop for several tiles
        problem = make_problem(lowered, default_dims(lowered))
        assert problem.tiles > len(problem.grid)
    assert _findings(front_end, lowered, 2, 30) == []


def test_specialize_gives_the_turns_to_the_consumer():
    """gemm_pipelined's role-free loop with `turns`: the compiler's consumer role
    (two warpgroups) takes the turns, its producer warp's copy of the loop none."""
    text = driver.read_source(ROOT / "samples" / "gemm_pipelined.hk").text
    old = "    for k in 0 .. K / BK {"
    assert old in text
    front_end, lowered = _lowered(text.replace(old, "    for k in 0 .. K / BK turns {"))
    roles = {s.role.name: s for s in lowered.body.stmts if isinstance(s, ir.RoleBlock)}
    assert [s.turns for s in walk(roles["consumer"].body) if isinstance(s, ir.ForLoop)] == [True]
    assert [s.turns for s in walk(roles["producer"].body) if isinstance(s, ir.ForLoop)] == [False]
    assert _findings(front_end, lowered, 2, 40) == []


def _turn_if(op: str):
    """The IfThen around a hand-over: the opening one ('and') or the loop's ('or')."""
    return lambda s: isinstance(s, ir.IfThen) and isinstance(s.cond, ir.ScalarOp) and \
        s.cond.op == op and any(isinstance(x, ir.TurnBarrier) for x in s.then.stmts)


UNBALANCED = [
    # warpgroup 0 waits for a hand-over that never comes
    ("no opening hand-over", m.remove(ir.IfThen, _turn_if("and")), "deadlock"),
    ("no hand-over in the loop", m.remove(ir.IfThen, _turn_if("or")), "deadlock"),
    # the last hand-over meets no sync: it is left at exit, or completes a generation
    # on its own when the loop runs again for the next tile
    ("the last hand-over kept",
     lambda s: list(s.then.stmts) if _turn_if("or")(s) else None, "barrier misuse"),
    ("no wait", m.remove(ir.TurnBarrier, lambda s: not s.hand_over), "barrier misuse"),
]


@pytest.mark.parametrize("edits", [(), PERSISTENT], ids=["one tile", "persistent"])
@pytest.mark.parametrize("what, mutation, category", UNBALANCED,
                         ids=[u[0] for u in UNBALANCED])
def test_unbalanced_turns_are_findings(edits, what, mutation, category):
    front_end, lowered = _lowered(_edited(edits))
    # every copy: split_boundary_iterations copies the loop's syncs into its interior
    # and boundary parts, and a bug of this pass would be in each
    copies = sum(mutation(stmt) is not None for stmt in walk(lowered.body))
    findings = _findings(front_end, m.edit(lowered, mutation, limit=copies))
    assert findings and findings[0].category.value == category, \
        [f.headline() for f in findings]


BEFORE_THE_LOOP = "        l: f32[64] = 0.0\n"
DIAGNOSTICS = [
    ((("tile(BM = 128", "tile(BM = 64"), ("warpgroup x2 regs 240", "warpgroup regs 240"),
      ("2 * tile.m + wg", "tile.m + wg")),
     "'turns' has the warpgroups of a role take turns issuing this loop's products; role "
     "'math' has 1 warpgroup", 26),
    ((("        for j in 0 .. L / BN {\n            tma sk",
       "        for j in 0 .. L / BN turns {\n            tma sk"),),
     "role 'load' has 1 warp, not whole warpgroups", 42),
    ((("grid(m: L / BM, h: H)", "grid(m: L / BM, h: H) persistent pingpong"),),
     "in a pingpong kernel the warpgroups already take whole tiles in turn", 26),
    (((BEFORE_THE_LOOP, BEFORE_THE_LOOP + "        for i in 0 .. 2 turns { o = o * 2.0 }\n"),),
     "'turns' orders the warpgroups' matrix products, and this loop has none", 26),
    (((BEFORE_THE_LOOP, BEFORE_THE_LOOP + "        manual { for i in 0 .. 2 turns { } }\n"),),
     "manual code writes its own", 26),
    ((("            m = m_new\n", "            m = m_new\n"
       "            for i in 0 .. 2 turns { o = o * 1.0 }\n"),),
     "this 'turns' loop is inside the 'turns' loop at line 26", 37),
    # Q loaded by the role's one thread in every iteration (line 22 moved into the loop)
    ((("        tma sq <- Q[tile.h, tile.m, 0]\n", ""),
      ("            s: f32[64, BN]", "            tma sq <- Q[tile.h, tile.m, 0]\n"
                                   "            s: f32[64, BN]")),
     "in the 'turns' loop at line 25 this is issued by one thread of the role", 26),
    ((("            m = m_new\n",
       "            m = m_new\n            manual { bar.sync 9, 256 }\n"),),
     "manual code in the 'turns' loop at line 26", 37),
]


@pytest.mark.parametrize("edits, message, line", DIAGNOSTICS)
def test_diagnostics(edits, message, line):
    with pytest.raises(CompileError) as info:
        driver.lower(driver.check(SourceFile("t.hk", _edited(edits))))
    assert message in info.value.message
    assert info.value.span.line == line


def _unordered() -> ir.Kernel:
    """mha_fwd_turns before this pass."""
    return driver.lower(driver.check(SourceFile("t.hk", TURNS)), "order_pingpong_turns")


def _in_loop(kernel: ir.Kernel, edit) -> ir.Kernel:
    return m.edit(kernel, lambda s: [edit(s)] if isinstance(s, ir.ForLoop) and s.turns else None)


WG = ir.Scalar(ir.ScalarKind.BUILTIN, "wg")


def test_a_trip_count_per_warpgroup_is_refused():
    """Warpgroup 1 running one iteration more would wait for a turn forever."""
    kernel = _in_loop(_unordered(), lambda s: replace(s, stop=ir.ScalarOp("+", s.stop, WG)))
    with pytest.raises(CompileError, match="a trip count may differ between them"):
        order_product_turns(kernel)


def test_a_condition_on_wg_around_the_products_is_refused():
    def guard(loop: ir.ForLoop) -> ir.ForLoop:
        stmts = loop.body.stmts
        i = next(n for n, s in enumerate(stmts) if isinstance(s, ir.Mma))
        guarded = ir.IfThen(ir.ScalarOp("==", WG, ir.const(0)), ir.Block((stmts[i],)),
                            ir.Block(), stmts[i].span)
        return replace(loop, body=ir.Block((*stmts[:i], guarded, *stmts[i + 1:])))
    with pytest.raises(CompileError, match="a condition in the .turns. loop at line 26") as info:
        order_product_turns(_in_loop(_unordered(), guard))
    assert info.value.span.line == 27


def test_a_barrier_of_the_role_inside_the_turn_is_refused():
    """Warpgroup 0 would wait there for warpgroup 1, which waits for its turn."""
    def barrier(loop: ir.ForLoop) -> ir.ForLoop:
        stmts = loop.body.stmts
        i = next(n for n, s in enumerate(stmts) if isinstance(s, ir.WgmmaWait))
        role_wide = ir.NamedBarrier(1, 256, stmts[i].span)
        return replace(loop, body=ir.Block((*stmts[:i], role_wide, *stmts[i:])))
    with pytest.raises(CompileError, match="a barrier of more than one warpgroup"):
        order_product_turns(_in_loop(_unordered(), barrier))


def test_sass_loop_has_one_sync_and_one_arrive():
    """Per iteration a warpgroup waits once (`BAR.SYNC R, 0x100`) and hands over
    once (`BAR.ARV R, 0x100`); nothing spills."""
    built = driver.build(SourceFile("t.hk", TURNS))
    assert (built.result.resources.spill_stores, built.result.resources.spill_loads) == (0, 0)
    (code,) = sm.functions(built.result.cubin).values()
    loop = max(sm.loops(code), key=len)
    body = [f"{i.opcode} {i.operands}" for i in loop.body(code)]
    assert sum(t.startswith("HGMMA") for t in body) == 12
    bars = [t for t in body if t.startswith("BAR")]
    assert [t.split()[0] for t in bars] == ["BAR.SYNC.DEFER_BLOCKING", "BAR.ARV"]
    assert all(t.endswith(",0x100") for t in bars)  # 256 threads: two warpgroups


def test_explain_names_the_loop(hopperc_cli):
    proc = hopperc_cli("explain", str(ROOT / "bench" / "kernels" / "mha_fwd_turns.hk"))
    assert proc.returncode == 0, proc.stderr
    assert "turns: in each iteration of the loop at line 26, the warpgroups of role 'math' " \
           "issue their products in turn" in proc.stdout


def test_negative_a_barrier_of_the_role_after_the_turn_is_kept():
    """After its hand-over a warpgroup holds nothing: a role-wide barrier there
    (or before the wait) cannot strand the others."""
    def barrier(loop: ir.ForLoop) -> ir.ForLoop:
        return replace(loop, body=ir.Block((*loop.body.stmts,
                                            ir.NamedBarrier(1, 256, loop.span))))
    ordered = order_product_turns(_in_loop(_unordered(), barrier))
    assert sum(isinstance(s, ir.TurnBarrier) for s in walk(ordered.body)) == 3
