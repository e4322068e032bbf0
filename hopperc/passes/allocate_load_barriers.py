"""allocate_load_barriers

Requires: loads between roles bound to pipelines (connect_role_pipelines).
Establishes: every remaining async load in automatic code (a role loading for
itself) completes on an mbarrier owned by its destination buffer
(`<buf>_full`, arrival count 1: the elected issuer's arrive.expect_tx), with a
phase bit carried in a register.

Hardware rule: a TMA/bulk load signals completion only through an mbarrier's
transaction count (PTX ISA, cp.async.bulk.tensor, mbarrier::complete_tx).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.rewrite import fresh_name, map_bodies


def allocate_load_barriers(kernel: ir.Kernel) -> ir.Kernel:
    loads = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.barrier is None]
    if not loads:
        return kernel
    buffers: list[str] = []
    for load in loads:
        buf = kernel.buffer(load.dst.buffer)
        if buf.stages > 1:
            raise CompileError(load.span, f"'{buf.name}' has {buf.stages} stages, but one role "
                                          "both loads and reads it; a stage ring is filled by a "
                                          "producer role and read by a consumer role (or use "
                                          "stages 1)")
        if buf.name not in buffers:
            buffers.append(buf.name)
    taken = {b.name for b in kernel.barriers} | {b.name for b in kernel.buffers}
    names = {b: fresh_name(f"{b}_full", taken) for b in buffers}
    barriers = tuple(ir.MBarrierArray(names[b], 1, kernel.buffer(b).span, 1) for b in buffers)
    return replace(kernel, barriers=kernel.barriers + barriers,
                   carried=kernel.carried + tuple(ir.phase_register(names[b]) for b in buffers),
                   body=_rebind(kernel.body, names))


def _rebind(block: ir.Block, names: dict[str, str]) -> ir.Block:
    out = []
    for stmt in block.stmts:
        if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is None:
            stmt = replace(stmt, barrier=ir.BarrierRef(names[stmt.dst.buffer], ir.const(0)))
        out.append(map_bodies(stmt, lambda b: _rebind(b, names)))
    return ir.Block(tuple(out))
