"""TMA and bulk copies: direction, box shape, coordinates and limits."""
from __future__ import annotations

from hopperc.diagnostics import CompileError
from hopperc.frontend import ast, limits
from hopperc.frontend.bounds import check_index
from hopperc.frontend.scope import Scope, did_you_mean, scalar_expr
from hopperc.frontend.views import ViewInfo, buffer_view
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import builtins_in, copy_indices
from hopperc.ir.layout import column_blocks, copy_box
from hopperc.runtime import ragged_view


def lower_copy(stmt: ast.Copy, scope: Scope, warpgroups: int, manual: bool):
    """`tma buf <- T[i, j]` loads, `tma T[i, j] <- buf` stores; indices count boxes."""
    dst_view = buffer_view(stmt.dst, scope, warpgroups)
    src_view = buffer_view(stmt.src, scope, warpgroups)
    if dst_view is not None and src_view is None:
        view, tensor_expr, load = dst_view, stmt.src, True
    elif src_view is not None and dst_view is None:
        view, tensor_expr, load = src_view, stmt.dst, False
    else:
        raise CompileError(stmt.span, f"a {stmt.engine} copy moves a tile between a shared "
                                      "buffer and a global tensor: tma buf <- T[i, j] or "
                                      "tma T[i, j] <- buf")
    if stmt.reduce_add:
        _check_reduce_add(stmt, view.buffer, load)
    if view.view.transposed:
        raise CompileError(stmt.span, "a copy moves a buffer as it is laid out; remove ^T")
    tensor, indices = _tensor_ref(tensor_expr, scope)
    engine = ir.Engine.TMA if stmt.engine == "tma" else ir.Engine.BULK
    box = _box(stmt, view, tensor, engine)
    part = view.view.part
    limits.check_copy_alignment(view.buffer, None if part is None else part.count, stmt.engine,
                                stmt.span)
    ragged = _ragged_bound(indices, tensor, engine, scope)
    coords = tuple(_coordinate(i, b, scope) for i, b in zip(indices, box))
    if not manual:
        _check_issuer(stmt, view.view, coords + ((ragged.end,) if ragged else ()), load)
    barrier = _via(stmt, scope, manual, load)
    if load:
        nbytes = view.buffer.dtype.nbytes
        for extent in box:
            nbytes *= extent
        return ir.AsyncLoad(engine, view.view, tensor.name, coords, box, nbytes, barrier, stmt.span,
                            ragged=ragged)
    return ir.AsyncStore(engine, tensor.name, coords, box, view.view, stmt.span, ragged=ragged,
                         reduce_add=stmt.reduce_add)


# The element types cp.reduce.async.bulk.tensor adds (PTX ISA: .add takes .u32,
# .s32, .u64, .f32, .f16 and .bf16 tensors); fp8 tensor maps are bytes (UINT8).
REDUCE_ADD_DTYPES = (ir.DType.F32, ir.DType.F16, ir.DType.BF16, ir.DType.I32)


def _check_reduce_add(stmt: ast.Copy, buffer: ir.SharedBuffer, load: bool) -> None:
    """`tma T[i, j] += buf` adds a staged tile into a tensor of a type TMA adds."""
    if load:
        raise CompileError(stmt.span, "'+=' adds a shared tile into a global tensor: tma "
                                      "T[i, j] += buf (a load into shared memory is "
                                      "'tma buf <- T[i, j]')")
    if buffer.dtype not in REDUCE_ADD_DTYPES:
        names = ", ".join(d.text for d in REDUCE_ADD_DTYPES)
        raise CompileError(stmt.span, f"a TMA reduce-add adds {names} elements, not "
                                      f"{buffer.dtype} ('{buffer.name}'): reduce into a "
                                      "tensor of one of those types")


def _coordinate(index: ast.Expr, box: int, scope: Scope) -> ir.ScalarExpr:
    """The box's first element along one dimension: an index counts boxes; a
    `START : END` index gives the element START itself."""
    if isinstance(index, ast.RangeSlice):
        return scalar_expr(index.start, scope)
    return ir.ScalarOp("*", scalar_expr(index, scope), ir.const(box)) if box != 1 \
        else scalar_expr(index, scope)


