"""elect_async_issue

Requires: all other sync passes done (they reason about flat statements).
Establishes: in automatic code every TMA/bulk copy, arrive.expect_tx,
commit_group, wait_group.read and mbarrier.inval is executed by one thread of
its role (the first warp's `elect.sync` lane); a store that names `wg` is
issued by one thread of each warpgroup (its first warp's elected lane), and so
are the commits and waits of a role whose stores do. Consecutive ones of one
kind, and the issuer's own load waits between them (complete_async_loads),
share one elected block, and a loop that only issues (a producer's main loop)
runs in one elected block instead of electing every iteration.

Hardware rule: a copy or an arrive.expect_tx issued by every thread would run
once per thread; bulk groups are per thread, so the thread that commits a
store is the one that must wait for it.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup, walk
from hopperc.ir.rewrite import map_bodies

ISSUED_BY_ONE = (ir.AsyncLoad, ir.MBarrierExpectTx, ir.MBarrierInval)
BULK_GROUPS = (ir.BulkCommit, ir.BulkWaitRead)
ELECTED = (ir.AsyncStore, *BULK_GROUPS, *ISSUED_BY_ONE)  # what this pass puts in a OneThread


def elect_async_issue(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=_block(kernel.body, _stores_per_warpgroup(kernel.body)))


def _stores_per_warpgroup(block: ir.Block) -> bool:
    """Whether the code's stores name `wg` (the front end makes a role's stores
    all per warpgroup or all whole)."""
    return any(issued_per_warpgroup(s) for s in walk(block))


def _issuer(stmt: ir.Stmt, per_warpgroup: bool) -> bool | None:
    """None: not issued by one thread; else whether each warpgroup's thread issues
    it. Bulk groups are per thread: they follow the role's stores."""
    if isinstance(stmt, ir.AsyncStore):
        return issued_per_warpgroup(stmt)
    if isinstance(stmt, BULK_GROUPS):
        return per_warpgroup
    if isinstance(stmt, ISSUED_BY_ONE):
        return False
    return None


def _block(block: ir.Block, per_warpgroup: bool) -> ir.Block:
    out: list[ir.Stmt] = []
    run: list[ir.Stmt] = []
    scope = False

    def close() -> None:
        if run:
            out.append(ir.OneThread(ir.Block(tuple(run)), run[0].span, scope))
            run.clear()

    for stmt in block.stmts:
        issued, stmts = _issuer(stmt, per_warpgroup), (stmt,)
        if isinstance(stmt, ir.OneThread) and stmt.body.stmts and isinstance(
                stmt.body.stmts[0], ir.MBarrierWait):
            issued, stmts = False, stmt.body.stmts  # the issuer's own wait joins its block
        if issued is not None:
            if issued != scope:
                close()
            scope = issued
            run.extend(stmts)
            continue
        close()
        if isinstance(stmt, ir.RoleBlock):
            stmt = replace(stmt, body=_block(stmt.body, _stores_per_warpgroup(stmt.body)))
        elif not isinstance(stmt, ir.OneThread):
            stmt = _hoisted(map_bodies(stmt, lambda body: _block(body, per_warpgroup)))
        out.append(stmt)
    close()
    return ir.Block(tuple(out))


def _hoisted(stmt: ir.Stmt) -> ir.Stmt:
    """A loop whose body only issues, from one thread, becomes one elected block
    around the loop."""
    if not isinstance(stmt, ir.ForLoop) or not stmt.body.stmts or not all(
            isinstance(s, (ir.OneThread, ir.StageAdvance)) for s in stmt.body.stmts):
        return stmt
    scopes = {s.per_warpgroup for s in stmt.body.stmts if isinstance(s, ir.OneThread)}
    if len(scopes) != 1:
        return stmt
    inner = tuple(x for s in stmt.body.stmts
                  for x in (s.body.stmts if isinstance(s, ir.OneThread) else (s,)))
    return ir.OneThread(ir.Block((replace(stmt, body=ir.Block(inner)),)), stmt.span,
                        scopes.pop())
