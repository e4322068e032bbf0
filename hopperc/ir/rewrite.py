"""Structural helpers for passes that rebuild statement trees."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.ir import nodes as ir


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