def _ragged_bound(indices: tuple[ast.Expr, ...], tensor: ir.TensorParam, engine: ir.Engine,
                  scope: Scope) -> ir.RaggedBound | None:
    """The copy's `START : END` index, if any. It is lowered to a tensor map of an
    overlapping view with two extra leading dimensions (docs/architecture.md,
    "Ragged boxes"): TMA takes 5 dimensions, so the tensor at most 3; the view's
    extra strides are multiples of 16 bytes only if the ragged dimension's is."""
    ranged = [(d, i) for d, i in enumerate(indices) if isinstance(i, ast.RangeSlice)]
    if not ranged:
        return None
    dim, index = ranged[0]
    if len(ranged) > 1:
        raise CompileError(ranged[1][1].span, "a copy takes at most one START : END index; "
                                              "index the other dimensions by box")
    if engine is not ir.Engine.TMA:
        raise CompileError(index.span, "a bulk copy moves a whole contiguous slice; a "
                                       "START : END bound needs a tma copy")
    if dim == len(indices) - 1:
        raise CompileError(index.span, "the innermost dimension cannot take a START : END "
                                       "bound (TMA addresses it contiguously); clip an outer "
                                       "dimension")
    if len(indices) > ragged_view.MAX_RANK:
        raise CompileError(index.span, f"a START : END bound needs a tensor of at most "
                                       f"{ragged_view.MAX_RANK} dimensions ('{tensor.name}' has "
                                       f"{len(indices)}): its tensor map adds "
                                       f"{ragged_view.EXTRA_DIMS} to the tensor's, and TMA "
                                       f"takes {ragged_view.TMA_MAX_RANK}")
    inner = tensor.dims[dim + 1:]
    if all(isinstance(d, int) for d in inner):
        stride = tensor.dtype.nbytes
        for d in inner:
            stride *= d
        if stride % 16:
            raise CompileError(index.span, f"a START : END bound along dimension {dim} of "
                                           f"'{tensor.name}' needs its stride ({stride} bytes) "
                                           "to be a multiple of 16 bytes; pad the inner "
                                           "dimensions")
    return ir.RaggedBound(dim, scalar_expr(index.stop, scope))


def _check_issuer(stmt: ast.Copy, view: ir.BufferView, coords, load: bool) -> None:
    """One thread issues each copy of automatic code (one per warpgroup for a
    store that names `wg`), so no index may differ between the threads that
    would have issued it."""
    named = {name for e in copy_indices(coords, view) for name in builtins_in(e)}
    per_thread = sorted(named - {"wg"})
    if per_thread:
        raise CompileError(stmt.span, f"a copy is issued by one thread of its role, so its "
                                      f"indices cannot use '{per_thread[0]}'; index by tile, "
                                      "loop or warpgroup ('wg', stores only)")
    if load and "wg" in named:
        raise CompileError(stmt.span, "a load is issued once for its role and fills the buffer "
                                      "for every warpgroup: load the whole tile and read buf[wg]")


def _tensor_ref(expr: ast.Expr, scope: Scope) -> tuple[ir.TensorParam, tuple[ast.Expr, ...]]:
    if not (isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name)):
        raise CompileError(expr.span, "expected a global tensor tile like T[tile.m, k]")
    tensor = scope.lookup(expr.value.id, expr.value.span)
    if not isinstance(tensor, ir.TensorParam):
        name = expr.value.id
        raise CompileError(expr.value.span, f"'{name}' is not a global tensor"
                                            f"{did_you_mean(name, scope.names_of(ir.TensorParam))}")
    if len(expr.indices) != len(tensor.dims):
        raise CompileError(expr.span, f"'{tensor.name}' has {_count(len(tensor.dims), 'dimension')} "
                                      f"but {_count(len(expr.indices), 'index', 'indices')} "
                                      f"{'is' if len(expr.indices) == 1 else 'are'} given")
    for index in expr.indices:
        if isinstance(index, (ast.FullSlice, ast.NewAxis)):
            raise CompileError(index.span, "a copy takes one tile index per dimension (or one "
                                           "START : END element range)")
    return tensor, expr.indices


