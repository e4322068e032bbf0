"""samples/attention_fwd.hk: forward attention with an online softmax, checked
against attention written out in float64 numpy, with the syncs around the two
products and the softmax."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from hopperc import driver
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import ROOT, filecheck, ir_after

SAMPLE = ROOT / "samples" / "attention_fwd.hk"


@pytest.mark.parametrize("length, causal", [(320, 0), (300, 0), (320, 1), (300, 1)])
def test_matches_attention_in_float64(length, causal):
    """L = 320: 3 blocks (the last half past the end, zero-filled and clipped)
    over 3 pairs of key tiles, so the ring wraps and the running maximum moves,
    and the last pair's tile b lies wholly past the end (zero-filled, masked);
    L = 300: the last key tile is partial, its zero-filled keys masked to -inf.
    Causal: row i sees keys 0 .. i, and block b reads key tiles 0 .. 2b + 1 only."""
    front_end = driver.check(driver.read_source(SAMPLE), {"CAUSAL": causal})
    problem = make_problem(driver.lower(front_end), {"L": length})
    got = expected_outputs(front_end, problem)["O"]
    q, k, v = (problem.inputs[n].astype(np.float64) for n in "QKV")
    s = q @ k.T / np.sqrt(128)
    if causal:
        i, j = np.indices(s.shape)
        s = np.where(j > i, -np.inf, s)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = p / p.sum(axis=1, keepdims=True) @ v
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


@pytest.mark.parametrize("causal", [0, 1])
def test_every_schedule_is_right(causal):
    report = driver.simulate(driver.read_source(SAMPLE), {"CAUSAL": causal}, {"L": 384},
                             seeds=4, search=50)
    assert report.ok, [f.headline() for f in report.findings]


def test_causal_blocks_stop_at_their_last_key_tile(tmp_path):
    """The producer's and the consumers' loops have the same tile-dependent bound
    (the consumers' split at the diagonal: its interior and boundary parts)."""
    from hopperc.ir.printer import print_kernel
    out = print_kernel(driver.lower(driver.check(driver.read_source(SAMPLE), {"CAUSAL": 1})))
    assert out.count("for j in 0 .. (tile.m + 1) * 128 / 128:") == 1
    assert out.count("(interior of 0 .. (tile.m + 1) * 128 / 128)") == 1
    assert out.count("(boundary of 0 .. (tile.m + 1) * 128 / 128)") == 1


def test_syncs_around_the_products_and_the_softmax(tmp_path):
    """Tile a's S completes before its softmax (wait_group 0: only the previous
    P V batch is older). Tile b's S is issued before tile a's softmax with no
    wait after it; tile a's P V is issued before tile b's softmax, which waits
    with wait_group 1 (S_b done, P V_a still in flight); the rescale of O by
    beta waits for P V_a (wait_group 0).

    K_a, K_b, V_a and V_b are four rings: each product waits for its own
    operands only, right before it (V_a's arrival overlaps softmax a). Two
    empty barriers free them: K_a's release of the previous iteration's stage,
    right after S_a is issued, also frees K_b's and V_a's (S_b and P V_a of
    that iteration completed at its wait_group 1 and 0), and V_b's, after P V_b
    is issued, its own (P V_b completed only at this iteration's first wait).
    No release needs a wait of its own. (The interior part of the key loop is
    checked; its boundary part holds the same syncs.)"""
    filecheck(ir_after(driver.read_source(SAMPLE).text), """
CHECK: for j in 0 .. {{.*}}(interior of 0 .. L / 128)
CHECK: mbarrier.wait load_math_ska0_full[load_math_math_stage], parity load_math_math_phase
CHECK-SAME: why: ska0, ska1 written by async loads
CHECK-NOT: mbarrier.wait
CHECK: wgmma sa = sq0[wg of 2] @ ska0{stage load_math_math_stage}^T
CHECK-NEXT: wgmma sa += sq1[wg of 2] @ ska1{stage load_math_math_stage}^T
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: if j > 0:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_ska0_empty[(load_math_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-SAME: why: ska0, ska1, skb0, skb1, sva0, sva1 read by wgmma
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: sa written by wgmma
CHECK-NEXT: xa: f32[64, 64] wgmma =
CHECK: mbarrier.wait load_math_skb0_full[load_math_math_stage]
CHECK: wgmma sb = sq0[wg of 2] @ skb0{stage load_math_math_stage}^T
CHECK-NEXT: wgmma sb += sq1[wg of 2] @ skb1{stage load_math_math_stage}^T
CHECK-NEXT: wgmma.commit_group
CHECK-NOT: wgmma.wait_group
CHECK: ma: f32[64] rows = max(m, rowmax(xa))
CHECK-NOT: wgmma.wait_group
CHECK: o0 = (o0 * alpha[:, None])
CHECK-NOT: wgmma.
CHECK: mbarrier.wait load_math_sva0_full[load_math_math_stage]
CHECK-NEXT: wgmma.fence
CHECK-NEXT: wgmma o0 += pab @ sva0{stage load_math_math_stage}
CHECK-NEXT: wgmma o1 += pab @ sva1{stage load_math_math_stage}
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: wgmma.wait_group 1
CHECK-SAME: why: sb written by wgmma
CHECK-NOT: wgmma.wait_group
CHECK: pbb: bf16[64, 64] wgmma = bf16(pb)
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: o0 written by wgmma
CHECK-NEXT: o0 = (o0 * beta[:, None])
CHECK-NEXT: o1 = (o1 * beta[:, None])
CHECK-NEXT: mbarrier.wait load_math_svb0_full[load_math_math_stage]
CHECK-NEXT: wgmma.fence
CHECK: wgmma o1 += pbb @ svb1{stage load_math_math_stage}
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: if j > 0:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_svb0_empty[(load_math_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: advance load_math_math_stage mod 2
CHECK: role load
CHECK: mbarrier.wait load_math_ska0_empty[load_math_load_stage], parity 1 - load_math_load_phase
CHECK-NEXT: mbarrier.arrive.expect_tx load_math_ska0_full[load_math_load_stage], 16384
CHECK-NOT: mbarrier.wait
CHECK: mbarrier.arrive.expect_tx load_math_skb0_full[load_math_load_stage], 16384
CHECK-NOT: mbarrier.wait
CHECK: mbarrier.arrive.expect_tx load_math_sva0_full[load_math_load_stage], 16384
CHECK: mbarrier.wait load_math_svb0_empty[load_math_load_stage], parity 1 - load_math_load_phase
CHECK-NEXT: mbarrier.arrive.expect_tx load_math_svb0_full[load_math_load_stage], 16384
""", tmp_path)


def test_builds_without_spills():
    resources = driver.build(driver.read_source(SAMPLE)).result.resources
    assert resources.spill_stores == resources.spill_loads == 0


def test_bench_says_what_it_needs_without_a_gpu():
    """bench/attention.py exits 2 with one line on a machine without a GPU."""
    import subprocess
    import sys

    from hopperc.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present: tests/gpu runs the benchmark's measurement")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "attention.py"), "--runs", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bench/attention.py: "), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("causal", [0, 1])
def test_sass_loop_waits_only_where_the_ir_does(causal):
    """The consumers' loop in SASS: 32 HGMMA (4 groups: S_a, S_b, P V_a, P V_b,
    each two 64x64x64 products of 4 k-steps of 64x64x16), a `WARPGROUP.ARRIVE`
    (wgmma.fence) before each of the 4 product groups, and exactly the three
    waits of the IR in order: `DEPBAR.LE gsb0, 0x0` for S_a, `0x1` for S_b
    (P V_a stays in flight) and `0x0` before O's rescale. ptxas serialized
    nothing: no wait between two HGMMA of one group."""
    from hopperc.backend import sass_metrics as sm
    built = driver.build(driver.read_source(SAMPLE), {"CAUSAL": causal})
    (code,) = sm.functions(built.result.cubin).values()
    body = sm.loop_holding(code, "HGMMA").body(code)
    assert sum(i.base == "HGMMA" for i in body) == 32
    assert sum(i.opcode == "WARPGROUP.ARRIVE" for i in body) == 4
    waits = [i.operands.replace(" ", "") for i in body if i.opcode.startswith("WARPGROUP.DEPBAR")]
    assert waits == ["gsb0,0x0", "gsb0,0x1", "gsb0,0x0"]


@pytest.mark.parametrize("causal", [0, 1])
def test_sass_interior_key_loop_has_no_mask(causal):
    """The key loop is split at its boundary iterations: the interior's SASS
    loop holds no FSETP / FSEL (the key bound and the diagonal are uniform
    there), the boundary's holds them, both the same 32 HGMMA."""
    from hopperc.backend import sass_metrics as sm
    built = driver.build(driver.read_source(SAMPLE), {"CAUSAL": causal})
    (code,) = sm.functions(built.result.cubin).values()
    parts = {found.part: found for found in sm.source_loops(code, built.generated.kernel)
             if any(i.is_wgmma for i in found.own)}
    assert set(parts) == {"interior", "boundary"}
    masks = {part: sum(i.base in ("FSETP", "FSEL") for i in found.own)
             for part, found in parts.items()}
    assert masks["interior"] == 0 and masks["boundary"] >= 64, masks
    assert all(sum(i.is_wgmma for i in found.own) == 32 for found in parts.values())
    assert parts["interior"].per_iteration < parts["boundary"].per_iteration


def test_bench_reports_each_part_of_the_key_loop():
    """bench/rows.py lists the key loop's interior and boundary apart, per
    iteration, with their mask instructions; bench/sass.py's consumer column
    gives the interior and, in parentheses, the boundary."""
    import subprocess
    import sys
    rows = subprocess.run([sys.executable, str(ROOT / "bench" / "rows.py"), str(SAMPLE)],
                          capture_output=True, text=True, cwd=ROOT)
    assert rows.returncode == 0, rows.stderr
    interior, = [line for line in rows.stdout.splitlines() if "(line 50 interior)" in line]
    boundary, = [line for line in rows.stdout.splitlines() if "(line 50 boundary)" in line]
    assert "HGMMA 32, FSETP 0, FSEL 0)" in interior and "FSEL 64)" in boundary
    table = subprocess.run([sys.executable, str(ROOT / "bench" / "sass.py"), str(SAMPLE)],
                           capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert table.returncode == 0, table.stderr
    assert re.search(r"attention_fwd +\| \d+ \(boundary \d+\)", table.stdout), table.stdout
