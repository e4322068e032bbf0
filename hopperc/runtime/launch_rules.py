"""The one definition of a legal launch shape: what the runtime refuses before
it launches, the simulator refuses for `--shape` (and never picks by default),
and docs/runtime.md describes. Plain Python on names and sizes (no CUDA, no
compiler), so the runtime, the simulator and the command line all import it.

For dimension values `dims` (the kernel's runtime sizes), a launch is legal when:
- every dimension is an integer in 0 .. 2^31 - 1 (it travels as a 32-bit int);
- every grid extent (an integer expression of dimensions and int scalars,
  `Extent`) is at least 0 and at most the hardware's (2^31 - 1 along x, 65535
  along y and z), and a multiple of the cluster's extent along its axis (a
  persistent grid is whole clusters anyway, and launches along x only);
- a persistent grid has at most 2^31 - 1 tiles (`tile_count_problem`);
- for a tensor read or written by TMA, laid out densely row-major (the layout
  the simulator and a `.contiguous()` tensor have): every extent is in
  1 .. 2^32 and every stride but the innermost (the bytes from one index of an
  axis to the next) is a positive multiple of 16 bytes below 2^40, as
  cuTensorMapEncodeTiled requires. A row of 500 bf16 elements (1000 bytes) is
  not; 504 is.
A grid with no blocks launches nothing, and is not checked further.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

INT_MAX = 2 ** 31 - 1  # dimensions and int scalars travel as 32-bit `int`
TMA_ALIGNMENT = 16  # bytes: a TMA global stride and base address
MAX_STRIDE = 1 << 40
MAX_EXTENT = 1 << 32


@dataclass(frozen=True)
class TensorShape:
    name: str
    itemsize: int  # bytes per element
    dims: tuple[str | int, ...]  # a dimension's name, or a fixed extent
    tma: bool  # the kernel copies it with TMA (through a tensor map)


# A grid extent as JSON: an int, {"dim": NAME}, {"scalar": NAME} (an int scalar
# parameter), or {"op": OP, "args": [LEFT, RIGHT]} with OP one of EXTENT_OPS.
Extent = int | dict
# The arithmetic of every integer expression (`/` rounds up: tile counts), defined
# here for the launch, which imports nothing of the compiler; ir/arith.py's
# INTEGER_OPS, which the compiler and the simulator use, adds its other operators.
EXTENT_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
              "/": lambda a, b: -(-a // b), "%": lambda a, b: a % b}
MAX_GRID = (INT_MAX, 65535, 65535)  # blocks along x, y, z


@dataclass(frozen=True)
class GridShape:
    axis: int  # 0, 1, 2: x, y, z
    extent: Extent | None  # None: a ragged axis, whose extent the data decides


def evaluate_extent(extent: Extent, values: dict[str, int]) -> int:
    """An extent's value, for dimension and int scalar `values` by name."""
    if isinstance(extent, int):
        return extent
    if "op" in extent:
        left, right = (evaluate_extent(a, values) for a in extent["args"])
        if extent["op"] in "/%" and right == 0:
            raise ZeroDivisionError(f"a grid extent divides by 0 ({extent_text(extent)})")
        return EXTENT_OPS[extent["op"]](left, right)
    return values[extent.get("dim", extent.get("scalar"))]


def extent_names(extent: Extent) -> list[str]:
    """The dimensions and scalars an extent reads, in order, once each."""
    if isinstance(extent, int):
        return []
    if "op" in extent:
        return list(dict.fromkeys(n for a in extent["args"] for n in extent_names(a)))
    return [extent.get("dim", extent.get("scalar"))]


def extent_text(extent: Extent) -> str:
    """An extent as a formula (`/` written ceil)."""
    if isinstance(extent, int):
        return str(extent)
    if "op" not in extent:
        return str(extent.get("dim", extent.get("scalar")))
    left, right = (extent_text(a) for a in extent["args"])
    return f"ceil({left} / {right})" if extent["op"] == "/" else \
        f"({left} {extent['op']} {right})"


@dataclass(frozen=True)
class IllegalShape:
    """Why a shape cannot launch; `tensor` names the tensor at fault, if one is."""

    message: str
    tensor: str | None = None


