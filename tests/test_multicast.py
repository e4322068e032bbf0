"""Clusters with TMA multicast (`cluster(2, 1)`): a ring load the blocks of a
cluster share is issued once per cluster, each block its slice of rows, and
the compiler writes the cluster-wide syncs: empty barriers that count every
block's consumers, releases in every block through mapa, a cluster barrier
after the barrier setup and another before exit."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT, filecheck, ir_after
from tests.oracle.toolchain import cute_include
from tests.sim import mutations as m

SAMPLE = ROOT / "samples" / "gemm_multicast.hk"


def _text() -> str:
    return driver.read_source(SAMPLE).text


def _cuda() -> str:
    """The generated C++ without its #line directives (they split statements)."""
    return re.sub(r"\n#line [^\n]*", "", driver.generate(driver.read_source(SAMPLE)).cuda)


def _lowered(text: str | None = None):
    front_end = driver.check(SourceFile("gemm_multicast.hk", text or _text()))
    return front_end, driver.lower(front_end)


def test_b_is_multicast_and_a_is_not(tmp_path):
    """B[tile.n, k] is the same box for both blocks of a cluster along m: each
    block issues 128 of its 256 rows; A[tile.m, k] is each block's own. Each
    full barrier still expects all 49152 bytes its stage receives."""
    filecheck(ir_after(_text()), """
CHECK: kernel gemm_multicast threads 384 cluster [2, 1, 1]
CHECK: mbarrier load_math_empty[4] arrivals 16
CHECK: expect_tx 49152 B
CHECK: fence.mbarrier_init.release.cluster
CHECK-NEXT: barrier.cluster.arrive.release + barrier.cluster.wait.acquire
CHECK-SAME: used by every block of the cluster
CHECK: mbarrier.arrive.release.cluster load_math_empty[(load_math_math_stage + 3) % 4] in each of 2 blocks  (release stage, lag 1)
CHECK: mbarrier.wait.acquire.cluster load_math_empty[load_math_load_stage], parity 1 - load_math_load_phase
CHECK-NEXT: mbarrier.arrive.expect_tx load_math_full[load_math_load_stage], 49152
CHECK-NEXT: tma.load sa{stage load_math_load_stage} <- A[tile.m * 128, k * 64] (16384 B) on load_math_full[load_math_load_stage]  #
CHECK-NEXT: tma.load sb{stage load_math_load_stage} <- B[tile.n * 256, k * 64] (32768 B) on load_math_full[load_math_load_stage], multicast to 2 blocks (each issues 128 rows)
CHECK: barrier.cluster.arrive.release + barrier.cluster.wait.acquire
CHECK-SAME: this block exits only after every block of the cluster is done with it
""", tmp_path)


def test_the_ring_barriers_are_not_invalidated():
    """The other block may still arrive on them until the cluster barrier at exit."""
    _, lowered = _lowered()
    assert not any(isinstance(s, ir.MBarrierInval) for s in walk(lowered.body))


def test_generated_code_multicasts_and_releases_through_mapa():
    cuda = _cuda()
    load = re.search(r'"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::'
                     r'complete_tx::bytes\.multicast::cluster \[%0\], \[%1, \{ %3, %4 \}\], '
                     r'\[%2\], %5;".*?:: "r"\((.*?)\), "l"\(&hk_tmap_B\), "r"\([^"]*\), '
                     r'"r"\([^"]*\), "r"\((.*?)\), "h"\(static_cast<unsigned short>\(3\)\)', cuda,
                     re.S)
    assert load, "no multicast load of B with mask 0b11"
    assert load.group(1).endswith("+ hk_cluster_rank() * 16384u")  # 128 rows of 128 B
    assert load.group(2).endswith("+ hk_cluster_rank() * 128")
    # lane r of each warp (r < 2) releases the stage in block r, at cluster scope
    assert re.search(r'fence\.release\.sync_restrict::shared::cta\.cluster; '
                     r'setp\.ne\.b32 p, %1, 0; mapa\.shared::cluster\.u32 r, %0, %2; "\s*'
                     r'"@p mbarrier\.arrive\.relaxed\.cluster\.shared::cluster\.b64 _, \[r\]; '
                     r'\}"\s*'
                     r':: "r"\(hk_smem_base \+ \d+u \+ [^"]*\), '
                     r'"r"\(static_cast<int>\(\(static_cast<int>\(threadIdx\.x\) % 32\) < 2 '
                     r'&& \([^"]*\)\)\), "r"\(\(static_cast<int>\(threadIdx\.x\) % 32\)\)',
                     cuda, re.S)
    assert cuda.count("barrier.cluster.arrive.release.aligned; "
                      "barrier.cluster.wait.acquire.aligned;") == 2
    # the producer acquires the other block's releases before refilling: cluster scope
    assert re.search(r"while \(!hk_mbarrier_try_wait_cluster\(hk_smem_base \+ \d+u \+ "
                     r"\(hk_reg_load_math_load_stage\) \* 8u, \(1 - hk_reg_load_math_load_phase\)\)\)",
                     cuda)
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in cuda


