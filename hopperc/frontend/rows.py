"""Row vectors in element-wise statements: each kind goes with the tiles whose
rows its threads hold. A warpgroup's [64, N] tiles (wgmma layout) go with
vectors of Layout.ROWS (a thread's two rows); a row-major tile whose rows each
span all its threads goes with vectors of Layout.EVERY_ROW (every row in every
thread), and its reductions meet in shared memory (RowPartials)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.diagnostics import CompileError, Span
from hopperc.frontend.scope import TileSymbol
from hopperc.ir import nodes as ir
from hopperc.ir.layout import WGMMA_M

_VECTOR_LAYOUTS = (ir.Layout.ROWS, ir.Layout.EVERY_ROW)


def register_vector_layout(threads: int, length: int) -> ir.Layout:
    """The layout of a register vector of `length` rows computed by `threads`
    (element_threads) from no tile of its own (`m: f32[64] = -inf`, `u: f32[BM]
    = t`): a warpgroup's 64 rows as its [64, N] tiles hold them (ROWS), else
    every row in every thread."""
    return ir.Layout.ROWS if threads == 128 and length == WGMMA_M else ir.Layout.EVERY_ROW


def row_operands(expr: ir.TileExpr, layout: ir.Layout | None, shape: tuple[int, ...],
                 threads: int, lookup: Callable[[str], object], span: Span) -> ir.TileExpr:
    """`expr` with its row vectors and reductions checked against the statement
    (its elements' `layout` and `shape` over `threads`), and each broadcast over a
    row-major tile told how many consecutive slots of a row a thread holds."""
    def rewrite(e: ir.TileExpr) -> ir.TileExpr:
        match e:
            case ir.Elementwise(args=args):
                return replace(e, args=tuple(rewrite(a) for a in args))
            case ir.Convert(operand=operand):
                return replace(e, operand=rewrite(operand))
            case ir.RowValues(name=name):
                vector = lookup(name)
                fits = _broadcast(e, vector, layout, shape, threads)
                if fits is None and vector.loaded is not None:
                    return vector.loaded  # a loaded vector read where it is used
                if fits is None:
                    raise CompileError(span, _broadcast_refused(name, vector.layout, layout,
                                                                shape))
                return fits
            case ir.RowReduce(name=name, partials=partials):
                kind = ir.Layout.ROWS if partials is None else ir.Layout.EVERY_ROW
                if layout is not kind:
                    raise CompileError(span, f"{e.function}({name}) gives {_kind(kind)}, which "
                                             f"does not go with {_statement(layout)}")
            case ir.TileRef(name=name):
                tile = lookup(name)
                if isinstance(tile, TileSymbol) and tile.layout in _VECTOR_LAYOUTS and \
                        tile.layout is not layout and tile.loaded is not None:
                    return tile.loaded
                if isinstance(tile, TileSymbol) and tile.layout in _VECTOR_LAYOUTS and \
                        tile.layout is not layout:
                    raise CompileError(span, f"'{name}' is {_kind(tile.layout)}, which does "
                                             f"not go with {_statement(layout)}")
        return e
    return rewrite(expr)


def _broadcast(e: ir.RowValues, vector: TileSymbol, layout: ir.Layout | None,
               shape: tuple[int, ...], threads: int) -> ir.RowValues | None:
    """`e` over a statement whose elements lie in `layout`, or None where its threads
    do not hold the rows of those elements."""
    if layout is ir.Layout.WGMMA and vector.layout is ir.Layout.ROWS:
        return e
    if (layout is ir.Layout.ROW_MAJOR and vector.layout is ir.Layout.EVERY_ROW
            and len(shape) == 2 and shape[0] == vector.shape[0] and shape[1] % threads == 0
            and vector.threads == threads):
        return replace(e, per_row=shape[1] // threads)
    return None


def _broadcast_refused(name: str, kind: ir.Layout, layout: ir.Layout | None,
                       shape: tuple[int, ...]) -> str:
    return (f"'{name}' ({_kind(kind)}) is broadcast ({name}[:, None]) over tiles whose rows "
            "its threads hold: a warpgroup's [64, N] tiles for a vector of 64 rows in a "
            "warpgroup, or row-major tiles of as many rows, each row spread over all their "
            f"threads; not over {_statement(layout, shape)}")


def _kind(layout: ir.Layout) -> str:
    if layout is ir.Layout.ROWS:
        return "a vector of a warpgroup's [64, N] tiles"
    return "a vector of row-major tiles whose rows span their threads"


def _statement(layout: ir.Layout | None, shape: tuple[int, ...] | None = None) -> str:
    if layout in _VECTOR_LAYOUTS:
        return _kind(layout)
    if layout is None:
        return "a store to a shared view that is not 2-D (a register vector is not stored " \
               "to shared memory yet)"
    what = "a warpgroup's [64, N] tile" if layout is ir.Layout.WGMMA else "a row-major tile"
    return what if shape is None else f"{what} {list(shape)}"
