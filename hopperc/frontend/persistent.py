"""Persistent kernels (`persistent` in the header): each block loops over
output tiles instead of computing the one its launch index names.

The body of each role (or the kernel's body, without roles) becomes a loop in
which block b takes tiles b, b + blocks, b + 2 blocks, ... (`TakeTile` sets
tile.AXIS, in ir/raster.py's grouped order). Every role walks the same tiles
in the same order, so a producer's loop and its consumer's stay matched, and
the stage and phase registers of a ring carry from one tile to the next.
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir import nodes as ir
from hopperc.ir.raster import TILE_LOOP, extent


def check(grid: tuple[ir.GridAxis, ...], cluster: tuple[int, ...], manual: bool,
          span: Span) -> None:
    if manual:
        raise CompileError(span, "a persistent kernel's tile loop is written by the compiler; "
                                 "a manual kernel writes its own")
    if not 1 <= len(grid) <= 2:
        raise CompileError(span, f"a persistent kernel walks a grid of 1 or 2 axes, not "
                                 f"{len(grid)}")
    if any(c != 1 for c in cluster):
        raise CompileError(span, "persistent kernels with clusters are not supported yet")


def tile_loop(body: ir.Block, grid: tuple[ir.GridAxis, ...], span: Span) -> ir.Block:
    """`body` inside the loop over this block's tiles."""
    tiles = extent(grid[0])
    for axis in grid[1:]:
        tiles = ir.ScalarOp("*", tiles, extent(axis))
    block = ir.Scalar(ir.ScalarKind.BUILTIN, "block")
    blocks = ir.Scalar(ir.ScalarKind.BUILTIN, "blocks")
    count = ir.ScalarOp("/", ir.ScalarOp("-", tiles, block), blocks)  # `/` rounds up
    index = ir.ScalarOp("+", block, ir.ScalarOp(
        "*", ir.Scalar(ir.ScalarKind.LOOP, TILE_LOOP), blocks))
    loop = ir.ForLoop(TILE_LOOP, ir.const(0), count,
                      ir.Block((ir.TakeTile(index, span), *body.stmts)), span)
    return ir.Block((loop,))