@pytest.mark.skipif(cute_include() is None, reason="CuTe's headers not installed")
def test_the_remote_release_is_cutlass_cluster_barrier_arrive():
    """CUTLASS's ClusterBarrier::arrive(cta_id): mapa of the local barrier's
    address to block cta_id, then mbarrier.arrive.shared::cluster there (at the
    default .release.cta; ours arrives at .cluster scope, after a release fence
    of the shared::cta reads: docs/architecture.md, cluster scope)."""
    header = (cute_include() / "cutlass" / "arch" / "barrier.h").read_text()
    theirs = re.search(r"static void arrive\(ValueType const\* smem_ptr, uint32_t cta_id, "
                       r"uint32_t pred\).*?asm volatile\((.*?)\);", header, re.S).group(1)
    steps = [" ".join(x.split()) for x in re.findall(r'"([^"]*?);\\n\\t"', theirs)
             if not x.startswith(".reg")]
    assert steps == ["mapa.shared::cluster.u32 remAddr32, %0, %1",
                     "mbarrier.arrive.shared::cluster.b64 _, [remAddr32]"]
    cuda = _cuda()
    # CUTLASS's two steps, with the lane id (%2: lane r arriving in block r) as cta_id
    mapa, arrive = (step.replace("remAddr32", "r") for step in steps)
    arrive = arrive.replace("mbarrier.arrive.", "mbarrier.arrive.relaxed.cluster.")
    assert re.search(re.escape(f"{mapa.replace('%1', '%2')}; ") + r'"\s*"' +
                     re.escape(f"@p {arrive};"), cuda)


def test_sass_has_multicast_loads_and_cluster_barriers():
    """As CUTLASS's cluster kernels: the producer loop issues UTMALDG.2D.MULTICAST
    (B) beside UTMALDG.2D (A); the consumer loop arrives remotely
    (one SYNCS.ARRIVE.TRANS64.RED: lane r of each warp arrives in block r) after
    the shared::cta release fence (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S), with no
    GPU-wide MEMBAR (what .release.cluster on the arrive costs) and no barrier;
    the producer's cluster-scope acquire is one CCTL.IVALL; the kernel meets the
    cluster (UCGABAR_ARV / UCGABAR_WAIT) at setup and at exit."""
    built = driver.build(driver.read_source(SAMPLE))
    (code,) = sm.functions(built.result.cubin).values()
    loops = [lp.body(code) for lp in sm.loops(code)]
    producer = next(body for body in loops if any(i.base == "UTMALDG" for i in body))
    assert {i.opcode for i in producer if i.base == "UTMALDG"} == {"UTMALDG.2D",
                                                                   "UTMALDG.2D.MULTICAST"}
    consumer = next(body for body in loops if any(i.base == "HGMMA" for i in body))
    assert sum(i.opcode.startswith("SYNCS.ARRIVE.TRANS64.RED") for i in consumer) == 1
    assert [i.opcode for i in consumer if i.base in ("BAR", "MEMBAR", "FENCE", "ERRBAR")] == [
        "MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S"]
    assert sum(i.opcode == "CCTL.IVALL" for i in producer) == 1
    assert [i.opcode for i in code if i.opcode.startswith("UCGABAR")] == [
        "UCGABAR_ARV", "UCGABAR_WAIT", "UCGABAR_ARV", "UCGABAR_WAIT"]


