"""Register tiles and element-wise expressions (shared-memory views: views.py).

A tile expression is typed by its dtype and shape; operands of an element-wise
operation must agree on both (casts are explicit: `f32(x)`), except literals,
scalar parameters and vectors broadcast with `v[:, None]` / `v[None, :]`.
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType, Swizzle
from hopperc.frontend import ast
from hopperc.frontend.scope import (Scope, ScalarSymbol, TileSymbol, VectorSymbol, const_value,
                                   did_you_mean, scalar_expr, tensor_element,
                                   unknown_attribute_owner)
from hopperc.frontend.views import buffer_view, require_warpgroup_view
from hopperc.ir import nodes as ir
from hopperc.ir.layout import MAX_EVERY_ROW, plane_rows

UNARY_FUNCS = {"relu", "abs", "exp", "exp2", "log", "log2", "rsqrt", "sqrt", "tanh", "sigmoid",
               "erf", "sin", "cos"}
BINARY_FUNCS = {"max", "min"}
TERNARY_FUNCS = {"where"}  # where(c, a, b): a where c != 0, else b
INDEX_FUNCS = {"row", "col"}  # the element's row or column: row(), col()
FUNCS = UNARY_FUNCS | BINARY_FUNCS | TERNARY_FUNCS
# one value per row of a register tile: function -> RowReduce's op
ROW_REDUCTIONS = {"rowmax": "max", "rowmin": "min", "rowsum": "sum", "argmax": "argmax"}
BINARY_OPS = {"+", "-", "*", "/"}
COMPARE_OPS = {"==", "!=", "<", "<=", ">", ">="}  # 1 where true, else 0


@dataclass(frozen=True)
class Typed:
    """A lowered tile expression with its dtype; shape None means it broadcasts."""

    expr: ir.TileExpr
    dtype: DType | None
    shape: tuple[int, ...] | None


def lower_row_values(expr: ast.Expr, scope: Scope, warpgroups: int, rows: bool) -> Typed:
    """`expr` lowered as the value of a statement that computes a row vector
    (`rows`: a loaded vector `t` or 1-D shared buffer `sv` named alone is its
    value per row, as a register row vector is) or a tile (they need a broadcast)."""
    scope.rows_statement = rows
    try:
        return lower_tile_expr(expr, scope, warpgroups)
    finally:
        scope.rows_statement = False


def lower_tile_expr(expr: ast.Expr, scope: Scope, warpgroups: int) -> Typed:
    match expr:
        case ast.IntLit(value=v) | ast.FloatLit(value=v):
            return Typed(ir.Literal(float(v)), None, None)
        case ast.Name(id="wg") if warpgroups >= 1:
            # the warpgroup: the same for all of a warpgroup's elements (its tile)
            return Typed(ir.ScalarValue(ir.Scalar(ir.ScalarKind.BUILTIN, "wg")), None, None)
        case ast.Name(id=name, span=span):
            symbol = scope.lookup(name, span)
            if isinstance(symbol, TileSymbol):
                _check_not_fp8_fragment(name, symbol, span)
                return Typed(ir.TileRef(name), symbol.dtype, symbol.shape)
            if isinstance(symbol, ir.ScalarParam):
                return Typed(ir.ScalarValue(ir.Scalar(ir.ScalarKind.PARAM, name)), None, None)
            if isinstance(symbol, ScalarSymbol):
                value = symbol.value if symbol.dtype is DType.F32 else ir.ScalarValue(symbol.value)
                return Typed(value, None, None)
            if isinstance(symbol, VectorSymbol) and scope.rows_statement:
                rows = ir.TileRef(symbol.registers) if symbol.registers else \
                    ir.GlobalVector(symbol.tensor, symbol.start, "rows", symbol.length)
                return Typed(rows, symbol.dtype, (symbol.length,))
            if isinstance(symbol, VectorSymbol):
                raise CompileError(span, f"vector '{name}' needs a broadcast: {name}[:, None] "
                                         f"(one value per row) or {name}[None, :] (per column)")
            if symbol in ("dim", "loop") or isinstance(symbol, int) and not isinstance(symbol,
                                                                                      bool):
                # a tile constant, dimension or loop variable: the same for every element
                return Typed(ir.ScalarValue(scalar_expr(expr, scope, builtins=frozenset())),
                             None, None)
        case ast.Attribute(value=ast.Name(id="tile")):
            return Typed(ir.ScalarValue(scalar_expr(expr, scope)), None, None)
        case ast.Attribute(value=ast.Name(id=name, span=name_span)):
            raise unknown_attribute_owner(name, name_span)
        case ast.Subscript(value=ast.Name(id=name), indices=(a, b)) if isinstance(
                scope.lookup(name, expr.value.span), TileSymbol):
            tile = scope.lookup(name, expr.value.span)
            if tile.layout in (ir.Layout.ROWS, ir.Layout.EVERY_ROW):
                _refuse_row_broadcast(name, scope, expr.span)
                if not (isinstance(a, ast.FullSlice) and isinstance(b, ast.NewAxis)):
                    raise CompileError(expr.span, f"a register vector is broadcast along its "
                                                  f"rows: {name}[:, None]")
                return Typed(ir.RowValues(name), tile.dtype, ("vector", "rows", tile.shape[0]))
            return _columns(name, tile, a, b, scope, expr.span)
        case ast.Subscript(value=ast.Name(id=name)) if isinstance(
                scope.lookup(name, expr.value.span), ir.TensorParam):
            return Typed(ir.ScalarValue(tensor_element(expr, scope)[0]), None, None)
        case ast.Call(func=func, args=args, span=span) if func in ROW_REDUCTIONS:
            return _row_reduce(func, args, scope, span)
        case ast.Subscript(value=ast.Name(id=name), indices=(a, b)) if isinstance(
                scope.lookup(name, expr.value.span), VectorSymbol):
            vector = scope.lookup(name, expr.value.span)
            _refuse_row_broadcast(name, scope, expr.span)
            axis, (first, stop) = _axis(a, b, expr.span), _elements(a, b, vector.length, scope)
            if vector.registers and axis == "rows" and (first, stop) == (0, vector.length):
                return Typed(ir.RowValues(vector.registers), vector.dtype,
                             ("vector", axis, vector.length))
            start = vector.start if not first else ir.ScalarOp("+", vector.start, ir.const(first))
            return Typed(ir.GlobalVector(vector.tensor, start, axis, stop - first), vector.dtype,
                         ("vector", axis, stop - first))
        case ast.Subscript(value=ast.Name(id=name) | ast.Subscript(value=ast.Name(id=name)) as
                           inner, indices=(a, b)) if _is_vector_buffer(
                scope.lookup(name, expr.value.span)):
            return _vector_buffer(inner, a, b, scope, warpgroups, expr.span)
        case ast.Cast(dtype=dtype, operand=operand):
            inner = lower_tile_expr(operand, scope, warpgroups)
            return Typed(ir.Convert(DType.parse(dtype), inner.expr), DType.parse(dtype), inner.shape)
        case ast.Neg(operand=operand):
            inner = lower_tile_expr(operand, scope, warpgroups)
            return Typed(ir.Elementwise("neg", (inner.expr,)), inner.dtype, inner.shape)
        case ast.BinOp(op="@", span=span):
            raise CompileError(span, "a matrix product must be the whole right side of an "
                                     "accumulator update: acc = a @ b or acc += a @ b")
        case ast.BinOp(op=op, left=left, right=right, span=span) if op in BINARY_OPS:
            return _combine(op, [lower_tile_expr(x, scope, warpgroups) for x in (left, right)], span)
        case ast.Compare(op=op, left=left, right=right, span=span) if op in COMPARE_OPS:
            return _combine(op, [lower_tile_expr(x, scope, warpgroups) for x in (left, right)],
                            span)
        case ast.Call(func=func, args=args, span=span) if func in FUNCS:
            arity = 1 if func in UNARY_FUNCS else 2 if func in BINARY_FUNCS else 3
            if len(args) != arity:
                raise CompileError(span, f"{func}() takes {arity} argument{'s' * (arity > 1)}")
            return _combine(func, [lower_tile_expr(x, scope, warpgroups) for x in args], span)
        case ast.Call(func=func, args=args, span=span) if func in INDEX_FUNCS:
            if args:
                raise CompileError(span, f"{func}() takes no arguments: it is the element's "
                                         f"{func}")
            return Typed(ir.ElementIndex(func), None, None)
        case ast.Call(func=func, span=span):
            # a cast is spelt as its dtype: bf16(x)
            names = FUNCS | set(INDEX_FUNCS) | set(ROW_REDUCTIONS) | {d.text for d in DType}
            known = ", ".join(sorted(FUNCS | {f"{f}()" for f in INDEX_FUNCS}
                                     | set(ROW_REDUCTIONS)))
            raise CompileError(span, f"unknown function '{func}'{did_you_mean(func, names)} "
                                     f"(known: {known}, and casts like f32(x))")
    view = buffer_view(expr, scope, warpgroups)
    if view is not None and scope.rows_statement and len(view.shape) == 1:
        # a 1-D buffer (or a warpgroup's block of it) in a row vector's statement
        return Typed(ir.SharedRead(view.view, "rows"), view.buffer.dtype, view.shape)
    if view is not None:
        if not scope.turns:  # in a pingpong turn a warpgroup's tile reads whole buffers
            require_warpgroup_view(view, warpgroups, expr.span)
        return Typed(ir.SharedRead(view.view), view.buffer.dtype, view.shape)
    raise CompileError(expr.span, "expected a tile expression: a register tile, a shared "
                                  "buffer, a broadcast vector, a literal or a scalar parameter")


def _is_vector_buffer(symbol) -> bool:
    """A 1-D shared buffer, which element-wise code reads broadcast like a vector."""
    return isinstance(symbol, ir.SharedBuffer) and len(symbol.shape) == 1


def _vector_buffer(inner: ast.Expr, a: ast.Expr, b: ast.Expr, scope: Scope, warpgroups: int,
                   span: Span) -> Typed:
    """`sv[:, None]` / `sv[None, :]` of a 1-D shared buffer, or `sv[wg][:, None]`: the
    running warpgroup's block of its elements (a view part, as `buf[wg]` is a
    warpgroup's rows), so a ring of BM per-row scales serves warpgroups of BM / W rows."""
    info = buffer_view(inner, scope, warpgroups)  # refuses any index but wg on rank 1
    _refuse_row_broadcast(info.buffer.name, scope, span)
    length = info.shape[0]
    axis, elements = _axis(a, b, span), _elements(a, b, length, scope)
    read = ir.SharedRead(info.view, axis, elements if elements != (0, length) else None)
    return Typed(read, info.buffer.dtype, ("vector", axis, elements[1] - elements[0]))


