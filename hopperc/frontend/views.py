"""Views of shared buffers as statements name them: `buf`, `buf[wg]` (a
warpgroup's rows), `buf[i]` (a plane of a rank-3+ buffer) and `buf^T`, with
their logical shapes; and the rule that several warpgroups touch only their own
rows element-wise."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import CompileError, Span
from hopperc.frontend import ast
from hopperc.frontend.bounds import check_index
from hopperc.frontend.scope import Scope, scalar_expr
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, warpgroup_offset


@dataclass(frozen=True)
class ViewInfo:
    view: ir.BufferView
    buffer: ir.SharedBuffer
    shape: tuple[int, ...]  # logical shape of the view (after part and transpose)


def buffer_view(expr: ast.Expr, scope: Scope, warpgroups: int) -> ViewInfo | None:
    """`buf`, `buf[wg]`, `buf[i]` (rank >= 3) or any of them `^T`; None if not a
    buffer (`buf^T[wg]`, a product's A only, is refused: frontend/mma.py)."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Transpose) and \
            isinstance(name := expr.value.value, ast.Name) and \
            isinstance(scope.lookup(name.id, name.span), ir.SharedBuffer):
        raise CompileError(expr.span, f"{name.id}^T[wg] (a warpgroup's columns of "
                                      f"'{name.id}') is only a product's A, MN-major "
                                      "(each warpgroup's M of a [K, M] buffer)")
    transposed = isinstance(expr, ast.Transpose)
    inner = expr.value if transposed else expr
    index = None
    if isinstance(inner, ast.Subscript):
        index, inner = inner, inner.value
    if not isinstance(inner, ast.Name):
        return None
    symbol = scope.lookup(inner.id, inner.span)
    if not isinstance(symbol, ir.SharedBuffer):
        return None
    shape, part = symbol.shape, None
    if index is not None:
        if len(index.indices) != 1:
            raise CompileError(index.span, "a shared buffer takes one index: buf[wg] or buf[i]")
        idx = index.indices[0]
        if len(shape) >= 3:
            part = ir.ViewPart(scalar_expr(idx, scope), shape[0])
            check_index(part.index, shape[0], scope.loop_ranges, warpgroups, idx.span,
                        f"'{symbol.name}'", "parts along its first axis")
            _check_warpgroup_planes(part.index, warpgroups, symbol.name, idx.span)
            shape = shape[1:]
        elif isinstance(idx, ast.Name) and idx.id == "wg":
            if warpgroups < 1:
                raise CompileError(idx.span, "'wg' is only available in warpgroup roles")
            if shape[0] % warpgroups:
                raise CompileError(idx.span, f"{shape[0]} rows of '{symbol.name}' do not split "
                                             f"evenly over {warpgroups} warpgroups")
            part = ir.ViewPart(ir.Scalar(ir.ScalarKind.BUILTIN, "wg"), warpgroups)
            shape = (shape[0] // warpgroups, *shape[1:])
        else:
            raise CompileError(idx.span, f"'{symbol.name}' has rank {len(shape)}: index it with "
                                         "wg (a warpgroup's rows), or give it a leading axis")
    if transposed:
        if len(shape) != 2:
            raise CompileError(expr.span, "only a 2-D view can be transposed")
        shape = (shape[1], shape[0])
    return ViewInfo(ir.BufferView(symbol.name, None, part, transposed, symbol.reuses), symbol,
                    shape)


def _check_warpgroup_planes(index: ir.ScalarExpr, warpgroups: int, name: str, span: Span):
    """A plane index naming wg gives each warpgroup its own plane: `c + wg`, c a
    multiple of the warpgroups, so planes of different offsets never meet."""
    if "wg" not in builtins_in(index):
        return
    offset = warpgroup_offset(index)
    if offset is None or offset % max(warpgroups, 1):
        raise CompileError(span, f"a plane of '{name}' per warpgroup is '{name}[c + wg]' with "
                                 f"c a constant multiple of the {warpgroups} warpgroups")


def require_warpgroup_view(view: ViewInfo, warpgroups: int, span: Span) -> None:
    """With several warpgroups, each holds its own tiles: element-wise shared access
    must say whose rows it touches (buf[wg]), or warpgroups would race on one buffer."""
    part = view.view.part
    own_rows = part is not None and warpgroup_offset(part.index) is not None
    if warpgroups > 1 and not own_rows:
        raise CompileError(span, f"{warpgroups} warpgroups each hold their own tiles; read or "
                                 f"write this warpgroup's rows with {view.buffer.name}[wg]")