def test_the_cluster_checks_clean_with_its_blocks_together():
    """One cluster of two blocks walks both runs of 2 x 2 tiles: each block takes
    two tiles, so the ring and the multicast wrap across tiles."""
    front_end, lowered = _lowered()
    problem = make_problem(lowered, default_dims(lowered))
    assert problem.cluster == 2 and problem.tiles == 4
    assert problem.grid == [{"@cluster": 0, "@clusters": 1, "@rank": 0},
                            {"@cluster": 0, "@clusters": 1, "@rank": 1}]
    report = simulate(lowered, front_end, problem, 4, 100)
    assert report.ok, [f.headline() for f in report.findings]


def _first_finding(kernel, front_end):
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 8, 200,
                      first_finding=True)
    assert report.findings, "the simulator found nothing"
    return report.findings[0]


def test_a_block_barrier_instead_of_the_cluster_barrier_after_setup_is_found():
    """The other block's multicast or release may reach a barrier before its init."""
    front_end, lowered = _lowered()
    setup = lowered.body.stmts[1]
    assert isinstance(setup, ir.ClusterBarrier)
    kernel = m.edit(lowered, lambda s: [ir.NamedBarrier(0, lowered.threads, s.span)]
                    if s is setup else None)
    finding = _first_finding(kernel, front_end)
    assert finding.category.value == "barrier misuse" and "init" in finding.message


def test_exiting_without_the_cluster_barrier_is_found():
    front_end, lowered = _lowered()
    last = lowered.body.stmts[-1]
    assert isinstance(last, ir.ClusterBarrier)
    kernel = m.edit(lowered, lambda s: [] if s is last else None)
    finding = _first_finding(kernel, front_end)
    assert finding.category.value in ("race", "barrier misuse")


def test_a_release_in_its_own_block_only_is_found():
    """The other block's producer waits for arrivals that never come."""
    front_end, lowered = _lowered()
    kernel = m.edit(lowered, lambda s: [ir.StageRelease(s.pipeline, s.barrier, s.lag, s.span,
                                                        s.reason, 1)]
                    if isinstance(s, ir.StageRelease) else None, limit=2)
    assert _first_finding(kernel, front_end).category.value == "deadlock"


def _variant(old: str, new: str) -> ir.Kernel:
    text = _text()
    assert old in text
    return _lowered(text.replace(old, new))[1]


@pytest.mark.parametrize("old, new, why", [
    ("tma sb <- B[tile.n, k]", "tma sb <- B[tile.n + tile.m, k]", "the box moves with tile.m"),
    ("cluster(2, 1) persistent", "cluster(2, 2)", "a cluster of two axes"),
    ("cluster(2, 1)", "", "no cluster"),
])
def test_loads_that_are_not_shared_stay_each_blocks_own(old, new, why):
    kernel = _variant(old, new)
    assert not any(isinstance(s, ir.AsyncLoad) and s.multicast > 1 for s in walk(kernel.body)), why
    assert not any(isinstance(s, ir.ClusterBarrier) for s in walk(kernel.body)), why


@pytest.mark.parametrize("rows, multicast", [(8, 1), (16, 2)])
def test_a_slice_must_start_where_the_swizzle_pattern_starts(rows, multicast):
    """Rows of 128 B split in 2 with the 128B swizzle (a 1024 B pattern): 16 rows
    give slices of 1024 B and are multicast; 8 rows would put the second slice
    512 B in, so each block loads its own."""
    text = f"""kernel narrow(X: bf16[R, C], Y: bf16[M, 64]) grid(m: M / 64) cluster(2)
{{
    shared s: bf16[{rows}, 64] stages 2 swizzle 128B
    role math: warpgroup {{
        t: f32[{rows}, 64] = f32(s)
    }}
    role load: warp {{
        tma s <- X[0, 0]
    }}
}}
"""
    kernel = driver.lower(driver.check(SourceFile("narrow.hk", text)))
    (load,) = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad)]
    assert load.multicast == multicast


def test_explain_describes_the_multicast(hopperc_cli):
    proc = hopperc_cli("explain", str(SAMPLE))
    assert proc.returncode == 0, proc.stderr
    assert ("cluster: B's loads into sb (line 32) are multicast to the 2 blocks of each "
            "cluster") in proc.stdout
    assert ("each stage is released in every block at cluster scope (the producer acquires "
            "at cluster scope)") in proc.stdout
    assert ("persistent: cluster c takes runs of 2 tiles along m c, c + clusters, ... (groups "
            "of 8 rows of runs), the block of rank r tile r of each run") in proc.stdout


HAZARD = ROOT / "tests" / "sim" / "hazards" / "cluster_rows.hk"


