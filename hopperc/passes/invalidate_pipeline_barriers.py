"""invalidate_pipeline_barriers

Requires: pipelines connected and role barriers placed (insert_barriers).
Establishes: each pipeline's mbarriers are invalidated (mbarrier.inval) by one
thread of its consumer role once every consumer thread is past its last wait
and release: right after the role's first barrier of all its threads that
follows them (an epilogue's hand-off barrier, at no extra cost; a warpgroup's
own barrier proves nothing about the other warpgroups). Without such a
barrier they stay valid to the block's end: no barrier is added for them. By
then the producer is done too: each of its arrivals and loads completed a
phase some consumer waited for. A pipeline filled by multicast loads stays
valid to the block's end: the cluster's other blocks may still arrive on its
empty barriers until the cluster barrier at exit.

Hardware rule: an mbarrier's memory may be reused for anything else only
after mbarrier.inval, and inval must not race with any other operation on the
barrier (PTX ISA, mbarrier.inval). The mbarriers have memory of their own
(no buffer reuses it), so the block's exit is the only reuse: inval is kept
where it is free, never bought with a barrier.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.passes.insert_barriers import role_barrier


def invalidate_pipeline_barriers(kernel: ir.Kernel) -> ir.Kernel:
    if not kernel.pipelines:
        return kernel
    body = []
    for stmt in kernel.body.stmts:
        mine = [p for p in kernel.pipelines
                if isinstance(stmt, ir.RoleBlock) and stmt.role.name == p.consumer
                and p.blocks == 1]
        if mine:
            stmt = replace(stmt, body=_invalidate(kernel, stmt, mine))
        body.append(stmt)
    return replace(kernel, body=ir.Block(tuple(body)))


def _invalidate(kernel: ir.Kernel, role: ir.RoleBlock, pipelines: list[ir.Pipeline]) -> ir.Block:
    # Rings may share an empty barrier (drop_implied_stage_waits): each array once.
    arrays = dict.fromkeys(name for p in pipelines for name in (p.full, p.empty))
    stmts = list(role.body.stmts)
    last_use = max(i for i, s in enumerate(stmts)
                   if any(_barrier_of(x) in arrays for x in walk(ir.Block((s,)))))
    span = stmts[last_use].span
    reason = ir.Reason(ir.Hazard.SETUP, ", ".join(sorted(arrays)),
                       "last waited for and released", span,
                       "invalidated once every consumer thread is past them", None)
    stages = {name: p.stages for p in pipelines for name in (p.full, p.empty)}
    invals = [ir.MBarrierInval(ir.BarrierRef(p_array, ir.const(i)), span, reason)
              for p_array in arrays for i in range(stages[p_array])]
    threads = role_barrier(kernel, role.role)[1]
    # Only a barrier of every consumer thread (not one warpgroup's) proves them past.
    after = next((i for i in range(last_use + 1, len(stmts))
                  if isinstance(stmts[i], ir.NamedBarrier) and not stmts[i].per_warpgroup
                  and stmts[i].threads == threads), None)
    if after is None:
        return role.body
    stmts[after + 1:after + 1] = invals
    return ir.Block(tuple(stmts))


def _barrier_of(stmt: ir.Stmt) -> str | None:
    barrier = getattr(stmt, "barrier", None)
    return barrier.array if isinstance(barrier, ir.BarrierRef) else None
