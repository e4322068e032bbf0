"""initialize_mbarriers

Requires: every compiler-owned mbarrier array declared with its arrival count
(connect_role_pipelines, allocate_load_barriers).
Establishes: before anything else runs, one thread initializes every
compiler-owned mbarrier with its arrival count, then executes
fence.mbarrier_init, then one block-wide barrier publishes them to every role;
where the cluster's other blocks use them too (multicast loads complete on
them, remote releases arrive on them), a cluster barrier publishes them to
every block of the cluster.

Hardware rule: an mbarrier must be initialized, and the initialization made
visible, before any thread arrives on or waits for it; the fence makes the
inits visible to the async proxy (the copy engine's complete_tx) as well
(PTX ISA, mbarrier.init, fence.mbarrier_init).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir


def initialize_mbarriers(kernel: ir.Kernel) -> ir.Kernel:
    owned = [b for b in kernel.barriers if b.arrivals is not None]
    if not owned:
        return kernel
    inits = [ir.MBarrierInit(ir.BarrierRef(b.name, ir.const(i)), b.arrivals, b.span, _reason(b))
             for b in owned for i in range(b.count)]
    first = owned[0]
    if any(p.blocks > 1 for p in kernel.pipelines):
        publish = ir.ClusterBarrier(first.span, _reason(first, "used by every block of the "
                                                               "cluster"))
    else:
        publish = ir.NamedBarrier(0, kernel.threads, first.span, _reason(first))
    prologue = (
        ir.OneThread(ir.Block((*inits, ir.MBarrierInitFence(first.span, _reason(first)))),
                     first.span),
        publish,
    )
    return replace(kernel, body=ir.Block(prologue + kernel.body.stmts))


def _reason(barrier: ir.MBarrierArray, users: str = "used by every role") -> ir.Reason:
    return ir.Reason(ir.Hazard.SETUP, barrier.name,
                     f"initialized by one thread with {barrier.arrivals} arrival"
                     f"{'s' if barrier.arrivals != 1 else ''}", barrier.span, users, None)
