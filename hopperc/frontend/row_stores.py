"""`T[i, START : END] = v` and `T[i, j] = v`: a register row vector stored to
global memory (ir.GlobalRowStore). Row r of `v` goes to element START + r of
T's last dimension (the box form: element j * len + r), elements at or past END
and past the tensor's extent are skipped; the other dimensions take one element
index each. `v` is a row vector (Layout.ROWS or EVERY_ROW) or an expression of
them and of loaded vectors, of T's dtype (converted explicitly: `bf16(lse)`);
a value of loaded vectors alone lies as a register copy of it would
(`u: f32[BM] = t`, rows.register_vector_layout).

`T[...] += v` adds instead (ir.GlobalRowStore.atomic): each storing lane's
`red.global.add` (PTX ISA, `red`: .f32, .s32, and .noftz .bf16 / .f16, the
latter two on sm_90 / sm_70 and later; relaxed, .gpu scope by default), so
blocks and warpgroups may add to the same elements in any order. No vector
form is used: one lane holds one row (`.v2`/`.v4` exist for .f32 and for the
packed 16-bit types, on consecutive elements of one thread). A register tile's
add, `T[R0 : R1, C0 : C1] += acc`, is frontend/tile_adds.py.

`T[i, j] += s`, every index an element's and `s` a scalar (the same in every
thread): a one-row vector's add, EVERY_ROW over the threads that add it once,
so thread 0 of them issues the one `red` (lower_scalar_add)."""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast
from hopperc.frontend.overlap import check_store_reads
from hopperc.frontend.rows import register_vector_layout, row_operands
from hopperc.frontend.scope import (DIVERGENT_BUILTINS, Scope, TileSymbol, VectorSymbol,
                                    scalar_expr)
from hopperc.frontend.tile_adds import is_tile_add, lower_tile_add, sliced_last
from hopperc.frontend.tiles import ROW_REDUCTIONS, lower_row_values
from hopperc.frontend.views import ViewInfo
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, tile_operands
from hopperc.ir.layout import MAX_EVERY_ROW

# What st.global writes from a register: a 4-byte or 2-byte value.
STORABLE = (DType.F32, DType.I32, DType.BF16, DType.F16)
_VECTORS = (ir.Layout.ROWS, ir.Layout.EVERY_ROW)


def is_tensor_target(target: ast.Expr, scope: Scope) -> bool:
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
        isinstance(scope.lookup(target.value.id, target.value.span), ir.TensorParam)


def lower_row_store(stmt: ast.Assign, scope: Scope, warpgroups: int,
                    threads: int, running: int) -> ir.GlobalRowStore:
    """`threads`: those that share a register tile where the statement runs;
    `running`: all that run it."""
    target: ast.Subscript = stmt.target
    tensor: ir.TensorParam = scope.lookup(target.value.id, target.value.span)
    name = tensor.name
    if stmt.op == "+=" and isinstance(stmt.value, ast.Name) and \
            isinstance(scope.lookup(stmt.value.id, stmt.value.span), ir.SharedBuffer):
        raise CompileError(stmt.span, f"'+=' into '{name}' is a TMA reduce-add of a shared "
                                      f"buffer: tma {name}[...] += {stmt.value.id}; '+=' of a "
                                      "register row vector adds it (red.global.add)")
    if is_tile_add(stmt):
        return lower_tile_add(stmt, scope, warpgroups)
    *leading, last = sliced_last(target, tensor, 1, "the last one START : END (elements) or "
                                                    "a block of the vector's length")
    typed = lower_row_values(stmt.value, scope, warpgroups, True)
    if typed.shape is None and stmt.op == "+=":
        return lower_scalar_add(stmt, tensor, typed.expr, scope, threads, running)
    # A value with a row vector in it is one: a tile or a broadcast beside it
    # would have been refused as a shape mismatch.
    layout, threads = _vector_layout(typed, scope, stmt, threads)
    rows = typed.shape[0]
    value = row_operands(typed.expr, layout, (rows,), threads,
                         lambda n: scope.lookup(n, stmt.span), stmt.span)
    if tensor.dtype not in STORABLE:
        verb = "added (red.global.add)" if stmt.op == "+=" else "stored"
        raise CompileError(target.value.span, f"'{name}' is {tensor.dtype}: a row vector is "
                                              f"{verb} to a tensor of f32, bf16, f16 or i32")
    if typed.dtype is not None and typed.dtype is not tensor.dtype:
        raise CompileError(stmt.span, f"dtype mismatch: the value is {typed.dtype} but '{name}' "
                                      f"is {tensor.dtype}; convert it explicitly, e.g. "
                                      f"{tensor.dtype}(...)")
    if isinstance(last, ast.RangeSlice):
        start, end = scalar_expr(last.start, scope), scalar_expr(last.stop, scope)
    elif isinstance(last, (ast.FullSlice, ast.NewAxis)):
        raise CompileError(last.span, f"the last index of '{name}' is START : END (elements) "
                                      f"or a block of {rows} elements")
    else:
        start, end = ir.ScalarOp("*", scalar_expr(last, scope), ir.const(rows)), None
    index = tuple(scalar_expr(i, scope) for i in leading)
    _uniform([(start, last), (end, last), *zip(index, leading)], "index")
    return ir.GlobalRowStore(name, index, start, end, value, rows, layout, threads, stmt.span,
                             atomic=stmt.op == "+=")


