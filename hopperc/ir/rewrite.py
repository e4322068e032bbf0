"""Structural helpers for passes that rebuild statement trees."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.ir import nodes as ir
from hopperc.ir.arith import INTEGER_OPS


def map_bodies(stmt: ir.Stmt, fn: Callable[[ir.Block], ir.Block]) -> ir.Stmt:
    """`stmt` with `fn` applied to each nested block; manual code is left as written."""
    match stmt:
        case ir.IfThen(then=then, orelse=orelse):
            return replace(stmt, then=fn(then), orelse=fn(orelse))
        case ir.ForLoop() | ir.RoleBlock() | ir.OneThread() | ir.ElectLane():
            return replace(stmt, body=fn(stmt.body))
    return stmt


def map_stmts(block: ir.Block, fn: Callable[[ir.Stmt], ir.Stmt]) -> ir.Block:
    """`block` with `fn` applied to every statement, nested ones first (manual
    code as written)."""
    return ir.Block(tuple(fn(map_bodies(s, lambda b: map_stmts(b, fn))) for s in block.stmts))


def close_runs(block: ir.Block, member: type | tuple[type, ...],
               closer: Callable[[list[ir.Stmt]], ir.Stmt]) -> ir.Block:
    """After each maximal run of consecutive `member` statements (in every nested
    block), append `closer(run)`: e.g. one commit_group per batch of async ops."""
    out: list[ir.Stmt] = []
    run: list[ir.Stmt] = []
    for stmt in block.stmts:
        if isinstance(stmt, member):
            run.append(stmt)
            out.append(stmt)
            continue
        if run:
            out.append(closer(run))
            run = []
        out.append(map_bodies(stmt, lambda b: close_runs(b, member, closer)))
    if run:
        out.append(closer(run))
    return ir.Block(tuple(out))


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name2`, `name3`... : the first not in `taken` (which it joins)."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}{n}"
    taken.add(candidate)
    return candidate


def scalar_op(op: str, left: ir.ScalarExpr, right: ir.ScalarExpr) -> ir.ScalarExpr:
    """`left op right`, folded when both are constants."""
    if all(isinstance(x, ir.Scalar) and x.kind is ir.ScalarKind.CONST for x in (left, right)):
        return ir.const(INTEGER_OPS[op](int(left.value), int(right.value)))
    if op in ("-", "+") and right == ir.const(0):
        return left
    return ir.ScalarOp(op, left, right)


def map_operands(stmt: ir.Stmt, fn: Callable[[ir.TileExpr], ir.TileExpr]) -> ir.Stmt:
    """`stmt` with `fn` applied to each leaf operand of its element-wise value."""
    def expr(e: ir.TileExpr) -> ir.TileExpr:
        match e:
            case None:
                return None
            case ir.Elementwise(op=op, args=args):
                return ir.Elementwise(op, tuple(expr(a) for a in args))
            case ir.Convert(dtype=dtype, operand=operand):
                return ir.Convert(dtype, expr(operand))
        return fn(e)

    match stmt:
        case ir.TileDef(init=init):
            return replace(stmt, init=expr(init))
        case ir.TileAssign(value=value) | ir.SharedStore(value=value) | \
                ir.GlobalRowStore(value=value):
            return replace(stmt, value=expr(value))
    return stmt


def at_stage(stmt: ir.Stmt, buffers: tuple[str, ...], stage: ir.ScalarExpr) -> ir.Stmt:
    """`stmt` with every view of `buffers` addressing ring stage `stage`."""
    def view(v):
        if isinstance(v, ir.BufferView) and v.buffer in buffers:
            return replace(v, stage=stage)
        return v

    if isinstance(stmt, ir.Mma):
        return replace(stmt, a=view(stmt.a), b=view(stmt.b))
    return map_operands(stmt, lambda e: replace(e, view=view(e.view))
                        if isinstance(e, ir.SharedRead) else e)