def _box(stmt: ast.Copy, view: ViewInfo, tensor: ir.TensorParam, engine: ir.Engine):
    shape = view.shape
    if view.buffer.dtype is not tensor.dtype:
        raise CompileError(stmt.span, f"dtype mismatch: buffer '{view.buffer.name}' is "
                                      f"{view.buffer.dtype} but tensor '{tensor.name}' is "
                                      f"{tensor.dtype} (copies do not convert)")
    if len(shape) > len(tensor.dims):
        raise CompileError(stmt.span, f"shape mismatch: a {len(shape)}-D buffer view does not "
                                      f"fit the {len(tensor.dims)}-D tensor '{tensor.name}'")
    box = (1,) * (len(tensor.dims) - len(shape)) + tuple(shape)
    for extent, dim in zip(box, tensor.dims):
        if isinstance(dim, int) and extent > dim:
            raise CompileError(stmt.span, f"shape mismatch: the box {_dims(box)} is larger than "
                                          f"'{tensor.name}' {_dims(tensor.dims)}")
    if engine is ir.Engine.TMA:
        blocks = column_blocks(view.buffer)
        if blocks > 1 and len(view.buffer.shape) > 2:
            raise CompileError(stmt.span, f"'{view.buffer.name}' is laid out in {blocks} column "
                                          f"blocks (its rows are wider than the "
                                          f"{view.buffer.swizzle} swizzle span), which TMA copies "
                                          "only for rank-2 buffers; split its planes into "
                                          "separate buffers or narrow its rows")
        limits.check_tma_box(copy_box(view.buffer, box), tensor.dtype, view.buffer.swizzle,
                             stmt.span)
    else:
        if len(tensor.dims) != 1 or len(shape) != 1:
            raise CompileError(stmt.span, "a bulk copy moves a contiguous 1-D slice; use tma "
                                          "for tiles")
        limits.check_bulk_copy(box[0] * tensor.dtype.nbytes, stmt.span)
    return box


def _via(stmt: ast.Copy, scope: Scope, manual: bool, load: bool) -> ir.BarrierRef | None:
    if stmt.via is None:
        if manual and load:
            raise CompileError(stmt.span, "in manual code a load names the mbarrier it "
                                          "completes on: tma buf <- T[i, j] via bar[s]")
        return None
    if not manual:
        raise CompileError(stmt.via.span, "'via' names an mbarrier in manual code; the "
                                          "compiler chooses it otherwise")
    if not load:
        raise CompileError(stmt.via.span, "a store completes through bulk.commit/bulk.wait_read, "
                                          "not an mbarrier")
    return barrier_ref(stmt.via, scope)


def barrier_ref(expr: ast.Expr, scope: Scope) -> ir.BarrierRef:
    """`bar[i]` (or `bar` for bar[0]) naming a declared mbarrier array."""
    index: ir.ScalarExpr = ir.const(0)
    if isinstance(expr, ast.Subscript) and len(expr.indices) == 1:
        index = scalar_expr(expr.indices[0], scope)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        raise CompileError(expr.span, "expected an mbarrier like bar[i]")
    symbol = scope.lookup(expr.id, expr.span)
    if not isinstance(symbol, ir.MBarrierArray):
        raise CompileError(expr.span, f"'{expr.id}' is not an mbarrier")
    if isinstance(index, ir.Scalar) and index.kind is ir.ScalarKind.CONST and not (
            0 <= index.value < symbol.count):
        raise CompileError(expr.span, f"mbarrier index {index.value} is out of range for "
                                      f"'{symbol.name}' ({_count(symbol.count, 'barrier')})")
    check_index(index, symbol.count, scope.loop_ranges, 0, expr.span,
                f"'{symbol.name}'", "mbarriers")
    return ir.BarrierRef(symbol.name, index)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _dims(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"
