"""wgmma products: operand kinds, dtypes, shapes and where they may run."""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType, Swizzle
from hopperc.frontend import ast, limits
from hopperc.frontend.scope import Scope, TileSymbol
from hopperc.frontend.views import ViewInfo, buffer_view
from hopperc.ir import nodes as ir

# f32 operands run as .tf32: the tensor cores read the f32 bits at tf32 precision.
MMA_INPUT_TYPES = {DType.BF16, DType.F16, DType.E4M3, DType.E5M2, DType.F32}


def lower_mma(acc: str, acc_symbol: TileSymbol, product: ast.BinOp, accumulate: bool,
              scope: Scope, role: ir.RoleInfo | None, warpgroups: int, span: Span) -> ir.Mma:
    """`acc (+)= a @ b`: A from shared memory (SS) or registers (RS), B from shared memory."""
    if warpgroups < 1:
        raise CompileError(span, "wgmma runs on whole warpgroups; run it in a 'warpgroup' role "
                                 "(or a block of 128 threads or more)")
    if role is not None:
        limits.check_wgmma_role_start(role, span)
    if acc_symbol.dtype is not DType.F32:
        raise CompileError(span, f"accumulator '{acc}' is {acc_symbol.dtype}; wgmma "
                                 "accumulates in f32")
    a, a_dtype, a_shape, a_buffer = _operand_a(product.left, scope, warpgroups)
    b_view = buffer_view(product.right, scope, warpgroups)
    if b_view is None:
        raise CompileError(product.right.span, "wgmma's B operand must be a shared buffer")
    b_dtype = b_view.buffer.dtype
    for shape, operand in ((a_shape, product.left), (b_view.shape, product.right)):
        if len(shape) != 2:
            raise CompileError(operand.span, f"wgmma operands are 2-D, but this one has shape "
                                             f"{_shape(shape)}")
    for dtype, operand in ((a_dtype, product.left), (b_dtype, product.right)):
        if dtype not in MMA_INPUT_TYPES:
            raise CompileError(operand.span, f"wgmma takes bf16, f16, fp8 or f32 (as tf32) "
                                             f"inputs, not {dtype}")
    if a_dtype.is_fp8 != b_dtype.is_fp8 or (not a_dtype.is_fp8 and a_dtype is not b_dtype):
        raise CompileError(product.span, f"dtype mismatch: wgmma operands are {a_dtype} and "
                                         f"{b_dtype}")
    # PTX ISA, wgmma: only .f16/.bf16 take the transpose immediates; the other
    # input types read both operands K-major.
    if a_dtype.nbytes != 2 and (not b_view.view.transposed
                                or (isinstance(a, ir.BufferView) and a.transposed)):
        kind = "fp8" if a_dtype.is_fp8 else "tf32"
        raise CompileError(product.span, f"{kind} wgmma needs K-major operands: a as [M, K] "
                                         "and b^T from a [N, K] buffer")
    m, k = a_shape
    k_b, n = b_view.shape
    if k != k_b:
        raise CompileError(product.span, f"shape mismatch: A is {m}x{k} but B is {k_b}x{n} "
                                         "(the K dimensions differ)")
    if acc_symbol.shape != (m, n):
        raise CompileError(product.span, f"shape mismatch: {m}x{k} @ {k_b}x{n} gives {m}x{n}, "
                                         f"but '{acc}' is {acc_symbol.shape[0]}x"
                                         f"{acc_symbol.shape[1]}")
    limits.check_wgmma((m, n, k), a_dtype, product.span)
    if a_buffer is not None:
        limits.check_wgmma_shared_operand(a_buffer, "A", not a.transposed,
                                          product.left.span)
    elif a_dtype is DType.F32:
        raise CompileError(product.left.span, "a register A operand must be bf16, f16 or fp8; "
                                              "tf32 wgmma reads A from shared memory")
    limits.check_wgmma_shared_operand(b_view.buffer, "B", b_view.view.transposed,
                                      product.right.span)
    return ir.Mma(acc, a, b_view.view, accumulate, (m, n, k), span)


def _operand_a(expr: ast.Expr, scope: Scope, warpgroups: int):
    if isinstance(expr, ast.Name):
        symbol = scope.lookup(expr.id, expr.span)
        if isinstance(symbol, TileSymbol):
            return ir.TileRef(expr.id), symbol.dtype, symbol.shape, None
    view = columns_view(expr, scope, warpgroups) or buffer_view(expr, scope, warpgroups)
    if view is None:
        raise CompileError(expr.span, "wgmma's A operand must be a shared buffer or a register "
                                      "tile")
    return view.view, view.buffer.dtype, view.shape, view.buffer


def columns_view(expr: ast.Expr, scope: Scope, warpgroups: int) -> ViewInfo | None:
    """`buf^T[wg]`: each warpgroup's rows of the transposed view, i.e. its block of
    the columns of a rank-2 buffer, as wgmma's MN-major A^T of a `[K, M]` buffer
    each warpgroup multiplies its M rows of (attention backward's dS^T, P^T).
    The blocks are whole column blocks of the swizzled layout (layout.column_blocks),
    so each is an MN-major operand of its own whose descriptor starts at its block."""
    if not (isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Transpose)):
        return None
    name = expr.value.value
    if not isinstance(name, ast.Name) or not isinstance(
            symbol := scope.lookup(name.id, name.span), ir.SharedBuffer):
        return None
    index = expr.indices[0] if len(expr.indices) == 1 else None
    if not (isinstance(index, ast.Name) and index.id == "wg") or len(symbol.shape) != 2:
        raise CompileError(expr.span, f"a transposed view takes one index, wg, on a rank-2 "
                                      f"buffer: {name.id}^T[wg] (each warpgroup's block of "
                                      f"'{name.id}''s columns)")
    if warpgroups < 1:
        raise CompileError(index.span, "'wg' is only available in warpgroup roles")
    rows, cols = symbol.shape
    width = cols // warpgroups * symbol.dtype.nbytes
    if cols % warpgroups or (symbol.swizzle is not Swizzle.NONE and width % symbol.swizzle.span):
        raise CompileError(index.span, f"{cols} columns of '{name.id}' do not split into "
                                       f"{warpgroups} warpgroups' blocks of whole "
                                       f"{symbol.swizzle.span}-byte swizzle spans")
    part = ir.ViewPart(ir.Scalar(ir.ScalarKind.BUILTIN, "wg"), warpgroups, columns=True)
    return ViewInfo(ir.BufferView(symbol.name, None, part, True, symbol.reuses), symbol,
                    (cols // warpgroups, rows))


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(x) for x in shape) + "]"
