"""Element-wise expressions over register tiles and row vectors, and row
reductions, as the generated code computes them: in f32, rounded to the
destination's dtype when written (an i32 statement of integer operations in
32-bit integers: sim/integer_values.py).

Shared by the simulator and the numpy reference: both compute the same
arithmetic; they differ in when and from where operands are read.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import plane_rows
from hopperc.sim.integer_values import integer_values
from hopperc.sim.values import global_vector, round_to


Leaf = Callable[[ir.TileExpr], "np.ndarray | float"]


def tile_value(expr: ir.TileExpr, leaf: Leaf,
               exact: Callable[[ir.TileExpr], bool] | None = None) -> np.ndarray:
    """An element-wise expression in f32; `leaf` supplies operands (tiles, shared
    reads, vectors, literals, scalars) as arrays that broadcast to the tile,
    asked for in the order of the expression (depth first, left to right), and
    the comparisons of two integer operands (`exact`, ir/integer_exprs.py), which
    compare ints."""
    key = (id(expr), exact is not None)
    hit = _COMPILED.get(key)
    if hit is None or hit[0] is not expr:
        hit = _COMPILED[key] = (expr, _compile(expr, exact))
    with np.errstate(all="ignore"):
        return np.asarray(hit[1](leaf), dtype=np.float32)


# Each expression compiled once into closures (it was walked at every step),
# keyed by identity as `block.Program.scalar` is: the entry keeps it alive.
_COMPILED: dict[tuple[int, bool], tuple[ir.TileExpr, Callable[[Leaf], object]]] = {}
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def _compile(expr: ir.TileExpr, exact: Callable[[ir.TileExpr], bool] | None
             ) -> Callable[[Leaf], object]:
    match expr:
        case ir.Elementwise(op=op) if op in _COMPARISONS and exact is not None and exact(expr):
            return lambda leaf: leaf(expr)
        case ir.Convert(dtype=dtype, operand=operand):
            inner = _compile(operand, exact)
            return lambda leaf: round_to(dtype, inner(leaf))
        case ir.Elementwise(op=op, args=args):
            apply, parts = _ELEMENTWISE[op], [_compile(a, exact) for a in args]
            if len(parts) == 1:
                only, = parts
                return lambda leaf: apply(_f32(only(leaf)))
            if len(parts) == 2:
                left, right = parts
                return lambda leaf: apply(_f32(left(leaf)), _f32(right(leaf)))
            return lambda leaf: apply(*[_f32(part(leaf)) for part in parts])
    return lambda leaf: leaf(expr)


def _f32(value):
    """Operands as numpy computes with them: a scalar as an f32."""
    if type(value) is np.ndarray:
        return value
    return np.float32(value) if np.isscalar(value) else value


def _log2(x):
    """lg2.approx.ftz: log2(0) = -inf and of a negative number NaN, as numpy's,
    without numpy's warnings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(x)


def _log(x):
    """log2(x) * ln 2, as the kernel computes it (rounded to f32 twice)."""
    return _log2(x) * np.float32(np.log(2.0))


