"""Grids: an extent is any positive integer expression of dimensions, constants
and i32 scalars (`/` rounds up), up to 3 axes for every kernel, persistent ones
included; a ragged grid (extents that read tile.<last axis> or tensor
elements) is walked by persistent blocks, every role the same way (ir/raster.py)."""
from __future__ import annotations

import collections
import re
from dataclasses import replace

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir.explain import schedule
from hopperc.ir import nodes as ir
from hopperc.ir import raster
from hopperc.ir.verify import VerifyError, verify
from hopperc.runtime.launch_rules import GridShape, evaluate_extent, illegal_shape
from hopperc.runtime.spec import parse_spec
from hopperc.sim import block as sim_block
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, given_problem, launch_tensors, make_problem
from tests.conftest import filecheck, ir_after
from tests.sim import mutations as m
from tests.test_metadata import _meta

HEADS = """kernel heads(X: bf16[B, H, M, N], Y: bf16[B, H, M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, bh: B * H) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[(tile.bh - tile.bh % H) / H, tile.bh % H, tile.m, 0]
    tma Y[(tile.bh - tile.bh % H) / H, tile.bh % H, tile.m, 0] <- buf
}
"""

THREE_AXES = """kernel batched(X: bf16[B, M, N], Y: bf16[B, M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN, b: B) threads 128 persistent
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.b, tile.m, tile.n]
    tma Y[tile.b, tile.m, tile.n] <- buf
}
"""

# Values g of the slowest axis have (3 g) % 4 row tiles: 0, 3, 2, 1, ...
RAGGED = """kernel ragged_copy(X: bf16[G, R, N], Y: bf16[G, R, N])
    tile(BM = 64, BN = 64) grid(m: (tile.g * 3) % 4, n: N / BN, g: G) threads 128 persistent
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.g, tile.m, tile.n]
    tma Y[tile.g, tile.m, tile.n] <- buf
}
"""

# Group g's row tiles start at tile OFFS[g] of X and end at OFFS[g + 1].
GROUPED = """kernel grouped_copy(X: bf16[M, N], Y: bf16[M, N], OFFS: i32[G1])
    tile(BM = 64, BN = 64)
    grid(m: OFFS[tile.g + 1] - OFFS[tile.g], n: N / BN, g: G1 - 1) threads 128 persistent
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[OFFS[tile.g] + tile.m, tile.n]
    tma Y[OFFS[tile.g] + tile.m, tile.n] <- buf
}
"""

RAGGED_GEMM = """kernel ragged_gemm(A: bf16[G, M, K], B: bf16[G, N, K], C: bf16[G, M, N])
    tile(BM = 64, BN = 64, BK = 64) grid(m: (tile.g * 3) % 4, n: N / BN, g: G) persistent
{
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    shared sb: bf16[BN, BK] stages 2 swizzle 128B
    shared sc: bf16[BM, BN] swizzle 128B
    role math: warpgroup {
        acc: f32[BM, BN] = 0
        for k in 0 .. K / BK {
            acc += sa @ sb^T
        }
        sc = bf16(acc)
        tma C[tile.g, tile.m, tile.n] <- sc
    }
    role load: warp {
        for k in 0 .. K / BK {
            tma sa <- A[tile.g, tile.m, k]
            tma sb <- B[tile.g, tile.n, k]
        }
    }
}
"""


def _kernels(text: str, name: str = "g.hk"):
    front_end = driver.check(SourceFile(name, text))
    return front_end, driver.lower(front_end)


def _stores(monkeypatch) -> collections.Counter:
    """Every box the simulated blocks store, by origin (the kernels store one tensor)."""
    stores: collections.Counter = collections.Counter()
    write_box = sim_block.write_box

    def counted(data, origin, values, *clip):
        if data.dtype != object:  # not the record of who wrote each element
            stores[tuple(origin)] += 1
        write_box(data, origin, values, *clip)
    monkeypatch.setattr(sim_block, "write_box", counted)
    return stores