def illegal_shape(tensors: Iterable[TensorShape], grid: Sequence[GridShape],
                  cluster: Sequence[int], persistent: bool,
                  dims: dict[str, int], scalars: dict[str, int] | None = None
                  ) -> IllegalShape | None:
    """The first rule `dims` (and the int `scalars`) break (module docstring), or None."""
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT_MAX:
            return IllegalShape(f"dimension {name} must be an integer in 0 .. {INT_MAX}, "
                                f"got {value!r}")
    values = {**dims, **(scalars or {})}
    fixed = [axis for axis in grid if axis.extent is not None]
    try:
        extents = [evaluate_extent(axis.extent, values) for axis in fixed]
    except ZeroDivisionError as exc:
        return IllegalShape(str(exc))
    for axis, extent in zip(fixed, extents):
        if not 0 <= extent <= MAX_GRID[0 if persistent else axis.axis]:
            text = extent_text(axis.extent)
            value = text if text == str(extent) else f"{text} is {extent}"
            return IllegalShape(f"grid {'xyz'[axis.axis]} extent {value}; a grid takes 0 .. "
                                f"{MAX_GRID[0 if persistent else axis.axis]} blocks there")
    if 0 in extents:
        return None
    if persistent and (problem := tile_count_problem(math.prod(extents))):
        return IllegalShape(problem)
    if not persistent:
        for axis, extent in zip(fixed, extents):
            size = cluster[axis.axis]
            if extent % size:
                given = ", ".join(f"{n} = {values[n]}" for n in extent_names(axis.extent))
                return IllegalShape(f"grid {'xyz'[axis.axis]} extent {extent} is not a multiple "
                                    f"of the cluster's {size} ({extent_text(axis.extent)}"
                                    f"{' with ' + given if given else ''})")
    for tensor in tensors:
        if tensor.tma:
            problem = _tma_problem(tensor, dims)
            if problem:
                return IllegalShape(problem, tensor.name)
    return None


def tile_count_problem(tiles: int) -> str | None:
    """Why a persistent grid of `tiles` tiles cannot run, or None: its blocks
    take tiles by a 32-bit int index. The launch checks a static grid; a
    ragged grid's kernel counts its own tiles and traps past the limit
    (ir/raster.count_cxx), and the simulator refuses such data."""
    if tiles > INT_MAX:
        return f"a persistent grid of {tiles} tiles; a tile's index is a 32-bit int (at most " \
               f"{INT_MAX})"
    return None


def _tma_problem(tensor: TensorShape, dims: dict[str, int]) -> str | None:
    shape = [dims[d] if isinstance(d, str) else d for d in tensor.dims]
    for axis, extent in enumerate(shape):
        problem = extent_problem(tensor.name, axis, extent)
        if problem:
            return problem
    for axis in range(len(shape) - 2, -1, -1):
        inner = math.prod(shape[axis + 1:])
        problem = stride_problem(tensor.name, axis, inner * tensor.itemsize, tensor.itemsize,
                                 shape[axis + 1], _name(tensor.dims[axis + 1]))
        if problem:
            return problem
    return None


def _name(dim: str | int) -> str | None:
    return dim if isinstance(dim, str) else None


def extent_problem(tensor: str, axis: int, extent: int) -> str | None:
    if not 0 < extent <= MAX_EXTENT:
        return f"{tensor}: dimension {axis} is {extent}; TMA takes 1 .. 2^32"
    return None


def stride_problem(tensor: str, axis: int, stride: int, itemsize: int,
                   inner: int | None, inner_name: str | None = None) -> str | None:
    """A TMA global stride of `stride` bytes for `axis`; `inner`: the extent of the
    next axis when the tensor is dense there (the one to pad), else None."""
    if stride % TMA_ALIGNMENT == 0 and 0 < stride < MAX_STRIDE:
        return None
    hint = ""
    if inner is not None:
        multiple = TMA_ALIGNMENT // math.gcd(TMA_ALIGNMENT, itemsize)
        padded = -(-inner // multiple) * multiple
        hint = (f"; for a contiguous tensor, pad dimension {axis + 1} (now {inner}) to a "
                f"multiple of {multiple}, as {inner_name or 'its extent'} = {padded}")
    return (f"{tensor}: the stride of dimension {axis} is {stride} bytes; TMA needs a positive "
            f"multiple of {TMA_ALIGNMENT} below 2^40{hint}")
