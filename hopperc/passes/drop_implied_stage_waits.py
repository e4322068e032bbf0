"""drop_implied_stage_waits

Requires: the rings of a hand-off connected (connect_role_pipelines) and the
consumer's wgmma waits placed (wait_wgmma_batches).
Establishes: a ring of two or more stages, handed between roles, unicast and
read by wgmma, keeps an empty barrier of its own only where
the producer's earlier waits in the same iteration do not already imply its
stage is free. Ring B's wait is implied by ring A's when the producer waits
for A's stage first and, in the consumer, every wgmma batch that read B's
stage of iteration j - 1 has completed (at a `wgmma.wait_group` in iteration
j - 1 or j) before the release of A's stage of iteration j - 1 (and, where the
loops run again, every batch that read B's last stage before A's release of
the last stage after the loop). Then B's producer wait, B's releases and B's
empty barriers go; B's pipeline names A's empty barrier as its own. Rings are
taken in the producer's order, each against the rings kept before it.

In attention over two key tiles an iteration (tests/sim/kernels/attention_two_tiles.hk)
the K_a, K_b, V_a and V_b rings keep two empty barriers
(K_a's and V_b's), the pair FlashAttention-3 writes by hand for K and V.

Hardware rule: each consumer warp arrives on A's empty barrier after its own
wgmma.wait_group, which completes every older batch of its warpgroup, so
when A's phase completes, every reader of B's stage is done with it (PTX ISA,
wgmma.wait_group, mbarrier); the producer's thread runs its waits in order,
so its wait for A's stage precedes its load into B's.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, leaf_accesses, walk
from hopperc.ir.rewrite import map_bodies, map_stmts

_ASYNC_MMA = (ir.Mma, ir.WgmmaCommit, ir.WgmmaWait)


def drop_implied_stage_waits(kernel: ir.Kernel) -> ir.Kernel:
    # Between roles, unicast, with a previous stage that is not this one, and read at
    # one site (where the consumer steps a ring of several sites, another ring's stage
    # of the same iteration may hold another fill).
    pipes = {p.name: p for p in kernel.pipelines if p.producer != p.consumer
             and p.blocks == 1 and p.stages > 1 and p.read_counter is None}
    by_empty = {p.empty: p for p in pipes.values()}
    sites = {name: _release_site(kernel.body, name) for name in pipes}
    dropped: dict[str, ir.Pipeline] = {}  # ring -> the ring whose empty barrier implies its own
    for block in _blocks(kernel.body):
        order = [by_empty[s.barrier.array] for s in block.stmts if isinstance(s, ir.MBarrierWait)
                 and s.barrier.array in by_empty]
        order = [p for p in order if p.name not in dropped]
        kept: list[ir.Pipeline] = []
        for ring in order:
            implier = next((a for a in kept if _implies(sites, a, ring)), None)
            if implier is None:
                kept.append(ring)
            else:
                dropped[ring.name] = implier
    if not dropped:
        return kernel
    gone = {pipes[name].empty for name in dropped}
    covered: dict[str, tuple[str, ...]] = {}  # a kept ring's empty barrier -> every buffer it frees
    for name, implier in dropped.items():
        covered.setdefault(implier.empty, implier.buffers)
        covered[implier.empty] += pipes[name].buffers
    body = map_stmts(kernel.body, lambda s: _without(s, dropped, gone, covered))
    return replace(kernel, body=_prune(body), barriers=tuple(
        b for b in kernel.barriers if b.name not in gone), pipelines=tuple(
        replace(p, empty=dropped[p.name].empty) if p.name in dropped else p
        for p in kernel.pipelines))


def _blocks(block: ir.Block):
    yield block
    for stmt in block.stmts:
        for body in bodies(stmt):
            yield from _blocks(body)


# ---------------------------------------------------------------- the implication
def _implies(sites: dict, first: ir.Pipeline, ring: ir.Pipeline) -> bool:
    """Whether every batch that read `ring`'s stage is complete where `first`
    releases the same stage, in the loop and after it (`sites`: each ring's
    `_release_site`)."""
    found = sites[first.name]
    if found is None or sites[ring.name] != found:
        return False
    loop, tail = found
    body = loop.body.stmts
    at = _index_of_release(body, first.name, lag=1)
    if at is None or not _completes(body, body[:at], ring.buffers):
        return False
    after = _index_of_release(tail, first.name, lag=0)
    if after is None:  # no release after the loop: the loops run once
        return _index_of_release(tail, ring.name, lag=0) is None
    return _completes(body, tail[:after], ring.buffers)


def _release_site(block: ir.Block, pipeline: str) -> tuple[ir.ForLoop, tuple] | None:
    """(the loop whose body releases `pipeline`'s previous stage, the statements
    after that loop in its block)."""
    for i, stmt in enumerate(block.stmts):
        for body in bodies(stmt):  # the innermost such loop
            found = _release_site(body, pipeline)
            if found is not None:
                return found
        if isinstance(stmt, ir.ForLoop) and _index_of_release(stmt.body.stmts, pipeline, 1) \
                is not None:
            return stmt, block.stmts[i + 1:]
    return None


def _index_of_release(stmts: tuple, pipeline: str, lag: int) -> int | None:
    return next((i for i, s in enumerate(stmts) if any(
        isinstance(x, ir.StageRelease) and x.pipeline == pipeline and x.lag == lag
        for x in walk(ir.Block((s,))))), None)


def _completes(iteration: tuple, then: tuple, buffers: tuple[str, ...]) -> bool:
    """Whether, after `iteration` (whose products reading `buffers` are
    tracked) and then `then`, no batch holding such a product is in flight.
    wgmma statements nested in control flow end the analysis (False)."""
    batches: list[bool] = []  # committed, oldest first: holds a tracked product
    open_batch = False
    for stmts, tracked in ((iteration, True), (then, False)):
        for stmt in stmts:
            if bodies(stmt):
                if any(isinstance(x, _ASYNC_MMA) for x in walk(ir.Block((stmt,)))):
                    return False
            elif isinstance(stmt, ir.Mma):
                open_batch = open_batch or (tracked and any(
                    a.buffer in buffers for a in leaf_accesses(stmt)))
            elif isinstance(stmt, ir.WgmmaCommit):
                batches.append(open_batch)
                open_batch = False
            elif isinstance(stmt, ir.WgmmaWait):
                batches = batches[len(batches) - stmt.pending:] if stmt.pending else []
    return not open_batch and not any(batches)


# ---------------------------------------------------------------- the rewrite
def _without(stmt: ir.Stmt, dropped: dict[str, ir.Pipeline], gone: set[str],
             covered: dict[str, tuple[str, ...]]) -> ir.Stmt | None:
    if isinstance(stmt, ir.StageRelease) and stmt.pipeline in dropped:
        return None
    if isinstance(stmt, (ir.MBarrierWait, ir.MBarrierInit)) and stmt.barrier.array in gone:
        return None
    # The waits and releases that stay now free the dropped rings' stages too.
    if isinstance(stmt, (ir.MBarrierWait, ir.StageRelease)) and stmt.reason is not None \
            and stmt.barrier.array in covered:
        return replace(stmt, reason=replace(stmt.reason,
                                            subject=", ".join(covered[stmt.barrier.array])))
    return stmt


def _prune(block: ir.Block) -> ir.Block:
    """Without the statements `_without` removed (None), and without the
    elections and conditions left empty by it."""
    out = []
    for stmt in (map_bodies(s, _prune) for s in block.stmts if s is not None):
        if isinstance(stmt, (ir.ElectLane, ir.IfThen)) and not any(b.stmts for b in bodies(stmt)):
            continue
        out.append(stmt)
    return ir.Block(tuple(out))
