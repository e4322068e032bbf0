"""The tensor map of a ragged copy (`tma buf <- T[START : END, j]`): a view of
T whose own bounds check clips the box at END. Plain Python on sizes (no CUDA),
shared by the runtime's encoder, the metadata, the code generator's coordinates
and the tests' model of TMA addressing.

TMA computes an element's address as base + sum(coordinate_i * stride_i) in
64-bit unsigned arithmetic (wrapping modulo 2^64), and treats an element as
out of bounds when any coordinate lies outside [0, extent_i): a load fills it
with zeros, a store skips it. The view of a tensor with dimensions
D_0 .. D_{n-1} (outermost first), clipped along dimension d of byte stride R,
has n + 2 dimensions, outermost first:

  W (extent LEAD, stride 2^34 - R), E (extent LEAD, stride R),
  D_0 .. D_{n-1} with D_d's extent replaced by ROWS = 2^30, strides unchanged.

A box whose first element along d is START, clipped at END' = min(max(END, 0),
D_d), takes the coordinates w = 2^30, e = END', c_d = 2^30 - END' + START (the
other dimensions as in the plain map). Its address along those three terms is
2^30 (2^34 - R) + END' R + (2^30 - END' + START) R = 2^64 + START R, which
wraps to START R: the box starts where the plain map's would. Row i of the box
has c_d + i, in bounds exactly when START + i < END' (and START + i >= END' -
2^30, which holds for START >= 0): every row at or past END' (hence past the
tensor) is out of bounds. w and e, with box extent 1, are always in bounds.

Constraints (cuTensorMapEncodeTiled, PTX coordinates are signed 32-bit): R a
multiple of 16 (then 2^34 - R is one) and below 2^34 (so 2^34 - R > 0 and <
2^40); D_d <= ROWS (so END' <= 2^30 and c_d >= START); rank n + 2 <= 5. The
view cannot clip below: a START < 0 reads or writes the rows before the tensor
(the simulator reports it). The same construction is Triton's published
"ragged TMA" descriptor; this module derives its own parameters from the rule
above.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

ROWS = 1 << 30  # the clipped dimension's extent in the view; END' is at most this
LEAD = 0x7FFF0000  # extent of W and E: above any coordinate they take, below 2^31
WRAP = 1 << 34  # W's stride is WRAP - R: ROWS * WRAP = 2^64
EXTRA_DIMS = 2
TMA_MAX_RANK = 5  # cuTensorMapEncodeTiled's tensorRank
MAX_RANK = TMA_MAX_RANK - EXTRA_DIMS  # of a tensor a ragged copy clips
T = TypeVar("T")


def view_dims(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """The view's extents, outermost first."""
    return (LEAD, LEAD) + tuple(ROWS if i == dim else e for i, e in enumerate(shape))


def view_strides(strides: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """The view's byte strides, outermost first (the innermost included)."""
    return (WRAP - strides[dim], strides[dim]) + tuple(strides)


def view_box(box: tuple[int, ...]) -> tuple[int, ...]:
    """The view's box, outermost first."""
    return (1, 1) + tuple(box)


@dataclass(frozen=True)
class Arithmetic(Generic[T]):
    """The operations the view's coordinates take, on ints (INTS: the tests'
    model of TMA) or on the code generator's C++ text (codegen/copies.py), so
    that one definition below serves both; the constants (0, ROWS) come as ints."""

    add: Callable[[T | int, T | int], T]
    sub: Callable[[T | int, T | int], T]
    min: Callable[[T | int, T | int], T]
    max: Callable[[T | int, T | int], T]


INTS: Arithmetic[int] = Arithmetic(operator.add, operator.sub, min, max)


def clipped_end(end: T, extent: T, arith: Arithmetic[T] = INTS) -> T:
    """END' = min(max(END, 0), D_d): the end a box is clipped at, where the
    clipped dimension's extent in the tensor is `extent`."""
    return arith.min(arith.max(end, 0), extent)


def view_coordinates(coords: Sequence[T], dim: int, end: T, arith: Arithmetic[T] = INTS
                     ) -> tuple[T | int, ...]:
    """The view's coordinates, outermost first, of a box at element coordinates
    `coords` (coords[dim] is START) clipped at `end` (END', `clipped_end`)."""
    return (ROWS, end) + tuple(arith.add(arith.sub(ROWS, end), c) if i == dim else c
                               for i, c in enumerate(coords))


def view_problem(tensor: str, shape: tuple[int, ...], strides: tuple[int, ...],
                 dim: int) -> str | None:
    """Why the tensor (byte strides) cannot take the view along `dim`, or None."""
    if shape[dim] > ROWS:
        return (f"{tensor}: a START : END copy clips dimension {dim}, whose extent "
                f"{shape[dim]} is above 2^30")
    if not 0 < strides[dim] < WRAP or strides[dim] % 16:
        return (f"{tensor}: a START : END copy clips dimension {dim}, whose stride "
                f"{strides[dim]} bytes must be a positive multiple of 16 below 2^34")
    return None
