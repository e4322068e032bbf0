"""The order in which a persistent kernel's blocks take output tiles, one
definition for code generation and the simulator.

Tile i of a 2-D grid (extents m x n) lies in group i / (8 n): groups of 8 rows
of tiles (fewer in the last group), walked down a column of the group before the
next column, so consecutive tiles share B's column of tiles and a group's tiles
reuse A's rows in L2 (the grouped order of Triton's and CUTLASS's GEMMs). A
1-D grid takes tiles in order. Block b takes tiles b, b + blocks, b + 2 blocks, ...

In a pingpong kernel the warpgroups of the turning role take a block's tiles in
turn: warpgroup w runs iteration `tile` of the tile loop when tile % N == w.

A persistent kernel with clusters of C blocks (along the first axis) walks runs
of C tiles instead: cluster c takes runs c, c + clusters, ..., in the same
grouped order over the runs, and the block of cluster rank r computes tile r of
its run, so the blocks of a cluster share the tiles' other coordinates (and
the loads that depend only on them).
"""
from __future__ import annotations

from hopperc.ir import nodes as ir

GROUP = 8
TILE_LOOP = "tile"  # the tile loop's variable: `tile` is a keyword, no user name shadows it


def coordinates(index: int, extents: tuple[int, ...]) -> tuple[int, ...]:
    """The grid coordinates of tile `index`."""
    if len(extents) == 1:
        return (index,)
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
    """The number of tiles along a grid axis (ceil(dim / divisor), or a constant);
    with `cluster` > 1, of runs of that many tiles (the last may be partial)."""
    tiles = ir.const(axis.divisor) if axis.dim is None else ir.ScalarOp(
        "/", ir.Scalar(ir.ScalarKind.DIM, axis.dim), ir.const(axis.divisor))
    return tiles if cluster == 1 else ir.ScalarOp("/", tiles, ir.const(cluster))  # rounds up


def run_extents(kernel: ir.Kernel) -> tuple[ir.ScalarExpr, ...]:
    """What a persistent kernel's tile loop walks along each grid axis: tiles, or
    runs of a cluster's tiles along the first axis."""
    return tuple(extent(axis, kernel.cluster[0] if i == 0 else 1)
                 for i, axis in enumerate(kernel.grid))


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
