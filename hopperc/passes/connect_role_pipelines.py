"""connect_role_pipelines

Requires: front-end IR (roles, async loads without mbarriers).
Establishes: every shared buffer that one role fills with async loads and
another role reads is a stage of a pipeline: iteration i of the loop that
holds the loads and of the loop that holds the reads uses stage i % S. The
buffers of one producer role, consumer role and pair of loops form one ring,
or several where the consumer works between their first reads (ir/handoffs:
a wait gates everything after it, so a buffer read late gets a barrier of
its own). Per ring, per stage, a full
mbarrier (1 arrival: the producer's elected arrive.expect_tx of the exact
bytes of all its loads) and an empty mbarrier (one arrival per consumer warp
for wgmma readers, per consumer thread for element-wise readers).
The producer waits empty[s] with the opposite parity (a fresh barrier's
previous phase counts as complete, so its first pass does not block), fences
the proxies when the consumer read the stage with ld.shared, arms full[s] and
loads. The consumer waits full[s] before its first read; element-wise readers
release the stage right after their last read; wgmma readers of a ring of
two or more stages release the previous iteration's stage after this
iteration's batch is issued (the wait pass completes the batch that read it
first; with one stage, that stage is the one the next load fills, so it is
released in its own iteration, after its batch), and the last stage after the
loop where the loops run again (inside another loop, as a persistent
kernel's tile loop): otherwise no later load waits for that phase. Stage and parity (`i % S` and `(i // S) % 2` of iteration i) are
registers each role carries, one pair for all the rings of its loop, and
steps at the end of an iteration: counters
instead of a division per iteration, and the same form in nested and
conditional loops. In a pingpong kernel the consumer's warpgroups take the
tiles in turn: one warpgroup's warps arrive on each empty barrier, and a
warpgroup steps its stage and parity past the iterations of every tile it
leaves to another (the turn's other branch).
A ring the consumer reads at several sites (ir/read_sites: before a loop, in
it, after it) is a ring of its own whose k-th read takes the k-th fill: the
consumer steps stage and phase registers of that ring at each read (after a
straight-line site, at the end of each iteration of a loop site), waits full
before each site's first read, and wgmma readers release the previous read's
stage after each site's batch is issued (the wait pass, counting those steps,
completes the products that read it first), the last one after the last site
where the sites run again (where they do not, nothing follows the last
straight-line site's reads). The reads must balance the producer's fills.

Hardware rule: an mbarrier phase completes when its pending arrivals and
transaction bytes reach zero; try_wait.parity(P) returns once the phase of
parity P has completed; two producers arriving on one barrier would complete
it early or never (PTX ISA, mbarrier; nvFuser's multi-role deadlock).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir import read_sites
from hopperc.ir.accesses import Proxy, bodies, scalars_in
from hopperc.ir.handoffs import (Path, Use, block_at, check_reused_memory, check_same_stages,
                                  controls, rings, shape, sides, touches, uses)
from hopperc.ir.raster import turn_warpgroups
from hopperc.ir.rewrite import at_stage, fresh_name, scalar_op


@dataclass(frozen=True)
class _Side:
    """How one role steps through a pipeline: its loop and stage expressions."""

    role: str
    site: Path | None  # None: the consumer of a ring read at several sites (it steps at each)
    stage: ir.ScalarExpr
    parity: ir.ScalarExpr
    previous: ir.ScalarExpr | None  # the stage of the previous iteration (in the loop)
    last: ir.ScalarExpr | None  # the stage of the last iteration (after the loop)
    ran: ir.ScalarExpr | None  # the loop ran at least once (after the loop)
    later: ir.ScalarExpr | None  # not the first iteration (in the loop)
    advance: ir.StageAdvance | None


@dataclass(frozen=True)
class _Plan:
    pipeline: ir.Pipeline
    producer: _Side
    consumer: _Side
    loads: tuple[ir.AsyncLoad, ...]
    consumer_uses: tuple[Use, ...]
    per_warp: bool  # wgmma readers: one arrival per warp, after its wait_group
    deferred: bool  # release the previous stage (and the last one after the loop, if `again`)
    again: bool  # the loops run again (inside another loop): the producer refills the last stage
    skip: tuple[Path, ir.StageAdvance] | None = None  # pingpong: (the turn's site, its skip)
    sites: read_sites.SiteRing | None = None  # read at several sites: the consumer's steps


def connect_role_pipelines(kernel: ir.Kernel) -> ir.Kernel:
    roles = [s for s in kernel.body.stmts if isinstance(s, ir.RoleBlock)]
    if len(roles) < 2:
        return kernel
    found = [u for r in roles for u in uses(r)]
    plans = _plan(kernel, roles, found)
    check_reused_memory(kernel, found, [(p.pipeline, p.consumer_uses) for p in plans])
    if not plans:
        return kernel
    body = []
    for stmt in kernel.body.stmts:
        if isinstance(stmt, ir.RoleBlock):
            stmt = replace(stmt, body=_rewrite(stmt.body, (), stmt.role.name, plans))
        body.append(stmt)
    pipelines = tuple(p.pipeline for p in plans)
    barriers = tuple(b for p in pipelines for b in (
        ir.MBarrierArray(p.full, p.stages, p.span, 1),
        ir.MBarrierArray(p.empty, p.stages, p.span, p.consumer_arrivals)))
    carried = tuple(dict.fromkeys(r for p in plans for side in (p.producer, p.consumer)
                                  if side.advance
                                  for r in (side.advance.stage, side.advance.phase)))
    return replace(kernel, body=ir.Block(tuple(body)), barriers=kernel.barriers + barriers,
                   carried=kernel.carried + carried, pipelines=kernel.pipelines + pipelines)


# ---------------------------------------------------------------- planning the rings
def _plan(kernel: ir.Kernel, roles: list[ir.RoleBlock], found: list[Use]) -> list[_Plan]:
    handoffs: dict[tuple, list[str]] = {}
    by_buffer: dict[str, list[Use]] = {}
    for use in found:
        by_buffer.setdefault(use.access.buffer, []).append(use)
    for name, buffer_uses in by_buffer.items():
        role_names = list(dict.fromkeys(u.role.name for u in buffer_uses))
        if len(role_names) < 2:
            continue
        producer, consumer = sides(name, role_names, buffer_uses)
        # Read at several sites: a ring of its own per sequence of sites.
        c_sites = tuple(g[0].site for g in read_sites.split_sites(consumer))
        key = (producer[0].role.name, consumer[0].role.name, producer[0].site, c_sites)
        handoffs.setdefault(key, []).append(name)
    taken = {b.name for b in kernel.barriers} | {b.name for b in kernel.buffers}
    role_blocks = {r.role.name: r for r in roles}
    plans: list[_Plan] = []
    fillers: dict[tuple, _Side] = {}  # the producer's side of the rings read at several sites
    for (producer, consumer, p_site, c_sites), buffers in handoffs.items():
        handed = [u for u in found if u.access.buffer in buffers]
        if len(c_sites) > 1:
            plans.append(_plan_sites(kernel, role_blocks[producer], role_blocks[consumer],
                                     p_site, buffers, handed, taken, fillers))
        else:
            plans.extend(_plan_handoff(kernel, role_blocks[producer], role_blocks[consumer],
                                       p_site, c_sites[0], buffers, handed, taken))
    return plans


def _plan_handoff(kernel: ir.Kernel, producer: ir.RoleBlock, consumer: ir.RoleBlock,
                  p_site: Path, c_site: Path, buffers: list[str], handed: list[Use],
                  taken: set[str]) -> list[_Plan]:
    """The rings of one hand-off. They share the two sides' stage and phase
    registers: both count the iterations of the same loops."""
    c_uses = [u for u in handed if u.role.name == consumer.role.name]
    p_controls = controls(producer.body, p_site)
    c_controls = controls(consumer.body, c_site)
    turn = next((i for i, c in enumerate(c_controls) if turn_warpgroups(c)), None)
    turns = 1 if turn is None else turn_warpgroups(c_controls[turn])
    if turn is not None:
        _check_turn(c_controls[turn + 1:], c_uses[0])
    if [shape(c) for c in p_controls] != [shape(c) for i, c in enumerate(c_controls)
                                           if i != turn]:
        raise CompileError(c_uses[0].access.span,
                           f"role '{producer.role.name}' loads '{buffers[0]}' under "
                           f"{_describe(p_controls)} but role '{consumer.role.name}' reads it "
                           f"under {_describe(c_controls)}; stage i of a handed-over buffer "
                           "is filled and read in iteration i of loops with the same bounds")
    n_stages = check_same_stages(kernel, buffers, "handed over")
    base = fresh_name(f"{producer.role.name}_{consumer.role.name}", taken)
    producer_side = _side(base, producer.role.name, p_site, p_controls, n_stages, taken)
    consumer_side = _side(base, consumer.role.name, c_site, c_controls, n_stages, taken)
    skip = None
    if turn is not None:
        loop = c_controls[-1]
        steps = scalar_op("*", consumer_side.ran, scalar_op("-", loop.stop, loop.start))
        # The skip stands for the reads of the iterations it steps over.
        skip = (c_site[:turn + 1], replace(consumer_side.advance, by=steps,
                                            span=c_uses[0].access.span))
    groups = rings(buffers, block_at(consumer.body, c_site), block_at(producer.body, p_site))
    plans = []
    for ring in groups:
        name = base if len(groups) == 1 else fresh_name(f"{base}_{ring[0]}", taken)
        mine = [u for u in handed if u.access.buffer in ring]
        ring_uses = [u for u in mine if u.role.name == consumer.role.name]
        loads = tuple(u.leaf for u in mine if u.role.name == producer.role.name)
        per_warp = all(isinstance(u.leaf, ir.Mma) for u in ring_uses)
        arrivals = consumer.role.active_warps // turns * (1 if per_warp else 32)
        pipeline = ir.Pipeline(name, producer.role.name, consumer.role.name, ring, n_stages,
                               fresh_name(f"{name}_full", taken),
                               fresh_name(f"{name}_empty", taken), arrivals,
                               sum(load.nbytes for load in loads), loads[0].span)
        # With one stage the previous iteration's stage is this one: released in the iteration.
        deferred = per_warp and n_stages > 1 and bool(c_controls) \
            and isinstance(c_controls[-1], ir.ForLoop)
        again = any(isinstance(c, ir.ForLoop) for c in c_controls[:-1])
        plans.append(_Plan(pipeline, producer_side, consumer_side, loads, tuple(ring_uses),
                           per_warp, deferred, again, skip))
    return plans


def _plan_sites(kernel: ir.Kernel, producer: ir.RoleBlock, consumer: ir.RoleBlock,
                p_site: Path, buffers: list[str], handed: list[Use], taken: set[str],
                fillers: dict[tuple, _Side]) -> _Plan:
    """The ring of buffers the consumer reads at several sites (ir/read_sites):
    the producer's side as for one site (one pair of registers for all such
    rings of its loop); the consumer steps registers of the ring's own at
    each read."""
    c_uses = [u for u in handed if u.role.name == consumer.role.name]
    base, sites = read_sites.read_sites(consumer.body, read_sites.split_sites(c_uses),
                                        buffers[0], producer, p_site)
    n_stages = check_same_stages(kernel, buffers, "handed over")
    pair = f"{producer.role.name}_{consumer.role.name}"
    key = (producer.role.name, p_site, n_stages)
    if key not in fillers:
        fillers[key] = _side(fresh_name(pair, taken), producer.role.name, p_site,
                             controls(producer.body, p_site), n_stages, taken)
    name = fresh_name(f"{pair}_{buffers[0]}", taken)
    stage = fresh_name(f"{name}_{consumer.role.name}_stage", taken)
    phase = fresh_name(f"{name}_{consumer.role.name}_phase", taken)
    advance = ir.StageAdvance(stage, phase, n_stages, c_uses[0].access.span)
    per_warp = all(isinstance(u.leaf, ir.Mma) for u in c_uses)
    ring = read_sites.SiteRing(tuple(buffers), base, tuple(sites), advance,
                               per_warp and n_stages > 1,
                               any(isinstance(c, ir.ForLoop) for c in controls(consumer.body,
                                                                              base)))
    # The consumer's steps happen at its sites, not at the end of one loop.
    consumer_side = _Side(consumer.role.name, None, ring.stage, ring.phase, ring.previous, None,
                          None, None, advance)
    loads = tuple(u.leaf for u in handed if u.role.name == producer.role.name)
    arrivals = consumer.role.active_warps * (1 if per_warp else 32)
    pipeline = ir.Pipeline(name, producer.role.name, consumer.role.name, tuple(buffers),
                           n_stages, fresh_name(f"{name}_full", taken),
                           fresh_name(f"{name}_empty", taken), arrivals,
                           sum(load.nbytes for load in loads), loads[0].span,
                           read_counter=stage)
    return _Plan(pipeline, fillers[key], consumer_side, loads, tuple(c_uses), per_warp, False,
                 False, sites=ring)


def _check_turn(below: list, use: Use) -> None:
    """A warpgroup skips another's tile by the trip count of the one loop that
    reads the ring, which must then be the same for every tile."""
    loop = below[0] if len(below) == 1 and isinstance(below[0], ir.ForLoop) else None
    if loop is None or any(x.kind is ir.ScalarKind.TILE for e in (loop.start, loop.stop)
                           for x in scalars_in(e)):
        raise CompileError(use.access.span, f"in a pingpong kernel a warpgroup skips the ring "
                                            "stages of the tiles it leaves to the others, so it "
                                            f"reads '{use.access.buffer}' in one loop directly "
                                            "in the role's body, with bounds that do not depend "
                                            "on the tile")


def _describe(controls: list) -> str:
    if not controls:
        return "no loop"
    return " / ".join(f"'for {c.var}' (line {c.span.line})" if isinstance(c, ir.ForLoop)
                      else f"'if' (line {c.span.line})" for c in controls)


def _side(pipe: str, role: str, site: Path, controls: list, stages: int, taken: set[str]) -> _Side:
    loop = controls[-1] if controls and isinstance(controls[-1], ir.ForLoop) else None
    later = ran = None
    if loop is not None:
        later = scalar_op(">", ir.Scalar(ir.ScalarKind.LOOP, loop.var), loop.start)
        ran = scalar_op(">", loop.stop, loop.start)
    if not controls:
        zero = ir.const(0)
        return _Side(role, site, zero, zero, None, None, None, None, None)
    stage = fresh_name(f"{pipe}_{role}_stage", taken)
    phase = fresh_name(f"{pipe}_{role}_phase", taken)
    reg = ir.Scalar(ir.ScalarKind.CARRIED, stage)
    back = scalar_op("%", scalar_op("+", reg, ir.const(stages - 1)), ir.const(stages))
    return _Side(role, site, reg, ir.Scalar(ir.ScalarKind.CARRIED, phase), back, back, ran, later,
                 ir.StageAdvance(stage, phase, stages, controls[-1].span))


# ---------------------------------------------------------------- rewriting the roles
def _rewrite(block: ir.Block, path: Path, role: str, plans: list[_Plan]) -> ir.Block:
    out: list[ir.Stmt] = []
    for i, stmt in enumerate(block.stmts):
        nested = bodies(stmt)
        if nested and not isinstance(stmt, ir.ManualRegion):
            new = [_rewrite(b, path + ((i, k),), role, plans) for k, b in enumerate(nested)]
            skips = dict.fromkeys(p.skip[1] for p in plans if p.skip and p.consumer.role == role
                                  and p.skip[0] == path + ((i, 0),))
            if skips:
                new[1] = ir.Block(new[1].stmts + tuple(skips))
            stmt = _with_bodies(stmt, new)
        out.append(stmt)
        for plan in plans:
            side = plan.consumer
            if plan.deferred and plan.again and side.role == role \
                    and side.site == path + ((i, 0),):
                out.extend(_after_loop_release(plan))
    stmts = tuple(out)
    advances, produced = {}, False
    for plan in plans:
        if plan.sites is not None and plan.consumer.role == role:
            stmts = read_sites.consume(
                stmts, path, plan.sites, lambda s, p=plan: touches(s, p.pipeline.buffers),
                lambda user, p=plan: _wait(p, user),
                lambda stage, lag, last, p=plan: _release(p, stage, lag, last))
        for side, connect in ((plan.producer, _produce), (plan.consumer, _consume)):
            if side.role == role and side.site == path:
                stmts = connect(stmts, plan)
                produced = produced or side is plan.producer
                if side.advance is not None:
                    advances[side.advance] = None
    if produced:
        stmts = _merge_issues(stmts)
    return ir.Block(stmts + tuple(advances))


def _merge_issues(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """Back-to-back single-thread issues (one per ring) as one: the same thread
    runs them, with nothing between."""
    out: list[ir.Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ir.OneThread) and out and isinstance(out[-1], ir.OneThread) \
                and out[-1].per_warpgroup == stmt.per_warpgroup:
            out[-1] = replace(out[-1], body=ir.Block(out[-1].body.stmts + stmt.body.stmts))
        else:
            out.append(stmt)
    return tuple(out)


def _with_bodies(stmt: ir.Stmt, new: list[ir.Block]) -> ir.Stmt:
    if isinstance(stmt, ir.IfThen):
        return replace(stmt, then=new[0], orelse=new[1])
    return replace(stmt, body=new[0])


def _produce(stmts: tuple[ir.Stmt, ...], plan: _Plan) -> tuple[ir.Stmt, ...]:
    p, side = plan.pipeline, plan.producer
    full = ir.BarrierRef(p.full, side.stage)
    first = next(i for i, s in enumerate(stmts) if touches(s, p.buffers))
    load = stmts[first]
    reader = plan.consumer_uses[-1]
    subject = ", ".join(p.buffers)
    head: list[ir.Stmt] = [ir.MBarrierWait(
        ir.BarrierRef(p.empty, side.stage), scalar_op("-", ir.const(1), side.parity), load.span,
        ir.Reason(ir.Hazard.STAGE_HANDOFF, subject, f"stage released by role '{p.consumer}'",
                  reader.access.span, f"refilled by role '{p.producer}'", load.span))]
    generic = next((u for u in plan.consumer_uses if u.access.proxy is Proxy.GENERIC), None)
    if generic is not None:
        head.append(ir.ProxyFence(load.span, ir.Reason(
            ir.Hazard.GENERIC_READ_ASYNC_WRITE, generic.access.buffer,
            f"{generic.access.what} in role '{p.consumer}'", generic.access.span,
            f"overwritten by {load.engine.label} load", load.span)))
    head.append(ir.MBarrierExpectTx(full, ir.const(p.tx_bytes), load.span, ir.Reason(
        ir.Hazard.ASYNC_WRITE_READ, subject, f"{p.tx_bytes} bytes written by async loads",
        load.span, f"awaited by role '{p.consumer}'", plan.consumer_uses[0].access.span)))
    last = max(i for i, s in enumerate(stmts) if touches(s, p.buffers))
    issue = list(head)
    for stmt in stmts[first:last + 1]:
        if isinstance(stmt, ir.AsyncLoad) and stmt.dst.buffer in p.buffers:
            stmt = replace(stmt, dst=replace(stmt.dst, stage=side.stage), barrier=full)
        issue.append(stmt)
    # The elected issuer alone waits for the stage, fences, arms and loads, as
    # long as nothing else runs between the loads (another hand-off's load
    # included: its own issue wraps it).
    if all(isinstance(s, ir.AsyncLoad) and s.dst.buffer in p.buffers
           for s in issue[len(head):]):
        out = [*stmts[:first], ir.OneThread(ir.Block(tuple(issue)), load.span)]
    else:
        out = [*stmts[:first], ir.OneThread(ir.Block(tuple(head)), load.span),
               *issue[len(head):]]
    out.extend(stmts[last + 1:])
    return tuple(out)


def _consume(stmts: tuple[ir.Stmt, ...], plan: _Plan) -> tuple[ir.Stmt, ...]:
    p, side = plan.pipeline, plan.consumer
    touching = [i for i, s in enumerate(stmts) if touches(s, p.buffers)]
    first, last = touching[0], touching[-1]
    out = list(stmts[:first]) + [_wait(plan, stmts[first])]
    for i, stmt in enumerate(stmts[first:], first):
        out.append(at_stage(stmt, p.buffers, side.stage))
        if i == last:
            if plan.deferred:
                release = _release(plan, side.previous, 1, stmts[last])
                out.append(ir.IfThen(side.later, ir.Block((release,)), ir.Block(), stmt.span))
            else:
                out.append(_release(plan, side.stage, 0, stmts[last]))
    return tuple(out)


def _wait(plan: _Plan, user: ir.Stmt) -> ir.MBarrierWait:
    """The consumer's wait for the fill of its current stage, before `user`."""
    p, side = plan.pipeline, plan.consumer
    return ir.MBarrierWait(ir.BarrierRef(p.full, side.stage), side.parity, user.span, ir.Reason(
        ir.Hazard.ASYNC_WRITE_READ, ", ".join(p.buffers),
        f"written by async loads of role '{p.producer}'", plan.loads[0].span, _what(user),
        user.span))


def _after_loop_release(plan: _Plan) -> list[ir.Stmt]:
    side = plan.consumer
    release = _release(plan, side.last, 0, plan.consumer_uses[-1].leaf)
    if side.ran == ir.const(1):
        return [release]
    return [ir.IfThen(side.ran, ir.Block((release,)), ir.Block(), release.span)]


def _release(plan: _Plan, stage: ir.ScalarExpr, lag: int, last_use: ir.Stmt) -> ir.Stmt:
    p = plan.pipeline
    reason = ir.Reason(ir.Hazard.STAGE_HANDOFF, ", ".join(p.buffers), _what(last_use),
                       last_use.span, f"refilled by role '{p.producer}'", plan.loads[0].span)
    release = ir.StageRelease(p.name, ir.BarrierRef(p.empty, stage), lag, last_use.span, reason)
    if plan.per_warp:
        return ir.ElectLane(ir.Block((release,)), last_use.span)
    return release


def _what(stmt: ir.Stmt) -> str:
    return "read by wgmma" if isinstance(stmt, ir.Mma) else "read by ld.shared"
