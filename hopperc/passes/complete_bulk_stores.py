"""complete_bulk_stores

Requires: async stores in automatic code (TMA or bulk), not yet committed.
Establishes: each run of consecutive stores is closed by one
cp.async.bulk.commit_group; before memory that a committed store may still
be reading is written again (by any proxy, through any buffer placed in that
memory), the issuing thread waits
cp.async.bulk.wait_group.read 0; before the role (or kernel) ends with stores
in flight, it waits too, so shared memory outlives every read of it.

Hardware rule: a bulk store reads its shared source asynchronously until
`wait_group.read` reports its group done; rewriting the source or exiting the
block before then corrupts the stored data (PTX ISA, cp.async.bulk.wait_group).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, all_accesses, leaf_accesses, may_overlap, source_order
from hopperc.ir.dataflow import ForwardRewrite
from hopperc.ir.rewrite import close_runs

# State: the shared-memory reads of committed stores still in flight.
InFlight = frozenset[Access]


def complete_bulk_stores(kernel: ir.Kernel) -> ir.Kernel:
    return _BulkStores().run(replace(kernel, body=close_runs(kernel.body, ir.AsyncStore, _commit)))


def _commit(run: list[ir.Stmt]) -> ir.BulkCommit:
    """One commit_group closes each run of consecutive stores."""
    last = run[-1]
    return ir.BulkCommit(last.span, ir.Reason(
        ir.Hazard.ASYNC_READ_WRITE, last.src.buffer, f"read by {last.engine.label} store",
        last.span, "tracked as one bulk group", None))


class _BulkStores(ForwardRewrite[InFlight]):
    def initial(self) -> InFlight:
        return frozenset()

    def join(self, a: InFlight, b: InFlight) -> InFlight:
        return a | b

    def before(self, stmt: ir.Stmt, state: InFlight):
        written = sorted((a for a in all_accesses(stmt) if a.write), key=source_order)
        for access in written:
            hit = min((s for s in state if may_overlap(s, access)), key=source_order,
                      default=None)
            if hit is not None:
                what = hit.what if hit.buffer == access.buffer else (
                    f"{hit.what} as '{hit.buffer}'")
                reason = ir.Reason(ir.Hazard.ASYNC_READ_WRITE, access.buffer,
                                   what, hit.span, access.what, access.span)
                return [ir.BulkWaitRead(0, access.span, reason)], frozenset()
        return [], state

    def transfer(self, stmt: ir.Stmt, state: InFlight) -> InFlight:
        if isinstance(stmt, ir.AsyncStore):
            return state | frozenset(leaf_accesses(stmt))
        if isinstance(stmt, ir.BulkWaitRead) and stmt.pending == 0:
            return frozenset()
        return state

    def manual(self, region: ir.ManualRegion, state: InFlight) -> InFlight:
        """Automatic stores are still in flight after hand-written code (which
        waits for its own bulk groups)."""
        return state

    def at_exit(self, state: InFlight) -> list[ir.Stmt]:
        if not state:
            return []
        last = sorted(state, key=source_order)[-1]
        return [ir.BulkWaitRead(0, last.span, ir.Reason(
            ir.Hazard.ASYNC_READ_WRITE, last.buffer, last.what, last.span,
            "shared memory released when the block exits", None))]
