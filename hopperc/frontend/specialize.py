"""Warp specialization of a role-free kernel (`specialize` in the header).

The kernel's loads into rings (buffers declared with `stages`) move to a
producer role of one warp; everything else is the consumer role, of the
kernel's warpgroups. Loops and conditions that hold such loads are kept in both
roles with the same bounds, so connect_role_pipelines pairs them as it pairs
hand-written roles, and writes the same syncs. Register budgets: 40 for the
producer, the rest of the register file for the consumer (a multiple of 8, at
most 256).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.frontend import ast
from hopperc.frontend.header import DEFAULT_THREADS
from hopperc.ir.layout import REGISTER_FILE

PRODUCER, CONSUMER = "producer", "consumer"
PRODUCER_REGS = 40


def specialize(kernel: ast.Kernel) -> ast.Kernel:
    stmts = kernel.body.stmts
    if kernel.manual:
        raise CompileError(kernel.clause_span("specialize"), "a manual kernel writes its own "
                                                             "roles; 'specialize' writes them "
                                                             "for an automatic one")
    role = next((s for s in stmts if isinstance(s, ast.Role)), None)
    if role is not None:
        raise CompileError(role.span, "'specialize' writes the kernel's roles; remove this "
                                      "role or the clause")
    threads = kernel.threads or DEFAULT_THREADS
    if threads % 128:
        raise CompileError(kernel.clause_span("specialize"), f"'specialize' gives the consumer "
                                                             f"whole warpgroups; {threads} "
                                                             "threads are not a multiple of 128")
    rings = {s.name for s in stmts if isinstance(s, ast.SharedDecl) and s.stages is not None}
    decls = tuple(s for s in stmts if isinstance(s, (ast.SharedDecl, ast.MBarrierDecl)))
    code = ast.Block(tuple(s for s in stmts if s not in decls), kernel.body.span)
    produced = _keep(code, lambda s: _loads_ring(s, rings))
    if not _selects(produced):
        raise CompileError(kernel.clause_span("specialize"), "'specialize' moves loads into "
                                                             "rings (buffers with 'stages') to a "
                                                             "producer warp; this kernel has none")
    consumed = _keep(code, lambda s: not _loads_ring(s, rings), structure=False)
    warpgroups = threads // 128
    regs = min(256, (REGISTER_FILE - PRODUCER_REGS * 128) // threads // 8 * 8)
    # Each role is located where its code starts (and roles are told apart by span).
    first_load = next(_leaves(produced))
    roles = (ast.Role(CONSUMER, "warpgroup", warpgroups, regs, consumed, kernel.body.span),
             ast.Role(PRODUCER, "warp", 1, PRODUCER_REGS, produced, first_load.span))
    return replace(kernel, threads=None, body=replace(kernel.body, stmts=decls + roles))


def _loads_ring(stmt, rings: set[str]) -> bool:
    """A load whose destination is a ring buffer (or a stage or part of one)."""
    if not isinstance(stmt, ast.Copy):
        return False
    dst = stmt.dst.value if isinstance(stmt.dst, ast.Subscript) else stmt.dst
    return isinstance(dst, ast.Name) and dst.id in rings


def _keep(block: ast.Block, keep, structure: bool = True) -> ast.Block:
    """The statements `keep` selects, and every scalar declaration (both roles
    may bound loops by it). With `structure`, a loop or condition is kept (with
    what it selects inside) when it selects anything but declarations; without,
    every loop and condition is kept, filtered."""
    out = []
    for stmt in block.stmts:
        match stmt:
            case ast.For(body=body):
                inner = _keep(body, keep, structure)
                if _selects(inner) or not structure:
                    # the consumer's warpgroups take turns; the producer is one warp
                    out.append(replace(stmt, body=inner, turns=stmt.turns and not structure))
            case ast.If(then=then, orelse=orelse):
                then_kept = _keep(then, keep, structure)
                else_kept = _keep(orelse, keep, structure) if orelse is not None else None
                if _selects(then_kept) or (else_kept and _selects(else_kept)) or not structure:
                    out.append(replace(stmt, then=then_kept, orelse=else_kept))
            case ast.ScalarDecl():
                out.append(stmt)
            case _ if keep(stmt):
                out.append(stmt)
    return ast.Block(tuple(out), block.span)


def _selects(block: ast.Block) -> bool:
    return any(not isinstance(s, ast.ScalarDecl) for s in block.stmts)


def _leaves(block: ast.Block):
    for stmt in block.stmts:
        match stmt:
            case ast.For(body=body):
                yield from _leaves(body)
            case ast.If(then=then, orelse=orelse):
                yield from _leaves(then)
                if orelse is not None:
                    yield from _leaves(orelse)
            case ast.ScalarDecl():
                pass
            case _:
                yield stmt
