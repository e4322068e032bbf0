"""Names and scalar expressions: what each name means, and integer arithmetic.

Scalar expressions index tiles, bound loops and guard conditionals. `/`
rounds up, so `K / BK` counts the last partial tile (TMA fills it with zeros).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, fields

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast
from hopperc.frontend.literals import check_int32
from hopperc.ir import nodes as ir
from hopperc.ir.arith import INTEGER_OPS
from hopperc.ir.rewrite import fresh_name

BUILTINS = {"warp", "lane", "thread", "wg"}
# Builtins that differ between the threads of a role: a branch on them would leave some
# of the role's threads out of the barriers and elected issues the compiler inserts.
DIVERGENT_BUILTINS = {"lane", "thread", "warp", "wg"}


@dataclass(frozen=True)
class TileSymbol:
    dtype: DType
    shape: tuple[int, ...]
    span: Span
    layout: ir.Layout = ir.Layout.ROW_MAJOR
    threads: int = 128  # the threads that share it (a warpgroup, or the running ones)
    # A loaded vector's register copy: the rows it holds, read where it is declared
    # (a use whose tiles its threads do not hold the rows of reads them instead).
    loaded: ir.GlobalVector | None = None


@dataclass(frozen=True)
class VectorSymbol:
    """`v: f32[BN] = bias[tile.n]`: a slice of a 1-D tensor. Where it is used one
    value per row, `registers` names the register row vector that holds its rows,
    read once at the declaration; other uses read the tensor where they are."""

    tensor: str
    dtype: DType
    start: ir.ScalarExpr
    length: int
    span: Span
    registers: str | None = None


@dataclass(frozen=True)
class ScalarSymbol:
    """`n: i32 = OFFS[g]`: an immutable scalar; its uses are its value, substituted
    (an i32 scalar's a ScalarExpr, an f32 scalar's a TileExpr of scalars)."""

    dtype: DType
    value: ir.ScalarExpr | ir.TileExpr
    span: Span


Symbol = (int | ir.TensorParam | ir.ScalarParam | ir.SharedBuffer | ir.MBarrierArray
          | TileSymbol | VectorSymbol | ScalarSymbol | str)


class Scope:
    """Nested name tables: kernel-level names, then one table per block."""

    def __init__(self, kernel: ast.Kernel | None = None) -> None:
        self.tables: list[dict[str, tuple[Symbol, Span | None]]] = [{}]
        # Every name the source spells anywhere, and those the compiler gave: a
        # name the compiler gives is none of them, so no later declaration of the
        # user's (in any block) meets it, and no two blocks share one.
        self.taken: set[str] = source_names(kernel) if kernel is not None else set()
        # Register tile name -> its first declaration: the IR keeps one tile per
        # name, so a block that declares the name again declares the same tile.
        self.tiles: dict[str, TileSymbol] = {}
        self.dims: set[str] = set()
        self.grid_axes: dict[str, Span] = {}
        self.loop_vars: set[str] = set()
        # Loop variable -> its (low, high) values, None where the loop never runs.
        self.loop_ranges: dict[str, tuple[int | None, int | None] | None] = {}
        # In a pingpong kernel's turning role each warpgroup runs whole tiles in turn:
        # element-wise code reads whole buffers (writes still name the warpgroup's own).
        self.turns = False
        # Threads running the statement being lowered, and the row reductions it
        # needs done first (RowPartials through shared memory, with the partials'
        # buffer): the analyzer puts them ahead of the statement.
        self.running = 0
        self.row_partials: list[tuple[ir.RowPartials, ir.SharedBuffer]] = []
        # The statement being lowered computes a row vector (one value per row):
        # a loaded vector or 1-D shared buffer named alone in it is its value per row.
        self.rows_statement = False
        # Tensor -> where its elements are first read as scalars (global_reads refuses
        # reading elements of a tensor the kernel stores there).
        self.element_reads: dict[str, Span] = {}

    def declare(self, name: str, symbol: Symbol, span: Span) -> None:
        for table in self.tables:
            if name in table:
                prev = table[name][1]
                where = f" (first declared at {prev})" if prev else ""
                raise CompileError(span, f"'{name}' is already declared{where}")
        if name in BUILTINS or name in ("tile", "inf"):
            raise CompileError(span, f"'{name}' is a built-in name and cannot be redeclared")
        self.tables[-1][name] = (symbol, span)

    def declare_tile(self, name: str, symbol: TileSymbol, span: Span) -> None:
        """Declare a register tile (or row vector); a name declared before in
        another block must keep its dtype and shape."""
        first = self.tiles.setdefault(name, symbol)
        if (first.dtype, first.shape, first.layout) != (symbol.dtype, symbol.shape, symbol.layout):
            raise CompileError(span, f"'{name}' was declared at {first.span} as {first.dtype}"
                                     f"{list(first.shape)}; a tile of another dtype or shape "
                                     "needs another name (the kernel keeps one register tile "
                                     "per name)")
        self.declare(name, symbol, span)

    def fresh(self, name: str, span: Span) -> str:
        """`name`, or `name2`, `name3`...: the first the source and the compiler
        have not used, declared at the kernel level (a name the compiler gives a
        buffer it adds)."""
        candidate = self.compiler_name(name)
        self.tables[0][candidate] = ("compiler", span)
        return candidate

    def compiler_name(self, name: str) -> str:
        """`name`, or `name2`, `name3`...: a name neither the source nor the
        compiler uses anywhere in the kernel, for the caller to declare."""
        candidate = fresh_name(name, self.taken | {n for table in self.tables for n in table})
        self.taken.add(candidate)
        return candidate

    def lookup(self, name: str, span: Span) -> Symbol:
        for table in reversed(self.tables):
            if name in table:
                return table[name][0]
        if name in self.visible():  # a built-in of integer expressions only
            raise CompileError(span, f"'{name}' is a built-in of integer expressions (indices, "
                                     f"scalars), not a value here: declare a scalar from it "
                                     f"first, e.g. `v: i32 = {name}`")
        raise CompileError(span, f"unknown name '{name}'{did_you_mean(name, self.visible())}")

    def visible(self) -> set[str]:
        """Every name a statement here may use: declared ones and the built-ins."""
        return {n for table in self.tables for n, (symbol, _) in table.items()
                if symbol != "compiler"} | BUILTINS

    def names_of(self, kind) -> set[str]:
        """The visible names whose symbol is an instance of `kind`: the candidates
        for a name used where only such a symbol fits."""
        return {n for table in self.tables for n, (symbol, _) in table.items()
                if isinstance(symbol, kind)}

    def push(self) -> None:
        self.tables.append({})

    def pop(self) -> None:
        self.tables.pop()


def scalar_expr(expr: ast.Expr, scope: Scope, *, builtins: frozenset[str] = frozenset(BUILTINS)
                ) -> ir.ScalarExpr:
    """Lower an integer/boolean expression, folding constants."""
    match expr:
        case ast.IntLit(value=v):
            return ir.const(v)
        case ast.Name(id=name, span=span):
            if name in BUILTINS:
                if name not in builtins:
                    raise CompileError(span, f"'{name}' is not available here")
                return ir.Scalar(ir.ScalarKind.BUILTIN, name)
            symbol = scope.lookup(name, span)
            if isinstance(symbol, int) and not isinstance(symbol, bool):
                return ir.const(symbol)
            if symbol == "dim":
                return ir.Scalar(ir.ScalarKind.DIM, name)
            if symbol == "loop":
                return ir.Scalar(ir.ScalarKind.LOOP, name)
            if isinstance(symbol, ir.ScalarParam):
                if symbol.dtype is not DType.I32:
                    raise CompileError(span, f"'{name}' is {symbol.dtype}; an index needs i32")
                return ir.Scalar(ir.ScalarKind.PARAM, name)
            if isinstance(symbol, ScalarSymbol):
                if symbol.dtype is not DType.I32:
                    raise CompileError(span, f"'{name}' is {symbol.dtype}; an integer expression "
                                             "needs i32")
                return symbol.value
            raise CompileError(span, f"'{name}' is not an integer value")
        case ast.Attribute(value=ast.Name(id="tile"), attr=axis, span=span):
            if axis not in scope.grid_axes:
                known = ", ".join(f"tile.{a}" for a in scope.grid_axes) or "none"
                meant = closest(axis, scope.grid_axes)
                hint = f"; did you mean 'tile.{meant}'?" if meant else ""
                raise CompileError(span, f"unknown grid axis 'tile.{axis}'{hint} (declared: "
                                         f"{known})")
            return ir.Scalar(ir.ScalarKind.TILE, axis)
        case ast.Attribute(value=ast.Name(id=name, span=name_span)):
            raise unknown_attribute_owner(name, name_span)
        case ast.BinOp(op=op, left=left, right=right, span=span) if op in "+-*/%":
            return fold(op, scalar_expr(left, scope, builtins=builtins),
                        scalar_expr(right, scope, builtins=builtins), span)
        case ast.Neg(operand=operand, span=span):
            return fold("-", ir.const(0), scalar_expr(operand, scope, builtins=builtins), span)
        case ast.Compare(op=op, left=left, right=right, span=span):
            return fold(op, scalar_expr(left, scope, builtins=builtins),
                        scalar_expr(right, scope, builtins=builtins), span)
        case ast.BoolOp(op=op, left=left, right=right, span=span):
            return fold(op, scalar_expr(left, scope, builtins=builtins),
                        scalar_expr(right, scope, builtins=builtins), span)
        case ast.Not(operand=operand, span=span):
            return ir.ScalarOp("not", scalar_expr(operand, scope, builtins=builtins))
        case ast.Call(func="min" | "max" as func, args=args, span=span):
            if len(args) != 2:
                raise CompileError(span, f"{func}() takes 2 arguments")
            return fold(func, *(scalar_expr(a, scope, builtins=builtins) for a in args), span)
        case ast.Subscript(value=ast.Name(id=name, span=name_span), span=span) if isinstance(
                scope.lookup(name, name_span), ir.TensorParam):
            element, dtype = tensor_element(expr, scope, builtins)
            if dtype is not DType.I32:
                raise CompileError(span, f"'{name}' is {dtype}; an integer expression needs an "
                                         "i32 element")
            return element
    raise CompileError(expr.span, "expected an integer expression here")


def tensor_element(expr: ast.Subscript, scope: Scope,
                   builtins: frozenset[str] = frozenset(BUILTINS)) -> tuple[ir.TensorElement, DType]:
    """`T[i, j]`, T a global i32 or f32 tensor: the element and its dtype."""
    tensor = scope.lookup(expr.value.id, expr.value.span)
    if tensor.dtype not in (DType.I32, DType.F32):
        raise CompileError(expr.span, f"'{tensor.name}' is {tensor.dtype}: only elements of i32 "
                                      "and f32 tensors are read as scalars")
    if len(expr.indices) != len(tensor.dims):
        raise CompileError(expr.span, f"'{tensor.name}' has {len(tensor.dims)} dimension"
                                      f"{'s' * (len(tensor.dims) > 1)}: an element takes one "
                                      f"index per dimension, not {len(expr.indices)}")
    for index in expr.indices:
        if isinstance(index, (ast.FullSlice, ast.RangeSlice, ast.NewAxis)):
            raise CompileError(index.span, f"an element of '{tensor.name}' takes an integer "
                                           "index per dimension, not a slice")
    indices = tuple(scalar_expr(i, scope, builtins=builtins) for i in expr.indices)
    scope.element_reads.setdefault(tensor.name, expr.span)
    return ir.TensorElement(tensor.name, indices), tensor.dtype


def fold(op: str, left: ir.ScalarExpr, right: ir.ScalarExpr, span: Span) -> ir.ScalarExpr:
    if op in "/%" and right == ir.const(0):
        raise CompileError(span, "division by zero")
    if is_const(left) and is_const(right):
        value = INTEGER_OPS[op](left.value, right.value)
        return ir.const(check_int32(value, span, "this constant expression"))
    # A flag constant (0 or 1) selects a term: CAUSAL * a + (1 - CAUSAL) * b.
    if op == "*" and ir.const(0) in (left, right):
        return ir.const(0)
    if op == "*" and ir.const(1) in (left, right):
        return right if left == ir.const(1) else left
    if op == "+" and ir.const(0) in (left, right):
        return right if left == ir.const(0) else left
    return ir.ScalarOp(op, left, right)


def is_const(expr: ir.ScalarExpr) -> bool:
    return isinstance(expr, ir.Scalar) and expr.kind is ir.ScalarKind.CONST


def const_value(expr: ast.Expr, scope: Scope, what: str) -> int:
    """Evaluate an expression that must be a compile-time integer."""
    lowered = scalar_expr(expr, scope, builtins=frozenset())
    if not is_const(lowered):
        raise CompileError(expr.span, f"{what} must be a compile-time constant")
    return int(lowered.value)


def source_names(node) -> set[str]:
    """Every identifier a kernel's syntax tree spells (declared or used)."""
    return {getattr(item, f.name) for item in ast.walk(node) for f in fields(item)
            if f.name in ("name", "id", "var") and isinstance(getattr(item, f.name), str)}


def closest(name: str, candidates, cutoff: float = 0.6) -> str | None:
    """The candidate most like a misspelt `name` (difflib's similarity ratio, at least
    `cutoff`), else one with two adjacent letters swapped (`gw` for `wg`, whose ratio
    is only 0.5), or None."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=cutoff)
    if close:
        return close[0]
    swaps = {name[:i] + name[i + 1] + name[i] + name[i + 2:] for i in range(len(name) - 1)}
    return next((c for c in sorted(candidates) if c != name and c in swaps), None)


def unknown_attribute_owner(name: str, span: Span) -> CompileError:
    """`tlie.m`: only the built-in `tile` has attributes (its grid axes)."""
    return CompileError(span, f"unknown name '{name}'{did_you_mean(name, {'tile'})} (only the "
                              "built-in 'tile' has attributes: tile.AXIS)")


def did_you_mean(name: str, candidates, cutoff: float = 0.6) -> str:
    """`; did you mean 'x'?` for the candidate closest to a misspelt `name`, or ''."""
    close = closest(name, candidates, cutoff)
    return f"; did you mean '{close}'?" if close else ""
