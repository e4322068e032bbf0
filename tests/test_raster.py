"""The order in which persistent blocks take output tiles (ir/raster.py): every
tile exactly once, in groups of 8 rows of tiles (the last of 3 axes slowest),
and the generated C++ computes the same coordinates as the simulator's Python;
a ragged grid's walk takes every tile once across the blocks, in order, with
a cursor that only moves forward."""
from __future__ import annotations

import itertools
import math
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopperc.ir import nodes as ir
from hopperc.ir import raster
from hopperc.sim.scalars import element_key, started_walk, walked_tile
from tests.conftest import device_helper


@pytest.mark.parametrize("extents", [(3, 4), (17, 5), (8, 8), (1, 1), (9, 1), (20,), (3, 4, 2),
                                     (17, 2, 3), (1, 1, 5)])
def test_every_tile_is_taken_once(extents):
    tiles = [raster.coordinates(i, extents) for i in range(len(list(
        itertools.product(*map(range, extents)))))]
    assert sorted(tiles) == sorted(itertools.product(*map(range, extents)))


def test_tiles_go_down_a_group_of_eight_rows_before_the_next_column():
    """17 x 5 tiles: tiles 0-7 are rows 0-7 of column 0, tile 8 is row 0 of
    column 1; the third group (rows 16) has one row, so it walks along it."""
    order = [raster.coordinates(i, (17, 5)) for i in range(85)]
    assert order[:9] == [(r, 0) for r in range(8)] + [(0, 1)]
    assert order[40] == (8, 0)
    assert order[80:] == [(16, c) for c in range(5)]


def _python(statements: str) -> str:
    """The generated C++ block as Python: declarations become assignments, and
    `/` is floor division (the operands are never negative)."""
    body = statements.replace("{", "").replace("}", "")
    lines = []
    for stmt in filter(None, (s.strip() for s in body.split(";"))):
        stmt = stmt.removeprefix("const int ")
        lines += [part.strip() for part in re.split(r", (?=hk_\w+ =)", stmt)]
    return "\n".join(line.replace("/", "//") for line in lines)


def test_three_axes_take_the_last_axis_slowest():
    """3 x 4 x 2 tiles: the 12 tiles of b = 0 in the 2-D order, then those of b = 1."""
    order = [raster.coordinates(i, (3, 4, 2)) for i in range(24)]
    assert [c[:2] for c in order[:12]] == [raster.coordinates(i, (3, 4)) for i in range(12)]
    assert [c[2] for c in order] == [0] * 12 + [1] * 12
    assert order[12:] == [(*c[:2], 1) for c in order[:12]]


@pytest.mark.parametrize("extents", [(3, 4), (17, 5), (20,), (3, 4, 2), (17, 2, 3)])
def test_generated_code_takes_the_same_tiles(extents):
    names = tuple(f"t{i}" for i in range(len(extents)))
    code = _python(raster.coordinates_cxx("index", tuple(map(str, extents)), names))
    for index in range(len(list(itertools.product(*map(range, extents))))):
        env = {"index": index}
        exec(code, {"min": min}, env)
        assert tuple(env[n] for n in names) == raster.coordinates(index, extents)


@pytest.mark.parametrize("extents, size", [((3, 4), 2), ((17, 5), 4), ((20,), 2)])
def test_with_clusters_the_generated_code_takes_the_same_tiles(extents, size):
    """Runs of `size` tiles along the first axis: the block of rank r computes
    tile r of its cluster's run, in C++ as in the simulator."""
    names = tuple(f"t{i}" for i in range(len(extents)))
    code = _python(raster.coordinates_cxx("index", tuple(map(str, extents)), names, size,
                                          "rank"))
    for index in range(len(list(itertools.product(*map(range, extents))))):
        for rank in range(size):
            env = {"index": index, "rank": rank}
            exec(code, {"min": min}, env)
            expected = raster.in_cluster(raster.coordinates(index, extents), size, rank)
            assert tuple(env[n] for n in names) == expected


