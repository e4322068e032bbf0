"""order_product_turns

Requires: the products of a `turns` loop committed (commit_wgmma_batches) and
the named barriers of insert_barriers placed.
Establishes: in each iteration of a `turns` loop of a role of N warpgroups, the
warpgroups issue their products in order 0, 1, ..., N - 1, and warpgroup 0's
of the next iteration after warpgroup N - 1's: a token passes round a ring of
N named barriers (the same TurnBarrier as pingpong tiles: id + w is handed
over by warpgroup w and awaited by warpgroup w + 1 mod N). In the loop body,
`bar.sync id + (wg - 1) mod N, 256` before the statement that holds the
iteration's first product and `bar.arrive id + wg, 256` after the last one's
commit; before the loop (when it runs at all) warpgroup N - 1 hands over once,
so warpgroup 0 goes first, and in the last iteration it does not, so every
arrival of a loop's run meets exactly one sync of the same run. While one
warpgroup runs its element-wise code (a softmax), the next one's products
occupy the tensor cores. The front end refuses `turns` in a pingpong kernel,
in manual code and outside a role of several warpgroups; this pass refuses, at
the line, a `turns` loop without a product or inside another; trip counts or
conditions in or around it that may differ between the warpgroups (one would
wait forever), and manual code in it; code in it issued by the role's one
thread (it waits for every warpgroup's release); and between its first and
last product a barrier of more than one warpgroup (the warpgroup holding the
turn would wait there for the ones waiting for the turn).

Hardware rule: `bar.sync id, n` waits until n threads arrived at id;
`bar.arrive id, n` counts its warps without waiting (PTX ISA, barrier). A
generation completes at the count whoever arrives: an arrival no sync
consumes (an unbalanced loop, or a loop run again in a persistent tile loop)
completes a later generation early, or leaves the barrier mid-generation.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup, walk
from hopperc.ir.rewrite import map_bodies
from hopperc.passes.insert_barriers import NAMED_BARRIERS, first_unallotted_barrier

PER_THREAD = frozenset({"lane", "thread", "warp", "wg"})
WG = ir.Scalar(ir.ScalarKind.BUILTIN, "wg")


def order_product_turns(kernel: ir.Kernel) -> ir.Kernel:
    if not any(isinstance(s, ir.ForLoop) and s.turns for s in walk(kernel.body)):
        return kernel
    taken = _taken_ids(kernel)
    first = first_unallotted_barrier(kernel)
    body = []
    for stmt in kernel.body.stmts:
        if isinstance(stmt, ir.RoleBlock) and any(
                isinstance(s, ir.ForLoop) and s.turns for s in walk(stmt.body)):
            warpgroups = stmt.role.active_warps // 4
            while any(i in taken for i in range(first, first + warpgroups)):
                first += 1
            if first + warpgroups > NAMED_BARRIERS:
                raise CompileError(stmt.span, f"the {warpgroups} warpgroups taking turns need "
                                              f"{warpgroups} named barriers past the {first} "
                                              f"this kernel already uses, and there are "
                                              f"{NAMED_BARRIERS}")
            stmt = replace(stmt, body=_order(stmt.body, first, warpgroups, None))
            first += warpgroups
        body.append(stmt)
    return replace(kernel, body=ir.Block(tuple(body)))


def _order(block: ir.Block, first: int, warpgroups: int, divergent: ir.Stmt | None) -> ir.Block:
    """`block` with its `turns` loops ordered; `divergent`: the innermost
    construct around it that the warpgroups may take differently."""
    out: list[ir.Stmt] = []
    for stmt in block.stmts:
        if isinstance(stmt, ir.ForLoop) and stmt.turns:
            if divergent is not None:
                raise _differs(divergent, stmt)
            out.extend(_ordered_loop(stmt, first, warpgroups))
            continue
        inner = stmt if _per_thread(stmt) else divergent  # (the front end refuses manual turns)
        out.append(map_bodies(stmt, lambda b: _order(b, first, warpgroups, inner)))
    return ir.Block(tuple(out))


def _ordered_loop(loop: ir.ForLoop, first: int, warpgroups: int) -> list[ir.Stmt]:
    if _per_thread(loop):
        raise _differs(loop, loop)
    stmts = loop.body.stmts
    holding = [i for i, s in enumerate(stmts) if _products(s)]
    if not holding:
        raise CompileError(loop.span, "'turns' orders the warpgroups' matrix products, and "
                                      "this loop has none")
    for stmt in walk(loop.body):
        _check_body(stmt, loop)
    start, end = holding[0], holding[-1] + 1
    while end < len(stmts) and isinstance(stmts[end], ir.WgmmaCommit):
        end += 1
    for stmt in stmts[start:end]:
        for inner in walk(ir.Block((stmt,))):
            _check_turn(inner, loop)
    first_product, last_product = _products(stmts[start])[0], _products(stmts[holding[-1]])[-1]
    fspan, lspan = first_product.span, last_product.span
    wait = ir.TurnBarrier(first, warpgroups, False, fspan, ir.Reason(
        ir.Hazard.TURN_ORDER, "the tensor cores", "taken by the previous warpgroup's products",
        lspan, "then by this warpgroup's", fspan))
    hand_over = ir.TurnBarrier(first, warpgroups, True, lspan, ir.Reason(
        ir.Hazard.TURN_ORDER, "the tensor cores", "taken by this warpgroup's products", lspan,
        "then by the next warpgroup's", fspan))
    opening = ir.TurnBarrier(first, warpgroups, True, loop.span, ir.Reason(
        ir.Hazard.TURN_ORDER, "the tensor cores", "free before the loop", None,
        "taken first by warpgroup 0's products", fspan))
    last_warpgroup = ir.ScalarOp("==", WG, ir.const(warpgroups - 1))
    var = ir.Scalar(ir.ScalarKind.LOOP, loop.var)
    # warpgroup N - 1 hands over to warpgroup 0 of the next iteration only if there is one
    next_turn = ir.ScalarOp("or", ir.ScalarOp("!=", WG, ir.const(warpgroups - 1)),
                            ir.ScalarOp("<", ir.ScalarOp("+", var, ir.const(1)), loop.stop))
    body = (*stmts[:start], wait, *stmts[start:end],
            ir.IfThen(next_turn, ir.Block((hand_over,)), ir.Block(), lspan), *stmts[end:])
    runs = ir.ScalarOp("and", ir.ScalarOp("<", loop.start, loop.stop), last_warpgroup)
    return [ir.IfThen(runs, ir.Block((opening,)), ir.Block(), loop.span),
            replace(loop, body=ir.Block(body))]


def _products(stmt: ir.Stmt) -> list[ir.Mma]:
    return [s for s in walk(ir.Block((stmt,))) if isinstance(s, ir.Mma)]


def _per_thread(stmt: ir.Stmt) -> bool:
    """A loop whose bounds or a condition that differs between the role's threads."""
    match stmt:
        case ir.ForLoop(start=start, stop=stop):
            return _names_thread(start) or _names_thread(stop)
        case ir.IfThen(cond=cond):
            return _names_thread(cond)
    return False


