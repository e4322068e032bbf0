"""Which loops the front end unrolls, and how far.

A loop over a constant range is unrolled where its variable stands for what the
hardware must know at compile time: the columns of a register tile
(`acc[:, 64 * s : 64 * s + 64]`: registers are not addressable) or of a shared
vector (`bias[None, 64 * s : 64 * s + 64]`), and a warpgroup's plane of a shared
buffer (`sc[2 * (s % 2) + wg]`: a constant offset from `wg`). The analyzer lowers
the body once per value, the variable bound to that constant, so the IR holds
straight-line copies, each statement spanning its line of the loop's body, and
every pass after (proxy fences, bulk-group waits, plane reuse, named barriers)
and the simulator see exactly the copies written by hand.

Every other loop stays a loop, constant bounds or not: a plane chosen by the
variable alone (`sd[j]`, `sd[i % 2]`) is an address computed at run time; a main
loop over a ring (`for k in 0 .. 4`) is pipelined as a loop, so a loop whose body
names a ring (a buffer with `stages`) is never unrolled, and one that would need
unrolling too is refused at the loop, with what needs the constant and the ring.
The copies are bounded (MAX_UNROLLED_STATEMENTS IR statements per unrolled loop,
nested ones included), so a large range is a located error, not a slow compile.
"""
from __future__ import annotations

from dataclasses import fields

from hopperc.diagnostics import CompileError
from hopperc.frontend import ast
from hopperc.frontend.scope import Scope, TileSymbol, VectorSymbol, is_const
from hopperc.ir import nodes as ir

MAX_UNROLLED_STATEMENTS = 512


def unrolled_values(loop: ast.For, start: ir.ScalarExpr, stop: ir.ScalarExpr,
                    scope: Scope) -> range | None:
    """The values of `loop`'s variable, one per copy, when it is unrolled; None
    when it stays a loop."""
    declared = {s.name for s in ast.walk(loop.body) if isinstance(s, ast.TileDecl)}
    needs = _first([subscript for subscript in _subscripts(loop.body)
                    if _needs_constant(*subscript[:2], loop.var, declared, scope)],
                   lambda subscript: subscript[2])
    ring = _first([n for n in ast.walk(loop.body)
                   if isinstance(n, ast.Name) and _is_ring(scope, n.id)], lambda n: n.span)
    if ring is not None and needs is not None:
        name, _, span = needs
        raise CompileError(loop.span, f"this loop must be unrolled ({why(loop.var)}: "
                                      f"'{name}[...]' at line {span.line}) but cannot be: it "
                                      f"names the ring '{ring.id}', whose loop is pipelined, "
                                      "not unrolled; use the ring in a loop of its own",
                           (f"{ring.span}: the ring '{ring.id}' "
                            f"({_visible(scope, ring.id).stages} stages) is named here",))
    if needs is None or ring is not None:
        return None
    if not (is_const(start) and is_const(stop)):
        raise CompileError(loop.span, f"this loop is unrolled ({why(loop.var)}), so its bounds "
                                      "must be compile-time constants (tile constants, -D "
                                      "values, literals)")
    values = range(int(start.value), int(stop.value))
    check_size(loop, len(values), len(values))  # each copy holds a statement or more
    return values


def check_size(loop: ast.For, statements: int, trips: int) -> None:
    """Refuse an unrolled loop of more statements than the bound."""
    if statements > MAX_UNROLLED_STATEMENTS:
        raise CompileError(loop.span, f"this loop is unrolled ({why(loop.var)}) into {trips} "
                                      f"copies of its body, more than "
                                      f"{MAX_UNROLLED_STATEMENTS} statements; use fewer "
                                      "iterations or a smaller body")


def why(var: str) -> str:
    """Why a loop over `var` is unrolled, for its messages."""
    return f"'{var}' picks columns of a tile or a warpgroup's plane, which are compile-time"


def _needs_constant(name: str, index, var: str, declared: set[str], scope: Scope) -> bool:
    """`var` in an index of `name` that must be a compile-time constant: any index
    of a register tile, a column slice of a shared buffer or vector, or a plane
    per warpgroup."""
    if not _mentions(index, var):
        return False
    symbol = _visible(scope, name)
    if name in declared or isinstance(symbol, TileSymbol):
        return True
    if isinstance(symbol, (VectorSymbol, ir.SharedBuffer)):
        return isinstance(index, ast.RangeSlice) or _mentions(index, "wg")
    return False


def _first(items: list, span_of):
    """The item the source spells first, or None."""
    return min(items, key=lambda item: (span_of(item).line, span_of(item).col), default=None)


def _is_ring(scope: Scope, name: str) -> bool:
    symbol = _visible(scope, name)
    return isinstance(symbol, ir.SharedBuffer) and symbol.stages > 1


def _visible(scope: Scope, name: str):
    for table in reversed(scope.tables):
        if name in table:
            return table[name][0]
    return None


def _subscripts(body: ast.Block):
    """(name, index, subscript's span) for each index of a subscript whose base is a
    name (`sa[wg][:, None]`: its innermost base)."""
    for node in ast.walk(body):
        if isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Transpose)):
                base = base.value
            if isinstance(base, ast.Name):
                for index in node.indices:
                    yield base.id, index, node.span


def _mentions(expr, var: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(expr))


def one_definition(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """`stmts` with a register tile defined again at the same level (in a later copy
    of an unrolled loop, or after the loop) assigned instead: the kernel keeps one
    tile per name, and C++ declares a name once per scope."""
    defined: set[str] = set()
    out: list[ir.Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ir.TileDef) and stmt.name in defined:
            if stmt.init is not None:  # None: a product overwrites it next
                out.append(ir.TileAssign(stmt.name, stmt.init, stmt.span))
            continue
        if isinstance(stmt, ir.TileDef):
            defined.add(stmt.name)
        out.append(stmt)
    return out


def statements(copies: list[ir.Stmt]) -> int:
    """The statements of `copies`, nested ones included."""
    return sum(_statements(s) for s in copies)


def _statements(stmt) -> int:
    """`stmt` and the statements nested in it."""
    return 1 + sum(_statements(s) for f in fields(stmt)
                   if isinstance(block := getattr(stmt, f.name), ir.Block)
                   for s in block.stmts)