def test_a_clusters_blocks_share_every_coordinate_but_the_first():
    runs = (3, 4)  # 6 x 4 tiles in runs of 2 along the first axis
    tiles = [raster.in_cluster(raster.coordinates(i, runs), 2, r) for i in range(12)
             for r in range(2)]
    assert sorted(tiles) == sorted(itertools.product(range(6), range(4)))
    assert all(a[1:] == b[1:] and b[0] == a[0] + 1 for a, b in zip(tiles[::2], tiles[1::2]))


def _walk(blocks: int, block: int, groups: list[tuple[int, ...]]):
    """The tiles block `block` of `blocks` takes over a ragged grid whose
    slowest value g has faster extents groups[g], and the cursor's steps."""
    def tiles(g: int) -> int:
        return math.prod(max(e, 0) for e in groups[g])
    total = sum(tiles(g) for g in range(len(groups)))
    group = first = steps = 0
    taken = []
    for index in range(block, total, blocks):
        moved = raster.advance(index, group, first, len(groups), tiles)
        steps += moved[0] - group
        group, first = moved
        taken.append((*raster.within_group(index - first, groups[group]), group))
    return taken, steps


@given(st.lists(st.tuples(st.integers(-2, 3), st.integers(0, 3)), min_size=1, max_size=6),
       st.integers(1, 7))
def test_a_ragged_walk_takes_every_tile_once_in_order(groups, blocks):
    """Values of the slowest axis with 0 tiles (an extent of 0, or negative) are
    skipped; the blocks' tiles together are every tile once, each block's in
    the linear order, and each block's cursor moves at most once per value."""
    everything = [(m, n, g) for g, (ms, ns) in enumerate(groups)
                  for n in range(ns) for m in range(max(ms, 0))]
    taken = []
    for block in range(blocks):
        tiles, steps = _walk(blocks, block, groups)
        assert tiles == [t for i, t in enumerate(everything) if i % blocks == block]
        assert steps <= len(groups)
        taken += tiles
    assert sorted(taken) == sorted(everything)


def test_ragged_walk_first_axis_fastest():
    """Value 0 has no tiles, value 1 has 2 x 2, value 2 has 1 x 2."""
    tiles, _ = _walk(1, 0, [(0, 2), (2, 2), (1, 2)])
    assert tiles == [(0, 0, 1), (1, 0, 1), (0, 1, 1), (1, 1, 1), (0, 0, 2), (0, 1, 2)]


def _ragged_grid() -> ir.TileWalk:
    g = ir.Scalar(ir.ScalarKind.TILE, "g")
    m = ir.ScalarOp("-", ir.ScalarOp("%", ir.ScalarOp("*", g, ir.const(3)), ir.const(4)),
                    ir.const(1))  # -1, 2, 1, 0, -1, ...: negative, empty and uneven values
    return ir.TileWalk(("m", "n", "g"), (m, ir.Scalar(ir.ScalarKind.DIM, "N"),
                                         ir.Scalar(ir.ScalarKind.DIM, "G")))


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_generated_ragged_walk_takes_the_same_tiles(tmp_path):
    """The C++ walk (count, then each block's cursor) on the host, against the
    Python walk the simulator runs."""
    walk, dims = _ragged_grid(), {"N": 3, "G": 7}
    render = _host_renderer(dims)
    targets = ("tm", "tn", "tg")
    program = f"""#include <cstdio>
{HOST_TRAP}
{device_helper("hk_cdiv")}int main() {{
  for (int blocks = 1; blocks <= 4; ++blocks) for (int block = 0; block < blocks; ++block) {{
    {raster.count_cxx(walk, render)}
    int tm = 0, tn = 0, tg = 0;
    for (int tile = 0; tile < hk_cdiv({render(raster.walk_registers()[0])} - block, blocks);
         ++tile) {{
      {raster.walk_cxx(walk, "block + tile * blocks", render, targets)}
      std::printf("%d %d %d %d %d\\n", blocks, block, tm, tn, tg);
    }}
  }}
}}
"""
    (tmp_path / "walk.cpp").write_text(program)
    subprocess.run(["g++", "-o", str(tmp_path / "walk"), str(tmp_path / "walk.cpp")],
                   check=True)
    out = subprocess.run([str(tmp_path / "walk")], capture_output=True, text=True, check=True)
    got = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    groups = [((g * 3) % 4 - 1, dims["N"]) for g in range(dims["G"])]
    want = [(blocks, block, *t) for blocks in range(1, 5) for block in range(blocks)
            for t in _walk(blocks, block, groups)[0]]
    assert got == want and len(want) == 4 * 18  # 18 tiles, for 1 to 4 blocks


