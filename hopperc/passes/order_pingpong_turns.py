"""order_pingpong_turns

Requires: a pingpong kernel's pipelines connected (the turning role's waits on
its rings placed, its skips of the other warpgroups' tiles written) and the
named barriers of insert_barriers placed.
Establishes: in tile t, the warpgroup whose turn it is enters the loop that
reads its rings only after the warpgroup of tile t - 1 has left its own:
`bar.sync id + (wg - 1) mod N, 256` before the loop (when t > 0), and
`bar.arrive id + wg, 256` right after it (when tile t + 1 exists, its
warpgroup waits for that arrival). The tensor cores alternate between the
warpgroups: one's main loop runs while the previous one finishes its last
batch and runs its epilogue. Inside a turn, a role-wide barrier is refused
(the other warpgroups, in their own turns, would never meet it), and so is
code issued by the role's one thread (in warpgroup 0, absent from the others'
turns).

Hardware rule: try_wait.parity(P) passes when the barrier's latest completed
phase has parity P; it cannot tell that phase from one two fills older. A
warpgroup that waits on a stage for tile t before the producer has filled the
same stage for tile t - 1 may see that older phase and read stale data (phase
aliasing). Once tile t - 1's waits have passed, every stage of every earlier
tile has been filled, so each of tile t's waits is at most one fill ahead.
bar.arrive does not block; bar.sync waits for all 256 threads of the two
warpgroups (PTX ISA, barrier).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup, walk
from hopperc.ir.raster import TILE_LOOP, turn_warpgroups
from hopperc.passes.insert_barriers import NAMED_BARRIERS, first_unallotted_barrier


def order_pingpong_turns(kernel: ir.Kernel) -> ir.Kernel:
    if not kernel.pingpong:
        return kernel
    full = {p.full: p for p in kernel.pipelines}
    first = first_unallotted_barrier(kernel)
    body = tuple(replace(s, body=_order_role(s.body, first, full))
                 if isinstance(s, ir.RoleBlock) else s for s in kernel.body.stmts)
    return replace(kernel, body=ir.Block(body))


def _order_role(body: ir.Block, first: int, full: dict[str, ir.Pipeline]) -> ir.Block:
    out = []
    for stmt in body.stmts:
        if isinstance(stmt, ir.ForLoop) and stmt.var == TILE_LOOP:
            stmt = replace(stmt, body=ir.Block(tuple(
                _order_turn(s, stmt, first, full) if turn_warpgroups(s) else s
                for s in stmt.body.stmts)))
        out.append(stmt)
    return ir.Block(tuple(out))


def _order_turn(turn: ir.IfThen, tiles: ir.ForLoop, first: int,
                full: dict[str, ir.Pipeline]) -> ir.IfThen:
    _check_turn_body(turn.then)
    stmts = turn.then.stmts
    rings = [i for i, s in enumerate(stmts) if isinstance(s, ir.ForLoop) and _waits_on(s, full)]
    if not rings:
        return turn
    warpgroups = turn_warpgroups(turn)
    if first + warpgroups > NAMED_BARRIERS:
        raise CompileError(turn.span, f"the {warpgroups} warpgroups taking turns need "
                                      f"{warpgroups} named barriers past the {first} this kernel "
                                      f"already uses, and there are {NAMED_BARRIERS}")
    start, end = stmts[rings[0]], stmts[rings[-1]]
    first_wait, last_wait = _ring_waits(start, full)[0], _ring_waits(end, full)[-1]
    buffers = ", ".join(dict.fromkeys(b for p in _waits_on(start, full) for b in p.buffers))
    tile = ir.Scalar(ir.ScalarKind.LOOP, TILE_LOOP)
    wait = ir.TurnBarrier(first, warpgroups, False, start.span, ir.Reason(
        ir.Hazard.TURN_ORDER, buffers, "awaited by the previous tile's warpgroup",
        first_wait.span, "awaited for this tile only after it, one ring turn ahead at most",
        first_wait.span))
    hand_over = ir.TurnBarrier(first, warpgroups, True, end.span, ir.Reason(
        ir.Hazard.TURN_ORDER, buffers, "awaited for this tile", last_wait.span,
        "awaited by the next tile's warpgroup after that", last_wait.span))
    later = ir.ScalarOp(">", tile, tiles.start)
    more = ir.ScalarOp("<", ir.ScalarOp("+", tile, ir.const(1)), tiles.stop)
    then = (*stmts[:rings[0]], ir.IfThen(later, ir.Block((wait,)), ir.Block(), start.span),
            *stmts[rings[0]:rings[-1] + 1],
            ir.IfThen(more, ir.Block((hand_over,)), ir.Block(), end.span),
            *stmts[rings[-1] + 1:])
    return replace(turn, then=ir.Block(then))


def _ring_waits(loop: ir.ForLoop, full: dict[str, ir.Pipeline]) -> list[ir.MBarrierWait]:
    """The waits of `loop` on the full barriers of pipelines."""
    return [s for s in walk(loop.body)
            if isinstance(s, ir.MBarrierWait) and s.barrier.array in full]


def _waits_on(loop: ir.ForLoop, full: dict[str, ir.Pipeline]) -> list[ir.Pipeline]:
    """The pipelines whose full barriers `loop` waits on."""
    return list(dict.fromkeys(full[s.barrier.array] for s in _ring_waits(loop, full)))


def _check_turn_body(block: ir.Block) -> None:
    """Code a turn runs on one warpgroup: no barrier of the whole role, nothing
    issued by the role's one thread (it is in warpgroup 0)."""
    for stmt in walk(block):
        if isinstance(stmt, ir.NamedBarrier) and not stmt.per_warpgroup:
            reason = stmt.reason
            what = f" ('{reason.subject}': {reason.before}, then {reason.after})" if reason else ""
            raise CompileError(reason.after_span if reason and reason.after_span else stmt.span,
                               "in a pingpong kernel each warpgroup works on its own tile, but "
                               f"this needs a barrier of the whole role{what}; use shared memory "
                               "of the warpgroup's own (index it with wg)")
        if isinstance(stmt, ir.OneThread) and not stmt.per_warpgroup or isinstance(
                stmt, (ir.AsyncLoad, ir.AsyncStore)) and not issued_per_warpgroup(stmt):
            raise CompileError(stmt.span, "in a pingpong kernel each warpgroup works on its own "
                                          "tile, but this is issued by one thread of the role, "
                                          "which is in warpgroup 0; use shared memory of the "
                                          "warpgroup's own (index it with wg)")
