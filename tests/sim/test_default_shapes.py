"""Default shapes follow what each dimension is used for (`sim/shapes.py`): whole
clusters, loops past their ring depth, a partial tile on every dimension, groups
of two or more, valid indices; nested loops and the work budget stay bounded."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.raster import launch_grid
from hopperc.runtime.launch_rules import illegal_shape
from hopperc.sim.problem import launch_tensors, make_problem
from hopperc.sim.index_inputs import index_ranges
from hopperc.sim.shapes import NEST_ITERATIONS, default_dims
from hopperc.sim.scalars import scalar

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def lowered(text: str):
    return driver.lower(driver.check(SourceFile("k.hk", text)))


def legal(kernel, dims) -> bool:
    return illegal_shape(launch_tensors(kernel), launch_grid(kernel.grid), kernel.cluster,
                         kernel.persistent, dims) is None


# A row softmax over one 256-wide tile: N is only in the mask and the tensors.
MASKED_ROW = """\
kernel row_softmax(X: f32[M, N], Y: f32[M, N]) tile(BM = 64, BN = 256) grid(m: M / BM) {
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    x: f32[BM, BN] = where(col() < N, sx, -inf)
    m: f32[BM] = rowmax(x)
    p: f32[BM, BN] = exp2(x - m[:, None])
    l: f32[BM] = rowsum(p)
    sx = p / l[:, None]
    tma Y[tile.m, 0] <- sx
}
"""


def test_dimension_only_in_a_mask_cuts_its_tile():
    kernel = lowered(MASKED_ROW)
    dims = default_dims(kernel)
    assert 0 < dims["N"] < 256 and dims["N"] % 4 == 0  # f32 rows: 16-byte strides
    assert dims["M"] % 64 and math.ceil(dims["M"] / 64) == 2 and legal(kernel, dims)
    report = driver.simulate(SourceFile("k.hk", MASKED_ROW), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


INNER_LOOP = """\
kernel row_sums(X: bf16[M, K], Y: f32[M, 64]) tile(BM = 64, BK = 64) grid(m: M / BM) {
    shared sx: bf16[BM, BK] stages 3 swizzle 128B
    shared sy: f32[BM, 64]
    acc: f32[BM, 64] = 0.0
    for k in 0 .. (K + BK - 1) / BK {
        tma sx <- X[tile.m, k]
        acc = acc + f32(sx)
    }
    sy = acc
    tma Y[tile.m, 0] <- sy
}
"""


def test_inner_loop_on_k_runs_twice_past_its_ring_with_a_partial_tile():
    kernel = lowered(INNER_LOOP)
    dims = default_dims(kernel)
    trips = -(-(dims["K"] + 63) // 64)
    assert trips >= 2 * 3 + 1 and dims["K"] % 64 and dims["K"] % 8 == 0
    assert legal(kernel, dims)


# Boxes at constant columns k * 64 (k < 4) of a dimension no grid axis or loop
# bound names: read back after being stored, so each must lie in the tensor.
STORED_COLUMNS = """\
kernel stored_columns(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    for k in 1 .. 4 {
        tma sx <- X[tile.m, k]
        tma Y[tile.m, k] <- sx
        tma sy <- Y[tile.m, k - 1]
        sx = bf16(f32(sy) * 2.0)
        tma X[tile.m, k] <- sx
    }
}
"""


def test_dimension_reaches_past_every_box_at_constant_coordinates():
    kernel = lowered(STORED_COLUMNS)
    dims = default_dims(kernel)
    assert 3 * 64 < dims["N"] < 4 * 64 and legal(kernel, dims)  # the last box partial
    report = driver.simulate(SourceFile("k.hk", STORED_COLUMNS), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


GQA = """\
kernel gqa_copy(Q: bf16[H, L, 64], K: bf16[HKV, L, 64], O: bf16[H, L, 64])
    tile(BL = 64) grid(l: L / BL, h: H)
{
    shared sq: bf16[BL, 64] swizzle 128B
    shared sk: bf16[BL, 64] swizzle 128B
    tma sq <- Q[tile.h, tile.l, 0]
    tma sk <- K[tile.h / (H / HKV), tile.l, 0]
    sq = bf16(f32(sq) + f32(sk))
    tma O[tile.h, tile.l, 0] <- sq
}
"""


def test_group_count_has_two_members_or_more():
    kernel = lowered(GQA)
    dims = default_dims(kernel)
    assert dims["H"] % dims["HKV"] == 0 and dims["H"] // dims["HKV"] >= 2
    assert dims["HKV"] >= 2 and dims["L"] % 64 and legal(kernel, dims)
    report = driver.simulate(SourceFile("k.hk", GQA), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


CLUSTER = """\
kernel cluster_copy(X: f32[M, 64], Y: f32[M, 64]) tile(BM = 32) grid(m: M / BM) cluster({C})
{{
    shared sx: f32[BM, 64]
    tma sx <- X[tile.m, 0]
    tma Y[tile.m, 0] <- sx
}}
"""


@pytest.mark.parametrize("size, clusters", [(4, 2), (8, 1)])
def test_default_grid_fills_whole_clusters(size, clusters):
    text = CLUSTER.format(C=size)
    kernel = lowered(text)
    dims = default_dims(kernel)
    tiles = math.ceil(dims["M"] / 32)
    assert tiles == size * clusters and dims["M"] % 32 and legal(kernel, dims)
    problem = make_problem(kernel, dims)
    assert len(problem.clusters()) == clusters
    report = driver.simulate(SourceFile("k.hk", text), seeds=1, search=0)
    assert report.ok, [f.headline() for f in report.findings]


LENGTHS = """\
kernel keep_prefix(X: f32[M, N], L: i32[M], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN)
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, tile.n]
    len: i32[BM] = L[tile.m]
    sx = where(f32(BN * tile.n + col()) < f32(len[:, None]), sx, 0.0)
    tma Y[tile.m, tile.n] <- sx
}
"""


def test_index_tensor_holds_valid_indices_of_what_it_is_compared_with():
    text = LENGTHS
    kernel = lowered(text)
    dims = default_dims(kernel)
    assert index_ranges(kernel, dims) == {"L": dims["N"]}
    values = make_problem(kernel, dims).inputs["L"]
    assert values.min() >= 0 and values.max() < dims["N"] and len(np.unique(values)) > 3
    assert np.array_equal(values, np.round(values))
    report = driver.simulate(SourceFile("k.hk", text), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


def nested(bound: str, depth: int = 18) -> str:
    loops = "\n".join("    " * (i + 1) + f"for i{i} in 0 .. {bound.format(i=i)} {{"
                      for i in range(depth))
    closes = "\n".join("    " * (i + 1) + "}" for i in reversed(range(depth)))
    params = ", ".join(f"X{i}: f32[N{i}]" for i in range(depth)) if "N" in bound else "X: f32[N]"
    return (f"kernel nested({params}, Y: f32[M, 64]) tile(BM = 64) grid(m: M / BM) {{\n"
            f"    shared sy: f32[BM, 64]\n    acc: f32[BM, 64] = 0.0\n{loops}\n"
            f"{'    ' * (depth + 1)}acc = acc + 1.0\n{closes}\n"
            f"    sy = acc\n    tma Y[tile.m, 0] <- sy\n}}\n")


def test_nested_loop_dimensions_are_capped_and_the_innermost_keeps_its_ring():
    kernel = lowered(nested("N{i}"))
    dims = default_dims(kernel)
    loops = [dims[f"N{i}"] for i in range(18)]
    assert math.prod(loops) <= NEST_ITERATIONS and loops[-1] >= 3
    report = driver.simulate(SourceFile("k.hk", nested("N{i}")), seeds=2, search=20)
    assert report.ok and not report.stopped


def test_work_budget_stops_loops_the_shape_cannot_shorten():
    report = driver.simulate(SourceFile("k.hk", nested("2")), seeds=2, search=20,
                             steps=2000)
    assert report.stopped == "seeds" and report.incomplete and report.schedules == 0


def test_check_says_it_stopped_at_the_budget(hopperc_cli, tmp_path):
    path = tmp_path / "nested.hk"
    path.write_text(nested("2"))
    result = hopperc_cli("sim", str(path), "--budget", "2000", "-q")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "stopped: the work budget of 2,000 steps" in result.stdout
    assert "INCOMPLETE" in result.stdout


# Head h's columns are the boxes 2 h and 2 h + 1 of a dimension no grid axis
# divides: the last head's boxes must lie in it, not only block 0's.
HEAD_COLUMNS = """\
kernel head_columns(X: bf16[M, D], Y: bf16[M, D], S: f32[H])
    tile(BM = 64) grid(m: M / BM, h: H) threads 128
{
    shared sx: bf16[BM, 64] swizzle 128B
    tma sx <- X[tile.m, 2 * tile.h + 1]
    tma Y[tile.m, 2 * tile.h + 1] <- sx
}
"""


def test_dimension_holds_the_box_of_the_last_tile_of_another_axis():
    kernel = lowered(HEAD_COLUMNS)
    dims = default_dims(kernel)
    last_box = 2 * (dims["H"] - 1) + 1
    assert dims["H"] >= 2 and last_box * 64 < dims["D"] < (last_box + 1) * 64  # partial
    assert legal(kernel, dims)
    report = driver.simulate(SourceFile("k.hk", HEAD_COLUMNS), seeds=2, search=0)
    assert report.ok, [f.headline() for f in report.findings]


def test_attention_varlen_defaults_hold_every_heads_column_boxes():
    kernel = lowered((SAMPLES / "attention_varlen.hk").read_text())
    dims = default_dims(kernel)
    copies = [s for s in walk(kernel.body) if isinstance(s, (ir.AsyncLoad, ir.AsyncStore))]
    assert {s.tensor for s in copies} == {"Q", "K", "V", "O"}
    for heads in range(dims["HQ"]):
        for copy in copies:
            column = scalar(copy.coords[-1], {**dims, "tile.h": heads})
            assert column < dims[kernel.tensor(copy.tensor).dims[-1]], (copy.tensor, heads)
    assert legal(kernel, dims)


def test_dimension_holds_the_box_of_a_loops_last_iteration():
    # SA[k, tile.m] for k in 0 .. K / 128: KB holds a scale row for every k-tile
    kernel = lowered((SAMPLES / "gemm_fp8_blockscaled.hk").read_text())
    dims = default_dims(kernel)
    assert dims["KB"] >= math.ceil(dims["K"] / 128) and legal(kernel, dims)


HUGE_GRID = """\
kernel huge(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(n: 65535 * 16, m: M / BM) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n % 4]
    tma Y[tile.m, tile.n % 4] <- buf
}
"""


def test_a_grid_of_a_million_tiles_is_not_enumerated():
    """A box coordinate's reach is taken at the ends of a long range (here a million
    values of tile.n), where `tile.n % 4` still takes every value up to 3."""
    dims = default_dims(lowered(HUGE_GRID))
    assert math.ceil(dims["N"] / 64) == 4
