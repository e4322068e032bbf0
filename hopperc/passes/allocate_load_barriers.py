"""allocate_load_barriers

Requires: loads into rings bound to pipelines (connect_role_pipelines,
pipeline_one_role_rings).
Establishes: every remaining async load in automatic code (a role loading for
itself) completes on an mbarrier owned by its destination buffer
(`<buf>_full`, arrival count 1: the elected issuer's arrive.expect_tx), with a
phase bit carried in a register. Buffers that are only ever loaded together
(in the same runs of consecutive loads, as `tma sa <- ...; tma sb <- ...` in
a GEMM loop) share one (`sa_sb_full`): one arm for all their bytes, one wait.

Hardware rule: a TMA/bulk load signals completion only through an mbarrier's
transaction count (PTX ISA, cp.async.bulk.tensor, mbarrier::complete_tx); one
phase completes when all the bytes armed for it have landed, whichever load
brought them, so loads issued together need only one barrier.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import all_accesses, bodies, walk
from hopperc.ir.rewrite import fresh_name, map_bodies


def allocate_load_barriers(kernel: ir.Kernel) -> ir.Kernel:
    loads = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.barrier is None]
    if not loads:
        return kernel
    buffers = list(dict.fromkeys(load.dst.buffer for load in loads))
    taken = {b.name for b in kernel.barriers} | {b.name for b in kernel.buffers}
    groups = _loaded_together(kernel.body, buffers)
    group_names = [fresh_name("_".join(group) + "_full", taken) for group in groups]
    names = {b: name for group, name in zip(groups, group_names) for b in group}
    barriers = tuple(ir.MBarrierArray(name, 1, kernel.buffer(group[0]).span, 1)
                     for group, name in zip(groups, group_names))
    return replace(kernel, barriers=kernel.barriers + barriers,
                   carried=kernel.carried + tuple(ir.phase_register(n) for n in group_names),
                   body=_rebind(kernel.body, names))


def _loaded_together(body: ir.Block, buffers: list[str]) -> list[tuple[str, ...]]:
    """`buffers` grouped by the runs of consecutive loads they appear in and the
    statement that first uses each after its run (a batch of wgmma products
    counts as one): two buffers share a group when every run that loads one
    loads the other and their first use is the same, so no use waits for a
    load it does not read."""
    runs: list[set[tuple[str, int | None]]] = []
    for block in [body] + [b for stmt in walk(body) for b in bodies(stmt)]:
        stmts = block.stmts
        start = 0
        for i in range(len(stmts) + 1):
            if i < len(stmts) and isinstance(stmts[i], ir.AsyncLoad) \
                    and stmts[i].barrier is None:
                continue
            if i > start:
                runs.append({(load.dst.buffer, _first_use(stmts, i, load.dst))
                             for load in stmts[start:i]})
            start = i + 1
    groups: dict[frozenset, list[str]] = {}
    for name in buffers:
        key = frozenset((i, use) for i, run in enumerate(runs) for buf, use in run if buf == name)
        groups.setdefault(key, []).append(name)
    return [tuple(group) for group in groups.values()]


def _first_use(stmts: tuple[ir.Stmt, ...], after: int, dst: ir.BufferView) -> int | None:
    """Index of the first statement from `after` on that touches `dst`'s memory
    (the first of a run of wgmma products that does), None if none in the block."""
    memory = dst.storage or dst.buffer
    batch = None
    for j in range(after, len(stmts)):
        if isinstance(stmts[j], ir.Mma):
            batch = j if batch is None else batch
        else:
            batch = None
        if any(a.memory == memory for a in all_accesses(stmts[j])):
            return batch if batch is not None else j
    return None


def _rebind(block: ir.Block, names: dict[str, str]) -> ir.Block:
    out = []
    for stmt in block.stmts:
        if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is None:
            stmt = replace(stmt, barrier=ir.BarrierRef(names[stmt.dst.buffer], ir.const(0)))
        out.append(map_bodies(stmt, lambda b: _rebind(b, names)))
    return ir.Block(tuple(out))
