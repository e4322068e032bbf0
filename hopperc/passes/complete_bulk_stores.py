"""complete_bulk_stores

Requires: async stores in automatic code (TMA or bulk), not yet committed.
Establishes: each run of consecutive stores is closed by one
cp.async.bulk.commit_group. Before memory that a committed store may still
be reading is written again (by any proxy, through any buffer placed in that
memory), the issuing thread waits `cp.async.bulk.wait_group.read N` with the
largest N that completes that store's group: N = the groups committed after
it, which may go on reading other memory (a double-buffered epilogue rewrites
one buffer while the other's store is in flight; a plane `sd[j]` chosen by a
loop variable is compared with the plane `sd[j - 1]` of the store still in
flight from the previous iteration, ir/iterations.py). Before global memory
that a committed store may still be writing is read (a TMA load, or ld.global
of a vector), it waits the plain `cp.async.bulk.wait_group N` likewise; the
barrier pass hands that completion to the other reading threads. Before
another async write of global memory that a committed store may still be
writing (a second store, or a store and a reduce-add, of overlapping boxes),
it waits the plain `wait_group N` likewise (an earlier store of the same run
is first committed as a group of its own); the barrier pass hands that
completion on where another thread issues the later write. Two reduce-adds
need no wait: their adds commute. Before the role (or kernel) ends with
stores still reading shared memory, it waits `.read 0`, so shared memory
outlives every read of it (the global writes complete by the kernel's end).
A TMA reduce-add (`tma T[i, j] += buf`) is a store here: it reads its source
and writes (adds into) global memory in a bulk group like any other. A
`signal` (or a counter's) completes every group: order_semaphores, later,
waits the plain `wait_group 0` before it.

Hardware rule: a bulk store reads its shared source asynchronously until
`wait_group.read` reports its group done, and writes global memory until a
plain `wait_group` reports it; `wait_group{.read} N` returns once at most the N
most recent groups are still pending (PTX ISA, cp.async.bulk.wait_group). The
completion of a bulk copy is followed by an implicit generic-async proxy fence
(PTX ISA, async proxy), so no fence.proxy.async comes between the plain wait
and an ld.global of what the store wrote. Bulk async operations are not
ordered with each other: two of one thread, even in one group or in groups
committed in order, may write global memory in either order, and only the wait
that completes the earlier one orders it before the later (PTX ISA,
cp.async.bulk.wait_group; memory consistency model, async proxy).
cp.reduce.async.bulk.tensor completes through the same bulk-group
mechanism (PTX ISA: `.bulk_group` completion, the same wait_group{.read}).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from hopperc.ir import async_groups, iterations
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, all_accesses, leaf_accesses, source_order, walk
from hopperc.ir.global_accesses import global_accesses
from hopperc.ir.dataflow import ForwardRewrite
from hopperc.ir.rewrite import close_runs


@dataclass(frozen=True)
class _InFlight:
    """What the stores in flight still do, by bulk group: read shared memory
    (accesses of a view) and write global memory (accesses of a region)."""

    groups: tuple[frozenset[Access], ...] = ()  # committed, oldest first
    open: frozenset[Access] = frozenset()  # issued, not yet committed

    def each(self, f: Callable[[Access], Access | None]) -> "_InFlight":
        """Each access mapped by `f` (None: dropped)."""
        def mapped(accesses: frozenset[Access]) -> frozenset[Access]:
            return frozenset(a for a in map(f, accesses) if a is not None)
        return _InFlight(tuple(map(mapped, self.groups)), mapped(self.open))


def complete_bulk_stores(kernel: ir.Kernel) -> ir.Kernel:
    return _BulkStores().run(replace(kernel, body=close_runs(kernel.body, ir.AsyncStore, _commit)))


def _commit(run: list[ir.Stmt]) -> ir.BulkCommit:
    """One commit_group closes each run of consecutive stores."""
    last = run[-1]
    return ir.BulkCommit(last.span, ir.Reason(
        ir.Hazard.ASYNC_READ_WRITE, last.src.buffer, f"read by {last.engine.label} {last.verb}",
        last.span, "tracked as one bulk group", None))


def _hazards(stmt: ir.Stmt) -> list[Access]:
    """What a store in flight may conflict with: writes of shared memory (the
    store reads it) and accesses of global memory (the store writes it)."""
    accesses = [a for a in all_accesses(stmt) if a.write] + global_accesses(stmt)
    return sorted(accesses, key=source_order)


def _conflict(store: Access, access: Access) -> bool:
    """Whether `access` must wait for the in-flight store's `store` where both
    touch the same bytes: a write after its read of shared memory, a read after
    its write of global memory, a write after that write unless both add or the
    store wrote an earlier tile of a persistent loop (different tiles write
    different elements: where two tiles' boxes meet, the blocks that take them
    race, which `check` reports, sim/block_accesses.py)."""
    if store.write != access.write:
        return True
    return store.write and not (store.adds and access.adds) \
        and not iterations.of_an_earlier_tile(store)


def _named_first(store: Access) -> tuple:
    """Which conflict a wait names: a global write first (it makes the wait
    plain), then the earliest in the source."""
    return (store.region is None, *source_order(store))


class _BulkStores(ForwardRewrite[_InFlight]):
    def __init__(self):
        self.indexed: dict[int, tuple[ir.ForLoop, bool]] = {}

    def initial(self) -> _InFlight:
        return _InFlight()

    def join(self, a: _InFlight, b: _InFlight) -> _InFlight:
        """Align from the youngest group: position p from the young end has p
        groups after it on every path, so a wait computed from it is safe."""
        return _InFlight(async_groups.join(a.groups, b.groups), a.open | b.open)

    def first_iteration(self, state: _InFlight, loop: ir.ForLoop) -> _InFlight:
        if not self.indexed_by(loop):
            return state  # nothing in it to compare at its first iteration
        return state.each(lambda a: iterations.first_iteration(a, loop))

    def indexed_by(self, loop: ir.ForLoop) -> bool:
        """Whether an access in the loop has an index that names its variable."""
        known = self.indexed.get(id(loop))
        if known is None or known[0] is not loop:
            accesses = all_accesses(loop) + global_accesses(loop)
            known = self.indexed[id(loop)] = (loop, any(
                loop.var in iterations.loop_variables(a) for a in accesses))
        return known[1]

    def next_iteration(self, state: _InFlight, loop: ir.ForLoop) -> _InFlight:
        return state.each(lambda a: iterations.next_iteration(a, loop))

    def widen(self, entry: _InFlight, state: _InFlight) -> _InFlight:
        """An access aged past what iterations.MAX_AGE tracks becomes its whole
        buffer or tensor, which a wait may then drain: join, so it ends."""
        return self.join(entry, state)

    def last_iteration(self, state: _InFlight, loop: ir.ForLoop) -> _InFlight:
        return state.each(lambda a: iterations.last_iteration(a, loop))

    def before(self, stmt: ir.Stmt, state: _InFlight):
        if isinstance(stmt, ir.ForLoop) and any(isinstance(s, ir.AsyncStore)
                                                for s in walk(stmt.body)):
            # Its body waits for its own stores every iteration anyway: a wait
            # ahead of it for the loop as a whole would only drain more groups.
            return [], state
        hazards = _hazards(stmt)
        closed = []
        if isinstance(stmt, ir.AsyncStore):
            earlier = [(s, a) for a in hazards for s in sorted(state.open, key=source_order)
                       if _conflict(s, a) and iterations.in_flight_overlap(s, a)]
            if earlier:  # a store of this run writes the same box: a wait needs its group
                (store, access), *_ = earlier
                closed = [ir.BulkCommit(store.span, ir.Reason(
                    ir.Hazard.ASYNC_WRITE_WRITE, access.buffer, store.what, store.span,
                    access.what, access.span))]
                state = self.transfer(closed[0], state)
        youngest = None  # groups younger than the youngest one the accesses conflict with
        hit = None
        for access in hazards:
            for age, group in enumerate(reversed(state.groups)):
                conflicts = [s for s in group if _conflict(s, access)
                             and iterations.in_flight_overlap(s, access)]
                if conflicts:
                    if youngest is None or age < youngest:
                        youngest = age
                    first = min(conflicts, key=_named_first)
                    if hit is None or _named_first(first) < _named_first(hit[0]):
                        hit = (first, access)
                    break
        if hit is None:
            return closed, state
        store, access = hit
        what = store.what if store.buffer == access.buffer else f"{store.what} as '{store.buffer}'"
        hazard = ir.Hazard.ASYNC_READ_WRITE if store.region is None else \
            ir.Hazard.ASYNC_WRITE_WRITE if access.write else ir.Hazard.ASYNC_WRITE_READ
        reason = ir.Reason(hazard, access.buffer, what, store.span, access.what, access.span)
        completed, _ = async_groups.split(state.groups, youngest)
        done = {a.issued or a.view for group in completed for a in group if a.view is not None}
        wait = ir.BulkWaitRead(youngest, access.span, reason,
                               tuple(sorted(done, key=lambda v: (v.buffer, repr(v)))),
                               read=store.region is None)
        return closed + [wait], self.transfer(wait, state)

    def transfer(self, stmt: ir.Stmt, state: _InFlight) -> _InFlight:
        if isinstance(stmt, ir.AsyncStore):
            issued = leaf_accesses(stmt) + global_accesses(stmt)
            return replace(state, open=state.open | frozenset(issued))
        if isinstance(stmt, ir.BulkCommit):
            return _InFlight(async_groups.append(state.groups, state.open), frozenset())
        if isinstance(stmt, ir.BulkWaitRead):
            done, running = async_groups.split(state.groups, stmt.pending)
            if not stmt.read:
                return replace(state, groups=running)
            writing = tuple(frozenset(a for a in g if a.region is not None) for g in done)
            while writing and not writing[0]:
                writing = writing[1:]
            return replace(state, groups=writing + running)
        if isinstance(stmt, (ir.Signal, ir.Count)):  # order_semaphores waits `wait_group 0` first
            return replace(state, groups=())
        return state

    def manual(self, region: ir.ManualRegion, state: _InFlight) -> _InFlight:
        """Automatic stores are still in flight after hand-written code (which
        waits for its own bulk groups)."""
        return state

    def at_exit(self, state: _InFlight) -> list[ir.Stmt]:
        reads = [a for group in state.groups for a in group if a.region is None] + \
            [a for a in state.open if a.region is None]
        if not reads:
            return []
        first = min(reads, key=source_order)  # explanations name the earliest access
        last = max(reads, key=source_order)
        return [ir.BulkWaitRead(0, last.span, ir.Reason(
            ir.Hazard.ASYNC_READ_WRITE, first.buffer, first.what, first.span,
            "shared memory released when the block exits", None))]