def _refuse_row_broadcast(name: str, scope: Scope, span: Span) -> None:
    """A row vector's statement has one element per row: there a vector is its
    value per row, named alone, not broadcast over a tile's columns."""
    if scope.rows_statement:
        raise CompileError(span, f"'{name}' is one value per row in a row vector's statement: "
                                 f"name it alone, {name}")


def _axis(first: ast.Expr, second: ast.Expr, span: Span) -> str:
    """`v[:, None]` (or `v[a : b, None]`): one value per row; `v[None, :]`: per column."""
    slices = (ast.FullSlice, ast.RangeSlice)
    if isinstance(first, slices) and isinstance(second, ast.NewAxis):
        return "rows"
    if isinstance(first, ast.NewAxis) and isinstance(second, slices):
        return "cols"
    raise CompileError(span, "broadcast a vector with v[:, None] or v[None, :]")


def _elements(first: ast.Expr, second: ast.Expr, length: int, scope: Scope) -> tuple[int, int]:
    """The elements [start, stop) a broadcast reads: all, or a constant slice
    `v[None, a : b]` (a subtile's columns of a bias)."""
    part = first if isinstance(first, ast.RangeSlice) else second
    if not isinstance(part, ast.RangeSlice):
        return 0, length
    start = const_value(part.start, scope, "a vector slice's start")
    stop = const_value(part.stop, scope, "a vector slice's end")
    if not 0 <= start < stop <= length:
        raise CompileError(part.span, f"elements {start} : {stop} are not inside the vector's "
                                      f"{length}")
    return start, stop


