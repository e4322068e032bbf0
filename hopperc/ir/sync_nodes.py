"""Synchronization IR nodes: what the sync passes insert (with a `Reason`) and
what manual code writes (without one). Re-exported by `hopperc.ir.nodes`."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hopperc.diagnostics import Span
from hopperc.ir.scalars import ScalarExpr
from hopperc.ir.views import BufferView


class MemoryScope(Enum):
    """The threads a release or an acquire synchronizes with (PTX `.cta` or
    `.cluster`): a release and an acquire synchronize only when each one's scope
    holds the other's thread (they are morally strong)."""

    CTA = "cta"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class BarrierRef:
    array: str
    index: ScalarExpr


class Hazard(Enum):
    GENERIC_WRITE_ASYNC_READ = "generic write -> async read"
    GENERIC_READ_ASYNC_WRITE = "generic read -> async write"
    ASYNC_WRITE_READ = "async write -> read"
    ASYNC_READ_WRITE = "async read -> write"
    ASYNC_WRITE_WRITE = "async write -> write"
    THREAD_HANDOFF = "hand-off between threads"
    REGISTERS_TO_WGMMA = "register access -> wgmma"
    SETUP = "barrier setup"
    STAGE_HANDOFF = "pipeline stage hand-off"
    REGISTER_BUDGET = "register budget"
    TURN_ORDER = "pingpong turn order"


@dataclass(frozen=True)
class Reason:
    """Why the compiler inserted a sync: the hazard, what it protects (a shared
    buffer or a register tile), and both accesses."""

    hazard: Hazard
    subject: str
    before: str
    before_span: Span | None
    after: str
    after_span: Span | None


@dataclass(frozen=True)
class ProxyFence:
    """fence.proxy.async.shared::cta; with `cluster`, .shared::cluster: it also
    orders the other blocks' shared memory (which a multicast load overwrites)."""

    span: Span
    reason: Reason | None = None
    cluster: bool = False


@dataclass(frozen=True)
class NamedBarrier:
    """bar.sync id, threads (id 0 with all threads is the block-wide barrier).
    `per_warpgroup`: each warpgroup of the role meets alone, on barrier `id + wg`
    with its 128 threads."""

    id: int
    threads: int
    span: Span
    reason: Reason | None = None
    per_warpgroup: bool = False


@dataclass(frozen=True)
class TurnBarrier:
    """Pingpong order between the warpgroups of a role that take tiles in turn,
    on named barriers `id` .. `id + warpgroups - 1`, each met by two warpgroups
    (256 threads). `hand_over`: `bar.arrive id + wg` (this warpgroup's turn at
    the tensor cores is over; the next one may start); else `bar.sync id +
    (wg - 1) mod warpgroups` (wait until the previous warpgroup handed over)."""

    id: int
    warpgroups: int
    hand_over: bool
    span: Span
    reason: Reason | None = None

    @property
    def threads(self) -> int:
        return 256


@dataclass(frozen=True)
class ClusterBarrier:
    """barrier.cluster.arrive.release + barrier.cluster.wait.acquire: every
    thread of every block of the cluster meets."""

    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class MBarrierInit:
    barrier: BarrierRef
    count: int
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class MBarrierInitFence:
    """fence.mbarrier_init.release.cluster: make inits visible before first use."""

    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class MBarrierArrive:
    barrier: BarrierRef
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class MBarrierExpectTx:
    """mbarrier.arrive.expect_tx: arrive and expect `nbytes` of async transactions."""

    barrier: BarrierRef
    nbytes: ScalarExpr
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class MBarrierWait:
    """try_wait.parity with .acquire at `scope`: .cluster where arrivals from
    the cluster's other blocks release what the waiter's next accesses need."""

    barrier: BarrierRef
    parity: ScalarExpr
    span: Span
    reason: Reason | None = None
    scope: MemoryScope = MemoryScope.CTA


@dataclass(frozen=True)
class MBarrierInval:
    barrier: BarrierRef
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class PhaseFlip:
    """Toggle the carried phase bit of a compiler-owned mbarrier after a wait."""

    phase: str
    span: Span


