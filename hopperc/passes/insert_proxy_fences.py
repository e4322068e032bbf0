"""insert_proxy_fences

Requires: hand-off barriers placed (insert_barriers).
Establishes: wherever a buffer's generic accesses (st.shared writes, ld.shared
reads) may be followed by a conflicting async access (TMA/bulk store or wgmma
reading what was written; TMA/bulk load overwriting what was read), the threads
that made the generic accesses execute `fence.proxy.async.shared::cta` before
the barrier that hands the buffer over: the one right before the async access
when it is the role's, else the first barrier after each access (an earlier
barrier, or one warpgroup's, may be what orders it with the issuer). Per-buffer
may-state, joined at merges and iterated to a fixpoint over loops; a fence a
loop needs as a whole is hoisted before it, unless the loop's body already
fences before the access (ir/dataflow.py). No fence for async -> async or async -> generic (the
mbarrier wait orders those). The fence is never predicated per thread.

Hardware rule: the generic and async proxies see shared memory through
different paths; only a proxy fence orders a thread's generic accesses with
later async-proxy accesses (PTX ISA, memory consistency model, proxies).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import (Access, Proxy, all_accesses, bodies, leaf_accesses,
                                 manual_accesses, may_overlap, source_order)
from hopperc.ir.dataflow import ForwardRewrite, insert_before_trailing
from hopperc.ir.rewrite import map_bodies

# An unfenced generic access, with the first barrier that followed it (id of the
# statement; None: none yet). The fence must come before that barrier: it may be
# the one that hands the memory to the async access's issuer.
Pending = tuple[Access, int | None]
Unfenced = frozenset[Pending]


def insert_proxy_fences(kernel: ir.Kernel) -> ir.Kernel:
    fences = _Fences()
    kernel = fences.run(kernel)
    return replace(kernel, body=_before_barriers(kernel.body, fences.before_barrier))


def _before_barriers(block: ir.Block, fences: dict[int, ir.ProxyFence]) -> ir.Block:
    """Each fence due before an earlier barrier, put there."""
    out: list[ir.Stmt] = []
    for stmt in block.stmts:
        if id(stmt) in fences and not (out and isinstance(out[-1], ir.ProxyFence)):
            out.append(fences[id(stmt)])
        out.append(map_bodies(stmt, lambda b: _before_barriers(b, fences)))
    return ir.Block(tuple(out))


class _Fences(ForwardRewrite[Unfenced]):
    def __init__(self):
        self.before_barrier: dict[int, ir.ProxyFence] = {}
        self.trailing: ir.NamedBarrier | None = None  # the statement just before

    def initial(self) -> Unfenced:
        return frozenset()

    def join(self, a: Unfenced, b: Unfenced) -> Unfenced:
        return a | b

    def before(self, stmt: ir.Stmt, state: Unfenced):
        for access in all_accesses(stmt):
            if access.proxy is not Proxy.ASYNC:
                continue
            conflicts = [(prior, barrier) for prior, barrier in state
                         if may_overlap(prior, access) and (prior.write or access.write)]
            if not conflicts:
                continue
            prior = min((p for p, _ in conflicts), key=source_order)
            hazard = (ir.Hazard.GENERIC_WRITE_ASYNC_READ if prior.write
                      else ir.Hazard.GENERIC_READ_ASYNC_WRITE)
            fence = ir.ProxyFence(access.span, ir.Reason(hazard, access.buffer, prior.what,
                                                        prior.span, access.what, access.span))
            # The fence goes before the barrier right before the access (`place`).
            # A role-wide one hands over every earlier write; any other (none, or
            # one warpgroup's) leaves the writes an earlier barrier handed over
            # to be fenced before that barrier.
            trailing = self.trailing
            if trailing is None or trailing.per_warpgroup:
                for _, barrier in conflicts:
                    if barrier is not None and barrier != id(trailing):
                        self.before_barrier.setdefault(barrier, fence)
                if trailing is None and all(barrier is not None for _, barrier in conflicts):
                    return [], state - frozenset(conflicts)  # all fenced before a barrier
            return [fence], frozenset()
        return [], state

    def step(self, stmt, state):
        if bodies(stmt):  # a loop or branch: no barrier is right before what follows
            self.trailing = None
            stmt, state = super().step(stmt, state)
            self.trailing = None
            return stmt, state
        return super().step(stmt, state)

    def commitments(self) -> int:
        return len(self.before_barrier)

    def transfer(self, stmt: ir.Stmt, state: Unfenced) -> Unfenced:
        if isinstance(stmt, ir.NamedBarrier):
            self.trailing = stmt
        elif not isinstance(stmt, (ir.BulkWaitRead, ir.MBarrierExpectTx)):
            self.trailing = None  # `place` slides a fence back over these only
        if isinstance(stmt, ir.ProxyFence):
            return frozenset()
        if isinstance(stmt, ir.NamedBarrier):
            return frozenset((a, id(stmt) if barrier is None else barrier)
                             for a, barrier in state)
        return state | frozenset((a, None) for a in leaf_accesses(stmt)
                                 if a.proxy is Proxy.GENERIC)

    def manual(self, region: ir.ManualRegion, state: Unfenced) -> Unfenced:
        """Hand-written generic accesses stay unfenced for the automatic code
        after them (a fence the user wrote inside is not relied on)."""
        self.trailing = None  # the region's last statement is hand-written
        return state | frozenset((a, None) for a in manual_accesses(region)
                                 if a.proxy is Proxy.GENERIC)

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        """A fence goes before the hand-off barrier (and the issue sequence) that
        precedes the async access."""
        insert_before_trailing(out, inserted, (ir.NamedBarrier, ir.BulkWaitRead,
                                               ir.MBarrierExpectTx))
