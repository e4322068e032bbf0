"""drop_implied_refill_fences

Requires: the rings of a hand-off connected (connect_role_pipelines: the
producer fences before refilling a stage its consumer read with ld.shared) and
the consumer's proxy fences placed (insert_proxy_fences).
Establishes: that producer fence is kept only where the consumer's own threads
do not already fence between their reads and their release. It goes where, in
the one block of the consumer role that releases the ring (every consumer
thread's `mbarrier.arrive` on its empty barrier for the stage it just read, at
the block's top level),
every ld.shared of the ring's buffers that the role makes comes before a
`fence.proxy.async` at the block's top level, which comes before the release.

attention_bwd reads LSE's stage to form P, then fences dS^T's stores for the
wgmma that reads them, then releases Q's, dO's and LSE's stage after dK's
product: the producer's fence before refilling that stage goes.

Hardware rule: a proxy fence orders the executing thread's earlier generic
accesses before the async-proxy accesses that follow it in causality order
(PTX ISA, memory consistency model, proxies), as the writer's fence before the
hand-off barrier orders an epilogue's stores before the TMA store another
thread issues. Each consumer thread reads, fences, then arrives (release); the
producer's wait on that phase (acquire) precedes its TMA load, so the reads
are ordered before the load's writes without a second fence.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Proxy, all_accesses, bodies
from hopperc.ir.rewrite import map_bodies


def drop_implied_refill_fences(kernel: ir.Kernel) -> ir.Kernel:
    roles = {s.role.name: s for s in kernel.body.stmts if isinstance(s, ir.RoleBlock)}
    # Unicast rings whose every consumer thread arrives on the empty barrier.
    implied = {(p.producer, buffer) for p in kernel.pipelines
               if p.producer != p.consumer and p.consumer in roles and p.blocks == 1
               and p.consumer_arrivals == 32 * roles[p.consumer].role.active_warps
               and _consumer_fences(roles[p.consumer].body, p) for buffer in p.buffers}
    if not implied:
        return kernel
    body = ir.Block(tuple(
        replace(s, body=_without(s.body, {b for r, b in implied if r == s.role.name}))
        if isinstance(s, ir.RoleBlock) else s for s in kernel.body.stmts))
    return replace(kernel, body=body)


def _without(block: ir.Block, buffers: set[str]) -> ir.Block:
    """`block` without the refill fences for reads of `buffers`."""
    return ir.Block(tuple(map_bodies(s, lambda b: _without(b, buffers)) for s in block.stmts
                          if not (isinstance(s, ir.ProxyFence) and s.reason is not None
                                  and s.reason.hazard is ir.Hazard.GENERIC_READ_ASYNC_WRITE
                                  and s.reason.subject in buffers)))


def _consumer_fences(role_body: ir.Block, pipe: ir.Pipeline) -> bool:
    """The consumer releases `pipe` in one block, by every thread, after a fence
    that follows every ld.shared of its buffers the role makes."""
    reads = _generic_reads(role_body.stmts, pipe)
    sites = [b for b in _blocks(role_body) if any(_releases(s, pipe) for s in b.stmts)]
    if not reads or len(sites) != 1 or any(
            isinstance(s, ir.StageRelease) and s.barrier.array == pipe.empty
            and not _releases(s, pipe) for b in _blocks(role_body) for s in b.stmts):
        return False
    stmts = sites[0].stmts
    release = next(i for i, s in enumerate(stmts) if _releases(s, pipe))
    if _generic_reads(stmts[:release], pipe) != reads:
        return False  # some read is outside the block, or after the release
    last_read = max(i for i in range(release) if _generic_reads(stmts[i:i + 1], pipe))
    return any(isinstance(s, ir.ProxyFence) for s in stmts[last_read + 1:release])


def _releases(stmt: ir.Stmt, pipe: ir.Pipeline) -> bool:
    """A release of the stage this iteration used (lag 0), which the block's
    earlier statements read."""
    return isinstance(stmt, ir.StageRelease) and stmt.barrier.array == pipe.empty \
        and stmt.lag == 0


def _generic_reads(stmts: tuple[ir.Stmt, ...], pipe: ir.Pipeline) -> int:
    return sum(a.proxy is Proxy.GENERIC and not a.write and a.buffer in pipe.buffers
               for s in stmts for a in all_accesses(s))


def _blocks(block: ir.Block):
    yield block
    for stmt in block.stmts:
        for body in bodies(stmt):
            yield from _blocks(body)
