"""complete_bulk_stores

Requires: async stores in automatic code (TMA or bulk), not yet committed.
Establishes: each run of consecutive stores is closed by one
cp.async.bulk.commit_group; before a buffer that a committed store may still
be reading is written again (by any proxy), the issuing thread waits
cp.async.bulk.wait_group.read 0; before the role (or kernel) ends with stores
in flight, it waits too, so shared memory outlives every read of it.

Hardware rule: a bulk store reads its shared source asynchronously until
`wait_group.read` reports its group done; rewriting the source or exiting the
block before then corrupts the stored data (PTX ISA, cp.async.bulk.wait_group).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import all_accesses, source_order
from hopperc.ir.dataflow import ForwardRewrite
from hopperc.ir.rewrite import close_runs

# State: the committed stores still in flight, as (buffer, "read by ... store", span).
InFlight = frozenset[tuple[str, str, object]]


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
            hit = min((s for s in state if s[0] == access.buffer),
                      key=lambda s: (s[2].line, s[2].col), default=None)
            if hit is not None:
                reason = ir.Reason(ir.Hazard.ASYNC_READ_WRITE, access.buffer,
                                   hit[1], hit[2], access.what, access.span)
                return [ir.BulkWaitRead(0, access.span, reason)], frozenset()
        return [], state

    def transfer(self, stmt: ir.Stmt, state: InFlight) -> InFlight:
        if isinstance(stmt, ir.AsyncStore):
            return state | {(stmt.src.buffer, f"read by {stmt.engine.label} store", stmt.span)}
        if isinstance(stmt, ir.BulkWaitRead) and stmt.pending == 0:
            return frozenset()
        return state

    def at_exit(self, state: InFlight) -> list[ir.Stmt]:
        if not state:
            return []
        buffer, what, span = sorted(state, key=lambda s: (s[2].line, s[0]))[-1]
        return [ir.BulkWaitRead(0, span, ir.Reason(
            ir.Hazard.ASYNC_READ_WRITE, buffer, what, span,
            "shared memory released when the block exits", None))]
