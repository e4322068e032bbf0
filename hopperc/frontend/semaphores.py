"""`signal F[i, ...]` and `wait F[i, ...] >= n`: flags in global memory that
blocks hand work to each other through (ir.Signal, ir.Wait), as a stream-K
fix-up or a "last block finishes" reduction needs.

`F` is an i32 tensor the kernel is given zeroed; each index is an integer
expression the whole block shares. `signal` adds 1 to the flag once every
global write of the block before it is visible to any block that sees the
new value; `wait` returns once the flag holds at least `n`, and makes visible
what the signals it observed released. The statements stand in code the whole
block runs (no roles: the compiler's barrier is the block's), outside `manual`
code, and not in a cluster (a cluster's blocks are one scheduling unit the
simulator runs together, and nothing here orders one cluster's waits).

`n: i32 = signal F[i]` is a counter (ir.Count): the same release, and `n` the
flag's value before this block's add (as CUDA's atomicInc and Triton's
atomic_add return it), the same in every thread of the block, so that
`if n == PARTS - 1 { ... }` runs the last arriving block's finishing code."""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.frontend import ast
from hopperc.frontend.scope import DIVERGENT_BUILTINS, ScalarSymbol, Scope, scalar_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in
from hopperc.ir.dtypes import DType


def lower_signal(stmt: ast.Signal | ast.Wait, scope: Scope, role: ir.RoleInfo | None,
                 manual: bool, divergent, cluster: tuple[int, ...]
                 ) -> ir.Signal | ir.Wait | ir.Count:
    what = "signal" if isinstance(stmt, ast.Signal) else "wait"
    if manual:
        raise CompileError(stmt.span, f"'{what}' is automatic code: the compiler writes its "
                                      "barrier and fences; write it outside 'manual'")
    if role is not None:
        raise CompileError(stmt.span, f"'{what}' stands in code the whole block runs: in a "
                                      f"role ('{role.name}') the compiler has no barrier of "
                                      "the block to release or acquire for it")
    if divergent is not None:
        raise CompileError(stmt.span, f"'{what}' is under a condition that differs between "
                                      "the block's threads: its barrier needs them all")
    if any(n > 1 for n in cluster):
        raise CompileError(stmt.span, f"'{what}' is not available in a kernel with clusters")
    tensor, index = _flag(stmt.flag, scope, what)
    if isinstance(stmt, ast.Signal) and stmt.result is not None:
        if DType.parse(stmt.dtype) is not DType.I32:
            raise CompileError(stmt.span, f"a counter's value is i32, not {stmt.dtype}: "
                                          "'n: i32 = signal F[i]'")
        count = ir.Count(tensor, index, f"count_{stmt.result}_{stmt.span.line}", stmt.span)
        scope.declare(stmt.result, ScalarSymbol(
            DType.I32, ir.Scalar(ir.ScalarKind.CARRIED, count.result), stmt.span), stmt.span)
        return count
    if isinstance(stmt, ast.Signal):
        return ir.Signal(tensor, index, stmt.span)
    count = scalar_expr(stmt.count, scope)
    _uniform(count, stmt.count)
    return ir.Wait(tensor, index, count, stmt.span)


def _flag(target: ast.Expr, scope: Scope, what: str) -> tuple[str, tuple[ir.ScalarExpr, ...]]:
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
        raise CompileError(target.span, f"'{what}' takes a flag: an element of an i32 tensor, "
                                        "F[i]")
    tensor = scope.lookup(target.value.id, target.value.span)
    if not isinstance(tensor, ir.TensorParam):
        raise CompileError(target.value.span, f"'{target.value.id}' is not a tensor: '{what}' "
                                              "takes an element of an i32 tensor, F[i]")
    if tensor.dtype is not DType.I32:
        raise CompileError(target.value.span, f"'{tensor.name}' is {tensor.dtype}: flags are "
                                              "i32 elements (red.release.gpu.global.add.s32)")
    if len(target.indices) != len(tensor.dims):
        raise CompileError(target.span, f"'{tensor.name}' has rank {len(tensor.dims)}: a flag "
                                        "takes one index per dimension")
    index = []
    for i in target.indices:
        if isinstance(i, (ast.RangeSlice, ast.FullSlice, ast.NewAxis)):
            raise CompileError(i.span, "a flag is one element: index each dimension by an "
                                       "integer")
        index.append(scalar_expr(i, scope))
        _uniform(index[-1], i)
    return tensor.name, tuple(index)


def _uniform(expr: ir.ScalarExpr, where: ast.Expr) -> None:
    names = builtins_in(expr) & DIVERGENT_BUILTINS
    if names:
        raise CompileError(where.span, f"this names '{sorted(names)[0]}', which differs "
                                       "between the block's threads: a flag and its count are "
                                       "the block's")
