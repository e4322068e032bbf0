"""The state of one simulated block: shared memory (data and shadow), barriers,
and the asynchronous operations in flight, each completing when the scheduler
says so (any time after issue, and no later than the wait that requires it)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Mapping

import numpy as np

from hopperc.diagnostics import Span
from hopperc.ir import nodes as ir
from hopperc.ir.dtypes import DType
from hopperc.ir.accesses import tile_operands
from hopperc.ir.elements import tensor_elements_in
from hopperc.ir.global_accesses import global_vectors
from hopperc.ir.integer_exprs import integer_test
from hopperc.sim.barriers import MBarrier, NamedBarrier
from hopperc.sim.block_accesses import BlockAccesses
from hopperc.sim.findings import Category, fail
from hopperc.sim.memory import Agents, Clock, GlobalWrites, ShadowMemory, Site
from hopperc.sim.scalars import PER_THREAD, compile_scalar, per_lane
from hopperc.sim.values import Clip, add_box, clipped_box, read_box, write_box
from hopperc.sim.views import Place, SharedSpace

TRACE_LENGTH = 14
_WHERE: dict[Span | None, str] = {}  # how a trace names each statement's line


def trace_line(who: str, span: Span | None, text: str) -> str:
    """An event as the trace of a finding shows it."""
    where = _WHERE.get(span)
    if where is None:
        where = _WHERE[span] = f" {span.file.rsplit('/', 1)[-1]}:{span.line}" if span else ""
    return f"{who}{where}: {text}"


@dataclass(frozen=True)
class ScalarCode:
    """A scalar expression compiled once, and which threads its value differs between."""

    evaluate: Callable[[Mapping[str, int]], int]
    per_lane: bool  # between the lanes of a warp
    per_thread: bool  # between any threads: a condition on it diverges
    # The tensor elements it reads (ld.global.nc): each tensor and its indices
    elements: tuple[tuple[str, tuple[Callable[[Mapping[str, int]], int], ...]], ...] = ()


@dataclass(frozen=True)
class Program:
    """What the simulator needs from the lowered kernel, computed once; the
    caches hold what depends only on the kernel, shared by every block and run."""

    kernel: ir.Kernel
    tiles: dict[str, ir.TileDef]
    carries_bytes: frozenset[str]  # mbarrier arrays that loads or expect_tx target
    scalars: dict = field(default_factory=dict, compare=False, repr=False)
    layout: dict = field(default_factory=dict, compare=False, repr=False)  # SharedSpace's
    vectors: dict = field(default_factory=dict, compare=False, repr=False)
    parts: dict = field(default_factory=dict, compare=False, repr=False)
    budget: "WorkBudget | None" = field(default=None, compare=False, repr=False)

    def scalar(self, expr: ir.ScalarExpr) -> ScalarCode:
        """Keyed by identity: hashing a frozen expression walks it, which is the
        cost compiling saves. The entry keeps the expression, so its id stays
        unique while the program lives."""
        hit = self.scalars.get(id(expr))
        if hit is None or hit[0] is not expr:
            elements = tuple((e.tensor, tuple(compile_scalar(i) for i in e.indices))
                             for e in dict.fromkeys(tensor_elements_in(expr)))
            hit = self.scalars[id(expr)] = (expr, ScalarCode(
                compile_scalar(expr), per_lane(expr), per_lane(expr, PER_THREAD), elements))
        return hit[1]

    @cached_property
    def integer_exact(self) -> Callable[[ir.TileExpr], bool]:
        """ir/integer_exprs.py's test (an i32 statement computed in integers)."""
        return integer_test(self.kernel, self.tiles)

    def global_vectors(self, expr: ir.TileExpr) -> tuple[ir.GlobalVector, ...]:
        """The 1-D global slices an element-wise expression reads (ld.global),
        found once per expression, keyed by identity as `scalar` is."""
        hit = self.vectors.get(id(expr))
        if hit is None or hit[0] is not expr:
            hit = self.vectors[id(expr)] = (expr, tuple(global_vectors(expr)))
        return hit[1]


    def parts_reads(self, expr: ir.TileExpr) -> tuple[str, ...]:
        """The Layout.ROW_PARTS vectors an element-wise expression reads as values
        (TileRef, RowValues: not through RowPartsSum), found once per expression,
        keyed by identity as `scalar` is."""
        hit = self.parts.get(id(expr))
        if hit is None or hit[0] is not expr:
            hit = self.parts[id(expr)] = (expr, tuple(
                e.name for e in tile_operands(expr) if isinstance(e, (ir.TileRef, ir.RowValues))
                and self.tiles[e.name].layout is ir.Layout.ROW_PARTS))
        return hit[1]