@dataclass(frozen=True)
class StageAdvance:
    """Step a role's carried pipeline state: the next stage, and the phase bit
    flipped each time the stage index wraps to 0. With `by`, that many steps at
    once (a pingpong warpgroup skipping the stages of another's tile)."""

    stage: str
    phase: str
    stages: int
    span: Span
    by: ScalarExpr | None = None


@dataclass(frozen=True)
class StageRelease:
    """mbarrier.arrive on a pipeline's empty barrier: the arriving threads are
    done with the stage the role used `lag` iterations ago (0: the latest).
    With `blocks` > 1 the ring is filled by multicast loads of the cluster's
    blocks, and each arrival is made on the barrier of every one of them (its
    own and, through `mapa`, the others'; an elected warp's lane r arrives in
    block r), with .release at `scope` (.cluster, so that the other blocks'
    producers acquire the readers' accesses)."""

    pipeline: str
    barrier: BarrierRef
    lag: int
    span: Span
    reason: Reason | None = None
    blocks: int = 1  # > 1: on that barrier in each of the cluster's blocks (mapa)
    scope: MemoryScope = MemoryScope.CTA


@dataclass(frozen=True)
class SetMaxRegisters:
    """setmaxnreg.{inc,dec}.sync.aligned.u32: the warpgroup's per-thread budget."""

    regs: int
    increase: bool
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class Pipeline:
    """A stage ring of shared buffers filled by one role and read by another.

    Stage s of every buffer completes on `full[s]` (one elected producer
    arrival with `tx_bytes` of async loads) and is released on `empty[s]`
    (`consumer_arrivals` arrivals)."""

    name: str
    producer: str
    consumer: str
    buffers: tuple[str, ...]
    stages: int
    full: str
    empty: str
    consumer_arrivals: int
    tx_bytes: int
    span: Span
    blocks: int = 1  # the cluster's blocks whose multicast loads fill each stage
    # Read at several sites: the consumer's stage register, stepped at each read
    # (a product's lag counts its steps, not loop iterations).
    read_counter: str | None = None


@dataclass(frozen=True)
class WgmmaFence:
    """wgmma.fence: order earlier register accesses before the wgmma that follow.
    `tiles` are the register operands of those wgmma (pinned in place by the
    renderer so the C++ compiler cannot move their writes past the fence)."""

    span: Span
    reason: Reason | None = None
    tiles: tuple[str, ...] = ()


@dataclass(frozen=True)
class WgmmaCommit:
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class WgmmaWait:
    """wgmma.wait_group N: at most `pending` batches still in flight. `tiles` are
    the accumulators it completes (pinned after the wait by the renderer) and
    `buffers` the shared memory (named by the buffer that owns it) whose
    wgmma reads it completes."""

    pending: int
    span: Span
    reason: Reason | None = None
    tiles: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()


@dataclass(frozen=True)
class BulkCommit:
    span: Span
    reason: Reason | None = None


@dataclass(frozen=True)
class BulkWaitRead:
    """cp.async.bulk.wait_group.read N: at most `pending` bulk groups still read
    shared memory. With N > 0, `views` are the sources of the stores it completes
    (those of the older groups), for the thread that waits: the barrier pass hands
    that completion to the other threads. N = 0 completes every store.
    `read` False is the plain cp.async.bulk.wait_group N: the older groups'
    global writes are complete too (and visible to the generic proxy: the
    completion of a bulk copy implies a generic-async proxy fence)."""

    pending: int
    span: Span
    reason: Reason | None = None
    views: tuple[BufferView, ...] = ()
    read: bool = True


SyncStmt = (ProxyFence | NamedBarrier | TurnBarrier | ClusterBarrier | MBarrierInit | MBarrierInitFence | MBarrierArrive
            | MBarrierExpectTx | MBarrierWait | MBarrierInval | StageRelease | SetMaxRegisters
            | WgmmaFence | WgmmaCommit | WgmmaWait | BulkCommit | BulkWaitRead)
