"""insert_proxy_fences

Requires: hand-off barriers placed (insert_barriers).
Establishes: wherever a buffer's generic accesses (st.shared writes, ld.shared
reads) may be followed by a conflicting async access (TMA/bulk store or wgmma
reading what was written; TMA/bulk load overwriting what was read), the threads
that made the generic accesses execute `fence.proxy.async.shared::cta` before
the barrier that hands the buffer over. Per-buffer may-state, joined at merges
and iterated to a fixpoint over loops; a fence a loop needs as a whole is
hoisted before it, unless the loop's body already fences before the access
(ir/dataflow.py). No fence for async -> async or async -> generic (the
mbarrier wait orders those). The fence is never predicated per thread.

Hardware rule: the generic and async proxies see shared memory through
different paths; only a proxy fence orders a thread's generic accesses with
later async-proxy accesses (PTX ISA, memory consistency model, proxies).
"""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import (Access, Proxy, all_accesses, leaf_accesses, manual_accesses,
                                 may_overlap, source_order)
from hopperc.ir.dataflow import ForwardRewrite, insert_before_trailing

Unfenced = frozenset[Access]


def insert_proxy_fences(kernel: ir.Kernel) -> ir.Kernel:
    return _Fences().run(kernel)


class _Fences(ForwardRewrite[Unfenced]):
    def initial(self) -> Unfenced:
        return frozenset()

    def join(self, a: Unfenced, b: Unfenced) -> Unfenced:
        return a | b

    def before(self, stmt: ir.Stmt, state: Unfenced):
        for access in all_accesses(stmt):
            if access.proxy is not Proxy.ASYNC:
                continue
            for prior in sorted(state, key=source_order):
                if may_overlap(prior, access) and (prior.write or access.write):
                    hazard = (ir.Hazard.GENERIC_WRITE_ASYNC_READ if prior.write
                              else ir.Hazard.GENERIC_READ_ASYNC_WRITE)
                    reason = ir.Reason(hazard, access.buffer, prior.what, prior.span,
                                       access.what, access.span)
                    return [ir.ProxyFence(access.span, reason)], frozenset()
        return [], state

    def transfer(self, stmt: ir.Stmt, state: Unfenced) -> Unfenced:
        if isinstance(stmt, ir.ProxyFence):
            return frozenset()
        return state | frozenset(a for a in leaf_accesses(stmt) if a.proxy is Proxy.GENERIC)

    def manual(self, region: ir.ManualRegion, state: Unfenced) -> Unfenced:
        """Hand-written generic accesses stay unfenced for the automatic code
        after them (a fence the user wrote inside is not relied on)."""
        return state | frozenset(a for a in manual_accesses(region) if a.proxy is Proxy.GENERIC)

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        """A fence goes before the hand-off barrier (and the issue sequence) that
        precedes the async access."""
        insert_before_trailing(out, inserted, (ir.NamedBarrier, ir.BulkWaitRead,
                                               ir.MBarrierExpectTx))
