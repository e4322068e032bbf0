"""Kernel IR: small frozen dataclasses.

Statements carry the source span they come from; inserted synchronization
carries a `Reason` naming the hazard, the buffer and both accesses. Expressions
are values (their statement holds the span). Passes build new trees with
`dataclasses.replace`; nothing is mutated, so before/after can be compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hopperc.diagnostics import Span
from hopperc.ir.dtypes import DType, Swizzle  # noqa: F401 - re-exported with SharedBuffer
from hopperc.ir.declarations import (  # noqa: F401 - re-exported: one namespace for the IR
    GridAxis, MBarrierArray, RoleInfo, ScalarParam, SharedBuffer, TensorParam)
from hopperc.ir.scalars import (  # noqa: F401 - re-exported: one namespace for the IR
    Scalar, ScalarExpr, ScalarKind, ScalarOp, TensorElement, const, operands, with_operands)
from hopperc.ir.semaphores import (  # noqa: F401 - re-exported
    Count, CountRead, GlobalProxyFence, SemaphoreStmt, Signal, Wait)
from hopperc.ir.sync_nodes import (  # noqa: F401 - re-exported: one namespace for the IR
    BarrierRef, BulkCommit, BulkWaitRead, ClusterBarrier, Hazard, MBarrierArrive, MBarrierExpectTx,
    MBarrierInit, MBarrierInitFence, MBarrierInval, MBarrierWait, MemoryScope, NamedBarrier,
    PhaseFlip, Pipeline, ProxyFence, Reason, SetMaxRegisters, StageAdvance, StageRelease, SyncStmt,
    TurnBarrier, WgmmaCommit, WgmmaFence, WgmmaWait)
from hopperc.ir.tile_exprs import (  # noqa: F401 - re-exported: one namespace for the IR
    Convert, ElementIndex, Elementwise, GlobalVector, Literal, RowPartsSum, RowReduce, RowValues,
    ScalarValue, SharedRead, ThreadRowSum, TileExpr, TileRef)
from hopperc.ir.views import BufferView, ViewPart  # noqa: F401 - re-exported: one namespace
from hopperc.ir.walk_nodes import StartTileWalk, TakeTile, TileWalk  # noqa: F401 - re-exported


def phase_register(barrier_array: str) -> str:
    """The register carrying the phase bit of a compiler-owned mbarrier."""
    return f"phase_{barrier_array}"


class Layout(Enum):
    """How a register tile's elements are spread over the running threads."""

    ROW_MAJOR = "row_major"  # slot k of thread t holds linear element k * threads + t
    # The wgmma register fragment of a warpgroup (accumulator D, and A of a
    # register-A wgmma, which has the same layout 16 columns at a time): slot k
    # of thread t (warp w, lane l) holds row 16w + l/4 + 8((k/2)%2), column
    # 8(k/4) + 2(l%4) + k%2.
    WGMMA = "wgmma"
    # A register row vector: one value per row of a warpgroup's wgmma-layout tile.
    # Slot j of thread t (warp w, lane l) holds row 16w + l/4 + 8j (j = 0, 1), the
    # rows that thread's wgmma-layout slots k hold with (k/2)%2 == j; the 4 lanes
    # of a quad hold the same rows.
    ROWS = "rows"
    # A register row vector of ROWS's slots whose 4 lanes of a quad each hold
    # their own part of a row: the row's value is the sum of the quad's parts (a
    # row sum deferred past a loop, passes/defer_row_sums.py; RowPartsSum).
    ROW_PARTS = "row_parts"
    # A register row vector of a row-major tile whose rows each span all its
    # threads (columns a multiple of the threads): every thread holds every row,
    # slot j being row j.
    EVERY_ROW = "every_row"


# ---------------------------------------------------------------- statements
class Engine(Enum):
    TMA = "tma"  # cp.async.bulk.tensor through a tensor map
    BULK = "bulk"  # cp.async.bulk of contiguous bytes

    @property
    def label(self) -> str:
        """How explanations name the engine: 'TMA load', 'bulk store'."""
        return "TMA" if self is Engine.TMA else "bulk"


@dataclass(frozen=True)
class Block:
    stmts: tuple["Stmt", ...] = ()


@dataclass(frozen=True)
class RoleBlock:
    role: RoleInfo
    body: Block
    span: Span


@dataclass(frozen=True)
class IterationRange:
    """A loop that runs part of a source loop's iterations (split_boundary_iterations):
    the source loop's bounds, and whether this part is its interior (the masks
    uniform over it replaced by their value) or a boundary (the body as written)."""

    start: ScalarExpr
    stop: ScalarExpr
    interior: bool


