"""Shared-memory views: the part of a buffer that a statement (ir/nodes.py), a
sync statement (ir/sync_nodes.py) or a tile expression (ir/tile_exprs.py) reads
or writes. A module of their own, so that the sync statements and the tile
expressions, which ir/nodes.py re-exports, need nothing from it. Re-exported by
`hopperc.ir.nodes`."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir.scalars import ScalarExpr


@dataclass(frozen=True)
class BufferView:
    """A buffer (one stage of it), optionally one slice along its first axis.

    `part` selects block `part.index` of `part.count` equal blocks of the first
    axis (a warpgroup's rows for `buf[wg]`, a plane for `buf[i]` on rank >= 3),
    or of a rank-2 buffer's columns (`part.columns`: a warpgroup's rows of the
    transposed view, `buf^T[wg]`, whole column blocks of the buffer).
    """

    buffer: str
    stage: ScalarExpr | None = None
    part: ViewPart | None = None
    transposed: bool = False
    storage: str | None = None  # the buffer whose memory it reuses, if any


@dataclass(frozen=True)
class ViewPart:
    index: ScalarExpr
    count: int
    columns: bool = False  # blocks of the columns, not of the first axis
