"""elect_async_issue

Requires: all other sync passes done (they reason about flat statements).
Establishes: in automatic code every TMA/bulk copy, arrive.expect_tx,
commit_group and wait_group.read is executed by one thread of its role (the
first warp's `elect.sync` lane); consecutive ones share one elected block.

Hardware rule: a copy or an arrive.expect_tx issued by every thread would run
once per thread; bulk groups are per thread, so the thread that commits a
store is the one that must wait for it.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.rewrite import map_bodies

ISSUED_BY_ONE = (ir.AsyncLoad, ir.AsyncStore, ir.MBarrierExpectTx, ir.BulkCommit,
                 ir.BulkWaitRead)


def elect_async_issue(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=_block(kernel.body))


def _block(block: ir.Block) -> ir.Block:
    out: list[ir.Stmt] = []
    run: list[ir.Stmt] = []
    for stmt in block.stmts:
        if isinstance(stmt, ISSUED_BY_ONE):
            run.append(stmt)
            continue
        if run:
            out.append(ir.OneThread(ir.Block(tuple(run)), run[0].span))
            run = []
        out.append(map_bodies(stmt, _block))
    if run:
        out.append(ir.OneThread(ir.Block(tuple(run)), run[0].span))
    return ir.Block(tuple(out))