def _combine(op: str, operands: list[Typed], span: Span) -> Typed:
    # where's condition is a truth value, tested against 0 in its own dtype (a mask of
    # i32 selects among f32 values); the values it selects share one dtype.
    typed = operands[1:] if op in TERNARY_FUNCS else operands
    dtypes = {o.dtype for o in typed if o.dtype is not None}
    if len(dtypes) > 1:
        a, b = sorted(d.text for d in dtypes)
        raise CompileError(span, f"dtype mismatch: {a} and {b} in '{op}'; convert one "
                                 f"explicitly, e.g. f32(x)")
    shape = None
    for operand in operands:
        if operand.shape is None or operand.shape[0] == "vector":
            continue
        if shape is not None and operand.shape != shape:
            raise CompileError(span, f"shape mismatch in '{op}': {list(shape)} and "
                                     f"{list(operand.shape)}")
        shape = operand.shape
    for operand in operands:
        if operand.shape is not None and operand.shape[0] == "vector":
            shape = _combine_broadcast(operand.shape, shape, op, span)
    # A comparison is 1 or 0, exact in every dtype: like a literal, it takes the
    # dtype of what it meets.
    dtype = None if op in COMPARE_OPS else next(iter(dtypes), None)
    return Typed(ir.Elementwise(op, tuple(o.expr for o in operands)), dtype, shape)


