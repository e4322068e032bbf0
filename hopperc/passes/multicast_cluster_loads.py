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
`mapa`) with release at cluster scope, the producer's wait on its empty barrier
acquires at cluster scope, and each empty barrier counts C times the consumer's
arrivals; where
the consumers read the ring with ld.shared, the producer's proxy fence before
its loads covers the whole cluster's shared memory (.shared::cluster). Every
thread of the cluster meets on a cluster barrier before the block exits, as
the other blocks' consumers may still arrive on this block's barriers (the
setup's cluster barrier is initialize_mbarriers').

A ring is multicast only when every block of the cluster provably issues the
same loads in the same iterations: every loop bound and condition around its
loads, full and empty waits, reads and releases is uniform over the cluster's
ranks (it reads no tile coordinate along the cluster's axis, no block index,
no compiler-carried register). Otherwise a block would wait forever on its
full barrier for a peer's slice that peer never loads, or a peer would
overwrite a stage this block has not released; such a ring stays each block's
own, and its shareable loads record why (`AsyncLoad.unicast`, for `explain`).
A ragged load (`START : END`) stays each block's own too: the slices of a
multicast box would each need the box's clip.

Hardware rule: a multicast copy writes the same CTA-relative shared address in
every destination CTA and signals the mbarrier at the same offset there; a
shared::cluster address of another CTA comes from `mapa`; a CTA's shared
memory may be accessed by its cluster's other CTAs only while it is running;
a .shared::cta proxy fence orders only the executing CTA's shared memory; a
release synchronizes with an acquire only when each one's scope includes the
other's thread, so the default .release.cta / .acquire.cta of mbarrier ops do
not order one block's reads before another block's refill (PTX ISA,
cp.async.bulk.tensor, mapa, fence.proxy.async, Distributed Shared Memory,
Memory Consistency Model: scope, morally strong).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, leaf_accesses, scalars_in, walk
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
    # `specialize` wrote the roles: their names are not the user's
    divergent = {p.name: _divergence(kernel.body, p, coordinate, "", not kernel.specialized)
                 for p in handed}
    shareable = {id(s): ir.RaggedUnicast(s.span) if s.ragged else divergent[p.name]
                 for p in handed for s in walk(kernel.body)
                 if isinstance(s, ir.AsyncLoad) and s.dst.buffer in p.buffers
                 and _shareable(s, kernel, blocks, coordinate)}
    shared = {key for key, why in shareable.items() if why is None}
    multicast = {name for name, p in pipelines.items() if any(
        isinstance(s, ir.AsyncLoad) and id(s) in shared and s.dst.buffer in p.buffers
        for s in walk(kernel.body))}
    if not multicast:
        return _record_unicast(kernel, shareable)

    written = {b for name in multicast for b in pipelines[name].buffers}
    empties = {pipelines[name].empty for name in multicast}

    def rewrite(stmt: ir.Stmt) -> ir.Stmt:
        if isinstance(stmt, ir.AsyncLoad) and id(stmt) in shared:
            return replace(stmt, multicast=blocks)
        if isinstance(stmt, ir.AsyncLoad) and id(stmt) in shareable:
            return replace(stmt, unicast=shareable[id(stmt)])
        if isinstance(stmt, ir.StageRelease) and stmt.pipeline in multicast:
            return replace(stmt, blocks=blocks, scope=ir.MemoryScope.CLUSTER)
        if isinstance(stmt, ir.MBarrierWait) and stmt.barrier.array in empties:
            return replace(stmt, scope=ir.MemoryScope.CLUSTER)  # acquires the peers' releases
        if isinstance(stmt, ir.ProxyFence) and stmt.reason is not None and \
                stmt.reason.hazard is ir.Hazard.GENERIC_READ_ASYNC_WRITE and \
                stmt.reason.subject in written:
            return replace(stmt, cluster=True)  # the loads overwrite the other blocks' reads
        return stmt

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
    that each start where the buffer's swizzle pattern starts again. The slices
    split the box's first axis, so it must be the buffer's rows: a box of a
    tensor of rank 3 or more (`K[b, h, j, 0]`, first axes of extent 1) stays
    each block's own."""
    if load.engine is not ir.Engine.TMA or load.dst.part is not None or load.dst.transposed:
        return False
    if len(load.box) != 2:
        return False
    if any(_varying(c, coordinate) for c in load.coords):
        return False
    buf = kernel.buffer(load.dst.buffer)
    if len(buf.shape) != 2 or column_blocks(buf) != 1 or buf.shape[0] % blocks:
        return False
    return buf.shape[0] // blocks * row_pitch(buf) % buf.swizzle.alignment == 0



