"""allocate_load_barriers

Requires: async loads in automatic code name no mbarrier.
Establishes: every such load completes on an mbarrier owned by its destination
buffer (`<buf>_full`, arrival count 1: the elected issuer's arrive.expect_tx),
with a phase bit carried in a register; one thread initializes the barriers,
fences the inits (fence.mbarrier_init) and a block-wide barrier publishes them
before any thread uses one.

Hardware rule: a TMA/bulk load signals completion only through an mbarrier's
transaction count; an mbarrier must be initialized, and the init made visible,
before any arrive or wait (PTX ISA, mbarrier).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.rewrite import map_bodies


def allocate_load_barriers(kernel: ir.Kernel) -> ir.Kernel:
    loads = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.barrier is None]
    if not loads:
        return kernel
    buffers: list[str] = []
    for load in loads:
        buf = kernel.buffer(load.dst.buffer)
        if buf.stages > 1:
            raise CompileError(load.span, f"'{buf.name}' has {buf.stages} stages; pipelined "
                                          "buffers need warp-specialized lowering, which this "
                                          "version does not do yet (use stages 1)")
        if buf.name not in buffers:
            buffers.append(buf.name)
    taken = {b.name for b in kernel.barriers} | {b.name for b in kernel.buffers}
    names = {b: _fresh(f"{b}_full", taken) for b in buffers}
    barriers = tuple(ir.MBarrierArray(names[b], 1, kernel.buffer(b).span) for b in buffers)
    setup = [ir.MBarrierInit(ir.BarrierRef(names[b], ir.const(0)), 1, kernel.buffer(b).span,
                             _reason(b, kernel)) for b in buffers]
    first = kernel.buffer(buffers[0]).span
    prologue = (
        ir.OneThread(ir.Block((*setup, ir.MBarrierInitFence(first, _reason(buffers[0], kernel)))),
                     first),
        ir.NamedBarrier(0, kernel.threads, first, _reason(buffers[0], kernel)),
    )
    body = _rebind(kernel.body, names)
    return replace(kernel, barriers=kernel.barriers + barriers,
                   phases=kernel.phases + tuple(ir.phase_register(names[b]) for b in buffers),
                   body=ir.Block(prologue + body.stmts))


def _rebind(block: ir.Block, names: dict[str, str]) -> ir.Block:
    out = []
    for stmt in block.stmts:
        if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is None:
            stmt = replace(stmt, barrier=ir.BarrierRef(names[stmt.dst.buffer], ir.const(0)))
        out.append(map_bodies(stmt, lambda b: _rebind(b, names)))
    return ir.Block(tuple(out))


def _fresh(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}{n}"
    taken.add(candidate)
    return candidate


def _reason(buffer: str, kernel: ir.Kernel) -> ir.Reason:
    span = kernel.buffer(buffer).span
    return ir.Reason(ir.Hazard.SETUP, buffer, "mbarrier initialized by one thread", span,
                     "used by every thread", None)
