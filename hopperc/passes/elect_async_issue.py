"""elect_async_issue

Requires: all other sync passes done (they reason about flat statements).
Establishes: in automatic code every TMA/bulk copy, arrive.expect_tx,
commit_group, wait_group.read and mbarrier.inval is executed by one thread of
its role (the first warp's `elect.sync` lane); consecutive ones, and the
issuer's own load waits between them (complete_async_loads), share one
elected block, and a loop that only issues (a producer's main loop) runs in
one elected block instead of electing every iteration.

Hardware rule: a copy or an arrive.expect_tx issued by every thread would run
once per thread; bulk groups are per thread, so the thread that commits a
store is the one that must wait for it.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.rewrite import map_bodies

ISSUED_BY_ONE = (ir.AsyncLoad, ir.AsyncStore, ir.MBarrierExpectTx, ir.BulkCommit,
                 ir.BulkWaitRead, ir.MBarrierInval)


def elect_async_issue(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=_block(kernel.body))


def _block(block: ir.Block) -> ir.Block:
    out: list[ir.Stmt] = []
    run: list[ir.Stmt] = []
    for stmt in block.stmts:
        if isinstance(stmt, ISSUED_BY_ONE):
            run.append(stmt)
            continue
        if isinstance(stmt, ir.OneThread) and stmt.body.stmts and isinstance(
                stmt.body.stmts[0], ir.MBarrierWait):
            run.extend(stmt.body.stmts)  # the issuer's own wait joins its elected block
            continue
        if run:
            out.append(ir.OneThread(ir.Block(tuple(run)), run[0].span))
            run = []
        if not isinstance(stmt, ir.OneThread):
            stmt = _hoisted(map_bodies(stmt, _block))
        out.append(stmt)
    if run:
        out.append(ir.OneThread(ir.Block(tuple(run)), run[0].span))
    return ir.Block(tuple(out))


def _hoisted(stmt: ir.Stmt) -> ir.Stmt:
    """A loop whose body only issues becomes one elected block around the loop."""
    if not isinstance(stmt, ir.ForLoop) or not stmt.body.stmts or not all(
            isinstance(s, (ir.OneThread, ir.StageAdvance)) for s in stmt.body.stmts):
        return stmt
    inner = tuple(x for s in stmt.body.stmts
                  for x in (s.body.stmts if isinstance(s, ir.OneThread) else (s,)))
    return ir.OneThread(ir.Block((replace(stmt, body=ir.Block(inner)),)), stmt.span)
