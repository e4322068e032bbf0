"""fold_zero_into_first_product

Requires: the front end's IR (runs before the sync passes, which then see no
zeroing to order).
Establishes: an accumulator set to 0 right before a loop whose first use of it
is a product into it (`acc = 0; for k { acc += a @ b }`) is not zeroed in
registers: the loop's first iteration runs its product with scale-d = 0
(D = A * B), the later ones accumulate. The accumulator is declared undefined;
where the loop may run no iteration, it is zeroed on that path only, after the
loop (`if stop <= start: acc = 0`): ahead of it the zeroing would join the
loop's wgmma chain and ptxas would serialize the chain (C7515). A loop from 0
to a tile count of a dimension some tensor map holds (`K / BK`) runs at least
once: a tensor map's dimensions are at least 1 (cuTensorMapEncodeTiled).
Manual code near the accumulator leaves it as written.

Hardware rule: wgmma's scale-d predicate selects D = A * B + D or D = A * B,
so the first product needs no zeroed registers (PTX ISA, wgmma.mma_async);
the zeroing is a warpgroup's 64 to 128 register moves per tile, and the
wgmma.fence it would need is the one every first wgmma needs anyway.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import mma_registers, register_uses, walk
from hopperc.ir.dataflow import runs_at_least_once
from hopperc.ir.rewrite import map_bodies


def fold_zero_into_first_product(kernel: ir.Kernel) -> ir.Kernel:
    mapped = {t.tensor for t in walk(kernel.body)
              if isinstance(t, (ir.AsyncLoad, ir.AsyncStore)) and t.engine is ir.Engine.TMA}
    positive = frozenset(d for t in kernel.tensors if t.name in mapped for d in t.dims
                         if isinstance(d, str))
    return replace(kernel, body=_block(kernel.body, positive))


def _block(block: ir.Block, positive: frozenset[str]) -> ir.Block:
    stmts = [map_bodies(s, lambda b: _block(b, positive)) for s in block.stmts]
    at = 0
    while at < len(stmts):
        tile = _zeroed(stmts[at])
        loop = _next_use(stmts, at + 1, tile) if tile else None
        folded = _fold(stmts[loop], tile) if loop is not None else None
        if folded is None:
            at += 1
            continue
        zero_path = [] if _runs(stmts[loop], positive) else [_zero_if_no_iteration(
            stmts[loop], tile, stmts[at].span)]
        declared = [replace(stmts[at], init=None)] if isinstance(stmts[at], ir.TileDef) else []
        stmts[loop + 1:loop + 1] = zero_path
        stmts[loop] = folded
        stmts[at:at + 1] = declared
        at += len(declared)
    return ir.Block(tuple(stmts))


def _zeroed(stmt: ir.Stmt) -> str | None:
    """The tile a statement sets to 0 in the wgmma layout, if it does."""
    match stmt:
        case ir.TileDef(name=name, init=ir.Literal(value=0), layout=ir.Layout.WGMMA) | \
                ir.TileAssign(name=name, value=ir.Literal(value=0)):
            return name
    return None


def _next_use(stmts: list[ir.Stmt], start: int, tile: str) -> int | None:
    """The index of the first statement from `start` that uses `tile`, if it is a
    loop (statements in between use neither the tile nor manual code)."""
    for i in range(start, len(stmts)):
        if _uses(stmts[i], tile):
            return i if isinstance(stmts[i], ir.ForLoop) else None
    return None


def _fold(loop: ir.ForLoop, tile: str) -> ir.ForLoop | None:
    """The loop with its first product into `tile` overwriting on the first
    iteration, if that product is the body's first use of the tile."""
    body = list(loop.body.stmts)
    for i, stmt in enumerate(body):
        if not _uses(stmt, tile):
            continue
        if not (isinstance(stmt, ir.Mma) and stmt.acc == tile and stmt.accumulate
                and stmt.overwrite_when is None and tile not in _register_a(stmt)):
            return None
        body[i] = replace(stmt, overwrite_when=loop.first_iteration)
        return replace(loop, body=ir.Block(tuple(body)))
    return None


def _runs(loop: ir.ForLoop, positive: frozenset[str]) -> bool:
    """Whether the loop runs at least once: constant bounds, or from 0 to a
    positive count (`positive`: dimensions known to be at least 1)."""
    return runs_at_least_once(loop) or (
        loop.start == ir.const(0) and _at_least_one(loop.stop, positive))


def _at_least_one(expr: ir.ScalarExpr, positive: frozenset[str]) -> bool:
    match expr:
        case ir.Scalar(kind=ir.ScalarKind.CONST, value=value):
            return value >= 1
        case ir.Scalar(kind=ir.ScalarKind.DIM, name=name):
            return name in positive
        case ir.ScalarOp(op="/" | "*" | "+", left=left, right=right) if right is not None:
            # `/` rounds up: a positive count over a positive divisor stays >= 1
            return _at_least_one(left, positive) and _at_least_one(right, positive)
    return False


def _zero_if_no_iteration(loop: ir.ForLoop, tile: str, span) -> ir.IfThen:
    return ir.IfThen(ir.ScalarOp("<=", loop.stop, loop.start),
                     ir.Block((ir.TileAssign(tile, ir.Literal(0.0), span),)), ir.Block(), span)


def _register_a(mma: ir.Mma) -> tuple[str, ...]:
    return mma_registers(mma)[1:]


def _uses(stmt: ir.Stmt, tile: str) -> bool:
    """Whether `stmt` may touch `tile`; manual code counts as touching it."""
    for leaf in walk(ir.Block((stmt,))):
        if isinstance(leaf, ir.ManualRegion):
            return True
        if isinstance(leaf, ir.Mma) and tile in mma_registers(leaf):
            return True
        if any(u.tile == tile for u in register_uses(leaf)):
            return True
    return False
