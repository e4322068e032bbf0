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
from hopperc.ir.accesses import all_accesses
from hopperc.ir.dataflow import ForwardRewrite

# State: the committed stores still in flight, as (buffer, store span) pairs.
InFlight = frozenset[tuple[str, object]]


def complete_bulk_stores(kernel: ir.Kernel) -> ir.Kernel:
    return _BulkStores().run(replace(kernel, body=_commit(kernel.body)))


def _commit(block: ir.Block) -> ir.Block:
    """One commit_group after each run of consecutive stores."""
    out: list[ir.Stmt] = []
    stmts = block.stmts
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ir.IfThen):
            stmt = replace(stmt, then=_commit(stmt.then), orelse=_commit(stmt.orelse))
        elif isinstance(stmt, (ir.ForLoop, ir.RoleBlock)):
            stmt = replace(stmt, body=_commit(stmt.body))
        out.append(stmt)
        last_of_run = i + 1 == len(stmts) or not isinstance(stmts[i + 1], ir.AsyncStore)
        if isinstance(stmt, ir.AsyncStore) and last_of_run:
            out.append(ir.BulkCommit(stmt.span, ir.Reason(
                ir.Hazard.ASYNC_READ_WRITE, stmt.src.buffer, f"read by {stmt.engine.value} store",
                stmt.span, "tracked as one bulk group", None)))
    return ir.Block(tuple(out))


class _BulkStores(ForwardRewrite[InFlight]):
    def initial(self) -> InFlight:
        return frozenset()

    def join(self, a: InFlight, b: InFlight) -> InFlight:
        return a | b

    def before(self, stmt: ir.Stmt, state: InFlight):
        written = {a for a in all_accesses(stmt) if a.write}
        for access in written:
            hit = next(((b, span) for b, span in state if b == access.buffer), None)
            if hit is not None:
                reason = ir.Reason(ir.Hazard.ASYNC_READ_WRITE, access.buffer,
                                   "read by bulk store", hit[1], access.what, access.span)
                return [ir.BulkWaitRead(0, access.span, reason)], frozenset()
        return [], state

    def transfer(self, stmt: ir.Stmt, state: InFlight) -> InFlight:
        if isinstance(stmt, ir.AsyncStore):
            return state | {(stmt.src.buffer, stmt.span)}
        if isinstance(stmt, ir.BulkWaitRead) and stmt.pending == 0:
            return frozenset()
        return state

    def at_exit(self, state: InFlight) -> list[ir.Stmt]:
        if not state:
            return []
        buffer, span = sorted(state, key=lambda s: (s[0], s[1].line))[-1]
        return [ir.BulkWaitRead(0, span, ir.Reason(
            ir.Hazard.ASYNC_READ_WRITE, buffer, "read by bulk store", span,
            "shared memory released when the block exits", None))]
