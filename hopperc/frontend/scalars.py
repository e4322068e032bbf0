"""Scalar declarations: `n: i32 = OFFS[g + 1] - OFFS[g]`, `s: f32 = SB[tile.n, k]`.

A declared scalar is immutable and has no storage of its own: its uses are its
expression (an element read is evaluated where it is used, see TensorElement).
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast
from hopperc.frontend.scope import Scope, ScalarSymbol, scalar_expr
from hopperc.frontend.tiles import lower_tile_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import tile_operands


def scalar_decl(decl: ast.ScalarDecl, scope: Scope, warpgroups: int) -> ScalarSymbol:
    dtype = DType.parse(decl.dtype)
    if dtype is DType.I32:
        return ScalarSymbol(dtype, scalar_expr(decl.value, scope), decl.span)
    if dtype is not DType.F32:
        raise CompileError(decl.span, f"a scalar is i32 or f32, not {dtype}")
    typed = lower_tile_expr(decl.value, scope, warpgroups)
    if typed.shape is not None or not all(isinstance(e, (ir.Literal, ir.ScalarValue))
                                          for e in tile_operands(typed.expr)):
        raise CompileError(decl.value.span, "an f32 scalar is computed from scalars: literals, "
                                            "scalar parameters, tensor elements and other "
                                            "scalars")
    return ScalarSymbol(dtype, typed.expr, decl.span)
