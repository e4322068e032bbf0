"""What a kernel declares: its tensors and scalars, shared buffers, mbarrier
arrays, grid axes and roles. Re-exported by `hopperc.ir.nodes`."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import Span
from hopperc.ir.dtypes import DType, Swizzle
from hopperc.ir.scalars import ScalarExpr


@dataclass(frozen=True)
class TensorParam:
    name: str
    dtype: DType
    dims: tuple[str | int, ...]
    span: Span


@dataclass(frozen=True)
class ScalarParam:
    name: str
    dtype: DType
    span: Span


@dataclass(frozen=True)
class SharedBuffer:
    name: str
    dtype: DType
    shape: tuple[int, ...]
    stages: int
    swizzle: Swizzle
    span: Span
    reuses: str | None = None  # placed in this (earlier) buffer's memory

    @property
    def storage(self) -> str:
        """The buffer whose memory this one occupies (itself unless it reuses one)."""
        return self.reuses or self.name

    @property
    def stage_bytes(self) -> int:
        size = self.dtype.nbytes
        for extent in self.shape:
            size *= extent
        return size

    @property
    def alignment(self) -> int:
        return self.swizzle.alignment


@dataclass(frozen=True)
class MBarrierArray:
    """`count` mbarriers in shared memory (8 bytes each). `arrivals` is the
    arrival count the compiler initializes them with (None: declared by the
    user, who initializes them in manual code)."""

    name: str
    count: int
    span: Span
    arrivals: int | None = None


@dataclass(frozen=True)
class GridAxis:
    """Block index axis `tile.<name>`: `extent` tiles, a positive integer
    expression of dimensions, constants and scalar parameters (`/` rounds up).
    In a ragged grid (ir/raster.py) the faster axes' extents may also read
    `tile.<the last axis>`."""

    name: str
    extent: "ScalarExpr"
    span: Span


@dataclass(frozen=True)
class RoleInfo:
    """A warp role: `warps` consecutive warps starting at `first_warp`."""

    name: str
    first_warp: int
    warps: int
    active_warps: int
    regs: int | None
    span: Span

    @property
    def threads(self) -> int:
        return self.warps * 32

    @property
    def warpgroups(self) -> int:
        return self.warps // 4
