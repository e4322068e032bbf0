"""`T[..., R0 : R1, C0 : C1] += acc`: a warpgroup's register tile added to global
memory (ir.GlobalRowStore with `columns`, the row vector's add extended to two
dimensions). Element (r, c) of the [64, N] tile goes to element (R0 + r, C0 + c)
of T's last two dimensions, skipped at or past R1 / C1 and outside the tensor;
the dimensions before them take one element index each.

Each thread adds the elements it holds in the wgmma accumulator layout (PTX ISA,
wgmma "Register Fragments": slots 2i and 2i + 1 of a thread are adjacent columns
of one row), so code generation pairs them into one `red.global.add.v2.f32`
(vector red: .global only, sm_90, the address aligned to the vector's 8 bytes)
or `red.global.add.noftz.bf16x2` / `.f16x2` (4 bytes), and adds a pair that
straddles the ragged end or is misaligned one element at a time."""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.frontend import ast
from hopperc.frontend.rows import row_operands
from hopperc.frontend.scope import DIVERGENT_BUILTINS, Scope, TileSymbol, scalar_expr
from hopperc.frontend.tiles import lower_tile_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, tile_operands
from hopperc.ir.dtypes import DType

# What red.global.add takes in pairs (.v2.f32, .noftz.bf16x2 / .f16x2).
ADDABLE = (DType.F32, DType.BF16, DType.F16)


def is_tile_add(stmt: ast.Assign) -> bool:
    """`+=` into a tensor whose last two indices are both START : END."""
    indices = stmt.target.indices
    return stmt.op == "+=" and len(indices) >= 2 and \
        all(isinstance(i, ast.RangeSlice) for i in indices[-2:])


def sliced_last(target: ast.Subscript, tensor: ir.TensorParam, sliced: int,
                the_last: str) -> list[ast.Expr]:
    """A store's or add's indices into `tensor`: one per dimension, the last
    `sliced` as `the_last` says, the others element indices (refused otherwise)."""
    name = tensor.name
    if len(target.indices) != len(tensor.dims):
        raise CompileError(target.span, f"'{name}' has rank {len(tensor.dims)}: give one index "
                                        f"per dimension, {the_last}")
    for index in target.indices[:-sliced]:
        if isinstance(index, (ast.RangeSlice, ast.FullSlice, ast.NewAxis)):
            dims = "dimension of '{0}' takes" if sliced == 1 else "two dimensions of '{0}' take"
            raise CompileError(index.span, f"only the last {dims.format(name)} a slice "
                                           "START : END; index the others by element")
    return list(target.indices)


def lower_tile_add(stmt: ast.Assign, scope: Scope, warpgroups: int) -> ir.GlobalRowStore:
    target: ast.Subscript = stmt.target
    tensor: ir.TensorParam = scope.lookup(target.value.id, target.value.span)
    name = tensor.name
    *leading, rows_slice, cols_slice = sliced_last(target, tensor, 2, "the last two START : END "
                                                  "(rows, columns)")
    if tensor.dtype not in ADDABLE:
        raise CompileError(target.value.span, f"'{name}' is {tensor.dtype}: a register tile is "
                                              "added (red.global.add) to a tensor of f32, bf16 "
                                              "or f16")
    typed = lower_tile_expr(stmt.value, scope, warpgroups)
    symbol = _accumulator(typed, scope, stmt)
    if typed.shape != symbol.shape:
        raise CompileError(stmt.value.span, f"shape mismatch: the value is "
                                            f"{list(typed.shape or ())} but '"
                                            f"{_first_tile(typed)}' is {list(symbol.shape)}")
    if typed.dtype is not tensor.dtype:
        raise CompileError(stmt.span, f"dtype mismatch: the value is {typed.dtype} but '{name}' "
                                      f"is {tensor.dtype}; convert it explicitly, e.g. "
                                      f"{tensor.dtype}(...)")
    value = row_operands(typed.expr, ir.Layout.WGMMA, symbol.shape, symbol.threads,
                         lambda n: scope.lookup(n, stmt.span), stmt.span)
    row_start, row_end = scalar_expr(rows_slice.start, scope), scalar_expr(rows_slice.stop, scope)
    start, end = scalar_expr(cols_slice.start, scope), scalar_expr(cols_slice.stop, scope)
    index = tuple(scalar_expr(i, scope) for i in leading)
    checked = [(row_start, rows_slice), (row_end, rows_slice), (start, cols_slice),
               (end, cols_slice), *zip(index, leading)]
    for expr, where in checked:
        lanes = builtins_in(expr) & DIVERGENT_BUILTINS - {"wg"}
        if lanes:
            raise CompileError(where.span, f"this index names '{sorted(lanes)[0]}', which "
                                           "differs between the threads that hold the tile; "
                                           "it may name wg (each warpgroup adds its own tile)")
    rows, columns = symbol.shape
    return ir.GlobalRowStore(name, index, start, end, value, rows, ir.Layout.WGMMA,
                             symbol.threads, stmt.span, atomic=True, columns=columns,
                             row_start=row_start, row_end=row_end)


def _first_tile(typed) -> str:
    return next(e.name for e in tile_operands(typed.expr) if isinstance(e, ir.TileRef))


def _accumulator(typed, scope: Scope, stmt: ast.Assign) -> TileSymbol:
    """The register tile the value computes from, which must lie in the wgmma
    accumulator layout (a warpgroup's [64, N] tile): the pairs of adjacent
    columns each thread adds."""
    tiles = [e for e in tile_operands(typed.expr) if isinstance(e, ir.TileRef)]
    if not tiles or typed.shape is None or len(typed.shape) != 2:
        raise CompileError(stmt.value.span, "'+=' into a tensor's rows and columns adds a "
                                            "warpgroup's register tile (acc: f32[64, N]) or an "
                                            "expression of it")
    for ref in tiles:
        symbol = scope.lookup(ref.name, stmt.span)
        if not isinstance(symbol, TileSymbol) or symbol.layout is not ir.Layout.WGMMA:
            raise CompileError(stmt.value.span, f"'{ref.name}' is not in the wgmma accumulator "
                                                "layout: a tile added to a tensor is a "
                                                "warpgroup's [64, N] register tile (N a multiple "
                                                "of 8), whose threads hold pairs of adjacent "
                                                "columns")
    return scope.lookup(tiles[0].name, stmt.span)