class BudgetReached(Exception):
    """The simulation used every step of its work budget."""


class WorkBudget:
    """Steps of one simulation, across all its schedules: a scheduler step (a warp
    running to its next synchronization, an asynchronous operation completing)
    or a loop iteration (a warp may run many before it synchronizes)."""

    def __init__(self, steps: int):
        self.steps, self.left = steps, steps

    def charge(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BudgetReached

    def guard(self, chooser):
        """`chooser`, charging a step per choice."""
        def choose(candidates, block_index, block):
            self.charge()
            return chooser(candidates, block_index, block)
        return choose


@dataclass
class Load:
    """A TMA or bulk load in flight: data and bytes land when it completes."""

    agent: int
    clock: Clock
    place: Place
    tensor: str
    origin: tuple[int, ...]
    box: tuple[int, ...]
    nbytes: int
    barrier: MBarrier
    site: Site
    clip: Clip = None  # a ragged load's (axis, END)


@dataclass(eq=False)
class Store:
    """A TMA or bulk store: reads shared memory and writes global memory any time
    until its group's wait, in any order with the issuer's other stores."""

    clock: Clock
    place: Place
    tensor: str
    origin: tuple[int, ...]
    box: tuple[int, ...]
    site: Site
    done: bool = False
    clip: Clip = None  # a ragged store's (axis, END)
    reduce_add: bool = False  # adds its box into the tensor (cp.reduce.async.bulk.tensor)

    def meets(self, other: "Store") -> bool:
        """Whether the two stores' global boxes share an element."""
        mine = clipped_box(self.origin, self.box, self.clip)
        theirs = clipped_box(other.origin, other.box, other.clip)
        return self.tensor == other.tensor and all(
            a < b + m and b < a + n and n and m
            for a, n, b, m in zip(self.origin, mine, other.origin, theirs))


def runnable_stores(queue: "InOrderQueue") -> list[Store]:
    """The pending stores of a thread that may run next. Bulk operations complete
    in any order (only wait_group orders them, PTX ISA cp.async.bulk.wait_group);
    their order shows only where two write the same element (the races of their
    shared reads are found by happens-before, whatever the order), so the oldest
    runs next unless a younger one meets an older one's box: then either may."""
    pending = queue.pending
    if len(pending) == 1:
        return [pending[0]]
    return [store for i, store in enumerate(pending)
            if i == 0 or any(store.meets(older) for older in list(pending)[:i])]


@dataclass
class Product:
    """One wgmma of a warp: reads its operands and writes its 16 accumulator rows
    any time until the `wait_group` that completes its batch."""

    clock: Clock
    acc: str
    a: Place | str  # a shared view or a register tile
    b: Place
    inputs: DType  # the operands' element type (f32: read as tf32)
    accumulate: bool
    site: Site
    done: bool = False


@dataclass
class InOrderQueue:
    """Operations of one issuer that complete in order (a warp's wgmma batches,
    a thread's bulk groups): one actor whose clock counts operations."""

    agent: int
    issued: int = 0
    writer: int = -1  # a bulk-store queue: the actor of its global writes, same ticks
    open: list = field(default_factory=list)
    groups: deque = field(default_factory=deque)  # committed, oldest first
    pending: deque = field(default_factory=deque)  # not yet executed, in order
    # Per committed group not yet complete as a whole (its writes), its last tick.
    unwritten: deque = field(default_factory=deque)

    def add(self, op) -> None:
        self.open.append(op)
        self.pending.append(op)

    def commit(self) -> None:
        self.groups.append(self.open)
        self.open = []
        self.unwritten.append(self.issued)

    def complete_writes(self, keep: int) -> Clock:
        """A plain wait: all but the newest `keep` groups have written their
        results; the clock of those writes."""
        done = 0
        while len(self.unwritten) > keep:
            done = self.unwritten.popleft()
        return {self.writer: done}

    def retire(self, keep: int) -> list:
        """Complete all but the newest `keep` committed groups; their operations."""
        done = []
        while len(self.groups) > keep:
            done.extend(self.groups.popleft())
        return done


class Block:
    """One block of the grid, its warps created by the caller."""

    def __init__(self, program: Program, env: dict[str, int],
                 tensors: dict[str, np.ndarray] | None,
                 writers: dict[str, np.ndarray] | None = None, agents: Agents | None = None,
                 trace: deque | None = None, between: BlockAccesses | None = None,
                 key: object = 0):
        """`tensors` None: a run without data (the exhaustive search), which makes
        every synchronization and shared-memory access with its checks but moves
        and computes no values. Nothing it reports depends on them: indices,
        loop bounds and conditions are scalars, and the data is compared only
        after the seeded schedules. `writers`: per output tensor, the span of
        the TMA store that last wrote each element, so a wrong result names it.
        The blocks of a cluster share `agents` (one set of clocks) and `trace`;
        `cluster` lists them, by rank, once all are made. `between`: the record of
        global accesses across the grid's blocks, in which this block is `key`."""
        kernel = program.kernel
        self.program = program
        self.kernel = kernel
        self.env = env
        self.tensors = tensors
        self.writers = writers if writers is not None else {}
        self.between, self.key = between, key
        self.space = SharedSpace(kernel, program.layout, data=tensors is not None)
        self.agents = agents if agents is not None else Agents()
        self.rank = env.get("@rank", 0)
        self.cluster: list[Block] = [self]
        self.exited = False
        self.memory = ShadowMemory(self.space.chunks, self.agents)
        self.global_writes = GlobalWrites()  # the cluster's: run_cluster shares block 0's
        self.mbarriers = {(b.name, i): MBarrier(f"{b.name}[{i}]", b.name in program.carries_bytes)
                          for b in kernel.barriers for i in range(b.count)}
        self.named: dict[int, NamedBarrier] = {}
        self.cluster_barrier = NamedBarrier(-1, "barrier.cluster")  # the cluster's, shared
        self.loads: list[Load] = []
        # a counter's broadcast slot (sim/semaphores.count): generation, value, and
        # the writer's agent, tick and statement
        self.count_slot: tuple = (0, 0, 0, 0, None)
        self.trace: deque[str] = trace if trace is not None else deque(maxlen=TRACE_LENGTH)
        self.warps: list = []

    def event(self, who: str, span: Span | None, text: str) -> None:
        self.trace.append(trace_line(who, span, text))

    def mbarrier(self, array: str, index: int, span: Span | None) -> MBarrier:
        barrier = self.mbarriers.get((array, index))
        if barrier is None:
            count = next(b.count for b in self.kernel.barriers if b.name == array)
            raise fail(Category.OUT_OF_RANGE, f"mbarrier index {index} is out of range for "
                                              f"'{array}' ({count} barriers, indexed 0 to "
                                              f"{count - 1})", span)
        return barrier

    def touch_global(self, tensor: str, origin: tuple[int, ...], box: tuple[int, ...], clip,
                     reduce_add: bool, site: Site, what: str) -> None:
        """A copy's box of global memory, for the record across blocks."""
        if self.between is not None:
            self.between.box(self.key, tensor, origin, box, clip, reduce_add, site, what)

    def touch_elements(self, tensor: str, index: tuple[np.ndarray, ...], site: Site,
                       adds: bool) -> None:
        """Elements a warp stores (or, `adds`, adds into) from registers, for the
        record across blocks."""
        if self.between is not None:
            self.between.elements(self.key, tensor, index, site, adds)

    def named_barrier(self, ident: int) -> NamedBarrier:
        return self.named.setdefault(ident, NamedBarrier(ident))

    @property
    def label(self) -> str:
        """How messages name this block: only a cluster's blocks need naming."""
        return f"block {self.rank} " if len(self.cluster) > 1 else ""

    def peer(self, rank: int, what: str, span: Span | None) -> "Block":
        """Block `rank` of the cluster, which `what` reaches into: it must still run."""
        block = self.cluster[rank]
        if block.exited:
            raise fail(Category.RACE, f"{what} reaches block {rank} of the cluster after it "
                                      "exited: nothing keeps it running until the cluster's "
                                      "other blocks are done with its shared memory", span)
        return block

    # ---- asynchronous completions
    def complete_load(self, load: Load) -> None:
        self.loads.remove(load)
        if self.exited:
            raise fail(Category.RACE, f"{load.site} writes block {self.rank} of the cluster "
                                      "after it exited", load.site.span)
        if load.barrier.invalidated or not load.barrier.initialized:
            raise fail(Category.BARRIER_MISUSE, f"{load.site} completes on {load.barrier.name}, "
                                                "which is no longer initialized", load.site.span)
        self.memory.write(load.agent, load.clock, self.space.region(load.place), load.site,
                          dtype=self.space.dtype(load.place))
        if self.tensors is not None:
            values = read_box(self.tensors[load.tensor], load.origin, load.box, load.clip)
            self.space.write(load.place, values.reshape(self.space.shape(load.place)))
        self.event(self.agents.names[load.agent], load.site.span,
                   f"completes {load.nbytes} B on {load.barrier.name}")
        load.barrier.complete_tx(load.nbytes, load.clock, load.site.span)

    def run_store(self, queue: InOrderQueue, store: Store | None = None) -> None:
        """Run `store` of `queue` (default: its oldest pending one)."""
        if store is None:
            store = queue.pending.popleft()
        else:
            queue.pending.remove(store)
        self.memory.read(queue.agent, store.clock, self.space.region(store.place), store.site,
                         self.space.dtype(store.place))
        if self.tensors is not None:
            values = self.space.read(store.place).reshape(store.box)
            if store.reduce_add:
                add_box(self.tensors[store.tensor], store.origin, values,
                        self.kernel.tensor(store.tensor).dtype, store.clip)
                if self.between is not None:
                    self.between.added(store.tensor, store.origin, values, store.clip)
            else:
                write_box(self.tensors[store.tensor], store.origin, values, store.clip)
        if store.tensor in self.writers:
            write_box(self.writers[store.tensor], store.origin,
                      np.full(store.box, store.site.span, dtype=object), store.clip)
        store.done = True

    def exit_checks(self, span: Span | None) -> None:
        """When the block's last warp is done: nothing may still touch its shared
        memory (the cluster's other blocks are checked when they reach it)."""
        for load in self.loads:
            raise fail(Category.RACE, f"the block exits while {load.site} is still in flight",
                       load.site.span)
        for warp in self.warps:
            for queue in warp.all_queues():
                unwaited = [op for group in queue.groups for op in group] + queue.open
                if unwaited:
                    raise fail(Category.RACE, f"the block exits while {unwaited[0].site} may "
                                              "still read shared memory: no wait completes it",
                               unwaited[0].site.span)
        for barrier in self.mbarriers.values():
            barrier.leftover(span, "left at block exit")
        for named in self.named.values():
            named.unmatched(span)
        self.exited = True
