"""The order in which a persistent kernel's blocks take output tiles, one
definition for code generation and the simulator.

Tile i of a 2-D grid (extents m x n) lies in group i / (8 n): groups of 8 rows
of tiles (fewer in the last group), walked down a column of the group before the
next column, so consecutive tiles share B's column of tiles and a group's tiles
reuse A's rows in L2 (the grouped order of Triton's and CUTLASS's GEMMs). A
1-D grid takes tiles in order. A 3-D grid (m x n x b) takes the m x n tiles of
b = 0 in the 2-D order, then those of b = 1, ...: the last axis is the slowest.
Block b takes tiles b, b + blocks, b + 2 blocks, ...

A ragged grid (`grid(m: (OFFS[tile.g + 1] - OFFS[tile.g]) / BM, g: E)`): the
faster axes' extents depend on the last axis's value g, so value g holds
tiles(g) tiles (the product of the faster extents at g, a negative extent
counting as 0) and the linear order takes every tile of g = 0, then of g = 1, ...
Within one g the first axis is the fastest (no grouping). The host does not
know the total, so the launch is one block per SM; each walking role sums the
tiles(g) once (WALK_TOTAL), then keeps a cursor (WALK_GROUP, WALK_FIRST: the
value g and its first linear index) that only moves forward as the block's
indices grow: O(extent of g) per block in all, the same walk in every role.

In a pingpong kernel the warpgroups of the turning role take a block's tiles in
turn: warpgroup w runs iteration `tile` of the tile loop when tile % N == w.

A persistent kernel with clusters of C blocks (along the first axis) walks runs
of C tiles instead: cluster c takes runs c, c + clusters, ..., in the same
grouped order over the runs, and the block of cluster rank r computes tile r of
its run, so the blocks of a cluster share the tiles' other coordinates (and
the loads that depend only on them).
"""
from __future__ import annotations

import math
from typing import Callable

from hopperc.ir import nodes as ir
from hopperc.ir.elements import tensor_elements_in
from hopperc.ir.index_algebra import names, substitute
from hopperc.runtime.launch_rules import EXTENT_OPS, INT_MAX, Extent, GridShape

GROUP = 8
TILE_LOOP = "tile"  # the tile loop's variable: `tile` is a keyword, no user name shadows it
# A ragged walk's registers: scalars of the CARRIED kind (compiler names, never a
# user's), declared as `int` by StartTileWalk in each walking role, not in Kernel.carried
WALK_TOTAL, WALK_GROUP, WALK_FIRST = "walk_total", "walk_group", "walk_first"


