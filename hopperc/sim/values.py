"""Values as the generated code computes them: numpy tiles whose element-wise
math runs in f32 and rounds to the destination's dtype, and the boxes of
global memory copies read and write (integer scalars: sim/scalars.py).

Shared by the simulator and the numpy reference: both compute the same
arithmetic; they differ in when and from where operands are read.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

import ml_dtypes
import numpy as np

from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.layout import plane_rows

_NUMPY = {DType.BF16: ml_dtypes.bfloat16, DType.F16: np.float16,
          DType.E4M3: ml_dtypes.float8_e4m3fn, DType.E5M2: ml_dtypes.float8_e5m2}
_SATURATE = {DType.E4M3: 448.0, DType.E5M2: 57344.0}  # fp8 conversions saturate
ULP = {DType.BF16: 2.0 ** -8, DType.F16: 2.0 ** -11, DType.E4M3: 2.0 ** -4,
       DType.E5M2: 2.0 ** -3, DType.F32: 2.0 ** -20, DType.I32: 0.0}


def tolerance(dtype: DType, expect: np.ndarray, ulps: float = 2) -> np.ndarray:
    """The largest |result - expect| accepted: sums of products may round
    differently by an ulp or two of the output; near zero, relative to 1."""
    return ulps * ULP[dtype] * np.maximum(np.abs(expect), 1.0) + 1e-6


def added(old: np.ndarray, terms: np.ndarray, dtype: DType) -> np.ndarray:
    """`red.global.add` of `terms` to elements holding `old`: one add each, in
    f32, rounded to the element's dtype (.noftz for the 16-bit types)."""
    return round_to(dtype, np.asarray(old, np.float32) + np.asarray(terms, np.float32))


def added_tolerance(dtype: DType, adds: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """How far adds in another order may land: each of an element's `adds`
    rounds once, by at most an ulp of the partial sum, which is at most the
    sum of the terms' magnitudes (`magnitude`)."""
    return adds * 2 * ULP[dtype] * magnitude


def undefined(shape: tuple[int, ...]) -> np.ndarray:
    """Registers nothing has written: NaN, so a result computed from them shows
    as wrong instead of passing by luck (a zeroed register file would)."""
    return np.full(shape, np.nan, dtype=np.float32)


def round_to(dtype: DType, values) -> np.ndarray:
    """Round f32 values to `dtype` (round to nearest), kept as f32."""
    values = np.asarray(values, dtype=np.float32)
    if dtype is DType.F32:
        return values
    if dtype is DType.I32:
        return np.rint(np.clip(values, -2.0 ** 31, 2.0 ** 31 - 128)).astype(np.float32)
    if dtype in _SATURATE:
        values = np.clip(values, -_SATURATE[dtype], _SATURATE[dtype])
    return values.astype(_NUMPY[dtype]).astype(np.float32)


def to_tf32(values: np.ndarray) -> np.ndarray:
    """f32 values as a .tf32 wgmma reads them: the PTX ISA gives tf32 the range of
    f32 and at least 10 mantissa bits, its layout implementation-defined, and
    the generated code passes the f32 bits as they are (no cvt.rna.tf32.f32). The
    model keeps exactly 10 bits and drops the low 13 toward zero, the coarsest
    reading allowed; inf and NaN pass unchanged."""
    values = np.asarray(values, dtype=np.float32)
    kept = (values.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(values), kept, values)


def matrix_product(a: np.ndarray, b: np.ndarray, inputs: DType) -> np.ndarray:
    """a @ b of operands of dtype `inputs` (held as f32), rounded once to f32;
    f32 operands run as tf32 (`to_tf32`).

    The tensor cores' summation order is unspecified, and so is BLAS's (it
    changes with the slice shape and the thread count). Products of 16-bit, fp8
    and tf32 inputs are exact in f64 and a sum in f64 differs between orders by far
    less than an f32 ulp, so the simulator (16 rows per warp) and the reference
    (a warpgroup's 64 rows) round to the same f32 unless the exact sum lies within that difference of
    an f32 rounding boundary.
    """
    if inputs is DType.F32:
        a, b = to_tf32(a), to_tf32(b)
    # Contiguous operands: numpy's matmul of a transposed view (a `b^T` operand)
    # can miss BLAS and take 100 times longer.
    return (np.ascontiguousarray(a, dtype=np.float64) @
            np.ascontiguousarray(b, dtype=np.float64)).astype(np.float32)


# ---------------------------------------------------------------- tiles
Leaf = Callable[[ir.TileExpr], "np.ndarray | float"]


def tile_value(expr: ir.TileExpr, leaf: Leaf) -> np.ndarray:
    """An element-wise expression in f32; `leaf` supplies operands (tiles, shared
    reads, vectors, literals, scalars) as arrays that broadcast to the tile,
    asked for in the order of the expression (depth first, left to right)."""
    hit = _COMPILED.get(id(expr))
    if hit is None or hit[0] is not expr:
        hit = _COMPILED[id(expr)] = (expr, _compile(expr))
    with np.errstate(all="ignore"):
        return np.asarray(hit[1](leaf), dtype=np.float32)


# Each expression compiled once into closures (it was walked at every step),
# keyed by identity as `block.Program.scalar` is: the entry keeps it alive.
_COMPILED: dict[int, tuple[ir.TileExpr, Callable[[Leaf], object]]] = {}


def _compile(expr: ir.TileExpr) -> Callable[[Leaf], object]:
    match expr:
        case ir.Convert(dtype=dtype, operand=operand):
            inner = _compile(operand)
            return lambda leaf: round_to(dtype, inner(leaf))
        case ir.Elementwise(op=op, args=args):
            apply, parts = _ELEMENTWISE[op], [_compile(a) for a in args]
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
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
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
                row_vector: bool = False, row_parts: bool = False) -> np.ndarray:
    """`expr` over a tile of `shape`, rounded to `dtype` as the write rounds it.
    `tile` and `shared` give register and shared-memory operands (where the
    simulator and the reference differ), `integer` evaluates scalars. A register
    row vector (`row_vector`) is one value per row: element i is row i, column 0
    (a 1-D view is one row: element i is row 0, column i). A Layout.ROW_PARTS
    vector (`row_parts`, `shape` [rows, 4]) is one value per row and quad lane."""
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
                length = plane_rows(shape) if axis == "rows" else shape[-1]
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
    return round_to(dtype, np.broadcast_to(tile_value(expr, leaf), shape))


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