def _sigmoid(x):
    """1 / (1 + e^-x) in f32: 0 where e^-x overflows, as the kernel's 1 / inf."""
    return np.float32(1) / (np.float32(1) + np.exp(-x))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """erf in f64 rounded to f32 (numpy has none): erff is within 2 ulp of it."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64).astype(np.float32)


_ELEMENTWISE = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "neg": np.negative,
    "relu": lambda x: np.maximum(x, np.float32(0)), "abs": np.abs, "exp": np.exp,
    "exp2": np.exp2, "log2": _log2, "log": _log,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x), "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _erf, "sin": np.sin, "cos": np.cos,
    "max": np.maximum, "min": np.minimum,
    **{op: (lambda f: lambda a, b: np.where(f(a, b), np.float32(1), np.float32(0)))(f)
       for op, f in (("==", np.equal), ("!=", np.not_equal), ("<", np.less),
                     ("<=", np.less_equal), (">", np.greater), (">=", np.greater_equal))},
    "where": lambda c, a, b: np.where(c != 0, a, b),
}


# rowmax / rowmin / rowsum / argmax along `axis`, as the C++ computes them in f32;
# argmax is numpy's (the first maximum; a NaN counts above every number).
_ROW_REDUCTIONS = {
    "max": np.max, "min": np.min,
    "sum": lambda v, axis: np.sum(v, axis=axis, dtype=np.float32),
    "argmax": lambda v, axis: np.argmax(v, axis=axis).astype(np.float32),
}


def elementwise(expr: ir.TileExpr, shape: tuple[int, ...], dtype: DType,
                tile: Callable[[str], np.ndarray], shared: Callable[[ir.SharedRead], np.ndarray],
                tensors: Mapping[str, np.ndarray], integer: Callable[[ir.ScalarExpr], int],
                row_vector: bool = False, row_parts: bool = False,
                exact: Callable[[ir.TileExpr], bool] | None = None) -> np.ndarray:
    """`expr` over a tile of `shape`, rounded to `dtype` as the write rounds it.
    `tile` and `shared` give register and shared-memory operands (where the
    simulator and the reference differ), `integer` evaluates scalars. A register
    row vector (`row_vector`) is one value per row: element i is row i, column 0
    (a 1-D view is one row: element i is row 0, column i). A Layout.ROW_PARTS
    vector (`row_parts`, `shape` [rows, 4]) is one value per row and quad lane.
    `exact`: ir/integer_exprs.py's integer_exact, for an i32 statement, which
    then runs in 32-bit integers where its value is made of integer operations."""
    def leaf(e: ir.TileExpr):
        match e:
            case ir.TileRef(name=name) if row_parts:
                value = tile(name)  # a row vector's value is alike in a row's parts
                return value if value.ndim == 2 else value[:, None]
            case ir.TileRef(name=name, columns=None):
                return tile(name)
            case ir.TileRef(name=name, columns=(start, stop)):
                return tile(name)[:, start:stop]
            case ir.SharedRead(broadcast=None):
                return shared(e)
            case ir.SharedRead(broadcast=axis, elements=None):
                return _broadcast(shared(e), axis, shape)  # a 1-D view
            case ir.SharedRead(broadcast=axis, elements=(start, stop)):
                return _broadcast(shared(e)[start:stop], axis, shape)
            case ir.GlobalVector(tensor=tensor, start=start, axis=axis):
                length = vector_length(axis, shape, row_vector)
                return _broadcast(global_vector(tensors[tensor], integer(start), length),
                                  axis, shape)
            case ir.Literal(value=v):
                return np.float32(v)
            case ir.ScalarValue(expr=value):
                return np.float32(integer(value))
            case ir.RowReduce(op=op, partials=ir.BufferView() as partials):
                # the warps' partials in shared memory (f32 [warps, rows padded])
                parts = shared(ir.SharedRead(partials, "rows"))[:, :shape[0]]
                return combine_argmax(parts) if op == "argmax" else \
                    _ROW_REDUCTIONS[op](parts, axis=0)
            case ir.RowReduce(op=op, name=name):
                return _ROW_REDUCTIONS[op](tile(name), axis=1)
            case ir.ThreadRowSum(name=name):
                return thread_row_sums(tile(name))
            case ir.RowPartsSum(name=name):
                return np.sum(tile(name), axis=1, dtype=np.float32)
            case ir.RowValues(name=name):
                return tile(name)[:, None]
            case ir.ElementIndex(axis="row") if row_vector:
                return np.arange(shape[0], dtype=np.float32)
            case ir.ElementIndex(axis="col") if row_vector:
                return np.float32(0)
            case ir.ElementIndex(axis="row"):
                return _broadcast(np.arange(plane_rows(shape), dtype=np.float32), "rows", shape) \
                    if len(shape) > 1 else np.float32(0)
            case ir.ElementIndex(axis="col"):
                return np.arange(shape[-1], dtype=np.float32)
        raise TypeError(e)

    def f32_leaf(e: ir.TileExpr):
        if isinstance(e, ir.Elementwise):  # a comparison of two integer operands
            return integer_values(e, leaf, f32_value, integer, exact).astype(np.float32)
        value = leaf(e)  # i32 operands (held as f64) are converted to f32 when read
        return value.astype(np.float32) if getattr(value, "dtype", None) == np.float64 \
            else value

    def f32_value(e: ir.TileExpr) -> np.ndarray:
        return tile_value(e, f32_leaf, exact)
    if exact is not None and dtype is DType.I32 and exact(expr):
        values = integer_values(expr, leaf, f32_value, integer, exact)
        return np.broadcast_to(values, shape).astype(np.float64)
    return round_to(dtype, np.broadcast_to(f32_value(expr), shape))


def vector_length(axis: str, shape: tuple[int, ...], row_vector: bool) -> int:
    """Values a vector broadcast along `axis` gives a statement of `shape`: a
    register row vector's statement takes one per row (a loaded vector named alone)."""
    if row_vector:
        return shape[0]
    return plane_rows(shape) if axis == "rows" else shape[-1]


