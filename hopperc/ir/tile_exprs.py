"""Tile expressions: the values element-wise statements compute, per element of
their grid. Re-exported by `hopperc.ir.nodes`."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir.dtypes import DType
from hopperc.ir.scalars import ScalarExpr
from hopperc.ir.views import BufferView


@dataclass(frozen=True)
class TileRef:
    """A register tile, or its columns [start, stop) (constant, whole 8-column
    groups of a wgmma-layout tile: a contiguous run of each thread's slots)."""

    name: str
    columns: tuple[int, int] | None = None


@dataclass(frozen=True)
class SharedRead:
    """Element-wise read of shared memory by the running threads (generic proxy).
    `broadcast` ('rows' or 'cols'): a 1-D view, one value per row or column, from
    its `elements` [start, stop) (None: all of them)."""

    view: BufferView
    broadcast: str | None = None
    elements: tuple[int, int] | None = None


@dataclass(frozen=True)
class GlobalVector:
    """A slice of a 1-D global tensor, broadcast along `axis` ('rows' or 'cols')."""

    tensor: str
    start: ScalarExpr
    axis: str
    length: int | None = None  # elements read, where known


@dataclass(frozen=True)
class Literal:
    value: float


@dataclass(frozen=True)
class ScalarValue:
    expr: ScalarExpr


@dataclass(frozen=True)
class RowReduce:
    """rowmax(name) / rowmin(name) / rowsum(name) / argmax(name) (`op` "max",
    "min", "sum" or "argmax": the column of each row's first maximum, as f32):
    one value per row of an f32 tile. Of a warpgroup's wgmma-layout tile
    (`partials` None), a register row vector (Layout.ROWS) reduced in registers
    (argmax carries (value, column) pairs). Of a row-major tile whose
    rows span every thread that holds it, a vector of Layout.EVERY_ROW that
    combines the warps' partials a RowPartials statement wrote to the shared
    view `partials` (f32 [warps, rows]; a warpgroup's part `buf[wg]` where each
    warpgroup holds its own tile): a generic read of that view."""

    op: str
    name: str
    partials: BufferView | None = None

    @property
    def function(self) -> str:
        """The name a kernel calls it by."""
        return self.op if self.op == "argmax" else f"row{self.op}"


@dataclass(frozen=True)
class ThreadRowSum:
    """This thread's part of rowsum(name) of a warpgroup's wgmma-layout f32 tile:
    its own slots of the row summed, without the quad's shuffles. Only in a
    statement over a Layout.ROW_PARTS vector (passes/defer_row_sums.py)."""

    name: str


@dataclass(frozen=True)
class RowPartsSum:
    """The value of each row of Layout.ROW_PARTS vector `name`: the 4 parts its
    quad's lanes hold, summed with shuffles (xor 1, 2), in a statement over a
    Layout.ROWS vector."""

    name: str


@dataclass(frozen=True)
class RowValues:
    """`name[:, None]`: a register row vector's value for the element's row, in a
    statement over a warpgroup's wgmma-layout tile (`per_row` None), or over a
    row-major tile whose rows span its threads, where each thread holds
    `per_row` consecutive slots of each row (Layout.EVERY_ROW vectors)."""

    name: str
    per_row: int | None = None


@dataclass(frozen=True)
class ElementIndex:
    """The row (in its 2-D plane) or column of the element being computed, in the
    statement's element grid: `row()`, `col()` (for masks)."""

    axis: str  # "row" or "col"


@dataclass(frozen=True)
class Elementwise:
    """An element-wise operation: + - * / max min neg relu abs exp exp2 log
    log2 rsqrt sqrt tanh sigmoid erf sin cos,
    comparisons (1 where true, else 0) and where(c, a, b) (a where c != 0)."""

    op: str
    args: tuple["TileExpr", ...]


@dataclass(frozen=True)
class Convert:
    dtype: DType
    operand: "TileExpr"


TileExpr = (TileRef | SharedRead | GlobalVector | Literal | ScalarValue | ElementIndex
            | RowReduce | ThreadRowSum | RowPartsSum | RowValues | Elementwise | Convert)
