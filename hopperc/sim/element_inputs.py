"""Default inputs of the i32 tensors a kernel reads elements of as scalars
(TensorElement), drawn by use so that `check` runs the paths they steer:

- offsets: a tensor read at i and i + 1 along an axis (`OFFS[g]`, `OFFS[g + 1]`)
  holds non-decreasing values from 0 along it, the groups between them of
  sizes cycling through a long group, an empty group, a group of one row, one that is not a
  multiple of the tile, one shorter than a tile, a whole tile and two rows;
  each data set starts the cycle elsewhere, so every group sees each size;
- the values stay within the extent they index into where one is found: the
  dimension of a tensor whose copy coordinate an element feeds (`A[OFFS[g] +
  k, ...]`: the tiles of A along that axis), else SMALL_BOUND;
- counts: a tensor read at one index whose element is the END of a copy's
  `START : END` index along a dimension (`C[g, r : CNT[g], j]`, an expert's
  rows in a masked layout) holds the same cycle of sizes, each at most that
  dimension (grown to hold the long one), the tile being the copy's box there;
- any other i32 tensor read as scalars holds values 0 .. that bound;
- a dimension only such tensors have reaches past every index the last tile
  reads (`OFFS[tile.m + 1]` in the last block is in range).

`check` runs DATA_SETS data sets: the seeded schedules take them in turn, each
compared with its own reference.
"""
from __future__ import annotations

import numpy as np

from hopperc.ir import index_algebra
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.elements import element_tensors, tensor_elements_in
from hopperc.ir.raster import extent
from hopperc.sim.scalars import scalar

DATA_SETS = 3
SMALL_BOUND = 4  # the largest value of an i32 element whose extent is not found


