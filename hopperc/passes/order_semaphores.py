"""order_semaphores

Requires: `signal` / `wait` / counters (ir.Signal, ir.Wait, ir.Count) in code the
whole block runs (no roles, no clusters: the front end), every other sync pass done (the
copies' issuers elected, so the thread that commits the bulk stores is known).
Establishes: a signal is a release of everything the block wrote before it,
a wait an acquire for everything the block does after it:

    signal F[i]  ->  [each store-issuing thread] cp.async.bulk.wait_group 0
                     bar.sync 0, threads
                     [one thread] red.release.gpu.global.add.s32 [F + i], 1
    wait F[i] >= n -> [one thread] spin ld.acquire.gpu.global.b32 [F + i] until >= n
                      [the same thread] fence.proxy.async.global   (if a TMA load may follow)
                      bar.sync 0, threads
    n: i32 = signal F[i] -> [each store-issuing thread] cp.async.bulk.wait_group 0
                     bar.sync 0, threads
                     [one thread] atom.acq_rel.gpu.global.add.s32 old, [F + i], 1
                                  slot = old                     (shared memory)
                                  fence.proxy.async.global       (if a TMA load may follow)
                     bar.sync 0, threads
                     [every thread] n = slot

Hardware rules (PTX ISA): a bulk store's global writes are complete, and
visible to the generic proxy of the issuing thread, only at a plain
`cp.async.bulk.wait_group` (`.read` completes only its read of shared memory;
the completion implies a generic-async proxy fence); `bar.sync` orders every
thread's earlier writes before the one thread's release (causality order is
transitive, and a release is cumulative over what happens before it); the
release's add and the acquiring load are morally strong at `.gpu` scope, so
a load that reads the add's value (or a later one) synchronizes with it. The
acquire is the spinning thread's: the barrier after it extends it to the
block's other threads. A TMA load is an async-proxy access, which an acquire
through the generic proxy does not order: the issuing thread (the same elected
thread that spins, in code without roles) fences `fence.proxy.async.global`
after its acquire and before the load (CUTLASS's and the PTX ISA's pattern for
data a generic release published to the async proxy).

A counter (ir.Count) is a signal whose block may then read what the others
wrote (the last arriver finishes their reduction), so its atom is acq_rel
(PTX ISA: an atom with .acq_rel is both; its acquire synchronizes with the
releases of every earlier add to the flag, a release sequence of
read-modify-writes, so each block's writes before its add are visible to the
block that reads the final count), and, as a wait's, fenced to the async proxy
before a TMA load may read them. Its old value reaches the block through a
shared-memory slot: the one thread's store, then the barrier (which also
extends the acquire to every thread), then each thread's load. The next
counter's barrier before its atom keeps the slot's next store after every
thread's load of this one.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup, walk
from hopperc.ir.rewrite import map_bodies


def order_semaphores(kernel: ir.Kernel) -> ir.Kernel:
    stmts = list(walk(kernel.body))
    if not any(isinstance(s, (ir.Signal, ir.Wait, ir.Count)) for s in stmts):
        return kernel
    stores = [s for s in stmts if isinstance(s, ir.AsyncStore)]
    lowering = _Lowering(kernel.threads, bool(stores),
                         any(issued_per_warpgroup(s) for s in stores),
                         _loads_after_waits(kernel.body))
    return replace(kernel, body=lowering.block(kernel.body))


def _loads_after_waits(body: ir.Block) -> set[int]:
    """The acquires (waits and counters, by id) that a TMA load may follow: one
    later in program order (any later statement of the kernel, branches
    included), or one anywhere in a loop around the acquire."""
    order = list(walk(body))
    acquires = (ir.Wait, ir.Count)
    found = {id(s) for i, s in enumerate(order) if isinstance(s, acquires) and any(
        isinstance(later, ir.AsyncLoad) for later in order[i + 1:])}
    for loop in (s for s in order if isinstance(s, ir.ForLoop)):
        inside = list(walk(loop.body))
        if any(isinstance(s, ir.AsyncLoad) for s in inside):
            found |= {id(s) for s in inside if isinstance(s, acquires)}
    return found


class _Lowering:
    def __init__(self, threads: int, stores: bool, stores_per_warpgroup: bool,
                 loads_after: set[int]):
        self.threads, self.stores, self.per_warpgroup, self.loads_after = \
            threads, stores, stores_per_warpgroup, loads_after

    def block(self, block: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for stmt in block.stmts:
            if isinstance(stmt, ir.Signal):
                out += self.signal(stmt)
            elif isinstance(stmt, ir.Wait):
                out += self.wait(stmt)
            elif isinstance(stmt, ir.Count):
                out += self.count(stmt)
            else:
                out.append(map_bodies(stmt, self.block))
        return ir.Block(tuple(out))

    def signal(self, stmt: ir.Signal | ir.Count) -> list[ir.Stmt]:
        span, out = stmt.span, []
        if self.stores:
            complete = ir.BulkWaitRead(0, span, _reason(
                ir.Hazard.ASYNC_WRITE_READ, stmt, "the block's bulk stores' global writes",
                "signal (its release)"), read=False)
            out.append(ir.OneThread(ir.Block((complete,)), span, self.per_warpgroup))
        out.append(ir.NamedBarrier(0, self.threads, span, _reason(
            ir.Hazard.THREAD_HANDOFF, stmt, "every thread's global writes",
            "the one thread's release")))
        if isinstance(stmt, ir.Signal):
            out.append(ir.OneThread(ir.Block((stmt,)), span))
        return out

    def count(self, stmt: ir.Count) -> list[ir.Stmt]:
        span, inner = stmt.span, [replace(stmt, acquire=True)]
        if id(stmt) in self.loads_after:
            inner.append(ir.GlobalProxyFence(span, _reason(
                ir.Hazard.GENERIC_WRITE_ASYNC_READ, stmt, "what the acquire made visible",
                "the issuer's later TMA loads")))
        return [*self.signal(stmt), ir.OneThread(ir.Block(tuple(inner)), span),
                ir.NamedBarrier(0, self.threads, span, _reason(
                    ir.Hazard.THREAD_HANDOFF, stmt, "the one thread's acquire and its "
                    "store of the count to the broadcast slot",
                    "every thread's read of the count and later accesses")),
                ir.CountRead(stmt.result, span)]

    def wait(self, stmt: ir.Wait) -> list[ir.Stmt]:
        span, inner = stmt.span, [stmt]
        if id(stmt) in self.loads_after:
            inner.append(ir.GlobalProxyFence(span, _reason(
                ir.Hazard.GENERIC_WRITE_ASYNC_READ, stmt, "what the acquire made visible",
                "the issuer's later TMA loads")))
        return [ir.OneThread(ir.Block(tuple(inner)), span),
                ir.NamedBarrier(0, self.threads, span, _reason(
                    ir.Hazard.THREAD_HANDOFF, stmt, "the one thread's acquire",
                    "every thread's later accesses"))]


def _reason(hazard: ir.Hazard, stmt: ir.Signal | ir.Wait | ir.Count, before: str,
            after: str) -> ir.Reason:
    return ir.Reason(hazard, stmt.tensor, before, stmt.span, after, stmt.span)
