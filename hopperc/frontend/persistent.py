"""Persistent kernels (`persistent` in the header): each block loops over
output tiles instead of computing the one its launch index names.

The body of each role (or the kernel's body, without roles) becomes a loop in
which block b takes tiles b, b + blocks, b + 2 blocks, ... (`TakeTile` sets
tile.AXIS, in ir/raster.py's grouped order); in a kernel with clusters, cluster
c takes runs of its blocks' tiles c, c + clusters, ... Every role walks the same tiles
in the same order, so a producer's loop and its consumer's stay matched, and
the stage and phase registers of a ring carry from one tile to the next.

With `pingpong`, the role of two or more warpgroups takes the tiles in turn:
its body runs under raster.turn_condition, so warpgroup w computes tiles w,
w + N, ... of the block's while the others run their epilogues or wait; the
producer still walks every tile. The sync passes write the rest: each
warpgroup skips the ring stages of the tiles it leaves to the others, and
named barriers hand the tensor cores from one warpgroup to the next.
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir import nodes as ir
from hopperc.ir.raster import TILE_LOOP, extent, ragged_walk, turn_condition, walk_registers


def check(grid: tuple[ir.GridAxis, ...], cluster: tuple[int, ...], manual: bool,
          span: Span) -> None:
    if manual:
        raise CompileError(span, "a persistent kernel's tile loop is written by the compiler; "
                                 "a manual kernel writes its own")
    if not grid:
        raise CompileError(span, "a persistent kernel walks a grid of 1 to 3 axes; declare one")
    if any(c != 1 for c in cluster[1:]):
        raise CompileError(span, "a persistent kernel's cluster spans the first grid axis: "
                                 f"cluster({cluster[0] * cluster[1] * cluster[2]}), not "
                                 f"cluster({', '.join(map(str, cluster))})")
    if cluster[0] > 1 and ragged_walk(grid):
        raise CompileError(span, "the blocks of a ragged grid's walk take tiles one by one; "
                                 "remove the cluster")


def turning_role(roles: tuple[ir.RoleInfo, ...], persistent: bool, span: Span) -> ir.RoleInfo:
    """The role whose warpgroups take tiles in turn in a pingpong kernel."""
    if not persistent:
        raise CompileError(span, "'pingpong' alternates the tiles a persistent block takes; add "
                                 "'persistent'")
    turning = [r for r in roles if r.warpgroups >= 2 and r.active_warps == r.warps]
    if len(turning) != 1:
        raise CompileError(turning[1].span if turning else span,
                           "'pingpong' needs exactly one role of two or more warpgroups (they "
                           f"take the tiles in turn); this kernel has {len(turning)}")
    return turning[0]


def tile_loop(body: ir.Block, grid: tuple[ir.GridAxis, ...], cluster: int, span: Span,
              turns: int = 0) -> ir.Block:
    """`body` inside the loop over this block's tiles (with clusters of `cluster`
    > 1 blocks, over its cluster's runs of tiles: ir/raster.py); with `turns` N,
    run by warpgroup tile % N of the role."""
    if turns:
        body = ir.Block((ir.IfThen(turn_condition(turns), body, ir.Block(), span),))
    walk = ragged_walk(grid)
    if walk is None:
        tiles = extent(grid[0], cluster)
        for axis in grid[1:]:
            tiles = ir.ScalarOp("*", tiles, extent(axis))
    else:
        tiles = walk_registers()[0]
    who = ("cluster", "clusters") if cluster > 1 else ("block", "blocks")
    block = ir.Scalar(ir.ScalarKind.BUILTIN, who[0])
    blocks = ir.Scalar(ir.ScalarKind.BUILTIN, who[1])
    count = ir.ScalarOp("/", ir.ScalarOp("-", tiles, block), blocks)  # `/` rounds up
    index = ir.ScalarOp("+", block, ir.ScalarOp(
        "*", ir.Scalar(ir.ScalarKind.LOOP, TILE_LOOP), blocks))
    loop = ir.ForLoop(TILE_LOOP, ir.const(0), count,
                      ir.Block((ir.TakeTile(index, span, walk), *body.stmts)), span)
    if walk is None:
        return ir.Block((loop,))
    return ir.Block((ir.StartTileWalk(walk, span), loop))