def lower_scalar_add(stmt: ast.Assign, tensor: ir.TensorParam, value: ir.TileExpr,
                     scope: Scope, threads: int, running: int) -> ir.GlobalRowStore:
    """`T[i, j] += s`: a one-row vector's add of scalar `value` (a red.global.add
    by one thread). Added once by the `running` threads, or once by each
    warpgroup (`threads`) where they differ (the statement names `wg`) or take
    tiles in turn (pingpong): the value is the same in all of them, so more
    adds would only multiply it."""
    target: ast.Subscript = stmt.target
    name = tensor.name
    for index in target.indices:
        if isinstance(index, (ast.RangeSlice, ast.FullSlice, ast.NewAxis)):
            raise CompileError(index.span, f"a scalar is added to one element of '{name}': "
                                           "index every dimension by element")
    for operand in tile_operands(value):
        if not isinstance(operand, (ir.Literal, ir.ScalarValue)):
            raise CompileError(stmt.value.span, "the value added to one element is a scalar: "
                                                "literals, scalar parameters, tensor elements "
                                                "and scalars (c: f32 = ...)")
    if tensor.dtype not in STORABLE:
        raise CompileError(target.value.span, f"'{name}' is {tensor.dtype}, which has no "
                                              "red.global.add: a scalar is added to a tensor of "
                                              "f32, i32, bf16 or f16")
    index = tuple(scalar_expr(i, scope) for i in target.indices)
    named = set().union(*(builtins_in(e.expr) for e in tile_operands(value)
                          if isinstance(e, ir.ScalarValue)))
    _uniform(list(zip(index, target.indices)), "index")
    _uniform([(e.expr, stmt.value) for e in tile_operands(value)
              if isinstance(e, ir.ScalarValue)], "value")
    named |= set().union(*(builtins_in(i) for i in index))
    adding = threads if "wg" in named or scope.turns else running
    *leading, last = index
    return ir.GlobalRowStore(name, tuple(leading), last, None, value, 1, ir.Layout.EVERY_ROW,
                             adding, stmt.span, atomic=True)


def _uniform(exprs: list[tuple[ir.ScalarExpr | None, ast.Expr]], what: str) -> None:
    """Refuse a per-thread builtin other than `wg` in an index or added value."""
    for expr, where in exprs:
        lanes = builtins_in(expr) & DIVERGENT_BUILTINS - {"wg"} if expr is not None else set()
        if lanes:
            raise CompileError(where.span, f"this {what} names '{sorted(lanes)[0]}', which "
                                           "differs between the threads that run the "
                                           "statement; it may name wg (each warpgroup then "
                                           "writes its own)")


