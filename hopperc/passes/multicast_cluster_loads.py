"""multicast_cluster_loads

Requires: pipelines connected (connect_role_pipelines), their releases placed.
Establishes: in a kernel whose cluster spans C > 1 blocks along one grid axis,
a ring load whose box does not depend on that axis's tile coordinate (the
same box for every block of the cluster: B's tile for a cluster along m) is
issued once per cluster: the block of cluster rank r loads the r-th slice of
the box's rows and multicasts it into that slice of the ring stage of all C
blocks (`.multicast::cluster`, mask of the C blocks), completing on each
block's full barrier, which still expects every byte its stage receives. A
block's producer then writes into the other blocks' stages, so it may refill a
stage only once every block's consumers released it: each consumer arrival
goes to the empty barrier of all C blocks (its own, and the others' through
`mapa`), and each empty barrier counts C times the consumer's arrivals; where
the consumers read the ring with ld.shared, the producer's proxy fence before
its loads covers the whole cluster's shared memory (.shared::cluster). Every
thread of the cluster meets on a cluster barrier before the block exits, as
the other blocks' consumers may still arrive on this block's barriers (the
setup's cluster barrier is initialize_mbarriers').

Hardware rule: a multicast copy writes the same CTA-relative shared address in
every destination CTA and signals the mbarrier at the same offset there; a
shared::cluster address of another CTA comes from `mapa`; a CTA's shared
memory may be accessed by its cluster's other CTAs only while it is running;
a .shared::cta proxy fence orders only the executing CTA's shared memory
(PTX ISA, cp.async.bulk.tensor, mapa, fence.proxy.async, Distributed Shared
Memory).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import scalars_in, walk
from hopperc.ir.layout import column_blocks, row_pitch
from hopperc.ir.rewrite import map_stmts


def multicast_cluster_loads(kernel: ir.Kernel) -> ir.Kernel:
    axes = [i for i, extent in enumerate(kernel.cluster) if extent > 1]
    if len(axes) != 1 or axes[0] >= len(kernel.grid):
        return kernel  # no cluster, or one over several axes: every block loads its own
    blocks = kernel.cluster[axes[0]]
    coordinate = ir.Scalar(ir.ScalarKind.TILE, kernel.grid[axes[0]].name)
    pipelines = {p.name: p for p in kernel.pipelines}
    handed = [p for p in kernel.pipelines if p.producer != p.consumer]  # between roles
    shared = {id(s) for p in handed for s in walk(kernel.body)
              if isinstance(s, ir.AsyncLoad) and s.dst.buffer in p.buffers
              and _shareable(s, kernel, blocks, coordinate)}
    multicast = {name for name, p in pipelines.items() if any(
        isinstance(s, ir.AsyncLoad) and id(s) in shared and s.dst.buffer in p.buffers
        for s in walk(kernel.body))}
    if not multicast:
        return kernel

    written = {b for name in multicast for b in pipelines[name].buffers}

    def rewrite(stmt: ir.Stmt) -> ir.Stmt:
        if isinstance(stmt, ir.AsyncLoad) and id(stmt) in shared:
            return replace(stmt, multicast=blocks)
        if isinstance(stmt, ir.StageRelease) and stmt.pipeline in multicast:
            return replace(stmt, blocks=blocks)
        if isinstance(stmt, ir.ProxyFence) and stmt.reason is not None and \
                stmt.reason.hazard is ir.Hazard.GENERIC_READ_ASYNC_WRITE and \
                stmt.reason.subject in written:
            return replace(stmt, cluster=True)  # the loads overwrite the other blocks' reads
        return stmt

    empties = {pipelines[name].empty for name in multicast}
    barriers = tuple(replace(b, arrivals=b.arrivals * blocks) if b.name in empties else b
                     for b in kernel.barriers)
    scoped = tuple(replace(p, blocks=blocks, consumer_arrivals=p.consumer_arrivals * blocks)
                   if p.name in multicast else p for p in kernel.pipelines)
    release = next(s for s in walk(kernel.body)
                   if isinstance(s, ir.StageRelease) and s.pipeline in multicast)
    first = pipelines[release.pipeline]
    exit_barrier = ir.ClusterBarrier(kernel.span, ir.Reason(
        ir.Hazard.SETUP, first.empty, f"arrived on by the cluster's other block"
        f"{'s' if blocks > 2 else ''}", release.span,
        "this block exits only after every block of the cluster is done with it", None))
    body = map_stmts(kernel.body, rewrite)
    return replace(kernel, body=ir.Block(body.stmts + (exit_barrier,)), barriers=barriers,
                   pipelines=scoped)


def _shareable(load: ir.AsyncLoad, kernel: ir.Kernel, blocks: int,
               coordinate: ir.Scalar) -> bool:
    """The same box for every block of the cluster, split in `blocks` row slices
    that each start where the buffer's swizzle pattern starts again."""
    if load.engine is not ir.Engine.TMA or load.dst.part is not None or load.dst.transposed:
        return False
    if any(coordinate in scalars_in(c) for c in load.coords):
        return False
    buf = kernel.buffer(load.dst.buffer)
    if len(buf.shape) != 2 or column_blocks(buf) != 1 or buf.shape[0] % blocks:
        return False
    return buf.shape[0] // blocks * row_pitch(buf) % buf.swizzle.alignment == 0