@dataclass(frozen=True)
class ForLoop:
    """`turns`: the warpgroups of the role take turns issuing the body's
    products (passes/order_product_turns.py)."""

    var: str
    start: ScalarExpr
    stop: ScalarExpr
    body: Block
    span: Span
    turns: bool = False
    split: IterationRange | None = None  # a part of a source loop's iterations

    @property
    def first_iteration(self) -> ScalarExpr:
        """`var == start`: holds on the loop's first iteration only."""
        return ScalarOp("==", Scalar(ScalarKind.LOOP, self.var), self.start)


@dataclass(frozen=True)
class IfThen:
    cond: ScalarExpr
    then: Block
    orelse: Block
    span: Span


@dataclass(frozen=True)
class RankDivergence:
    """Why a load whose box the blocks of a cluster share stays each block's own:
    `construct` (a loop's trip count or a condition, at `span`) around the load
    or around its stage's reads depends on `scalar`, which differs between the
    cluster's blocks, so they might not issue the same loads in the same
    iterations; or, with `scalar` None, `construct` is manual code touching the
    ring, which the compiler does not analyse."""

    construct: str
    scalar: str | None
    span: Span

    @property
    def because(self) -> str:
        if self.scalar is None:
            return (f"{self.construct} (line {self.span.line}) loads, waits for, reads or "
                    "releases the ring in code the compiler does not analyse")
        return (f"{self.construct} (line {self.span.line}), around the ring's loads or reads, "
                f"depends on {self.scalar}, which differs between the blocks of a cluster")


@dataclass(frozen=True)
class RaggedBound:
    """A `tma` copy's `START : END` index: along tensor dimension `dim` (never
    the innermost) the box starts at element START (the copy's coordinate there)
    and elements at or past `end` (or the tensor's extent) are out of bounds: a
    load reads them as zeros, a store does not write them."""

    dim: int
    end: ScalarExpr


@dataclass(frozen=True)
class RaggedUnicast:
    """Why a ragged load whose box the blocks of a cluster share stays each
    block's own: a multicast splits the box into row slices, one per block,
    and the compiler does not clip slices at a ragged bound."""

    span: Span

    @property
    def because(self) -> str:
        return (f"its box is ragged (clipped at an END bound, line {self.span.line}), which a "
                "multicast's per-block slices do not carry")


