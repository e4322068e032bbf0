"""`T[i, START : END] = v` and `T[i, j] = v`: a register row vector stored to
global memory (ir.GlobalRowStore). Row r of `v` goes to element START + r of
T's last dimension (the box form: element j * len + r), elements at or past END
and past the tensor's extent are skipped; the other dimensions take one element
index each. `v` is a row vector (Layout.ROWS or EVERY_ROW) or an expression of
them, of T's dtype (converted explicitly: `bf16(lse)`).

`T[...] += v` adds instead (ir.GlobalRowStore.atomic): each storing lane's
`red.global.add` (PTX ISA, `red`: .f32, .s32, and .noftz .bf16 / .f16, the
latter two on sm_90 / sm_70 and later; relaxed, .gpu scope by default), so
blocks and warpgroups may add to the same elements in any order. No vector
form is used: one lane holds one row (`.v2`/`.v4` exist for .f32 and for the
packed 16-bit types, on consecutive elements of one thread)."""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast
from hopperc.frontend.rows import row_operands
from hopperc.frontend.scope import DIVERGENT_BUILTINS, Scope, TileSymbol, scalar_expr
from hopperc.frontend.tiles import lower_tile_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, tile_operands

# What st.global writes from a register: a 4-byte or 2-byte value.
STORABLE = (DType.F32, DType.I32, DType.BF16, DType.F16)
_VECTORS = (ir.Layout.ROWS, ir.Layout.EVERY_ROW)


def is_tensor_target(target: ast.Expr, scope: Scope) -> bool:
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
        isinstance(scope.lookup(target.value.id, target.value.span), ir.TensorParam)


def lower_row_store(stmt: ast.Assign, scope: Scope, warpgroups: int) -> ir.GlobalRowStore:
    target: ast.Subscript = stmt.target
    tensor: ir.TensorParam = scope.lookup(target.value.id, target.value.span)
    name = tensor.name
    if len(target.indices) != len(tensor.dims):
        raise CompileError(target.span, f"'{name}' has rank {len(tensor.dims)}: give one index "
                                        "per dimension, the last one START : END (elements) or "
                                        "a block of the vector's length")
    *leading, last = target.indices
    for index in leading:
        if isinstance(index, (ast.RangeSlice, ast.FullSlice, ast.NewAxis)):
            raise CompileError(index.span, f"only the last dimension of '{name}' takes a slice "
                                           "START : END; index the others by element")
    typed = lower_tile_expr(stmt.value, scope, warpgroups)
    # A value with a row vector in it is one: a tile or a broadcast beside it
    # would have been refused as a shape mismatch.
    layout, threads = _vector_layout(typed.expr, scope, stmt)
    rows = typed.shape[0]
    value = row_operands(typed.expr, layout, (rows,), threads,
                         lambda n: scope.lookup(n, stmt.span), stmt.span)
    if tensor.dtype not in STORABLE:
        verb = "added (red.global.add)" if stmt.op == "+=" else "stored"
        raise CompileError(target.value.span, f"'{name}' is {tensor.dtype}: a row vector is "
                                              f"{verb} to a tensor of f32, bf16, f16 or i32")
    if typed.dtype is not tensor.dtype:
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
    for expr, where in [(start, last), (end, last), *zip(index, leading)]:
        lanes = builtins_in(expr) & DIVERGENT_BUILTINS - {"wg"} if expr is not None else set()
        if lanes:
            raise CompileError(where.span, f"this index names '{sorted(lanes)[0]}', which "
                                           "differs between the threads that hold the vector; "
                                           "it may name wg (each warpgroup stores its own rows)")
    return ir.GlobalRowStore(name, index, start, end, value, rows, layout, threads, stmt.span,
                             atomic=stmt.op == "+=")


def _vector_layout(expr: ir.TileExpr, scope: Scope, stmt: ast.Assign) -> tuple[ir.Layout, int]:
    """The layout and threads of the first row vector `expr` computes from."""
    for e in tile_operands(expr):
        if isinstance(e, ir.TileRef):
            symbol = scope.lookup(e.name, stmt.span)
            if isinstance(symbol, TileSymbol) and symbol.layout in _VECTORS:
                return symbol.layout, symbol.threads
        if isinstance(e, ir.RowReduce):
            tile = scope.lookup(e.name, stmt.span)
            return (ir.Layout.ROWS if e.partials is None else ir.Layout.EVERY_ROW), tile.threads
    raise CompileError(stmt.value.span, "the value stored to a tensor is a register row vector "
                                        "(m: f32[64] = rowmax(s)) or an expression of them; "
                                        "tiles are stored through shared memory (tma)")

