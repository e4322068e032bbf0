"""pipeline_one_role_rings: a ring one role loads and reads in one loop is
software-pipelined in that role, with a pipeline's full and empty barriers."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import CompileError, SourceFile
from tests.conftest import ROOT, filecheck, ir_after

PASS = "pipeline_one_role_rings"
GEMM = driver.read_source(ROOT / "samples" / "gemm_one_role.hk").text
ROWS = driver.read_source(ROOT / "tests" / "sim" / "hazards" / "one_role_rows.hk").text


def test_loads_run_stages_minus_one_iterations_ahead(tmp_path):
    """3 stages: k-blocks 0 and 1 before the loop (first fills: no wait), then in
    iteration k, after the release of the stage k - 1 read, k-block k + 2 into
    it, once that release completed the stage's empty barrier."""
    filecheck(ir_after(GEMM, PASS), """
CHECK: mbarrier ring_full[3] arrivals 1
CHECK: mbarrier ring_empty[3] arrivals 8
CHECK: pipeline ring: within the block [sa, sb] stages 3
CHECK: for k in 0 .. 2:
CHECK-NEXT: if k < K / 64:
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.arrive.expect_tx ring_full[ring_load_stage], 49152
CHECK-NEXT: tma.load sa{stage ring_load_stage} <- A[tile.m * 128, k * 64] (16384 B) on ring_full[ring_load_stage]
CHECK-NEXT: tma.load sb{stage ring_load_stage} <- B[tile.n * 256, k * 64] (32768 B) on ring_full[ring_load_stage]
CHECK-NEXT: advance ring_load_stage mod 3
CHECK-NEXT: for k in 0 .. K / 64:
CHECK-NEXT: mbarrier.wait ring_full[ring_read_stage], parity ring_read_phase
CHECK-NEXT: wgmma acc += sa{stage ring_read_stage}[wg of 2] @ sb{stage ring_read_stage}^T
CHECK-NEXT: if k > 0:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive ring_empty[(ring_read_stage + 2) % 3]  (release stage, lag 1)
CHECK-NEXT: if k + 2 < K / 64:
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.wait ring_empty[ring_load_stage], parity 1 - ring_load_phase
CHECK-NEXT: mbarrier.arrive.expect_tx ring_full[ring_load_stage], 49152
CHECK-NEXT: tma.load sa{stage ring_load_stage} <- A[tile.m * 128, (k + 2) * 64]
CHECK-NEXT: tma.load sb{stage ring_load_stage} <- B[tile.n * 256, (k + 2) * 64]
CHECK-NEXT: advance ring_load_stage mod 3
CHECK-NEXT: advance ring_read_stage mod 3
CHECK-NEXT: st.shared sc[wg of 4]
""", tmp_path)


def test_the_main_loop_gets_wait_group_1_and_no_role_barrier(tmp_path):
    """The loads are ordered against the products by the ring's barriers: the
    release waits for the previous batch (wait_group 1), and nothing adds a
    bar.sync or a wait_group 0 to the loop."""
    out = ir_after(GEMM)
    loop = out[out.index("for k in 0 .. K / 64:"):out.index("st.shared sc[wg of 4]")]
    body = loop[:loop.index("\n  wgmma.wait_group 0")]
    assert "wgmma.wait_group 1" in body
    assert "bar.sync" not in body and "wait_group 0" not in body


def test_element_wise_readers_release_per_thread_and_the_refill_fences(tmp_path):
    filecheck(ir_after(ROWS), """
CHECK: mbarrier ring_empty[2] arrivals 128
CHECK: for k in 0 .. 1:
CHECK-NOT: fence.proxy.async
CHECK: for k in 0 .. N / 64:
CHECK: acc = (acc + ld.shared(sx{stage ring_read_stage}))
CHECK-NEXT: mbarrier.arrive ring_empty[ring_read_stage]  (release stage, lag 0)
CHECK-NEXT: if k + 1 < N / 64:
CHECK-NEXT: one_thread:
CHECK-NEXT: mbarrier.wait ring_empty[ring_load_stage], parity 1 - ring_load_phase
CHECK-NEXT: fence.proxy.async.shared::cta
CHECK-SAME: why: sx read by ld.shared (t.hk:14), overwritten by TMA load (t.hk:13)
""", tmp_path)


