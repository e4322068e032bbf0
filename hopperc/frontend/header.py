"""The kernel header: parameters, tile constants, the grid and the roles,
checked and turned into IR in the order later declarations need them."""
from __future__ import annotations

from hopperc.diagnostics import CompileError, Span
from hopperc.ir.dtypes import DType
from hopperc.frontend import ast, limits
from hopperc.frontend.literals import check_int32
from hopperc.frontend.scope import Scope, const_value, did_you_mean, is_const, scalar_expr
from hopperc.ir import nodes as ir
from hopperc.ir.elements import tensor_elements_in
from hopperc.ir.index_algebra import names
from hopperc.runtime.launch_rules import EXTENT_OPS

DEFAULT_THREADS = 128  # a block without `threads` or roles

def params(kernel: ast.Kernel, scope: Scope, consts: dict[str, int]):
    """Tensor and scalar parameters, declared in `scope` with their dimensions. A
    dimension that names a tile constant is that constant (`D: bf16[L, HEAD_DIM]`
    with `-D HEAD_DIM=64`): a compile-time size, as an integer dimension."""
    tensors, scalars = [], []
    for p in kernel.params:
        if isinstance(p, ast.ScalarParam):
            sym = ir.ScalarParam(p.name, DType.parse(p.dtype), p.span)
            if sym.dtype not in (DType.F32, DType.I32):
                raise CompileError(p.span, f"scalar parameter '{p.name}' is {sym.dtype}; "
                                           "scalar parameters are f32 or i32")
            scalars.append(sym)
            scope.declare(p.name, sym, p.span)
            continue
        dims: list[str | int] = []
        for d in p.dims:
            if isinstance(d, ast.IntLit):
                dims.append(d.value)
                continue
            if d.id in consts:
                if consts[d.id] < 1:
                    raise CompileError(d.span, f"dimension '{d.id}' of '{p.name}' is the tile "
                                               f"constant {d.id} = {consts[d.id]}; a "
                                               "dimension must be at least 1")
                dims.append(consts[d.id])
                continue
            dims.append(d.id)
            if d.id not in scope.dims:
                scope.dims.add(d.id)
                scope.declare(d.id, "dim", d.span)
        sym = ir.TensorParam(p.name, DType.parse(p.dtype), tuple(dims), p.span)
        tensors.append(sym)
        scope.declare(p.name, sym, p.span)
    return tuple(tensors), tuple(scalars)


def consts(kernel: ast.Kernel, defines: dict[str, int],
           scope: Scope) -> tuple[tuple[str, int], ...]:
    """Tile constants, `-D` overrides applied, declared in `scope`."""
    declared = {c.name for c in kernel.consts}
    for name in defines:
        if name not in declared:
            raise CompileError(None, f"-D {name}: the kernel has no tile constant '{name}'"
                                     f"{did_you_mean(name, declared)} (it has: "
                                     f"{', '.join(sorted(declared)) or 'none'})")
    values = []
    for c in kernel.consts:
        value = defines.get(c.name)
        if value is not None:
            check_int32(value, None, f"-D {c.name}")
        else:
            value = const_value(c.value, scope, f"tile constant '{c.name}'")
        if value < 0:  # 0 is a flag's off (CAUSAL = 0); a size of 0 is refused where used
            raise CompileError(c.span, f"tile constant '{c.name}' must not be negative, not "
                                       f"{value}")
        scope.declare(c.name, value, c.span)
        values.append((c.name, value))
    return tuple(values)


def grid(kernel: ast.Kernel, scope: Scope) -> tuple[ir.GridAxis, ...]:
    """The grid axes, each with its extent: every axis is declared first, so that
    the faster axes' extents of a ragged grid may read `tile.<the last axis>`."""
    if len(kernel.grid) > 3:
        raise CompileError(kernel.grid[3].span, "a grid has at most 3 axes")
    for g in kernel.grid:
        if g.name in scope.grid_axes:
            raise CompileError(g.span, f"grid axis '{g.name}' is already declared")
        scope.grid_axes[g.name] = g.span
    return tuple(ir.GridAxis(g.name, _grid_extent(g, kernel, scope), g.span)
                 for g in kernel.grid)


def roles(kernel: ast.Kernel) -> tuple[ir.RoleInfo, ...]:
    """Roles laid out on consecutive warps (budgeted roles padded to warpgroups)."""
    roles, warp = [], 0
    decls = [s for s in kernel.body.stmts if isinstance(s, ast.Role)]
    budgeted = [r.regs is not None for r in decls]
    if any(budgeted) and not all(budgeted):
        bare = next(r for r in decls if r.regs is None)
        raise CompileError(bare.span, f"role '{bare.name}' has no register budget; when one "
                                      "role sets 'regs', every role must (setmaxnreg is per "
                                      "warpgroup)")
    seen: dict[str, Span] = {}
    for r in decls:
        if r.name in seen:
            raise CompileError(r.span, f"role '{r.name}' is already declared (first "
                                       f"declared at {seen[r.name]})")
        seen[r.name] = r.span
        if r.count < 1:
            raise CompileError(r.span, f"role '{r.name}' has no warps; give it at least one")
        active = r.count * (4 if r.unit == "warpgroup" else 1)
        # setmaxnreg applies to whole warpgroups: pad a budgeted role to one.
        warps = -(-active // 4) * 4 if r.regs is not None else active
        info = ir.RoleInfo(r.name, warp, warps, active, r.regs, r.span)
        limits.check_role_registers(info)
        roles.append(info)
        warp += warps
    if any(budgeted):
        limits.check_register_file(tuple(roles), kernel.span)
    return tuple(roles)


def _check_extent_ops(expr: ir.ScalarExpr, span: Span) -> None:
    if isinstance(expr, ir.ScalarOp):
        if expr.op not in EXTENT_OPS:
            raise CompileError(span, f"a grid extent is integer arithmetic (+ - * / %), not "
                                     f"'{expr.op}'")
        _check_extent_ops(expr.left, span)
        _check_extent_ops(expr.right, span)


def _grid_extent(g: ast.GridDim, kernel: ast.Kernel, scope: Scope) -> ir.ScalarExpr:
    """A positive integer expression of dimensions, tile constants and i32 scalar
    parameters; in a ragged grid, of tensor elements and (but for the last
    axis) `tile.<last axis>` too (ir/raster.py)."""
    extent = scalar_expr(g.extent, scope, builtins=frozenset())
    _check_extent_ops(extent, g.extent.span)
    if is_const(extent) and extent.value < 1:
        raise CompileError(g.extent.span, f"a grid extent must be positive, not {extent.value}")
    tiles = names(extent, ir.ScalarKind.TILE)
    reads_data = next(tensor_elements_in(extent), None) is not None
    if not tiles and not reads_data:
        return extent
    slowest = kernel.grid[-1]
    if g is slowest and tiles:
        raise CompileError(g.extent.span, "the last grid axis's extent cannot read tile "
                                          "coordinates; the faster axes' extents may read "
                                          f"tile.{slowest.name}")
    if tiles - {slowest.name}:
        raise CompileError(g.extent.span, f"a grid extent may read only tile.{slowest.name}, "
                                          "the last (slowest) axis")
    if not kernel.persistent:
        varies = f"varies with tile.{slowest.name}" if tiles else "reads tensor elements"
        raise CompileError(g.extent.span, (
            f"this extent {varies} (a ragged grid): only a persistent kernel walks such a "
            "grid; add 'persistent', or use a static bound and skip the tiles past the end "
            "with a condition"))
    return extent