def _row_reduce(func: str, args, scope: Scope, span: Span) -> Typed:
    """rowmax(t) / rowmin(t) / rowsum(t) / argmax(t) of an f32 register tile. In
    the wgmma layout a row lives in the 4 threads of a quad, so a thread reduces
    its slots and the quad its threads (shuffles), with no shared memory. A
    row-major tile whose rows each span all its threads (columns a multiple of
    them) is reduced per warp (slots, then shuffles), and the warps' partials
    meet in shared memory: a RowPartials statement ahead of this one writes
    them, this one reads them."""
    op = ROW_REDUCTIONS[func]
    tile = scope.lookup(args[0].id, args[0].span) if len(args) == 1 and isinstance(
        args[0], ast.Name) else None
    if not isinstance(tile, TileSymbol) or len(tile.shape) != 2 or tile.dtype is not DType.F32:
        raise CompileError(span, f"{func}() takes a 2-D register tile of f32 by name")
    # argmax's column is an index: like a literal it takes the dtype it meets (exact
    # in an i32 statement, ir/integer_exprs.py; an f32 below 2^24)
    dtype = None if op == "argmax" else DType.F32
    if tile.layout is ir.Layout.WGMMA:
        return Typed(ir.RowReduce(op, args[0].id), dtype, (tile.shape[0],))
    rows, cols = tile.shape
    if cols % tile.threads or rows > MAX_EVERY_ROW:
        raise CompileError(span, f"{func}() of a row-major tile needs each row spread over all "
                                 f"{tile.threads} threads that hold it (columns a multiple of "
                                 f"{tile.threads}) and at most {MAX_EVERY_ROW} rows (each "
                                 f"thread holds every row's value); '{args[0].id}' is "
                                 f"{rows}x{cols} (a warpgroup's [64, N] tiles are reduced in "
                                 "registers)")
    # A warp's row of partials fills whole 16-byte chunks: no two warps share one.
    # Where each warpgroup holds its own tile, each has its own part (buf[wg]).
    name = scope.fresh(f"{args[0].id}_{func}_partials", span)
    groups = scope.running // tile.threads
    # argmax's partials are the warps' values, then their columns (as f32)
    warps = scope.running // 32 * (2 if op == "argmax" else 1)
    buffer = ir.SharedBuffer(name, DType.F32, (warps, -(-rows // 4) * 4), 1, Swizzle.NONE, span)
    part = ir.ViewPart(ir.Scalar(ir.ScalarKind.BUILTIN, "wg"), groups) if groups > 1 else None
    view = ir.BufferView(name, part=part)
    scope.row_partials.append((ir.RowPartials(op, args[0].id, view, span), buffer))
    return Typed(ir.RowReduce(op, args[0].id, view), dtype, (rows,))


def _columns(name: str, tile: TileSymbol, rows: ast.Expr, cols: ast.Expr, scope: Scope,
             span: Span) -> Typed:
    """`acc[:, start : stop]`: whole 8-column groups of a tile in the wgmma layout,
    which are a contiguous run of each thread's slots (a subtile an epilogue stores)."""
    if not isinstance(rows, ast.FullSlice) or not isinstance(cols, ast.RangeSlice):
        raise CompileError(span, f"a register tile is sliced by columns: {name}[:, start : stop]")
    _check_not_fp8_fragment(name, tile, span)
    start = const_value(cols.start, scope, "a column slice's start")
    stop = const_value(cols.stop, scope, "a column slice's end")
    if tile.layout is not ir.Layout.WGMMA:
        raise CompileError(span, f"only a tile in the wgmma layout (a warpgroup's [64, N]) "
                                 f"can be sliced; '{name}' is {list(tile.shape)}")
    if not 0 <= start < stop <= tile.shape[1]:
        raise CompileError(cols.span, f"columns {start} : {stop} are not inside the "
                                      f"{tile.shape[1]} columns of '{name}'")
    if start % 8 or stop % 8:
        raise CompileError(cols.span, f"a column slice starts and ends on a multiple of 8 "
                                      f"(the wgmma layout's column groups), not {start} : {stop}")
    return Typed(ir.TileRef(name, (start, stop)), tile.dtype, (tile.shape[0], stop - start))


def _check_not_fp8_fragment(name: str, tile: TileSymbol, span: Span) -> None:
    """A warpgroup's fp8 [64, N] tile is held as wgmma's A fragment, four
    elements to a register in another thread than the accumulator layout's
    (layout.holds_fp8_fragment): it is read only as the A of a product."""
    if tile.layout is ir.Layout.WGMMA and tile.dtype.is_fp8:
        raise CompileError(span, f"'{name}' is a warpgroup's {tile.dtype} tile, held as "
                                 "wgmma's register A fragment: it can only be the A of a "
                                 f"product ('acc += {name} @ sv^T'); compute with the f32 "
                                 "values it was converted from")


def _combine_broadcast(vector_shape: tuple, shape: tuple | None, op: str, span: Span):
    """A broadcast operand met with a tile (or view) or with another broadcast:
    two broadcasts along the same axis with as many values are one broadcast (a
    per-row term such as `m[:, None] * c - n[:, None] * c`)."""
    if shape is None or shape[0] != "vector":
        return check_broadcast(vector_shape, shape, span)
    if vector_shape != shape:
        axis = {"rows": "rows", "cols": "columns"}
        raise CompileError(span, f"'{op}' of a vector of {shape[2]} broadcast along the "
                                 f"{axis[shape[1]]} and one of {vector_shape[2]} along the "
                                 f"{axis[vector_shape[1]]}: broadcasts combine along one "
                                 "axis with as many values")
    return shape


def check_broadcast(vector_shape: tuple, shape: tuple[int, ...] | None, span: Span):
    """A row vector (v[:, None]) needs as many values as each 2-D plane of the tile
    or view has rows (a 1-D view is one row)."""
    _, axis, length = vector_shape
    if shape is None:
        return vector_shape
    expected = plane_rows(shape) if axis == "rows" else shape[-1]
    if length != expected:
        what = "rows" if axis == "rows" else "columns"
        raise CompileError(span, f"shape mismatch: a vector of {length} broadcast over "
                                 f"{expected} {what}")
    return shape