def test_a_ring_loop_inside_another_loop_waits_before_its_first_fills(tmp_path):
    """Persistent: the next tile's first fills refill stages this tile read, so
    they wait for their release, and the last stage is released after the loop."""
    text = GEMM.replace("threads 256\n", "threads 256 persistent\n")
    assert text != GEMM
    out = ir_after(text)
    prologue = out[out.index("for k in 0 .. 2:"):out.index("for k in 0 .. K / 64:")]
    assert "mbarrier.wait ring_empty[ring_load_stage], parity 1 - ring_load_phase" in prologue
    assert "(release stage, lag 0)" in out
    front_end = driver.check(SourceFile("p.hk", text))
    report = driver.simulate(SourceFile("p.hk", text), seeds=4, search=100)
    assert report.ok and front_end.persistent, [f.headline() for f in report.findings]


def test_sass_main_loop_has_no_block_barrier_or_wait_0():
    built = driver.build(driver.read_source(ROOT / "samples" / "gemm_one_role.hk"))
    (code,) = sm.functions(built.result.cubin).values()
    loop = next(lp.body(code) for lp in sm.loops(code)
                if any(i.base == "HGMMA" for i in lp.body(code))
                and any(i.base == "UTMALDG" for i in lp.body(code)))
    assert not any(i.base in ("BAR", "MEMBAR") for i in loop)
    texts = [f"{i.opcode} {i.operands}" for i in loop]
    assert not any(re.match(r"WARPGROUP\.DEPBAR\.LE gsb0,0x0", t) for t in texts)
    assert any(re.match(r"WARPGROUP\.DEPBAR\.LE gsb0,0x1", t) for t in texts)


ERRORS = [
    ("        acc += sa[wg] @ sb^T\n", "",
     "a ring loaded and read by one role is pipelined when one loop's body loads 'sa' first "
     "and reads it after", 18),
    ("        acc += sa[wg] @ sb^T\n", "        if k > 0 {\n            acc += sa[wg] @ sb^T\n"
                                      "        }\n",
     "reads 'sa' in statements of its own, not inside a nested loop or condition", 20),
    ("shared sb: bf16[BN, BK] stages 3", "shared sb: bf16[BN, BK] stages 2",
     "'sb' has stages 2 but 'sa' (line 12) has stages 3, and both are loaded in the same "
     "loop", 13),
    ("    acc: f32[64, BN] = 0\n", "    acc: f32[64, BN] = 0\n    tma sa <- A[tile.m, 0]\n",
     "'sa' has 3 stages, so it is filled one stage per iteration of a loop", 17),
    ("    for s in 0 .. BN / 64 {\n",
     "    sc[wg] = bf16(acc[:, 0 : 64] + f32(sa[wg]))\n    for s in 0 .. BN / 64 {\n",
     "'sa' is a ring filled one stage per iteration of the loop that loads it", 22),
    ("    for s in 0 .. BN / 64 {\n",
     "    for j in 0 .. K / BK {\n        tma sa <- A[tile.m, j]\n        tma sb <- B[tile.n, j]\n"
     "        acc += sa[wg] @ sb^T\n    }\n    for s in 0 .. BN / 64 {\n",
     "'sa' is a ring of an earlier loop", 23),
]


@pytest.mark.parametrize("old, new, message, line", ERRORS)
def test_rings_outside_the_loop_form_are_refused_at_their_line(old, new, message, line):
    assert old in GEMM
    with pytest.raises(CompileError) as info:
        driver.lower(driver.check(SourceFile("g.hk", GEMM.replace(old, new, 1))))
    assert message in info.value.message
    assert info.value.span.line == line