# The device's __trap() on the host: the program stops with exit status 3.
HOST_TRAP = "#include <cstdlib>\nstatic void __trap() { std::exit(3); }"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
@pytest.mark.parametrize("extents, total", [
    ((46340, 46340, 1), 46340 * 46340),  # just below 2^31: counted exactly
    ((-5, 3, 2), 0),  # negative extents count as 0
    ((65536, 65536, 1), None),  # one value's 2^32 tiles: a product past int, in 64 bits
    ((1 << 30, 1, 3), None),  # the sum passes 2^31 - 1 at the second value
])
def test_generated_count_traps_past_int_max(tmp_path, extents, total):
    """The C++ count of a ragged grid's tiles is exact up to 2^31 - 1 and traps
    beyond (a tile's index is a 32-bit int), however large one value's count."""
    walk = ir.TileWalk(("m", "n", "g"), tuple(ir.const(e) for e in extents))
    program = f"""#include <cstdio>
{HOST_TRAP}
int main() {{ {raster.count_cxx(walk, _host_renderer({}))}
  std::printf("%d\\n", {raster.WALK_TOTAL}); }}
"""
    (tmp_path / "count.cpp").write_text(program)
    subprocess.run(["g++", "-o", str(tmp_path / "count"), str(tmp_path / "count.cpp")],
                   check=True)
    out = subprocess.run([str(tmp_path / "count")], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == ((0, f"{total}\n") if total is not None else (3, ""))


def _host_renderer(dims: dict[str, int]):
    """Scalars as host C++: the walk's registers by name, dimensions as values."""
    def render(expr: ir.ScalarExpr) -> str:
        if isinstance(expr, ir.Scalar):
            if expr.kind is ir.ScalarKind.DIM:
                return str(dims[expr.name])
            if expr.kind is ir.ScalarKind.TILE:
                return "t" + expr.name
            return str(int(expr.value)) if expr.kind is ir.ScalarKind.CONST else expr.name
        return f"({render(expr.left)} {expr.op} {render(expr.right)})"
    return render


@given(st.lists(st.integers(0, 4), min_size=1, max_size=6), st.integers(1, 3),
       st.integers(1, 5))
def test_the_simulators_walk_over_offsets_takes_every_tile_once(sizes, columns, blocks):
    """The walk as the simulator runs it (StartTileWalk, then TakeTile with the
    IR's extents `OFFS[g + 1] - OFFS[g]` and a static one): every (m, n, g)
    once across the blocks, empty groups included."""
    g = ir.Scalar(ir.ScalarKind.TILE, "g")
    rows = ir.ScalarOp("-", ir.TensorElement("OFFS", (ir.ScalarOp("+", g, ir.const(1)),)),
                       ir.TensorElement("OFFS", (g,)))
    walk = ir.TileWalk(("m", "n", "g"), (rows, ir.const(columns), ir.const(len(sizes))))
    offsets = np.cumsum([0, *sizes]).astype(np.float32)
    taken = []
    for block in range(blocks):
        env = {element_key("OFFS"): offsets, **started_walk(walk, {element_key("OFFS"): offsets})}
        for tile in range(-(-(env[raster.WALK_TOTAL] - block) // blocks)):
            env.update(walked_tile(walk, block + tile * blocks, env))
            taken.append((env["tile.m"], env["tile.n"], env["tile.g"]))
    assert sorted(taken) == sorted((m, n, gi) for gi, size in enumerate(sizes)
                                   for m in range(size) for n in range(columns))
