"""A persistent block's walk over the output tiles (ir/raster.py): `TakeTile`,
and over a ragged grid its `TileWalk` and `StartTileWalk`. Re-exported by
`hopperc.ir.nodes` (one namespace for the IR)."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import Span
from hopperc.ir.scalars import ScalarExpr


@dataclass(frozen=True)
class TileWalk:
    """A ragged grid's tiles (ir/raster.py): the axes' extents, first fastest,
    where the faster ones read tile.<slowest>. A walking role keeps a cursor over
    the slowest axis in the carried registers raster.WALK_GROUP (its value) and
    raster.WALK_FIRST (the linear index of that value's first tile)."""

    axes: tuple[str, ...]
    extents: tuple[ScalarExpr, ...]

    def __post_init__(self) -> None:
        assert len(self.axes) == len(self.extents) >= 1

    @property
    def slowest(self) -> str:
        return self.axes[-1]


@dataclass(frozen=True)
class StartTileWalk:
    """Before a persistent block's tile loop over a ragged grid: the register
    raster.WALK_TOTAL counts the grid's tiles (the sum over the slowest axis of
    the faster extents' product) and the cursor starts at the slowest axis's 0."""

    walk: TileWalk
    span: Span


@dataclass(frozen=True)
class TakeTile:
    """A persistent block takes output tile `index` (linear, in ir/raster.py's
    order): from here on tile.AXIS are that tile's coordinates. With `walk` (a
    ragged grid) the cursor moves forward to the slowest axis's value holding
    `index` first; indices only grow, so a block's walk is O(that extent)."""

    index: ScalarExpr
    span: Span
    walk: TileWalk | None = None