@dataclass(frozen=True)
class AsyncLoad:
    """Global -> shared through the async proxy, completing on `barrier`. With
    `multicast` > 1 the box is the same for that many blocks of the cluster:
    the block of cluster rank r issues its r-th slice of rows (`issued_box`)
    into rows r of the buffer in every one of them, completing on each one's
    `barrier`. A load `ahead` of its readers in their own role (a one-role ring)
    is ordered against them by its pipeline's full and empty barriers alone, as
    a producer role's loads are: the passes that order a role's own accesses
    leave it out."""

    engine: Engine
    dst: BufferView
    tensor: str
    coords: tuple[ScalarExpr, ...]
    box: tuple[int, ...]
    nbytes: int
    barrier: BarrierRef | None
    span: Span
    multicast: int = 1
    ahead: int = 0  # > 0: issued that many iterations before its readers, in their role
    unicast: RankDivergence | RaggedUnicast | None = None  # a shared box not multicast, and why
    ragged: RaggedBound | None = None  # coords[ragged.dim] is an element START, clipped at END

    @property
    def issued_box(self) -> tuple[int, ...]:
        return (self.box[0] // self.multicast, *self.box[1:])

    @property
    def multicast_mask(self) -> int:
        """The cluster ranks a multicast writes: every block of a one-axis cluster."""
        return (1 << self.multicast) - 1


@dataclass(frozen=True)
class AsyncStore:
    """Shared -> global through the async proxy (a bulk group). With
    `reduce_add` the box is added into global memory element by element
    (cp.reduce.async.bulk.tensor .add: each element's add is atomic, the order of
    the adds of different stores is free); its commit and waits are a store's."""

    engine: Engine
    tensor: str
    coords: tuple[ScalarExpr, ...]
    box: tuple[int, ...]
    src: BufferView
    span: Span
    ragged: RaggedBound | None = None  # coords[ragged.dim] is an element START, clipped at END
    reduce_add: bool = False

    @property
    def verb(self) -> str:
        """How messages name it: "store" or "reduce-add"."""
        return "reduce-add" if self.reduce_add else "store"


@dataclass(frozen=True)
class TileDef:
    name: str
    dtype: DType
    shape: tuple[int, ...]
    layout: Layout
    threads: int
    init: TileExpr | None  # None: undefined until written (a product overwrites it)
    span: Span


@dataclass(frozen=True)
class TileAssign:
    name: str
    value: TileExpr
    span: Span


@dataclass(frozen=True)
class RowPartials:
    """The first half of rowmax / rowmin / rowsum (`op` "max", "min" or "sum") of row-major f32
    tile `tile`, whose rows each span all its threads: each thread reduces its
    slots of a row, the warp's lanes combine theirs with shuffles, and lane 0
    of warp w writes the row's partial to row w of shared view `partials` (f32
    [warps, rows]; `buf[wg]` where each warpgroup holds its own tile). A
    RowReduce with these `partials` combines them."""

    op: str
    tile: str
    partials: BufferView
    span: Span


@dataclass(frozen=True)
class SharedStore:
    """Registers -> shared memory by the running threads (generic proxy write).
    A register row vector's store into a 1-D view (`sl = v`, `sl[wg] = v`) has
    `row_layout` (Layout.ROWS or EVERY_ROW, the vector's, over `row_threads`):
    element r is row r, written by one thread that holds it, as GlobalRowStore's."""

    dst: BufferView
    value: TileExpr
    span: Span
    row_layout: Layout | None = None
    row_threads: int = 0


@dataclass(frozen=True)
class GlobalRowStore:
    """Register row vector -> global memory by the running threads (st.global,
    generic proxy): row r of `value` (a vector of `layout` over `threads`:
    Layout.ROWS, a warpgroup's 64 rows, or EVERY_ROW) goes to element
    `start + r` of the tensor's last dimension, at element `index` of each
    other dimension. One lane stores each row; an element at or past `end`
    (None: no bound but the tensor's), or outside the tensor, is not written.
    `atomic`: the lane adds its value to the element (`T[...] += v`: one
    `red.global.add` per row, relaxed, .gpu scope): adds of several threads or
    blocks to one element need no order among them, only against plain writes.
    A warpgroup's register tile added (`T[R0 : R1, C0 : C1] += acc`, atomic,
    `columns` > 0, Layout.WGMMA): element (r, c) of the [rows, columns] `value`
    goes to element `row_start + r` (below `row_end`) of the second-to-last
    dimension and `start + c` (below `end`) of the last; `index` then indexes
    the dimensions before those two. Each thread adds the elements it holds."""

    tensor: str
    index: tuple[ScalarExpr, ...]
    start: ScalarExpr
    end: ScalarExpr | None
    value: TileExpr
    rows: int
    layout: Layout
    threads: int
    span: Span
    atomic: bool = False
    columns: int = 0
    row_start: ScalarExpr | None = None
    row_end: ScalarExpr | None = None


@dataclass(frozen=True)
class Mma:
    """acc (+)= a @ b on the tensor cores (wgmma); a from shared memory or registers.
    With `overwrite_when`, an accumulating product overwrites acc (scale-d 0 on
    its first instruction) whenever that condition holds: its loop's first
    iteration, the accumulator being undefined before it."""

    acc: str
    a: BufferView | TileRef
    b: BufferView
    accumulate: bool
    shape: tuple[int, int, int]  # M, N, K of the whole product for one warpgroup
    span: Span
    overwrite_when: ScalarExpr | None = None


@dataclass(frozen=True)
class ElectLane:
    """`elect.sync`: one lane of each running warp executes the body."""

    body: Block
    span: Span


@dataclass(frozen=True)
class OneThread:
    """One thread of the running role (first warp, elected lane) executes the body;
    with `per_warpgroup`, one thread of each of the role's warpgroups (its first
    warp's elected lane: the role's thread for warpgroup 0)."""

    body: Block
    span: Span
    per_warpgroup: bool = False


@dataclass(frozen=True)
class ManualRegion:
    """Code whose synchronization the user wrote; sync passes leave it alone."""

    body: Block
    span: Span



Stmt = (RoleBlock | ForLoop | IfThen | AsyncLoad | AsyncStore | TileDef | TileAssign
        | RowPartials | SharedStore | GlobalRowStore | Mma | TakeTile | StartTileWalk | ElectLane
        | OneThread | ManualRegion | PhaseFlip | StageAdvance | SyncStmt | SemaphoreStmt)


# ---------------------------------------------------------------- kernel
@dataclass(frozen=True)
class Kernel:
    name: str
    tensors: tuple[TensorParam, ...]
    scalars: tuple[ScalarParam, ...]
    consts: tuple[tuple[str, int], ...]
    grid: tuple[GridAxis, ...]
    cluster: tuple[int, int, int]
    threads: int
    roles: tuple[RoleInfo, ...]
    buffers: tuple[SharedBuffer, ...]
    barriers: tuple[MBarrierArray, ...]
    body: Block
    span: Span
    carried: tuple[str, ...] = field(default=())  # unsigned registers starting at 0
    pipelines: tuple[Pipeline, ...] = field(default=())
    persistent: bool = False  # blocks loop over the output tiles (TakeTile)
    specialized: bool = False  # the roles were written by the compiler (`specialize`)
    pingpong: bool = False  # a role's warpgroups take the tiles in turn (raster.turn)

    def pipeline(self, name: str) -> Pipeline:
        return next(p for p in self.pipelines if p.name == name)

    def buffer(self, name: str) -> SharedBuffer:
        return next(b for b in self.buffers if b.name == name)

    def tensor(self, name: str) -> TensorParam:
        return next(t for t in self.tensors if t.name == name)