def test_extent_of_a_product_of_dimensions_checks_clean():
    """bh: B * H, decomposed with % (and an exact division): every block right."""
    front_end, lowered = _kernels(HEADS)
    dims = default_dims(lowered)
    assert dims["B"] >= 2 and dims["H"] >= 2
    problem = make_problem(lowered, dims)
    assert len(problem.grid) == -(-dims["M"] // 64) * dims["B"] * dims["H"]
    report = simulate(lowered, front_end, problem, 2, 100)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]


def test_extents_travel_as_expressions_the_launch_evaluates():
    meta = _meta(HEADS)
    assert meta["grid"][1] == {"axis": "y", "name": "bh", "extent": "(B * H)",
                               "tiles": {"op": "*", "args": [{"dim": "B"}, {"dim": "H"}]}}
    assert evaluate_extent(meta["grid"][1]["tiles"], {"B": 3, "H": 5}) == 15


def test_an_extent_reads_i32_scalars_at_launch():
    text = THREE_AXES.replace("Y: bf16[B, M, N])", "Y: bf16[B, M, N], S: i32)").replace(
        "b: B)", "b: B * S + 1)")
    meta = _meta(text)
    assert meta["grid"][2]["tiles"] == {"op": "+", "args": [
        {"op": "*", "args": [{"dim": "B"}, {"scalar": "S"}]}, 1]}
    assert evaluate_extent(meta["grid"][2]["tiles"], {"B": 2, "S": 3}) == 7


def test_launch_refuses_an_extent_past_the_hardware_along_y():
    _, lowered = _kernels(HEADS)
    dims = {"B": 300, "H": 300, "M": 64, "N": 64}
    problem = illegal_shape(launch_tensors(lowered), raster.launch_grid(lowered.grid), lowered.cluster,
                            False, dims)
    assert problem is not None and "grid y extent (B * H) is 90000" in problem.message


def test_persistent_grid_of_three_axes(tmp_path):
    """The last axis is the slowest; a block takes tiles of several of its values."""
    filecheck(ir_after(THREE_AXES, "front-end"), """
CHECK: for tile in 0 .. (M / 64 * (N / 64) * B - block) / blocks:
CHECK-NEXT: take tile block + tile * blocks
""", tmp_path)
    front_end, lowered = _kernels(THREE_AXES)
    problem = make_problem(lowered, default_dims(lowered))
    assert problem.tiles == 8 and len(problem.grid) == 2
    report = simulate(lowered, front_end, problem, 2, 100)
    assert report.ok, [f.headline() for f in report.findings]


def test_every_role_walks_a_ragged_grid_the_same_way(tmp_path):
    out = ir_after(RAGGED_GEMM, "front-end")
    assert out.count("start walk over tile.g") == 2
    assert out.count("for tile in 0 .. (walk_total - block) / blocks:") == 2
    assert out.count("take tile block + tile * blocks walking tile.g") == 2