def _names_thread(expr: ir.ScalarExpr) -> bool:
    if isinstance(expr, ir.Scalar):
        return expr.kind is ir.ScalarKind.BUILTIN and expr.name in PER_THREAD
    return any(_names_thread(e) for e in ir.operands(expr))


def _differs(construct: ir.Stmt, loop: ir.ForLoop, inside: bool = False) -> CompileError:
    what = "a condition" if isinstance(construct, ir.IfThen) else "a trip count"
    where = "" if construct is loop else \
        f" {'in' if inside else 'around'} the 'turns' loop at line {loop.span.line}"
    return CompileError(construct.span, f"the warpgroups taking turns must run the same "
                                        f"iterations, but {what}{where} may differ between "
                                        "them (it names lane, thread, warp or wg): one would "
                                        "wait forever for the turn of another")


def _check_body(stmt: ir.Stmt, loop: ir.ForLoop) -> None:
    """Anywhere in the loop: code the warpgroups run alike, no nested turns, no
    issue by the role's one thread (it waits for every warpgroup's release)."""
    if stmt is not loop and _per_thread(stmt):
        raise _differs(stmt, loop, inside=True)
    if isinstance(stmt, ir.ManualRegion):
        raise CompileError(stmt.span, f"manual code in the 'turns' loop at line "
                                      f"{loop.span.line} may branch or meet differently in "
                                      "each warpgroup, which the turns cannot tell; move it out "
                                      "of the loop")
    if isinstance(stmt, ir.ForLoop) and stmt.turns:
        raise CompileError(stmt.span, f"this 'turns' loop is inside the 'turns' loop at line "
                                      f"{loop.span.line}; take turns in one of them")
    if isinstance(stmt, ir.OneThread) and not stmt.per_warpgroup or isinstance(
            stmt, (ir.AsyncLoad, ir.AsyncStore)) and not issued_per_warpgroup(stmt):
        raise CompileError(stmt.span, f"in the 'turns' loop at line {loop.span.line} this is "
                                      "issued by one thread of the role (in warpgroup 0), "
                                      "which would wait for the other warpgroups while they "
                                      "wait for its turn; load in another role, or store per "
                                      "warpgroup (index with wg)")


def _check_turn(stmt: ir.Stmt, loop: ir.ForLoop) -> None:
    """From the first product to the last: nothing that waits for another
    warpgroup (it waits for the turn this warpgroup holds)."""
    if isinstance(stmt, ir.NamedBarrier) and not stmt.per_warpgroup or isinstance(
            stmt, (ir.ClusterBarrier, ir.TurnBarrier)):
        reason = stmt.reason
        what = f" ('{reason.subject}': {reason.before}, then {reason.after})" if reason else ""
        raise CompileError(reason.after_span if reason and reason.after_span else stmt.span,
                           f"between the first and the last product of the 'turns' loop at "
                           f"line {loop.span.line} a warpgroup holds the tensor cores' turn, "
                           f"but this needs a barrier of more than one warpgroup{what}, which "
                           "the others reach only after their turn; move it out of that span, "
                           "or use shared memory of the warpgroup's own (index it with wg)")


def _taken_ids(kernel: ir.Kernel) -> set[int]:
    """Named barrier ids the roles' barriers already use (a warpgroup's own
    barrier: one id per warpgroup of its role)."""
    taken: set[int] = set()
    for role in (s for s in kernel.body.stmts if isinstance(s, ir.RoleBlock)):
        for stmt in walk(role.body):
            if isinstance(stmt, ir.NamedBarrier):
                count = role.role.active_warps // 4 if stmt.per_warpgroup else 1
                taken.update(range(stmt.id, stmt.id + count))
            elif isinstance(stmt, ir.TurnBarrier):
                taken.update(range(stmt.id, stmt.id + stmt.warpgroups))
    return taken