def global_vector(data: np.ndarray, start: int, length: int) -> np.ndarray:
    """Elements start .. start+length-1 of a 1-D tensor, 0 past its end."""
    out = np.zeros(length, dtype=np.float32)
    lo, hi = max(start, 0), min(start + length, data.shape[0])
    if hi > lo:
        out[lo - start:hi - start] = data[lo:hi]
    return out


Clip = tuple[int, int] | None  # a ragged copy's (axis, END): elements at or past END are out


def read_box(data: np.ndarray, origin: tuple[int, ...], box: tuple[int, ...],
             clip: Clip = None) -> np.ndarray:
    """A TMA box at element coordinates `origin`; parts outside the tensor (or
    at or past a ragged END) read 0."""
    out = np.zeros(box, dtype=np.float32)
    src, dst = _clip(_bounds(data.shape, clip), origin, box)
    if src is not None:
        out[dst] = data[src]
    return out


def write_box(data: np.ndarray, origin: tuple[int, ...], values: np.ndarray,
              clip: Clip = None) -> None:
    """Store a box; parts outside the tensor (or at or past a ragged END) are
    not written."""
    src, dst = _clip(_bounds(data.shape, clip), origin, values.shape)
    if src is not None:
        data[src] = values[dst]


def add_box(data: np.ndarray, origin: tuple[int, ...], values: np.ndarray, dtype: DType,
            clip: Clip = None) -> None:
    """Add a box into a tensor (a TMA reduce-add), each sum rounded to the
    tensor's dtype; parts outside the tensor (or at or past a ragged END) are
    not touched."""
    src, dst = _clip(_bounds(data.shape, clip), origin, values.shape)
    if src is not None:
        data[src] = round_to(dtype, data[src] + values[dst])


def box_index(shape: tuple[int, ...], origin: tuple[int, ...], box: tuple[int, ...],
              clip: Clip = None) -> tuple[slice, ...] | None:
    """The elements of a tensor of `shape` a box at `origin` touches (None: none)."""
    return _clip(_bounds(shape, clip), origin, box)[0]


def clipped_box(origin: tuple[int, ...], box: tuple[int, ...], clip: Clip) -> tuple[int, ...]:
    """The part of a box a ragged copy may touch: along its axis, up to END."""
    if clip is None:
        return box
    axis, end = clip
    return tuple(max(0, min(n, end - origin[axis])) if i == axis else n
                 for i, n in enumerate(box))


def _bounds(shape: tuple[int, ...], clip: Clip) -> tuple[int, ...]:
    if clip is None:
        return shape
    axis, end = clip
    return tuple(min(n, max(end, 0)) if i == axis else n for i, n in enumerate(shape))


def _clip(shape, origin, box):
    src, dst = [], []
    for extent, start, size in zip(shape, origin, box):
        lo, hi = max(start, 0), min(start + size, extent)
        if hi <= lo:
            return None, None
        src.append(slice(lo, hi))
        dst.append(slice(lo - start, hi - start))
    return tuple(src), tuple(dst)
