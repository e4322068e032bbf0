"""The order in which persistent blocks take output tiles (ir/raster.py): every
tile exactly once, in groups of 8 rows of tiles, and the generated C++ computes
the same coordinates as the simulator's Python."""
from __future__ import annotations

import itertools
import re

import pytest

from hopperc.ir import raster


@pytest.mark.parametrize("extents", [(3, 4), (17, 5), (8, 8), (1, 1), (9, 1), (20,)])
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


@pytest.mark.parametrize("extents", [(3, 4), (17, 5), (20,)])
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
