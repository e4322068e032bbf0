"""wait_wgmma_batches

Requires: wgmma batches closed by commit_group (commit_wgmma_batches).
Establishes: before any statement that reads or writes an accumulator a
committed batch may still be writing, writes a register A operand it may
still be reading, writes shared memory it may still be reading, or releases
a pipeline stage it may still be reading, the warpgroup executes
`wgmma.wait_group N` with the largest N that completes that batch (N = the
batches committed after it, which may stay in flight); a role (or kernel)
that ends with batches in flight waits for all of them.
Nothing else waits: products on the same accumulator are ordered by the
hardware, so a loop of wgmma needs no wait inside it, and one flush before
the accumulators are first read covers every batch before it. Stage releases
are matched by iteration: a product remembers how many iterations ago it read
each pipeline stage, so releasing the previous iteration's stage waits only
for the previous batch (`wait_group 1`) while this iteration's stays in flight.
A ring read at several sites counts reads instead of iterations: its
consumer's stage register steps at each read, and so does the product's lag.

Hardware rule: wgmma.mma_async reads its operands and writes its accumulators
asynchronously until wgmma.wait_group reports its batch complete; touching
them earlier, or letting a producer overwrite them, is a race (PTX ISA,
wgmma.wait_group).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from hopperc.diagnostics import Span
from hopperc.ir import async_groups
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import leaf_accesses, leaves, register_uses
from hopperc.ir.dataflow import ForwardRewrite, insert_before_trailing

UNKNOWN_LAG = 8  # a stage read this many iterations ago or more may be any stage


@dataclass(frozen=True)
class _Product:
    """A wgmma product that may still be running. `stages` holds (pipeline,
    iterations since it read that pipeline's stage)."""

    acc: str
    a_tile: str | None
    memory: frozenset[str]
    stages: frozenset[tuple[str, int]]
    span: Span


@dataclass(frozen=True)
class _InFlight:
    batches: tuple[frozenset[_Product], ...] = ()  # committed, oldest first
    open: frozenset[_Product] = frozenset()  # issued, not yet committed


def wait_wgmma_batches(kernel: ir.Kernel) -> ir.Kernel:
    return _Waits(kernel).run(kernel)


class _Waits(ForwardRewrite[_InFlight]):
    def __init__(self, kernel: ir.Kernel):
        self.stages = {p.name: p.stages for p in kernel.pipelines}
        self.pipeline_of = {b: p.name for p in kernel.pipelines for b in p.buffers}
        # Rings read at several sites: a product's lag counts the steps of this register.
        self.counted = {p.read_counter: p.name for p in kernel.pipelines if p.read_counter}

    def initial(self) -> _InFlight:
        return _InFlight()

    def join(self, a: _InFlight, b: _InFlight) -> _InFlight:
        """Align from the youngest batch: position p from the young end has p
        batches after it on every path, so a wait computed from it is safe."""
        return _InFlight(async_groups.join(a.batches, b.batches), a.open | b.open)

    def next_iteration(self, state: _InFlight, loop: ir.ForLoop) -> _InFlight:
        return _aged(state, lambda name: name not in self.counted.values())

    def before(self, stmt: ir.Stmt, state: _InFlight):
        if isinstance(stmt, ir.Mma):
            return [], state
        for age, batch in enumerate(reversed(state.batches)):
            for product in sorted(batch, key=lambda p: (p.span.line, p.span.col)):
                reason = self._conflict(stmt, product)
                if reason is not None:
                    return [_wait(state, age, reason)], _keep_youngest(state, age)
        return [], state

    def transfer(self, stmt: ir.Stmt, state: _InFlight) -> _InFlight:
        match stmt:
            case ir.Mma():
                return _InFlight(state.batches, state.open | {self._product(stmt)})
            case ir.WgmmaCommit() if state.open:
                return _InFlight(async_groups.append(state.batches, state.open), frozenset())
            case ir.WgmmaWait(pending=n):
                return _keep_youngest(state, n)
            case ir.StageAdvance(stage=stage) if stage in self.counted:
                return _aged(state, lambda name: name == self.counted[stage])
        return state

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        insert_before_trailing(out, inserted, (ir.MBarrierExpectTx,))

    def at_exit(self, state: _InFlight) -> list[ir.Stmt]:
        products = [p for batch in state.batches for p in batch]
        if not products:
            return []
        last = max(products, key=lambda p: (p.span.line, p.span.col))
        reason = ir.Reason(ir.Hazard.ASYNC_READ_WRITE, min(last.memory), "read by wgmma",
                           last.span, "shared memory released when the block exits", None)
        return [_wait(state, 0, reason)]

    def _product(self, mma: ir.Mma) -> _Product:
        views = [v for v in (mma.a, mma.b) if isinstance(v, ir.BufferView)]
        a_tile = mma.a.name if isinstance(mma.a, ir.TileRef) else None
        stages = frozenset((self.pipeline_of[v.buffer], 0) for v in views
                           if v.buffer in self.pipeline_of)
        return _Product(mma.acc, a_tile, frozenset(v.storage or v.buffer for v in views), stages,
                        mma.span)

    def _conflict(self, stmt: ir.Stmt, product: _Product) -> ir.Reason | None:
        """Why `stmt` (or something in it) may not run while `product` is in flight."""
        for leaf in leaves(stmt):
            if isinstance(leaf, ir.Mma):
                continue  # products on one accumulator are ordered by the hardware
            if isinstance(leaf, ir.StageRelease) and self._reads_stage(product, leaf):
                return ir.Reason(ir.Hazard.ASYNC_READ_WRITE, leaf.pipeline, "stage read by wgmma",
                                 product.span, "released to the producer", leaf.span)
            for use in register_uses(leaf):
                if use.tile == product.acc:
                    return ir.Reason(ir.Hazard.ASYNC_WRITE_READ, use.tile, "written by wgmma",
                                     product.span, use.what, use.span)
                if use.write and use.tile == product.a_tile:
                    return ir.Reason(ir.Hazard.ASYNC_READ_WRITE, use.tile, "read by wgmma",
                                     product.span, use.what, use.span)
            for access in leaf_accesses(leaf):
                if access.write and access.memory in product.memory:
                    return ir.Reason(ir.Hazard.ASYNC_READ_WRITE, access.buffer, "read by wgmma",
                                     product.span, access.what, access.span)
        return None

    def _reads_stage(self, product: _Product, release: ir.StageRelease) -> bool:
        """Whether `product` may read the stage `release` frees (same stage index)."""
        stages = self.stages[release.pipeline]
        return any(name == release.pipeline and (lag >= UNKNOWN_LAG
                                                 or (lag - release.lag) % stages == 0)
                   for name, lag in product.stages)


def _aged(state: _InFlight, which) -> _InFlight:
    """`state` one step later for the pipelines `which(name)` selects: a loop's
    next iteration, or (a ring read at several sites) its consumer's step."""
    def older(product: _Product) -> _Product:
        if not product.stages:
            return product
        return replace(product, stages=frozenset(
            (name, min(lag + 1, UNKNOWN_LAG) if which(name) else lag)
            for name, lag in product.stages))
    return _InFlight(tuple(frozenset(map(older, batch)) for batch in state.batches),
                     frozenset(map(older, state.open)))


def _wait(state: _InFlight, pending: int, reason: ir.Reason) -> ir.WgmmaWait:
    """wait_group `pending`: completes every batch older than the youngest `pending`."""
    done, _ = async_groups.split(state.batches, pending)
    products = [p for batch in done for p in batch]
    tiles = tuple(sorted({p.acc for p in products}))
    memory = tuple(sorted({m for p in products for m in p.memory}))
    span = reason.after_span or reason.before_span
    return ir.WgmmaWait(pending, span, reason, tiles, memory)


def _keep_youngest(state: _InFlight, n: int) -> _InFlight:
    """After wait_group n (uncommitted products belong to no batch: they stay)."""
    _, kept = async_groups.split(state.batches, n)
    return _InFlight(kept, state.open)
