"""samples/attention_fwd.hk: forward attention over [B, H, L, D] with an online
softmax and the log-sum-exp per row, at every head dimension, checked against
attention written out in float64 numpy; the syncs of FlashAttention-3's
overlapped key loop; and its SASS against the issue's targets (instructions per
64 queries x 64 keys of one consumer warpgroup, counted as bench/attention_sass.py
counts FlashAttention-3's: 216 non-causal, 234.5 causal unmasked, at D = 128)."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from bench.attention_sass import key_loops
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.sim.problem import make_problem
from hopperc.sim.reference import expected_outputs
from tests.conftest import ROOT, filecheck, ir_after

SAMPLE = ROOT / "samples" / "attention_fwd.hk"


def _attention(q, k, v, causal):
    """O and the natural log-sum-exp of each row's scaled scores, in float64."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        i, j = np.indices(s.shape[-2:])
        s = np.where(j > i, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    p = np.exp(s - top)
    total = p.sum(axis=-1, keepdims=True)
    return p / total @ v, (top + np.log(total))[..., 0]


@pytest.mark.parametrize("head_dim, length, causal", [
    (128, 384, 0), (128, 300, 0), (128, 300, 1), (64, 300, 1), (256, 200, 0), (256, 200, 1)])
def test_matches_attention_in_float64(head_dim, length, causal):
    """L = 384: 3 query blocks, 3 key tiles (the first before the loop, one
    interior, the last a boundary); L = 300 and 200: the last key tile partial,
    its zero-filled keys masked, the last block's rows past L clipped. Causal:
    row i sees keys 0 .. i, block b reads key tiles up to the one holding its
    last row. D = 256 runs 80 keys a tile (64 when causal)."""
    defines = {"HEAD_DIM": head_dim, "CAUSAL": causal}
    front_end = driver.check(driver.read_source(SAMPLE), defines)
    problem = make_problem(driver.lower(front_end), {"B": 1, "H": 2, "L": length})
    got = expected_outputs(front_end, problem)
    q, k, v = (problem.inputs[n].astype(np.float64) for n in "QKV")
    want, lse = _attention(q, k, v, causal)
    np.testing.assert_allclose(got["O"], want, atol=2e-2 * np.abs(want).max())
    np.testing.assert_allclose(got["LSE"], lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("defines, dims", [
    # block 4 runs two interior iterations (j = 2, 3: keys 256 .. 511, below
    # its rows 512 ..); the default shapes' blocks have none
    ({"CAUSAL": 1}, {"B": 1, "H": 1, "L": 640}),
    ({"HEAD_DIM": 64}, {"B": 1, "H": 1, "L": 300}),
    ({"HEAD_DIM": 256, "CAUSAL": 1}, {"B": 1, "H": 1, "L": 200}),
])
def test_every_schedule_is_right(defines, dims):
    """`check` on the lowered kernel (tests/sim runs the default, D = 128)."""
    report = driver.simulate(driver.read_source(SAMPLE), defines, dims, seeds=3, search=30)
    assert report.ok, [f.headline() for f in report.findings]


def test_the_key_loop_overlaps_the_softmax_and_takes_turns(tmp_path):
    """The key loop from 1 (S_0 and its softmax come before it) runs as three
    parts: its first iteration (P V overwrites O: scale-d 0), the interior up to
    the key tile before the last, and the last (ceil(L / 128) - 1 =
    (L - 128) / 128 rounded up, tighter than the key bound's ceil((L - 127) / 128)).
    In the interior: K's full wait, the turn's sync, S_j, K's previous stage
    released (S_{j-1} completed at the previous iteration's wait), V's full wait,
    a fence (ptxas orders none across the wait's retry loop), P_{j-1} V_{j-1}
    accumulating, the hand-over of the turn, V's previous stage
    released (P V_{j-2} completed), then `wait_group 1` for S_j with P V in
    flight, the softmax with no key mask, `wait_group 0` only before O's rescale.
    The row sum is kept as parts."""
    filecheck(ir_after(SAMPLE.read_text()), """
CHECK: wgmma s = sq[wg of 2] @ sk{stage load_math_sk_math_stage}^T (m64n128k128)
CHECK: l_parts: f32[64] row_parts = thread_rowsum(p)
CHECK: for j in 1 .. min(2, L / 128) turns:  (boundary of 1 .. L / 128)
CHECK: (m64n128k128, overwrites when j == 1)
CHECK: for j in min(2, L / 128) .. max((L - 128) / 128, min(2, L / 128)) turns:  (interior of 1 .. L / 128)
CHECK-NEXT: mbarrier.wait load_math_sk_full[load_math_sk_math_stage]
CHECK-NEXT: bar.sync 5 + (wg + 1) % 2, 256  (turn of 2 warpgroups: wait)
CHECK-NEXT: wgmma.fence
CHECK-NEXT: wgmma s = sq[wg of 2] @ sk{stage load_math_sk_math_stage}^T (m64n128k128)
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sk_empty[(load_math_sk_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: mbarrier.wait load_math_sv_full[load_math_sv_math_stage]
CHECK-NEXT: wgmma.fence
CHECK-SAME: why: o issued after an mbarrier wait's retry loop
CHECK-NEXT: wgmma o += pb @ sv{stage load_math_sv_math_stage} (m64n128k128)
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: if wg != 1 or j + 1 < L / 128:
CHECK-NEXT: bar.arrive 5 + wg, 256  (turn of 2 warpgroups: hand over)
CHECK-NEXT: if j > 1:
CHECK-NEXT: elect:
CHECK-NEXT: mbarrier.arrive load_math_sv_empty[(load_math_sv_math_stage + 1) % 2]  (release stage, lag 1)
CHECK-NEXT: wgmma.wait_group 1
CHECK-SAME: why: s written by wgmma
CHECK-NOT: < L)
CHECK: m_new: f32[64] rows = max(m, rowmax(s))
CHECK: l_parts = ((l_parts * alpha) + thread_rowsum(p))
CHECK-NEXT: wgmma.wait_group 0
CHECK-SAME: why: o written by wgmma
CHECK-NEXT: o = (o * alpha[:, None])
CHECK: for j in max((L - 128) / 128, min(2, L / 128)) .. L / 128 turns:  (boundary of 1 .. L / 128)
CHECK: s = where((((128 * j) + col()) < L), s, neg(inf))
CHECK: wgmma o += pb @ sv{stage load_math_sv_math_stage} (m64n128k128)
CHECK-NEXT: wgmma.commit_group
CHECK-NEXT: l: f32[64] rows = quad_sum(l_parts)
CHECK: role load
""", tmp_path)


@functools.lru_cache(maxsize=None)
def _built(head_dim: int = 128, causal: int = 0):
    return driver.build(driver.read_source(SAMPLE), {"HEAD_DIM": head_dim, "CAUSAL": causal})


def _key_loops(defines):
    built = _built(defines.get("HEAD_DIM", 128), defines.get("CAUSAL", 0))
    resources = built.result.resources
    assert resources.spill_stores == resources.spill_loads == 0
    (code,) = sm.functions(built.result.cubin).values()
    return code, key_loops(code, defines.get("HEAD_DIM", 128))


@pytest.mark.parametrize("causal, target", [(0, 235), (1, 245)])
def test_interior_key_loop_meets_the_instruction_targets(causal, target):
    """At D = 128, no spills; the interior's SASS loop (no FSETP or FSEL: the key
    bound and the diagonal are uniform there) is at most `target` instructions
    per 64x64 tile of work and 8 HGMMA (2 x 8 m64n128k16: S over D = 128 and P V
    over 128 keys, 2 tiles); the boundary loop holds the masks: their selects
    (FSEL) and the key index's compares, in ints (ISETP: `BN * j + col()` and the
    bound are integers)."""
    _, (interior, boundary) = _key_loops({"CAUSAL": causal})
    assert interior.masks == 0 and boundary.masks >= 64
    assert sum(i.base == "ISETP" for i in boundary.body) >= 32
    assert interior.tiles == 2 and interior.per_tile <= target, interior.per_tile
    assert sum(i.is_wgmma for i in interior.body) / interior.tiles <= 8


@pytest.mark.parametrize("head_dim, causal", [(64, 1), (256, 0), (256, 1)])
def test_every_head_dimension_builds_without_spills(head_dim, causal):
    """D = 64 (one swizzle span; causal, the more registers), D = 256 (four, BN =
    80, or 64 when causal): no spills, an interior loop without masks."""
    _, loops = _key_loops({"HEAD_DIM": head_dim, "CAUSAL": causal})
    assert loops[0].masks == 0 and all(lp.masks > 0 for lp in loops[1:])


def test_sass_loop_waits_only_where_the_ir_does():
    """The interior in SASS: the turn's `BAR.SYNC` before the first HGMMA and
    one `BAR.ARV` after the last, a `WARPGROUP.ARRIVE` before each product (the
    IR's two fences: ptxas injected none, tests/test_samples.py), and
    exactly the IR's two waits in order, `DEPBAR.LE gsb0, 0x1` (S_j; P V in
    flight) and `0x0` (before O's rescale): ptxas serialized nothing."""
    _, (interior, _) = _key_loops({})
    body = interior.body
    waits = [i.operands.replace(" ", "") for i in body if i.opcode.startswith("WARPGROUP.DEPBAR")]
    assert waits == ["gsb0,0x1", "gsb0,0x0"]
    assert sum(i.opcode == "WARPGROUP.ARRIVE" for i in body) == 2
    assert [i.opcode.split(".")[:2] for i in body if i.base == "BAR"] == [
        ["BAR", "SYNC"], ["BAR", "ARV"]]


def test_bench_says_what_it_needs_without_a_gpu():
    """bench/attention.py exits 2 with one line on a machine without a GPU."""
    from hopperc.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present: tests/gpu runs the benchmark's measurement")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "attention.py"), "--runs", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bench/attention.py: "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_reports_each_part_of_the_key_loop():
    """bench/rows.py lists the key loop's interior and boundary apart, per
    iteration, with their mask instructions; bench/sass.py's consumer column
    gives the interior and, in parentheses, the boundary (bench/attention_sass.py's
    count per 64x64 tile is the targets' test above)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows = subprocess.run([sys.executable, str(ROOT / "bench" / "rows.py"), str(SAMPLE)],
                          capture_output=True, text=True, cwd=ROOT)
    assert rows.returncode == 0, rows.stderr
    interior, = [line for line in rows.stdout.splitlines() if "(line 55 interior)" in line]
    boundary, = [line for line in rows.stdout.splitlines() if "(line 55 boundary)" in line]
    assert "HGMMA 16, FSETP 0, FSEL 0)" in interior and "FSEL 64)" in boundary
    table = subprocess.run([sys.executable, str(ROOT / "bench" / "sass.py"), str(SAMPLE)],
                           capture_output=True, text=True, cwd=ROOT, env=env)
    assert table.returncode == 0, table.stderr
    assert re.search(r"attention_fwd +\| \d+ \(boundary \d+\)", table.stdout), table.stdout


def test_the_first_iterations_part_is_one_iteration_in_the_code():
    """The key loop's part `1 .. min(2, L / 128)` runs at most once: codegen
    renders it as its first iteration (P V overwrites O) under `if`, with no loop
    after it; the interior and the last part are loops, as is the producer's."""
    cuda = driver.generate(driver.read_source(SAMPLE)).cuda
    assert cuda.count("[[maybe_unused]] const int u_j = 1;") == 1
    assert cuda.count("for (int u_j = ") == 3
