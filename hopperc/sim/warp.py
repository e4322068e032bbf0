"""One warp of the simulated block: a coroutine that runs the lowered IR.

The warp yields before every synchronization or asynchronous operation, so
the scheduler interleaves warps there; plain computation between them runs
at once (its accesses are checked by happens-before, not by timing). Lanes
are tracked as a set so hand-written code may branch on `lane` or `thread`:
copies and arrivals happen once per active lane, `elect` and the compiler's
one-thread blocks run on the lowest active lane. Its element-wise code
(elements.py), what it issues to the asynchronous units (issue.py) and its
synchronization statements (warp_sync.py) are mixins of `Warp`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator

import numpy as np

from hopperc.diagnostics import ToolchainError
from hopperc.ir import nodes as ir
from hopperc.sim.block import Block, InOrderQueue
from hopperc.sim.elements import ElementCode
from hopperc.sim.findings import Category, fail, line
from hopperc.sim.issue import AsyncIssue
from hopperc.sim.memory import Site, join
from hopperc.sim.scalars import started_walk, taken_tile
from hopperc.sim.values import undefined
from hopperc.sim.views import Place
from hopperc.sim.warp_sync import WarpSync

ALL_LANES = tuple(range(32))
PREEMPT = None  # yielded: the scheduler may run something else here
# Statements a warp runs without yielding (control flow, element-wise code,
# counters); every other one is a synchronization or asynchronous operation.
_RUN_AT_ONCE = frozenset({ir.RoleBlock, ir.ForLoop, ir.IfThen, ir.OneThread, ir.ElectLane,
                          ir.ManualRegion, ir.TileDef, ir.TileAssign, ir.SharedStore,
                          ir.RowPartials, ir.GlobalRowStore, ir.TakeTile, ir.StartTileWalk,
                          ir.PhaseFlip, ir.StageAdvance})


class SimUnsupported(ToolchainError):
    """Code the simulator cannot model (reported as such, never as a finding)."""

    def __init__(self, message: str):
        super().__init__(f"the simulator cannot model this kernel: {message}")
        self.detail = message

    def __reduce__(self):  # raised in a worker process, rebuilt as it was
        return SimUnsupported, (self.detail,)


class Warp(ElementCode, AsyncIssue, WarpSync):
    def __init__(self, block: Block, index: int):
        self.block = block
        self.index = index
        self.agent = block.agents.add(f"{block.label}warp {index}", generic=True)
        self.clock = {self.agent: 1}
        self.env: dict[str, int] = {**block.env, **dict.fromkeys(block.kernel.carried, 0),
                                    "@warp": index, "@wg": index // 4}
        self.role: ir.RoleInfo | None = None
        self.local = index
        self.running_threads = block.kernel.threads
        self.tiles: dict[str, np.ndarray] = {}
        self.wgmma = InOrderQueue(block.agents.add(f"wgmma of {block.label}warp {index}",
                                                   generic=False))
        self.stores: dict[int, InOrderQueue] = {}
        self.touched: dict[str, object] = {}  # tiles used by other code since wgmma.fence
        self.fenced = False  # PTX wants a wgmma.fence before a warpgroup's first wgmma
        self.global_fenced: dict[int, int] = {}  # its clock at fence.proxy.async.global
        self.count_reads = 0  # loads of its block's counter slot (sim/semaphores.count_read)
        self.occurrences: defaultdict[int, int] = defaultdict(int)  # Counter is slower to make
        self.divergent = 0  # inside conditions on warp, lane or thread
        self.ready = None  # while blocked: a test that says when it may go on
        self.waiting = ""
        self.waiting_on = None  # the barrier it waits on
        self.waiting_span = None
        self.done = False
        self.steps = 0
        self.as_candidate = ("warp", self)  # what the scheduler offers the choosers
        self.product_candidate = ("product", self)
        # In messages: the warp (with its block's rank, in a cluster; the block's
        # cluster is complete when its warps are made), and with its role.
        self.who = f"{block.label}warp {index}"
        self.name = self.who

    def all_queues(self) -> list[InOrderQueue]:
        return [self.wgmma, *self.stores.values()]

    def tick(self) -> None:
        self.clock[self.agent] += 1

    def run(self) -> Iterator:
        yield from self.block_(self.block.kernel.body, ALL_LANES)
        self.done = True

    # ---- helpers
    def value(self, expr: ir.ScalarExpr, lanes: tuple[int, ...], span) -> int:
        code = self.block.program.scalar(expr)
        for tensor, indices in code.elements:
            # ld.global.nc: a store of the cluster to the element must be complete
            for env in self._lane_envs(lanes) if code.per_lane else (self.env,):
                self.block.global_writes.read(
                    self.clock, tensor, tuple(index(env) for index in indices),
                    (1,) * len(indices), Site(f"ld.global.nc of an element of '{tensor}'", span),
                    self)
        if not code.per_lane:
            return code.evaluate(self.env)
        values = {code.evaluate(env) for env in self._lane_envs(lanes)}
        if len(values) != 1:
            raise SimUnsupported(f"{span}: a value that differs between the lanes of a warp "
                                 "is used where the simulator needs one per warp")
        return values.pop()

    def _lane_envs(self, lanes: tuple[int, ...]) -> Iterator[dict[str, int]]:
        """The environment of each lane in turn (one dict, updated per lane)."""
        env = dict(self.env)
        for lane in lanes:
            env["@lane"], env["@thread"] = lane, 32 * self.local + lane
            yield env

    def place(self, view: ir.BufferView, lanes, span) -> Place:
        stage = 0 if view.stage is None else self.value(view.stage, lanes, span)
        part = None if view.part is None else self.value(view.part.index, lanes, span)
        if part is not None and not 0 <= part < view.part.count:
            raise fail(Category.OUT_OF_RANGE, f"index {part} of '{view.buffer}' is out of range "
                                              f"(it has {view.part.count} parts, indexed 0 to "
                                              f"{view.part.count - 1})", span)
        return Place(view.buffer, stage, part, view.part.count if view.part else 1,
                     view.transposed, bool(view.part and view.part.columns))

    def label(self, place: Place) -> str:
        return f"'{place.label(self.block.space.buffers[place.buffer].stages)}'"

    def barrier(self, ref: ir.BarrierRef, lanes, span):
        return self.block.mbarrier(ref.array, self.value(ref.index, lanes, span), span)

    def wait(self, ready, what: str, on, span) -> Iterator:
        while not ready():
            self.ready, self.waiting, self.waiting_on, self.waiting_span = ready, what, on, span
            yield PREEMPT
        self.ready, self.waiting, self.waiting_on, self.waiting_span = None, "", None, None

    # ---- statements
    def block_(self, block: ir.Block, lanes: tuple[int, ...]) -> Iterator:
        for stmt in block.stmts:
            yield from self.stmt(stmt, lanes)

    def stmt(self, stmt: ir.Stmt, lanes: tuple[int, ...]) -> Iterator:
        if type(stmt) not in _RUN_AT_ONCE:  # most statements: one set lookup, not 13 cases
            yield PREEMPT
            yield from self.sync(stmt, lanes)
            return
        match stmt:
            case ir.RoleBlock(role=role, body=body):
                if role.first_warp <= self.index < role.first_warp + role.warps:
                    yield from self.enter_role(role, body)
            case ir.ForLoop(var=var, start=start, stop=stop, body=body, span=span):
                lo, hi = self.value(start, lanes, span), self.value(stop, lanes, span)
                budget = self.block.program.budget
                for i in range(lo, hi):
                    if budget is not None:
                        budget.charge()
                    self.env[var] = i
                    yield from self.block_(body, lanes)
            case ir.IfThen(cond=cond, then=then, orelse=orelse):
                code = self.block.program.scalar(cond)
                if code.per_lane:
                    taken = tuple(l for l, env in zip(lanes, self._lane_envs(lanes))
                                  if code.evaluate(env))
                    rest = tuple(l for l in lanes if l not in taken)
                else:  # the same for every lane: evaluated once
                    taken, rest = (lanes, ()) if code.evaluate(self.env) else ((), lanes)
                self.divergent += code.per_thread
                if taken:
                    yield from self.block_(then, taken)
                if rest:
                    yield from self.block_(orelse, rest)
                self.divergent -= code.per_thread
            case ir.OneThread(body=body, per_warpgroup=True):
                if self.local % 4 == 0:
                    yield from self.block_(body, (min(lanes),))
            case ir.OneThread(body=body):
                if self.local == 0:
                    yield from self.block_(body, (min(lanes),))
            case ir.ElectLane(body=body):
                yield from self.block_(body, (min(lanes),))
            case ir.ManualRegion(body=body):
                yield from self.block_(body, lanes)
            case ir.TileDef(init=None, name=name, span=span):
                # ptxas may give it registers other code wrote: its first wgmma
                # wants a fence after that code, as after a write of the tile.
                self.touched.setdefault(name, span)
                if self.block.tensors is not None:
                    self.tiles[name] = undefined(self.block.program.tiles[name].shape)
            case ir.TileDef() | ir.TileAssign() | ir.SharedStore():
                self.elementwise(stmt, lanes)
            case ir.RowPartials():
                self.row_partials(stmt, lanes)
            case ir.GlobalRowStore():
                self.row_store(stmt, lanes)
            case ir.TakeTile(index=index, span=span, walk=walk):
                self.env.update(taken_tile(self.block.kernel, self.value(index, lanes, span),
                                           self.env, walk))
            case ir.StartTileWalk(walk=walk):
                self.env.update(started_walk(walk, self.env))
            case ir.PhaseFlip(phase=phase):
                self.env[phase] ^= 1
            case ir.StageAdvance(stage=stage, phase=phase, stages=stages, by=by, span=span):
                to = self.env[stage] + (1 if by is None else self.value(by, lanes, span))
                self.env[phase] ^= (to // stages) & 1
                self.env[stage] = to % stages

    def enter_role(self, role: ir.RoleInfo, body: ir.Block) -> Iterator:
        self.role, self.local = role, self.index - role.first_warp
        self.name = f"{self.who} ({role.name})"
        self.running_threads = role.active_warps * 32
        self.env.update({"@warp": self.local, "@wg": self.local // 4})
        head = [s for s in body.stmts if isinstance(s, ir.SetMaxRegisters)]
        for stmt in head:
            yield PREEMPT
            self.block.event(self.name, stmt.span, f"setmaxnreg {stmt.regs}")
        if self.local < role.active_warps:
            yield from self.block_(ir.Block(body.stmts[len(head):]), ALL_LANES)

    # ---- operations issued lane by lane (synchronization: warp_sync.py)
    def per_lane(self, stmt: ir.Stmt, lane: int) -> None:
        block, span, lanes = self.block, stmt.span, (lane,)
        match stmt:
            case ir.MBarrierInit(barrier=ref, count=count):
                barrier = self.barrier(ref, lanes, span)
                barrier.init(count, (self.agent, lane), self.clock, span)
                self.tick()
            case ir.StageRelease(barrier=ref, blocks=blocks, scope=scope) if blocks > 1:
                index = self.value(ref.index, lanes, span)
                for rank in range(blocks):  # its own barrier and, through mapa, the others'
                    peer = block.peer(rank, f"the remote mbarrier.arrive{line(span)}", span)
                    barrier = peer.mbarrier(ref.array, index, span)
                    barrier.usable("mbarrier.arrive", self.clock, span, (self.agent, lane))
                    block.event(self.name, span, f"arrives on {peer.label}{barrier.name}")
                    barrier.arrive((self.who, lane), self.clock, span,
                                   None if peer is block else scope.value)
                self.tick()
            case ir.MBarrierArrive(barrier=ref) | ir.StageRelease(barrier=ref):
                barrier = self.barrier(ref, lanes, span)
                barrier.usable("mbarrier.arrive", self.clock, span, (self.agent, lane))
                block.event(self.name, span, f"arrives on {barrier.name}")
                barrier.arrive((self.who, lane), self.clock, span)
                self.tick()
            case ir.MBarrierExpectTx(barrier=ref, nbytes=nbytes):
                barrier = self.barrier(ref, lanes, span)
                barrier.usable("mbarrier.arrive.expect_tx", self.clock, span,
                               (self.agent, lane))
                n = self.value(nbytes, lanes, span)
                block.event(self.name, span, f"arrive.expect_tx {barrier.name}, {n} B")
                barrier.expect_tx(n)
                barrier.arrive((self.who, lane), self.clock, span)
                self.tick()
            case ir.MBarrierInval(barrier=ref):
                barrier = self.barrier(ref, lanes, span)
                barrier.usable("mbarrier.inval", self.clock, span, (self.agent, lane))
                waiters = sum(1 for w in block.warps if w.waiting_on is barrier)
                barrier.inval(span, waiters)
            case ir.AsyncLoad(barrier=None):
                raise SimUnsupported(f"{span}: a load without an mbarrier")
            case ir.AsyncLoad():
                self.issue_load(stmt, lanes)
            case ir.AsyncStore():
                self.issue_store(stmt, lane)
            case ir.BulkCommit():
                self.store_queue(lane).commit()
            case ir.BulkWaitRead(pending=keep, read=read):
                queue = self.store_queue(lane)
                for op in queue.retire(keep):
                    if not op.done:
                        block.run_store(queue, op)
                    join(self.clock, op.clock)
                if not read:  # the older groups' global writes are complete too
                    join(self.clock, queue.complete_writes(keep))
                block.event(self.name, span,
                            f"cp.async.bulk.wait_group{'.read' if read else ''} {keep}")
            case _:
                raise SimUnsupported(f"{span}: the simulator does not model "
                                     f"{type(stmt).__name__}")
