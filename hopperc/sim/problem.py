"""The problem a simulation runs: dimension sizes, scalar arguments, input
tensors and the grid. Default sizes are small but exercise what matters: two
tiles along each grid axis, and loops long enough that every stage of every
ring is filled more than twice, so both parities and the wrap-around are used."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.values import round_to

GRID_TILES = 2


@dataclass
class Problem:
    dims: dict[str, int]
    scalars: dict[str, float]
    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...]  # tensors the kernel stores to
    grid: list[dict[str, int]]  # tile coordinates of each block

    def env(self, block: dict[str, int]) -> dict[str, int]:
        return {**self.dims, **self.scalars, **{f"tile.{k}": v for k, v in block.items()}}

    def fresh_tensors(self) -> dict[str, np.ndarray]:
        return {name: data.copy() for name, data in self.inputs.items()}

    def describe(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.dims.items())
        return f"{dims or 'no dimensions'}, {len(self.grid)} block{'s' * (len(self.grid) != 1)}"


def default_dims(kernel: ir.Kernel) -> dict[str, int]:
    """Each dimension as a multiple of the tile sizes that divide it: GRID_TILES
    tiles for grid axes, 2 x ring depth + 1 iterations for loop bounds."""
    names = [d for t in kernel.tensors for d in t.dims if isinstance(d, str)]
    divisors: dict[str, list[int]] = {}
    loop_dims: set[str] = set()
    for axis in kernel.grid:
        if axis.dim is not None:
            divisors.setdefault(axis.dim, []).append(axis.divisor)
    for stmt in walk(kernel.body):
        if isinstance(stmt, ir.ForLoop):
            for dim, divisor in _divided_dims(stmt.stop):
                divisors.setdefault(dim, []).append(divisor)
                loop_dims.add(dim)
    depth = ring_depth(kernel)
    dims = {}
    for name in dict.fromkeys(names):
        unit = math.lcm(*divisors.get(name, [1]))
        dims[name] = unit * ((2 * depth + 1) if name in loop_dims else GRID_TILES)
    return dims


def ring_depth(kernel: ir.Kernel) -> int:
    """The longest ring the kernel may cycle through, compiler-made or written by
    hand: pipeline stages, mbarrier arrays, staged buffers and the planes of
    rank-3 buffers. 2 x depth + 1 iterations fill each of its slots more than
    twice, so both parities and the wrap-around run."""
    depths = [p.stages for p in kernel.pipelines] + [b.count for b in kernel.barriers]
    depths += [b.stages for b in kernel.buffers]
    depths += [b.shape[0] for b in kernel.buffers if len(b.shape) == 3]
    return max(depths + [1])


def _divided_dims(expr: ir.ScalarExpr):
    if isinstance(expr, ir.ScalarOp):
        if expr.op in ("/", "//") and isinstance(expr.left, ir.Scalar) and \
                expr.left.kind is ir.ScalarKind.DIM and isinstance(expr.right, ir.Scalar) and \
                expr.right.kind is ir.ScalarKind.CONST:
            yield expr.left.name, int(expr.right.value)
        for side in (expr.left, expr.right):
            if side is not None:
                yield from _divided_dims(side)
    elif isinstance(expr, ir.Scalar) and expr.kind is ir.ScalarKind.DIM:
        yield expr.name, 1


def make_problem(kernel: ir.Kernel, dims: dict[str, int], seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    stored = {s.tensor for s in walk(kernel.body) if isinstance(s, ir.AsyncStore)}
    inputs = {}
    for t in kernel.tensors:
        shape = tuple(dims[d] if isinstance(d, str) else d for d in t.dims)
        if t.name in stored:
            inputs[t.name] = np.zeros(shape, dtype=np.float32)
        else:
            inputs[t.name] = round_to(t.dtype, rng.uniform(-1, 1, shape))
    scalars = {s.name: (float(round_to(s.dtype, rng.uniform(0.5, 2))) if s.dtype.is_float
                        and s.dtype is not ir.DType.I32 else int(rng.integers(1, 4)))
               for s in kernel.scalars}
    env = {**dims, **scalars}
    extents = []
    for axis in kernel.grid:
        extent = axis.divisor if axis.dim is None else -(-env[axis.dim] // axis.divisor)
        extents.append((axis.name, extent))
    grid = [dict(zip([n for n, _ in extents], coords))
            for coords in np.ndindex(*[e for _, e in extents])] if extents else [{}]
    grid = [{k: int(v) for k, v in b.items()} for b in grid]
    return Problem(dims, scalars, inputs, tuple(sorted(stored)), grid)