def _broadcast(v: np.ndarray, axis: str, shape: tuple[int, ...]) -> np.ndarray:
    """A vector as one value per row or column of each 2-D plane of `shape` (a
    1-D view is one row)."""
    if len(shape) == 1:
        return v
    return v[:, None] if axis == "rows" else v[None, :]


def operands(expr: ir.TileExpr, tile: Callable[[str], object],
             shared: Callable[[ir.SharedRead], object],
             integer: Callable[[ir.ScalarExpr], int]) -> None:
    """Call `tile`, `shared` and `integer` on the operands of `expr` in the order
    `elementwise` reads them, computing nothing: what a run without data checks."""
    hit = _OPERANDS.get(id(expr))
    if hit is None or hit[0] is not expr:
        found: list[tuple[int, object]] = []
        _operands(expr, found)
        hit = _OPERANDS[id(expr)] = (expr, tuple(found))
    calls = (tile, shared, integer)
    for which, operand in hit[1]:
        calls[which](operand)


_OPERANDS: dict[int, tuple[ir.TileExpr, tuple]] = {}  # as _COMPILED: the operands in order


def _operands(expr: ir.TileExpr, found: list[tuple[int, object]]) -> None:
    """(0: a tile's name, 1: a shared read, 2: a scalar) of each operand, in order."""
    match expr:
        case ir.Convert(operand=operand):
            _operands(operand, found)
        case ir.Elementwise(args=args):
            for arg in args:
                _operands(arg, found)
        case ir.RowReduce(partials=ir.BufferView() as partials):
            found.append((1, ir.SharedRead(partials, "rows")))
        case ir.TileRef(name=name) | ir.RowReduce(name=name) | ir.RowValues(name=name) | \
                ir.ThreadRowSum(name=name) | ir.RowPartsSum(name=name):
            found.append((0, name))
        case ir.SharedRead():
            found.append((1, expr))
        case ir.GlobalVector(start=start) | ir.ScalarValue(expr=start):
            found.append((2, start))
        case ir.Literal() | ir.ElementIndex():
            pass
        case _:
            raise TypeError(expr)


def thread_row_sums(values: np.ndarray) -> np.ndarray:
    """Each quad lane's part of the row sums of a warpgroup's wgmma-layout tile
    ([rows, 4]): lane q of a row's quad holds its columns c with (c % 8) // 2 == q
    (ir.Layout.WGMMA)."""
    rows, cols = values.shape
    return np.sum(values.reshape(rows, cols // 8, 4, 2), axis=(1, 3), dtype=np.float32)


def row_partials(op: str, values: np.ndarray, threads: int, width: int) -> np.ndarray:
    """What RowPartials writes for a row-major [rows, cols] tile over `threads`
    threads (cols a multiple of them): [warps, width], row w holding warp w's
    reduction of each row (element (r, c) lies in thread c % threads), then
    zeros to `width`."""
    rows, cols = values.shape
    warps = threads // 32
    by_warp = values.reshape(rows, cols // threads, warps, 32)
    if op == "argmax":  # each warp's first maximum, then its column (argmax's partials)
        mine = by_warp.transpose(2, 0, 1, 3).reshape(warps, rows, -1)  # in column order
        first = np.argmax(mine, axis=2)
        columns = (first // 32) * threads + np.arange(warps)[:, None] * 32 + first % 32
        reduced = np.concatenate([np.take_along_axis(mine, first[..., None], 2)[..., 0],
                                  columns.astype(np.float32)])
    else:
        reduced = _ROW_REDUCTIONS[op](by_warp, axis=(1, 3)).T
    out = np.zeros((reduced.shape[0], width), dtype=np.float32)
    out[:, :rows] = reduced
    return out


def combine_argmax(parts: np.ndarray) -> np.ndarray:
    """argmax from its partials ([2 * warps, rows]: the warps' first maxima, then
    their columns): the lowest column among the warps holding the row's maximum,
    or a NaN where one does (numpy.argmax's order)."""
    values, columns = np.split(parts, 2)
    nan = np.isnan(values)
    top = np.max(np.where(nan, -np.inf, values), axis=0)
    holders = np.where(nan.any(axis=0), nan, values == top)
    return np.min(np.where(holders, columns, np.inf), axis=0).astype(np.float32)