def reach_element_dims(kernel: ir.Kernel, dims: dict[str, int], iterations: int) -> None:
    """Grow each dimension only element-read tensors have until every index the
    last tile reads (loop variables at their first value) is inside it; then
    each dimension offsets index into until it holds their groups."""
    read = set(element_tensors(kernel))
    others = {d for t in kernel.tensors if t.name not in read for d in t.dims}
    env = _last_tile(kernel, dims)
    for element in tensor_elements_in((kernel.body, kernel.grid)):
        tensor = kernel.tensor(element.tensor)
        for dim, index in zip(tensor.dims, element.indices):
            if isinstance(dim, str) and dim not in others:
                try:
                    dims[dim] = max(dims[dim], int(scalar(index, env)) + 1)
                except (KeyError, TypeError, ZeroDivisionError):
                    continue  # an index of what the shape does not fix
    for name in read:
        counts = _counts(kernel, name)
        if counts is not None and _offsets_axis(kernel, name) is None:
            dim, box = counts
            dims[dim] = max(dims[dim], *group_sizes(box, iterations))
        axis, feeds = _offsets_axis(kernel, name), _feeds(kernel, name)
        if axis is None or feeds is None:
            continue
        dim, a, box = feeds
        groups = _size(kernel.tensor(name).dims[axis], dims) - 1
        total = sum(sorted(group_sizes(max(box // a, 1), iterations))[-groups:]) if groups else 0
        while -(-dims[dim] // a) < total:  # whole boxes: the partial tile's cut stays
            dims[dim] += box


def group_sizes(tile: int, iterations: int) -> list[int]:
    """The sizes offsets' groups cycle through: long enough for a loop over it to
    run `iterations` times at a row or a tile per iteration (first: block 0,
    which the exhaustive search explores, takes it), empty, one row, not a
    multiple of the tile, shorter than a tile, a whole tile."""
    return [iterations * tile, 0, 1, tile + tile // 2 + 1 if tile > 1 else 3,
            max(tile // 2, 1), tile]


def draw_elements(kernel: ir.Kernel, tensor: ir.TensorParam, dims: dict[str, int],
                  rng: np.random.Generator, data_set: int, iterations: int) -> np.ndarray:
    """Data set `data_set` of an i32 tensor read as scalars (as the f32 array the
    simulator keeps); `iterations`: what a loop over a long group should run."""
    shape = tuple(_size(d, dims) for d in tensor.dims)
    feeds = _feeds(kernel, tensor.name)
    bound, tile = SMALL_BOUND, 1
    if feeds is not None:
        dim, a, box = feeds
        bound, tile = -(-dims[dim] // a), max(box // a, 1)
    axis = _offsets_axis(kernel, tensor.name)
    counts = _counts(kernel, tensor.name)
    if axis is None and counts is not None:
        dim, box = counts
        sizes = group_sizes(box, iterations)
        count = int(np.prod(shape))
        drawn = [min(sizes[(data_set * count + n) % len(sizes)], dims[dim]) for n in range(count)]
        return np.array(drawn, dtype=np.float32).reshape(shape)
    if axis is None:
        return rng.integers(0, bound + 1, shape).astype(np.float32)
    sizes = group_sizes(tile, iterations)
    data = np.zeros(shape, dtype=np.float32)
    moved = np.moveaxis(data, axis, -1)
    for n, fiber in enumerate(np.ndindex(*moved.shape[:-1])):
        start = (data_set * (moved.shape[-1] - 1) + n) % len(sizes)
        groups = [sizes[(start + g) % len(sizes)] for g in range(moved.shape[-1] - 1)]
        moved[fiber] = np.minimum(np.cumsum([0, *groups]), bound)
    return data


def _offsets_axis(kernel: ir.Kernel, tensor: str) -> int | None:
    """The axis along which the kernel reads `tensor` at i and at i + 1."""
    elements = {e for e in tensor_elements_in((kernel.body, kernel.grid)) if e.tensor == tensor}
    for a in elements:
        for b in elements:
            steps = [index_algebra.difference(y, x) for x, y in zip(a.indices, b.indices)]
            if steps.count(1) == 1 and all(s in (0, 1) for s in steps):
                return steps.index(1)
    return None


def _feeds(kernel: ir.Kernel, tensor: str) -> tuple[str, int, int] | None:
    """Where an element of `tensor` is a term `a * T[..]` of a copy's coordinate
    along a named dimension D of box extent B: D, a and B (its values then count
    units of a elements, up to ceil(D / a), a tile being B / a of them)."""
    for stmt in walk(kernel.body):
        if not isinstance(stmt, (ir.AsyncLoad, ir.AsyncStore)):
            continue
        target = kernel.tensor(stmt.tensor)
        for dim, coord, box in zip(target.dims, stmt.coords, stmt.box):
            form = index_algebra.linear(coord)
            if form is None:
                continue
            for leaf, a in form[0].items():
                if isinstance(leaf, ir.TensorElement) and leaf.tensor == tensor and a > 0 \
                        and isinstance(dim, str):
                    return dim, a, box
    return None


def _counts(kernel: ir.Kernel, tensor: str) -> tuple[str, int] | None:
    """Where an element of `tensor` is a term of a ragged copy's END along a
    named dimension D: D and the largest box extent of those copies along it."""
    found: tuple[str, int] | None = None
    for stmt in walk(kernel.body):
        if not isinstance(stmt, (ir.AsyncLoad, ir.AsyncStore)) or stmt.ragged is None:
            continue
        dim = kernel.tensor(stmt.tensor).dims[stmt.ragged.dim]
        form = index_algebra.linear(stmt.ragged.end)
        if form is None or not isinstance(dim, str) or not any(
                isinstance(leaf, ir.TensorElement) and leaf.tensor == tensor and a == 1
                for leaf, a in form[0].items()):
            continue
        box = stmt.box[stmt.ragged.dim]
        found = (dim, max(box, found[1] if found is not None and found[0] == dim else 0))
    return found


def _size(dim: str | int, dims: dict[str, int]) -> int:
    return dims[dim] if isinstance(dim, str) else dim


def _last_tile(kernel: ir.Kernel, dims: dict[str, int]) -> dict:
    env: dict = {**dims, **{s.name: 1 for s in kernel.scalars}}
    env.update({f"@{b}": 0 for b in ("warp", "lane", "thread", "wg", "block", "rank")})
    env["@blocks"] = 1
    for axis in reversed(kernel.grid):  # a ragged grid's extents read the last axis
        try:
            env[f"tile.{axis.name}"] = max(int(scalar(extent(axis), env)) - 1, 0)
        except KeyError:  # an extent that reads elements: its first tile
            env[f"tile.{axis.name}"] = 0
    return env
