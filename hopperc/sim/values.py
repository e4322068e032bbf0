"""Values as the generated code holds them: each dtype's rounding and
tolerance, wgmma's products, and the boxes of global memory that copies read,
write and add into (element-wise math over tiles: sim/tile_values.py; integer
scalars: sim/scalars.py).

Shared by the simulator and the numpy reference: both compute the same
arithmetic; they differ in when and from where operands are read.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from hopperc.ir.dtypes import DType

_NUMPY = {DType.BF16: ml_dtypes.bfloat16, DType.F16: np.float16,
          DType.E4M3: ml_dtypes.float8_e4m3fn, DType.E5M2: ml_dtypes.float8_e5m2}
_SATURATE = {DType.E4M3: 448.0, DType.E5M2: 57344.0}  # fp8 conversions saturate
ULP = {DType.BF16: 2.0 ** -8, DType.F16: 2.0 ** -11, DType.E4M3: 2.0 ** -4,
       DType.E5M2: 2.0 ** -3, DType.F32: 2.0 ** -20, DType.I32: 0.0}


def tolerance(dtype: DType, expect: np.ndarray, ulps: float = 2) -> np.ndarray:
    """The largest |result - expect| accepted: sums of products may round
    differently by an ulp or two of the output; near zero, relative to 1."""
    return ulps * ULP[dtype] * np.maximum(np.abs(expect), 1.0) + 1e-6


def holding(dtype: DType) -> type:
    """The numpy type the simulator holds `dtype`'s values in: f32, except i32 in
    f64, which holds every i32 exactly (f32 only up to 2^24)."""
    return np.float64 if dtype is DType.I32 else np.float32


def added(old: np.ndarray, terms: np.ndarray, dtype: DType) -> np.ndarray:
    """An add of `terms` to elements holding `old` (`red.global.add`, a TMA
    reduce-add): one add each, in f32, rounded to the element's dtype (.noftz
    for the 16-bit types); i32 sums exact and wrapped past 2^31 (the .s32 add
    is an integer add: no rounding through f32), held as f64 where two i32 sum
    exactly."""
    if dtype is DType.I32:
        total = np.asarray(old, np.float64) + np.asarray(terms, np.float64)
        return np.mod(total + 2.0 ** 31, 2.0 ** 32) - 2.0 ** 31
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
    """Round f32 values to `dtype` (round to nearest), kept as f32; i32 values
    as f64, which holds every i32 exactly (ir/integer_exprs.py)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype is DType.F32:
        return values
    if dtype is DType.I32:
        return np.rint(np.clip(values, -2.0 ** 31, 2.0 ** 31 - 128)).astype(np.float64)
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


# ---------------------------------------------------------------- boxes
def global_vector(data: np.ndarray, start: int, length: int) -> np.ndarray:
    """Elements start .. start+length-1 of a 1-D tensor, 0 past its end."""
    out = np.zeros(length, dtype=data.dtype)
    lo, hi = max(start, 0), min(start + length, data.shape[0])
    if hi > lo:
        out[lo - start:hi - start] = data[lo:hi]
    return out


Clip = tuple[int, int] | None  # a ragged copy's (axis, END): elements at or past END are out


def read_box(data: np.ndarray, origin: tuple[int, ...], box: tuple[int, ...],
             clip: Clip = None) -> np.ndarray:
    """A TMA box at element coordinates `origin`; parts outside the tensor (or
    at or past a ragged END) read 0."""
    out = np.zeros(box, dtype=data.dtype)
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
    """Add a box into a tensor (a TMA reduce-add), each sum as `added` makes it.
    Parts outside the tensor (or at or past a ragged END) are not touched."""
    src, dst = _clip(_bounds(data.shape, clip), origin, values.shape)
    if src is None:
        return
    data[src] = added(data[src], values[dst], dtype)


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