def _record_unicast(kernel: ir.Kernel, shareable: dict[int, ir.RankDivergence | None]
                    ) -> ir.Kernel:
    def rewrite(stmt: ir.Stmt) -> ir.Stmt:
        if isinstance(stmt, ir.AsyncLoad) and shareable.get(id(stmt)) is not None:
            return replace(stmt, unicast=shareable[id(stmt)])
        return stmt
    return replace(kernel, body=map_stmts(kernel.body, rewrite))


def _varying(expr: ir.ScalarExpr, coordinate: ir.Scalar) -> ir.Scalar | None:
    """A leaf of `expr` that may differ between the blocks of a cluster along
    `coordinate`'s axis: that coordinate, the block index, or a register the
    compiler carries (its value depends on the iterations before). Constants,
    dimensions, parameters, the other axes' coordinates (a cluster's blocks
    share them: ir/raster.py), the cluster index and the thread builtins (the
    same in every block) do not; nor do loop variables, once the loops' own
    bounds are known to be uniform."""
    for leaf in sorted(scalars_in(expr), key=lambda s: (s.kind.value, s.name)):
        if leaf == coordinate or leaf.kind is ir.ScalarKind.CARRIED or \
                (leaf.kind is ir.ScalarKind.BUILTIN and leaf.name == "block"):
            return leaf
    return None


def _divergence(block: ir.Block, pipeline: ir.Pipeline, coordinate: ir.Scalar,
                role: str = "", named: bool = True) -> ir.RankDivergence | None:
    """The first loop bound or condition, around a statement of `pipeline`
    (its loads, waits, reads and releases), that may differ between the
    blocks of the cluster, with its role where `named`; None when there is none."""
    for stmt in block.stmts:
        if _uses(stmt, pipeline) and (why := _varying_control(stmt, coordinate)) is not None:
            return replace(why, construct=f"{why.construct} in role '{role}'") if role else why
        inside = stmt.role.name if isinstance(stmt, ir.RoleBlock) and named else role
        inner = next((why for body in bodies(stmt)
                      if (why := _divergence(body, pipeline, coordinate, inside, named))
                      is not None), None)
        if inner is not None:
            return inner
    return None


def _varying_control(stmt: ir.Stmt, coordinate: ir.Scalar) -> ir.RankDivergence | None:
    """`stmt`'s own trip count or condition, where it may differ between the
    blocks of the cluster (manual code: the compiler cannot tell)."""
    match stmt:
        case ir.ForLoop(var=var, start=start, stop=stop, span=span):
            culprit = _varying(start, coordinate) or _varying(stop, coordinate)
            construct = f"the trip count of 'for {var}'"
        case ir.IfThen(cond=cond, span=span):
            culprit, construct = _varying(cond, coordinate), "the condition of 'if'"
        case ir.ManualRegion(span=span):
            return ir.RankDivergence("a 'manual' block", None, span)
        case _:
            return None
    return None if culprit is None else ir.RankDivergence(construct, _spelled(culprit), span)


def _uses(stmt: ir.Stmt, pipeline: ir.Pipeline) -> bool:
    """`stmt` (or a statement in it) loads, waits for, reads or releases a
    stage of `pipeline`."""
    for leaf in walk(ir.Block((stmt,))):
        match leaf:
            case ir.AsyncLoad(dst=dst) if dst.buffer in pipeline.buffers:
                return True
            case ir.StageRelease(pipeline=name) if name == pipeline.name:
                return True
            case ir.MBarrierWait(barrier=ref) | ir.MBarrierArrive(barrier=ref) | \
                    ir.MBarrierExpectTx(barrier=ref) if ref.array in (pipeline.full,
                                                                      pipeline.empty):
                return True
        if any(a.buffer in pipeline.buffers for a in leaf_accesses(leaf)):
            return True
    return False


def _spelled(scalar: ir.Scalar) -> str:
    return f"tile.{scalar.name}" if scalar.kind is ir.ScalarKind.TILE else scalar.name