def test_element_wise_readers_release_in_every_block_and_the_fence_covers_the_cluster():
    """cluster_rows reads its multicast ring with ld.shared: every thread arrives
    in both blocks (each empty barrier counts 128 threads x 2 blocks), and the
    producer's fence before refilling is .shared::cluster (a .shared::cta fence
    would order only its own block's reads)."""
    source = driver.read_source(HAZARD)
    lowered = driver.lower(driver.check(source))
    assert lowered.pipelines[0].consumer_arrivals == 256
    cuda = re.sub(r"\n#line [^\n]*", "", driver.generate(source).cuda)
    release = re.search(r'asm volatile\("\{ \.reg \.b32 r; '
                        r'fence\.release\.sync_restrict::shared::cta\.cluster; "\s*'
                        r'"mapa\.shared::cluster\.u32 r, %0, 0; mbarrier\.arrive\.relaxed\.cluster'
                        r'\.shared::cluster\.b64 _, \[r\]; "\s*"mapa\.shared::cluster\.u32 r, %0, 1; '
                        r'mbarrier\.arrive\.relaxed\.cluster\.shared::cluster\.b64 _, \[r\]; "\s*"\}"',
                        cuda)
    assert release, "no per-thread release in both blocks"
    assert "mapa.shared::cluster.u32 r, %0, %2" not in cuda  # no lane-spread (per-warp) form
    assert "fence.proxy.async.shared::cluster;" in cuda


def test_a_cta_fence_before_a_multicast_over_element_wise_reads_is_found():
    front_end = driver.check(driver.read_source(HAZARD))
    lowered = driver.lower(front_end)
    kernel = m.edit(lowered, lambda s: [ir.ProxyFence(s.span, s.reason)]
                    if isinstance(s, ir.ProxyFence) and s.cluster else None)
    assert _first_finding(kernel, front_end).category.value == "missing proxy fence"


@pytest.mark.parametrize("causal, multicast", [(0, 2), (1, 1)])
def test_causal_attention_on_a_cluster_loads_its_own_keys(causal, multicast):
    """Attention over [L, 128] (tests/sim/kernels/attention_two_tiles.hk) on
    clusters of two along m: without CAUSAL both blocks walk every key tile, so K
    and V are multicast; with CAUSAL a block stops at the key pair that holds its
    last row (the trip count depends on tile.m), so each block loads its own."""
    path = ROOT / "tests" / "sim" / "kernels" / "attention_two_tiles.hk"
    text = path.read_text().replace("grid(m: L / BM)", "grid(m: L / BM) cluster(2, 1)")
    kernel = driver.lower(driver.check(SourceFile(path.name, text), {"CAUSAL": causal}))
    keys = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.tensor in "KV"]
    assert len(keys) == 8 and {s.multicast for s in keys} == {multicast}
    assert all((s.unicast is None) == (causal == 0) for s in keys)


def test_boxes_of_higher_rank_tensors_stay_each_blocks_own():
    """attention_fwd's K and V are [B, H, L, D]: a box's first axis is a batch
    axis of extent 1, not the buffer's rows, so the slices could not split it;
    the loads stay unicast and the cluster checks clean (a multicast split the
    batch axis into slices of 0 rows, and the simulator crashed)."""
    path = ROOT / "samples" / "attention_fwd.hk"
    grid = "grid(m: L / BM, h: H, b: B)"
    text = path.read_text().replace(grid, f"{grid} cluster(2, 1)")
    source = SourceFile(path.name, text)
    kernel = driver.lower(driver.check(source, {"HEAD_DIM": 64}))
    keys = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.tensor in "KV"]
    assert len(keys) == 2 and {s.multicast for s in keys} == {1}
    report = driver.simulate(source, {"HEAD_DIM": 64}, {"B": 1, "H": 1, "L": 512}, 2, 10)
    assert report.ok, [f.headline() for f in report.findings]


def test_a_ragged_run_of_tiles_keeps_the_multicast_and_checks_clean():
    """Three tiles along m on clusters of two: the last run's rank-1 tile lies past
    the grid's edge (its A rows zero-filled, its C rows clipped), but both blocks
    of the cluster still run the same k-loop, so B stays multicast and the
    cluster checks clean."""
    report = driver.simulate(driver.read_source(SAMPLE), None, {"M": 384, "N": 256, "K": 128},
                             4, 0)
    assert report.ok, [f.headline() for f in report.findings]
