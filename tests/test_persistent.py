"""Persistent kernels (`persistent` in the header): each role's body runs in a
loop over the block's tiles, the rings' stage and phase carry across tiles,
and the simulator runs fewer blocks than tiles so that they do."""
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

COPY = """kernel copy(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128 persistent
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- buf
}
"""


def test_body_runs_once_per_tile_of_the_block(tmp_path):
    """Block b takes tiles b, b + blocks, ...: ceil((tiles - b) / blocks) of them."""
    filecheck(ir_after(COPY, "front-end"), """
CHECK: kernel copy threads 128 cluster [1, 1, 1] persistent
CHECK: for tile in 0 .. (M / 64 * (N / 64) - block) / blocks:
CHECK-NEXT: take tile block + tile * blocks
CHECK-NEXT: tma.load buf <- X
""", tmp_path)


def test_each_role_loops_over_the_same_tiles(tmp_path):
    out = ir_after(driver.read_source(ROOT / "samples" / "gemm_persistent.hk").text, "front-end")
    assert out.count("take tile block + tile * blocks") == 2
    assert out.count("for tile in 0 .. (M / 128 * (N / 256) - block) / blocks:") == 2


def test_a_plane_rewritten_in_the_next_tile_waits_for_its_own_store(tmp_path):
    """The first subtile of a tile rewrites sc[wg], which the previous tile's third
    subtile store may still read; that tile's fourth store may go on."""
    out = ir_after(driver.read_source(ROOT / "samples" / "gemm_persistent.hk").text)
    filecheck(out, """
CHECK: take tile
CHECK: cp.async.bulk.wait_group.read 1
CHECK-SAME: why: sc read by TMA store (t.hk:23), written by st.shared (t.hk:22)
CHECK-NEXT: bar.sync 3 + wg, 128
CHECK-NEXT: st.shared sc[wg of 4] = bf16(acc[:, 0:64])
""", tmp_path)


def test_blocks_take_several_tiles_in_the_simulator():
    """Two blocks over four tiles: each takes two, so the ring wraps across tiles;
    the result matches the reference and no schedule finds a fault."""
    source = driver.read_source(ROOT / "samples" / "gemm_persistent.hk")
    front_end = driver.check(source)
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered))
    assert len(problem.grid) == 2 and problem.tiles == 4
    report = simulate(lowered, front_end, problem, 4, 200)
    assert report.ok, [f.headline() for f in report.findings]


def test_a_block_that_takes_the_wrong_tiles_is_found():
    """Every block taking tile `block` each time: tiles 2 and 3 are never written,
    and each block stores its one tile twice with the first store possibly still
    in flight, a race `check` reports at the store before the wrong result."""
    front_end = driver.check(SourceFile("copy.hk", COPY))
    lowered = driver.lower(front_end)
    stuck = _replace_take(lowered)
    report = simulate(stuck, front_end, make_problem(stuck, default_dims(stuck)), 2, 0)
    assert [f.category.value for f in report.findings] == ["race"]
    assert "TMA store from 'buf' (copy.hk:6) writes global memory of 'Y' that TMA store " \
           "from 'buf' (copy.hk:6) writes" in report.findings[0].headline()


def _replace_take(kernel: ir.Kernel) -> ir.Kernel:
    def first_tile(s):
        if isinstance(s, ir.TakeTile):
            return [ir.TakeTile(ir.Scalar(ir.ScalarKind.BUILTIN, "block"), s.span)]
        return None
    out = m.edit(kernel, first_tile)
    assert any(isinstance(s, ir.TakeTile) and s.index == ir.Scalar(ir.ScalarKind.BUILTIN, "block")
               for s in walk(out.body))
    return out


def test_epilogue_staging_in_the_ring_is_refused():
    """The producer refills the ring for the next tile while this tile's epilogue
    runs: staging memory that reuses the ring would be overwritten under it."""
    text = driver.read_source(ROOT / "samples" / "gemm_persistent.hk").text.replace(
        "shared sc: bf16[4, 64, 64] swizzle 128B", "shared sc: bf16[4, 64, 64] swizzle 128B reuses sa")
    with pytest.raises(CompileError) as info:
        driver.build(SourceFile("p.hk", text))
    assert "which the producer refills for the next tile" in info.value.message
    assert info.value.span.line == 22  # the epilogue's first write of sc


def test_ring_counters_are_declared_once_per_block_not_per_tile():
    """The stage and phase registers carry across tiles: they are declared (as 0)
    before the role dispatch and the tile loops, never inside them."""
    cuda = driver.generate(driver.read_source(ROOT / "samples" / "gemm_persistent.hk")).cuda
    first_loop = cuda.index("for (int u_tile = 0;")
    declarations = [m.start() for m in re.finditer(r"unsigned hk_reg_\w+ = 0u;", cuda)]
    assert len(declarations) == 4  # stage and phase of the producer's and the consumer's
    assert all(at < first_loop for at in declarations)


def test_sass_has_the_structure_of_a_persistent_warp_specialized_gemm():
    """As CUTLASS's persistent cooperative kernel: the consumers' tile loop holds
    the main loop and the epilogue's stores, synchronized only by warpgroup
    barriers (no block-wide barrier per tile); the producer's tile loop holds its
    TMA load loop and no barrier at all."""
    built = driver.build(driver.read_source(ROOT / "samples" / "gemm_persistent.hk"))
    (code,) = sm.functions(built.result.cubin).values()
    loops = [(lp, lp.body(code)) for lp in sm.loops(code)]

    def around(base: str):
        """The smallest loop strictly around the smallest loop holding `base`."""
        inner = next(lp for lp, body in loops if any(i.base == base for i in body))
        return next((lp, body) for lp, body in loops if lp.start <= inner.start
                    and inner.end <= lp.end and lp != inner)
    _, consumer = around("HGMMA")
    assert any(i.base == "UTMASTG" for i in consumer)
    barriers = [f"{i.opcode} {i.operands}" for i in consumer if i.base == "BAR"]
    assert barriers and all(re.fullmatch(r"BAR\.SYNC\.DEFER_BLOCKING R\d+,0x80", b)
                            for b in barriers)
    _, producer = around("UTMALDG")
    assert not any(i.base in ("BAR", "HGMMA", "UTMASTG") for i in producer)


def test_explain_describes_the_tile_loop(hopperc_cli):
    proc = hopperc_cli("explain", str(ROOT / "samples" / "gemm_persistent.hk"))
    assert proc.returncode == 0, proc.stderr
    assert "gemm_persistent.hk:9: persistent: block b takes tiles b, b + blocks, ... (groups " \
           "of 8 rows of tiles)" in proc.stdout.splitlines()[0]


@pytest.mark.parametrize("sample", ["tma_copy", "scale_rows", "two_producers"])
def test_samples_made_persistent_check_clean(sample):
    """The tile loop composes with what the samples use (vectors, two producer
    roles): a block takes two tiles and every schedule tried is right."""
    text = driver.read_source(ROOT / "samples" / f"{sample}.hk").text
    text = re.sub(r"grid\(([^)]*)\)", r"grid(\1) persistent", text, count=1)
    front_end = driver.check(SourceFile(f"{sample}.hk", text))
    lowered = driver.lower(front_end)
    assert lowered.persistent
    problem = make_problem(lowered, default_dims(lowered))
    report = simulate(lowered, front_end, problem, 4, 200)
    assert report.ok and problem.tiles >= 2 * len(problem.grid), \
        [f.headline() for f in report.findings]