def test_ragged_copy_writes_every_tile_once(monkeypatch):
    """Two blocks walk values of 0, 3, 2 and 1 row tiles: each output tile is
    stored exactly once, none past its value's count."""
    front_end, lowered = _kernels(RAGGED)
    dims = default_dims(lowered)
    assert dims["G"] == 4
    problem = make_problem(lowered, dims)
    stores = _stores(monkeypatch)
    report = simulate(lowered, front_end, problem, 1, 0)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]
    columns = -(-dims["N"] // 64)
    want = {(g, m * 64, n * 64) for g in range(4) for m in range((g * 3) % 4)
            for n in range(columns)}
    assert problem.tiles == len(want) > len(problem.grid) == 2
    assert stores == collections.Counter(want)


def test_ragged_grid_from_offsets_checks_clean(monkeypatch):
    """Extents read an offsets tensor: check draws empty and uneven groups, and
    each group's row tiles are stored once, at the group's offset."""
    front_end, lowered = _kernels(GROUPED)
    problem = make_problem(lowered, default_dims(lowered))
    offsets = problem.inputs["OFFS"].astype(int)
    sizes = np.diff(offsets)
    assert 0 in sizes and (sizes > 1).any()
    stores = _stores(monkeypatch)
    report = simulate(lowered, front_end, problem, 1, 0)
    assert report.ok and report.reference == "numpy reference", \
        [f.headline() for f in report.findings]
    columns = -(-problem.dims["N"] // 64)
    want = {((offsets[g] + m) * 64, n * 64) for g in range(len(sizes))
            for m in range(sizes[g]) for n in range(columns)}
    assert stores == collections.Counter(want)
    report = simulate(lowered, front_end, problem, 3, 300)  # every data set, and a search
    assert report.ok, [f.headline() for f in report.findings]


def test_ragged_walk_stays_outside_the_k_loop():
    """The walk runs once per tile, before the roles' k-loops; it builds."""
    cuda = driver.generate(SourceFile("g.hk", RAGGED_GEMM)).cuda
    lines = cuda.splitlines()
    walks = [i for i, line in enumerate(lines) if "while (hk_reg_walk_group" in line]
    k_loops = [i for i, line in enumerate(lines) if re.search(r"for \(int u_k\b", line)]
    tile_loops = [i for i, line in enumerate(lines) if "for (int u_tile" in line]
    assert len(walks) == len(tile_loops) == 2
    for w in walks:  # taken once per tile: no k-loop opens between its tile loop and it
        tile = max(t for t in tile_loops if t < w)
        assert not any(tile < k < w for k in k_loops) and any(k > w for k in k_loops)
    driver.build(SourceFile("g.hk", RAGGED_GEMM))


def test_negative_roles_walking_apart_are_caught():
    """The consumer role takes the tile after the producer's (the first after
    the last): the simulator finds the wrong result (the walk must be the same
    in every role)."""
    front_end, lowered = _kernels(RAGGED_GEMM)
    total = raster.walk_registers()[0]
    shifted = m.edit(lowered, lambda s: [replace(s, index=ir.ScalarOp("%", ir.ScalarOp(
        "+", s.index, ir.const(1)), total))] if isinstance(s, ir.TakeTile) else None)
    problem = make_problem(shifted, default_dims(shifted))
    report = simulate(shifted, front_end, problem, 1, 0)
    assert not report.ok
    assert simulate(lowered, front_end, problem, 1, 0).ok


def test_explain_says_how_a_ragged_grid_is_walked():
    _, lowered = _kernels(GROUPED)
    assert any("persistent over a ragged grid: each role counts the tiles (a loop over "
               "tile.g)" in line for line in schedule(lowered))


def test_pingpong_over_a_ragged_grid_checks_clean():
    """The turning role's warpgroups each walk every tile (the turn is inside the
    loop, after TakeTile), so their cursors agree with the producer's."""
    text = RAGGED_GEMM.replace("persistent", "persistent pingpong").replace(
        "shared sc: bf16[BM, BN]", "shared sc: bf16[2, BM, BN]").replace(
        "role math: warpgroup {", "role math: warpgroup x2 regs 232 {").replace(
        "role load: warp {", "role load: warp regs 40 {").replace("sc = bf16(acc)",
                                                                 "sc[wg] = bf16(acc)").replace(
        "tile.n] <- sc", "tile.n] <- sc[wg]")
    front_end, lowered = _kernels(text)
    problem = make_problem(lowered, default_dims(lowered))
    assert problem.tiles > 2 * len(problem.grid)
    report = simulate(lowered, front_end, problem, 2, 100)
    assert report.ok, [f.headline() for f in report.findings]


def test_a_ragged_grid_launches_one_block_per_sm():
    """Only the kernel counts a ragged grid's tiles: the metadata has no extents,
    and the launch is one block per SM whatever the shape."""
    meta = _meta(GROUPED)
    assert [axis["tiles"] for axis in meta["grid"]] == [None, None, None]
    assert meta["grid"][0]["extent"] == "OFFS[tile.g + 1] - OFFS[tile.g]"
    spec = parse_spec(meta)
    assert spec.ragged and spec.persistent
    assert spec.grid_dims({"M": 64, "N": 64, "G1": 2}, sms=132) == (132, 1, 1)
    assert illegal_shape([], raster.launch_grid(_kernels(GROUPED)[1].grid), (1, 1, 1), True,
                         {"M": 64, "N": 64, "G1": 2}) is None


def test_verify_refuses_a_walk_whose_registers_are_not_declared():
    front_end, _ = _kernels(GROUPED)
    verify(front_end, "front-end")
    broken = m.edit(front_end, m.remove(ir.StartTileWalk))
    with pytest.raises(VerifyError, match="walks tile.g with no StartTileWalk before its loop"):
        verify(broken, "front-end")


def test_launch_refuses_an_extent_that_divides_by_zero_or_is_negative():
    grid = [GridShape(0, {"op": "/", "args": [{"dim": "M"}, {"scalar": "S"}]}),
            GridShape(1, {"op": "-", "args": [{"dim": "N"}, 4]})]
    assert "a grid extent divides by 0 (ceil(M / S))" in illegal_shape(
        [], grid, (1, 1, 1), False, {"M": 64, "N": 8}, {"S": 0}).message
    assert "grid y extent (N - 4) is -2" in illegal_shape(
        [], grid, (1, 1, 1), False, {"M": 64, "N": 2}, {"S": 1}).message


def test_a_one_axis_grid_whose_extent_reads_data_walks_one_tile_per_value(monkeypatch):
    """grid(m: NT[0]) persistent: a ragged grid of one axis, each value of which is a
    tile (no faster axes to multiply)."""
    text = """\
kernel onedim(X: bf16[M, N], Y: bf16[M, N], NT: i32[1])
    tile(BM = 64, BN = 64) grid(m: NT[0]) threads 128 persistent
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, 0]
    tma Y[tile.m, 0] <- buf
}
"""
    front_end, lowered = _kernels(text)
    driver.generate(SourceFile("g.hk", text))  # the C++ walk: an internal error before
    problem = make_problem(lowered, default_dims(lowered))
    stores = _stores(monkeypatch)
    report = simulate(lowered, front_end, problem, 1, 0)
    assert report.ok, [f.headline() for f in report.findings]
    assert stores == collections.Counter({(m * 64, 0): 1
                                          for m in range(int(problem.inputs["NT"][0]))})


def test_simulator_refuses_a_ragged_grid_past_int_max_tiles():
    """A ragged grid's tile index is a 32-bit int: the kernel traps when its count
    passes 2^31 - 1 (ir/raster.count_cxx), and the simulator refuses the data
    with the launch's message for a static grid."""
    _, lowered = _kernels(RAGGED.replace("n: N / BN", "n: 32768 * 32768"))  # 6 x 2^30 tiles
    with pytest.raises(CompileError, match=r"a persistent grid of 6442450944 tiles; a tile's "
                                           r"index is a 32-bit int \(at most 2147483647\): the "
                                           r"kernel would stop \(trap\)"):
        make_problem(lowered, {"G": 4, "R": 64, "N": 64})
    code = driver.generate(SourceFile("g.hk", RAGGED)).cuda
    assert "if (hk_tiles > 2147483647) __trap();" in code


def test_a_ragged_grids_count_from_data_is_not_wrapped():
    """A value's tile count is the 64-bit product of its extents, one from data
    (count_cxx), though the data's own sums wrap as i32: 2^16 row tiles of
    2^16 columns are 2^32 tiles, refused, not wrapped to 0."""
    _, lowered = _kernels(GROUPED.replace("n: N / BN", "n: 65536"))
    inputs = {"X": np.zeros((64, 64), np.float32), "Y": np.zeros((64, 64), np.float32),
              "OFFS": np.array([0, 65536], np.float32)}
    with pytest.raises(CompileError, match=r"a persistent grid of 4294967296 tiles"):
        given_problem(lowered, {"M": 64, "N": 64, "G1": 2}, inputs, {})
    code = driver.generate(SourceFile("g.hk", GROUPED)).cuda
    assert "hk_tiles += static_cast<long long>(" in code