def lower_shared_row_store(stmt: ast.Assign, view: ViewInfo, scope: Scope,
                           warpgroups: int, threads: int) -> ir.SharedStore | None:
    """`sl = v` / `sl[wg] = v`: a register row vector (an expression of them and
    of loaded vectors) into a 1-D shared view of as many elements, row r to
    element r, each written by one thread that holds it (codegen/row_stores.py);
    None where the value names no row vector (a 1-D view's own element-wise store)."""
    if len(view.shape) != 1 or not _names_row_vector(stmt.value, scope):
        return None
    typed = lower_row_values(stmt.value, scope, warpgroups, True)
    layout, threads = _vector_layout(typed, scope, stmt, threads)
    name, rows = view.buffer.name, typed.shape[0]
    if rows != view.shape[0]:
        raise CompileError(stmt.span, f"a row vector of {rows} rows is stored to the "
                                      f"{view.shape[0]} elements of '{name}'; a view of as many "
                                      "elements takes it (sl[wg]: a warpgroup's block)")
    if typed.dtype is not None and typed.dtype is not view.buffer.dtype:
        raise CompileError(stmt.span, f"dtype mismatch: the value is {typed.dtype} but '{name}' "
                                      f"is {view.buffer.dtype}; convert it explicitly, e.g. "
                                      f"{view.buffer.dtype}(...)")
    value = row_operands(typed.expr, layout, (rows,), threads,
                         lambda n: scope.lookup(n, stmt.span), stmt.span)
    store = ir.SharedStore(view.view, value, stmt.span, layout, threads)
    check_store_reads(store, lambda n: scope.lookup(n, stmt.span))
    return store


def vector_into_tile(stmt: ast.Assign, view: ViewInfo, scope: Scope,
                     warpgroups: int) -> CompileError | None:
    """Where a value refused as a tile's is a row vector's and the shared view is
    not 1-D: the shape mismatch (a better report than the operand that failed)."""
    if len(view.shape) == 1 or not _names_row_vector(stmt.value, scope):
        return None
    try:
        typed = lower_row_values(stmt.value, scope, warpgroups, True)
    except CompileError:
        return None
    if typed.shape is None or len(typed.shape) != 1:
        return None
    name, rows = view.buffer.name, typed.shape[0]
    return CompileError(stmt.span, f"shape mismatch: the value is a row vector of {rows} rows "
                                   f"but '{name}' is {list(view.shape)}; a row vector is "
                                   f"stored to a 1-D view of as many elements (shared {name}: "
                                   f"{view.buffer.dtype}[{rows}])")


def _names_row_vector(value: ast.Expr, scope: Scope) -> bool:
    return any(_is_row_vector(node, scope) for node in ast.walk(value))


def _is_row_vector(node, scope: Scope) -> bool:
    """A register row vector's name, a row reduction or a loaded vector's name, in
    an expression's AST."""
    if isinstance(node, ast.Call):
        return node.func in ROW_REDUCTIONS
    if isinstance(node, ast.Name) and node.id in scope.names_of(TileSymbol):
        return scope.lookup(node.id, node.span).layout in _VECTORS
    return isinstance(node, ast.Name) and node.id in scope.names_of(VectorSymbol)


def _vector_layout(typed, scope: Scope, stmt: ast.Assign,
                   running: int) -> tuple[ir.Layout, int]:
    """The layout and threads of the first row vector the value computes from; of
    a value of loaded vectors alone, a register copy's (`running` threads)."""
    for e in tile_operands(typed.expr):
        if isinstance(e, ir.TileRef):
            symbol = scope.lookup(e.name, stmt.span)
            if isinstance(symbol, TileSymbol) and symbol.layout in _VECTORS:
                return symbol.layout, symbol.threads
        if isinstance(e, ir.RowReduce):
            tile = scope.lookup(e.name, stmt.span)
            return (ir.Layout.ROWS if e.partials is None else ir.Layout.EVERY_ROW), tile.threads
    loaded = any(isinstance(e, ir.GlobalVector) or isinstance(e, ir.SharedRead) and
                 e.broadcast == "rows" for e in tile_operands(typed.expr))
    if loaded and typed.shape is not None and len(typed.shape) == 1:
        if typed.shape[0] > MAX_EVERY_ROW:
            raise CompileError(stmt.value.span, f"a row vector's store takes at most "
                                                f"{MAX_EVERY_ROW} rows; this value has "
                                                f"{typed.shape[0]}")
        return register_vector_layout(running, typed.shape[0]), running
    if typed.shape is not None and len(typed.shape) == 2:
        raise CompileError(stmt.value.span, "the value stored to a tensor is a register row "
                                            "vector (m: f32[64] = rowmax(s)) or an expression "
                                            "of them; tiles are stored through shared memory "
                                            "(tma), or added by rows and columns: "
                                            "T[R0 : R1, C0 : C1] += acc")
    raise CompileError(stmt.value.span, "the value names no row vector: store a register row "
                                        "vector (m: f32[64] = rowmax(s)), a loaded vector (t: "
                                        "f32[BM] = T[tile.m]) or an expression of them; "
                                        "a scalar is added to one element: T[i, j] += s")