def coordinates(index: int, extents: tuple[int, ...]) -> tuple[int, ...]:
    """The grid coordinates of tile `index`."""
    if len(extents) == 1:
        return (index,)
    if len(extents) == 3:
        plane = extents[0] * extents[1]
        return (*coordinates(index % plane, extents[:2]), index // plane)
    rows, columns = extents
    per_group = GROUP * columns
    first = index // per_group * GROUP
    height = min(rows - first, GROUP)
    within = index % per_group
    return (first + within % height, within // height)


def in_cluster(run: tuple[int, ...], size: int, rank: int) -> tuple[int, ...]:
    """The tile the block of cluster rank `rank` computes in a run of `size`
    tiles along the first axis, the run at coordinates `run`."""
    return (run[0] * size + rank, *run[1:])


def coordinates_cxx(index: str, extents: tuple[str, ...], targets: tuple[str, ...],
                    cluster: int = 1, rank: str = "") -> str:
    """C++ statements setting `targets` to the coordinates of tile `index`
    (`coordinates` with C++ integer expressions); with `cluster` > 1, `index`
    and `extents` count runs, and `rank` is the block's rank (`in_cluster`)."""
    if len(extents) == 1:
        run = f"{targets[0]} = {index};"
    elif len(extents) == 3:
        plane = f"(({extents[0]}) * ({extents[1]}))"
        run = (f"{{ const int hk_plane_tile = {index}; "
               f"{targets[2]} = hk_plane_tile / {plane}; "
               f"{coordinates_cxx(f'hk_plane_tile % {plane}', extents[:2], targets[:2])} }}")
    else:
        rows, columns = extents
        run = (f"{{ const int hk_tile = {index}, hk_per_group = {GROUP} * ({columns}); "
               f"const int hk_first = hk_tile / hk_per_group * {GROUP}; "
               f"const int hk_height = min(({rows}) - hk_first, {GROUP}); "
               f"const int hk_within = hk_tile % hk_per_group; "
               f"{targets[0]} = hk_first + hk_within % hk_height; "
               f"{targets[1]} = hk_within / hk_height; }}")
    if cluster == 1:
        return run
    return f"{run} {targets[0]} = {targets[0]} * {cluster} + {rank};"


def extent(axis: ir.GridAxis, cluster: int = 1) -> ir.ScalarExpr:
    """The number of tiles along a grid axis; with `cluster` > 1, of runs of that
    many tiles (the last may be partial)."""
    return axis.extent if cluster == 1 else ir.ScalarOp("/", axis.extent, ir.const(cluster))


def run_extents(kernel: ir.Kernel) -> tuple[ir.ScalarExpr, ...]:
    """What a persistent kernel's tile loop walks along each grid axis: tiles, or
    runs of a cluster's tiles along the first axis."""
    return tuple(extent(axis, kernel.cluster[0] if i == 0 else 1)
                 for i, axis in enumerate(kernel.grid))


def extent_json(expr: ir.ScalarExpr) -> Extent:
    """A static extent as the launch evaluates it (runtime/launch_rules.py)."""
    if isinstance(expr, ir.ScalarOp):
        assert expr.op in EXTENT_OPS and expr.right is not None, expr
        return {"op": expr.op, "args": [extent_json(expr.left), extent_json(expr.right)]}
    if expr.kind is ir.ScalarKind.CONST:
        return int(expr.value)
    assert expr.kind in (ir.ScalarKind.DIM, ir.ScalarKind.PARAM), expr
    return {"dim" if expr.kind is ir.ScalarKind.DIM else "scalar": expr.name}


def launch_grid(grid: tuple[ir.GridAxis, ...]) -> list[GridShape]:
    """The grid as the launch rules see it: a ragged grid's extents are None."""
    ragged = ragged_walk(grid) is not None
    return [GridShape(i, None if ragged else extent_json(axis.extent))
            for i, axis in enumerate(grid)]


def ragged_walk(grid: tuple[ir.GridAxis, ...]) -> ir.TileWalk | None:
    """The walk of a ragged grid (an extent reads a tile coordinate or a tensor
    element), else None."""
    if not any(names(axis.extent, ir.ScalarKind.TILE) or
               next(tensor_elements_in(axis.extent), None) is not None for axis in grid):
        return None
    return ir.TileWalk(tuple(a.name for a in grid), tuple(a.extent for a in grid))


def group_factors(walk: ir.TileWalk, group: ir.ScalarExpr) -> list[ir.ScalarExpr]:
    """The faster extents at the slowest axis's value `group`, each negative one
    counted as 0 (x * (x > 0)): their product is that value's tile count."""
    factors = []
    for e in walk.extents[:-1]:
        e = substitute(e, ir.ScalarKind.TILE, walk.slowest, group)
        factors.append(ir.ScalarOp("*", e, ir.ScalarOp(">", e, ir.const(0))))
    return factors


def group_tiles(walk: ir.TileWalk, group: ir.ScalarExpr) -> ir.ScalarExpr:
    """The tiles of the slowest axis's value `group` (`group_factors`' product)."""
    factors = group_factors(walk, group)
    if not factors:  # one axis: each of its values is one tile
        return ir.const(1)
    tiles = factors[0]
    for factor in factors[1:]:
        tiles = ir.ScalarOp("*", tiles, factor)
    return tiles


def walk_registers() -> tuple[ir.Scalar, ir.Scalar, ir.Scalar]:
    """The total, cursor value and cursor first index of a ragged walk."""
    return tuple(ir.Scalar(ir.ScalarKind.CARRIED, r)  # type: ignore[return-value]
                 for r in (WALK_TOTAL, WALK_GROUP, WALK_FIRST))


def advance(index: int, group: int, first: int, groups: int,
            tiles: Callable[[int], int]) -> tuple[int, int]:
    """The cursor (group, first) moved forward to the value holding tile
    `index` (tiles(g): value g's tile count); at `groups` past the last."""
    while group < groups and index >= first + tiles(group):
        first += tiles(group)
        group += 1
    return group, first


def within_group(offset: int, extents: tuple[int, ...]) -> tuple[int, ...]:
    """The faster axes' coordinates of tile `offset` of one value of the slowest
    axis (the first axis fastest)."""
    coords = []
    for e in extents:
        coords.append(offset % e)
        offset //= e
    return tuple(coords)


def walk_cxx(walk: ir.TileWalk, index: str, render: Callable[[ir.ScalarExpr], str],
             targets: tuple[str, ...]) -> str:
    """C++ statements moving the cursor to tile `index` and setting `targets` to
    its coordinates (`advance`, `within_group`); `render` renders a scalar."""
    _, group, first = walk_registers()
    cursor, start = render(group), render(first)
    text = (f"{{ const int hk_index = {index}; int hk_group_tiles; "
            f"while ({cursor} < {render(walk.extents[-1])} && hk_index >= {start} + "
            f"(hk_group_tiles = {render(group_tiles(walk, group))})) "
            f"{{ {start} += hk_group_tiles; ++{cursor}; }} "
            f"{targets[-1]} = {cursor}; int hk_offset = hk_index - {start};")
    for target, e in zip(targets[:-2], walk.extents[:-2]):
        text += (f" {{ const int hk_extent = {render(e)}; {target} = hk_offset % hk_extent; "
                 f"hk_offset /= hk_extent; }}")
    if len(targets) > 1:
        text += f" {targets[-2]} = hk_offset;"
    return text + " }"


def count_cxx(walk: ir.TileWalk, render: Callable[[ir.ScalarExpr], str]) -> str:
    """C++ declaring a ragged walk's registers: the grid's tiles summed over the
    slowest axis (the cursor's name serves as the sum's loop variable), then the
    cursor at the slowest axis's 0. The sum runs once per role and block, so it is
    not unrolled: ptxas's unrolling by 4 keeps 16 offsets in flight, more than a
    producer's 24 registers hold (it spilled). A tile's index is a 32-bit int, so
    the sum is kept in 64 bits (each value's count a 64-bit product of its faster
    extents) and the kernel traps once it passes INT_MAX, before any tile is
    taken: the launch then fails with an error (the simulator refuses such data:
    launch_rules.tile_count_problem). Below it, every count and cursor the walk
    computes in `int` is at most the total."""
    total, group, first = (render(r) for r in walk_registers())
    factors = " * ".join(f"static_cast<long long>({render(f)})"
                         for f in group_factors(walk, walk_registers()[1])) or "1LL"
    return (f"int {total}; {{ long long hk_tiles = 0; _Pragma(\"unroll 1\") "
            f"for (int {group} = 0; {group} < {render(walk.extents[-1])}; ++{group}) "
            f"{{ hk_tiles += {factors}; "
            f"if (hk_tiles > {INT_MAX}) __trap(); }} {total} = static_cast<int>(hk_tiles); }} "
            f"int {group} = 0, {first} = 0;")


def count_tiles(walk: ir.TileWalk, evaluate: Callable[[ir.ScalarExpr, int], int]) -> int:
    """The grid's tiles; `evaluate(expr, g)` evaluates an extent at slowest value g."""
    groups = evaluate(walk.extents[-1], 0)
    # each value's count is the 64-bit product of its factors, as count_cxx sums it
    factors = group_factors(walk, ir.Scalar(ir.ScalarKind.TILE, walk.slowest))
    return sum(math.prod(evaluate(f, g) for f in factors) for g in range(groups))


def turn_condition(warpgroups: int) -> ir.ScalarExpr:
    """Iteration `tile` of the tile loop is this warpgroup's turn."""
    tile = ir.Scalar(ir.ScalarKind.LOOP, TILE_LOOP)
    return ir.ScalarOp("==", ir.ScalarOp("%", tile, ir.const(warpgroups)),
                       ir.Scalar(ir.ScalarKind.BUILTIN, "wg"))


def turn_warpgroups(stmt: ir.Stmt) -> int | None:
    """N where `stmt` is the turn of N warpgroups (an IfThen on turn_condition(N))."""
    if isinstance(stmt, ir.IfThen) and isinstance(stmt.cond, ir.ScalarOp):
        modulo = stmt.cond.left
        if isinstance(modulo, ir.ScalarOp) and isinstance(modulo.right, ir.Scalar) and \
                modulo.right.kind is ir.ScalarKind.CONST:
            n = int(modulo.right.value)
            if stmt.cond == turn_condition(n):
                return n
    return None
