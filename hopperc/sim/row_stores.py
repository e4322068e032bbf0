"""Which elements a register row vector's store to global memory
(ir.GlobalRowStore) writes, and which running lanes write them, as code
generation does: row r goes to element START + r of the last dimension unless
that is at or past END, outside the tensor, or a leading index is; lane q < 2
of the quad holding a row (Layout.ROWS) or thread r % threads (EVERY_ROW)
stores it."""
from __future__ import annotations

from typing import Callable

import numpy as np

from hopperc.ir import nodes as ir


def stored_elements(stmt: ir.GlobalRowStore, shape: tuple[int, ...],
                    integer: Callable[[ir.ScalarExpr], int]
                    ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The rows that reach the tensor (of `shape`) and, as a numpy index, the
    element each one writes."""
    index = [integer(i) for i in stmt.index]
    start = integer(stmt.start)
    end = shape[-1] if stmt.end is None else min(integer(stmt.end), shape[-1])
    rows = np.arange(stmt.rows)
    keep = (start + rows >= 0) & (start + rows < end)
    if not all(0 <= i < extent for i, extent in zip(index, shape)):
        keep[:] = False
    rows = rows[keep]
    return rows, tuple(np.full(rows.size, i) for i in index) + (start + rows,)


def storing_rows(layout: ir.Layout, rows: int, threads: int, warp: int,
                 lanes: tuple[int, ...]) -> np.ndarray:
    """Which rows of a row vector of `layout` over `threads` the running `lanes`
    of role warp `warp` store (to global memory, or to a 1-D shared view)."""
    mine = np.zeros(rows, dtype=bool)
    for lane in lanes:
        if layout is ir.Layout.ROWS:
            if lane % 4 < 2:
                mine[16 * (warp % 4) + lane // 4 + 8 * (lane % 4)] = True
        else:  # every thread holds every row: thread t stores rows t, t + threads, ...
            mine[(32 * warp + lane) % threads::threads] = True
    return mine


def added_tile_elements(stmt: ir.GlobalRowStore, shape: tuple[int, ...],
                        integer: Callable[[ir.ScalarExpr], int]
                        ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """A register tile's add (`columns` > 0): which of its [rows, columns]
    elements reach the tensor (of `shape`), and, as a numpy index over those in
    row-major order, the element each one adds to."""
    index = [integer(i) for i in stmt.index]
    row0, col0 = integer(stmt.row_start), integer(stmt.start)
    row_end = min(integer(stmt.row_end), shape[-2])
    col_end = min(integer(stmt.end), shape[-1])
    rows = row0 + np.arange(stmt.rows)[:, None]
    cols = col0 + np.arange(stmt.columns)[None, :]
    keep = (rows >= 0) & (rows < row_end) & (cols >= 0) & (cols < col_end)
    if not all(0 <= i < extent for i, extent in zip(index, shape)):
        keep[:] = False
    r, c = np.nonzero(keep)
    return keep, tuple(np.full(r.size, i) for i in index) + (row0 + r, col0 + c)
