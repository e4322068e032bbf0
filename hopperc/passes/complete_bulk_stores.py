"""complete_bulk_stores

Requires: async stores in automatic code (TMA or bulk), not yet committed.
Establishes: each run of consecutive stores is closed by one
cp.async.bulk.commit_group; before memory that a committed store may still
be reading is written again (by any proxy, through any buffer placed in that
memory), the issuing thread waits `cp.async.bulk.wait_group.read N` with the
largest N that completes that store's group: N = the groups committed after
it, which may go on reading other memory (a double-buffered epilogue rewrites
one buffer while the other's store is in flight). Before the role (or kernel)
ends with stores in flight, it waits for all of them (N = 0), so shared memory
outlives every read of it.

Hardware rule: a bulk store reads its shared source asynchronously until
`wait_group.read` reports its group done; `wait_group.read N` returns once at
most the N most recent groups are still reading. Rewriting the source or
exiting the block before then corrupts the stored data (PTX ISA,
cp.async.bulk.wait_group).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from hopperc.ir import async_groups
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, all_accesses, leaf_accesses, may_overlap, source_order
from hopperc.ir.dataflow import ForwardRewrite
from hopperc.ir.rewrite import close_runs

@dataclass(frozen=True)
class _InFlight:
    """The shared-memory reads of the stores still in flight, by bulk group."""

    groups: tuple[frozenset[Access], ...] = ()  # committed, oldest first
    open: frozenset[Access] = frozenset()  # issued, not yet committed


def complete_bulk_stores(kernel: ir.Kernel) -> ir.Kernel:
    return _BulkStores().run(replace(kernel, body=close_runs(kernel.body, ir.AsyncStore, _commit)))


def _commit(run: list[ir.Stmt]) -> ir.BulkCommit:
    """One commit_group closes each run of consecutive stores."""
    last = run[-1]
    return ir.BulkCommit(last.span, ir.Reason(
        ir.Hazard.ASYNC_READ_WRITE, last.src.buffer, f"read by {last.engine.label} store",
        last.span, "tracked as one bulk group", None))


class _BulkStores(ForwardRewrite[_InFlight]):
    def initial(self) -> _InFlight:
        return _InFlight()

    def join(self, a: _InFlight, b: _InFlight) -> _InFlight:
        """Align from the youngest group: position p from the young end has p
        groups after it on every path, so a wait computed from it is safe."""
        return _InFlight(async_groups.join(a.groups, b.groups), a.open | b.open)

    def before(self, stmt: ir.Stmt, state: _InFlight):
        written = sorted((a for a in all_accesses(stmt) if a.write), key=source_order)
        youngest = None  # groups younger than the youngest one the writes conflict with
        hit = None
        for access in written:
            for age, group in enumerate(reversed(state.groups)):
                conflicts = [s for s in group if may_overlap(s, access)]
                if conflicts:
                    if youngest is None or age < youngest:
                        youngest = age
                    first = min(conflicts, key=source_order)
                    if hit is None or source_order(first) < source_order(hit[0]):
                        hit = (first, access)
                    break
        if hit is None:
            return [], state
        store, access = hit
        what = store.what if store.buffer == access.buffer else f"{store.what} as '{store.buffer}'"
        reason = ir.Reason(ir.Hazard.ASYNC_READ_WRITE, access.buffer, what, store.span,
                           access.what, access.span)
        completed, _ = async_groups.split(state.groups, youngest)
        done = {a.view for group in completed for a in group}
        wait = ir.BulkWaitRead(youngest, access.span, reason,
                               tuple(sorted(done, key=lambda v: (v.buffer, repr(v)))))
        return [wait], self.transfer(wait, state)

    def transfer(self, stmt: ir.Stmt, state: _InFlight) -> _InFlight:
        if isinstance(stmt, ir.AsyncStore):
            return replace(state, open=state.open | frozenset(leaf_accesses(stmt)))
        if isinstance(stmt, ir.BulkCommit):
            return _InFlight(async_groups.append(state.groups, state.open), frozenset())
        if isinstance(stmt, ir.BulkWaitRead):
            return replace(state, groups=async_groups.split(state.groups, stmt.pending)[1])
        return state

    def manual(self, region: ir.ManualRegion, state: _InFlight) -> _InFlight:
        """Automatic stores are still in flight after hand-written code (which
        waits for its own bulk groups)."""
        return state

    def at_exit(self, state: _InFlight) -> list[ir.Stmt]:
        reads = [a for group in state.groups for a in group] + list(state.open)
        if not reads:
            return []
        first = min(reads, key=source_order)  # explanations name the earliest access
        last = max(reads, key=source_order)
        return [ir.BulkWaitRead(0, last.span, ir.Reason(
            ir.Hazard.ASYNC_READ_WRITE, first.buffer, first.what, first.span,
            "shared memory released when the block exits", None))]
