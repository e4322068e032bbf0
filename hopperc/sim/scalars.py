"""Integer scalars as the generated code computes them (and the f32 elements
element-wise math reads): evaluation of scalar expressions over an
environment, tensor elements, a persistent block's tile coordinates and a
ragged grid's walk. Shared by the simulator and the numpy reference."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Mapping

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir import raster
from hopperc.ir.arith import INTEGER_OPS
from hopperc.ir.scalars import WRAPPING_OPS, holds_data


def wrap_i32(value: int) -> int:
    """An integer as the i32 two's complement wraps it to."""
    return (value + 2 ** 31) % 2 ** 32 - 2 ** 31


_WRAPPED = {op: (lambda f: lambda a, b: wrap_i32(f(a, b)))(INTEGER_OPS[op])
            for op in WRAPPING_OPS}


@lru_cache(maxsize=None)
def _operation(expr: ir.ScalarOp) -> Callable[[int, int], int]:
    """An operation as the generated code computes it: `+ - *` wrap to i32 where a
    parameter or an element takes part (codegen/scalars.py, hk_wrap_*); the
    launch's sizes, coordinates and indices compute exactly, as the host's
    64-bit launch arithmetic and a ragged walk's 64-bit count do."""
    if expr.op in WRAPPING_OPS and holds_data(expr):
        return _WRAPPED[expr.op]
    return INTEGER_OPS[expr.op]


def scalar(expr: ir.ScalarExpr, env: Mapping[str, int], kernel_side: bool = True) -> int:
    """Evaluate an integer expression. `env` names dimensions, parameters, loop
    variables and carried registers by name, grid coordinates as `tile.m` and
    the builtins as `@warp`, `@wg`, `@lane`, `@thread`. `kernel_side`: as the
    kernel computes it (data's sums wrap); else exactly, as the host computes a
    launch's grid (runtime/launch_rules.py)."""
    if isinstance(expr, ir.Scalar):
        match expr.kind:
            case ir.ScalarKind.CONST:
                return expr.value
            case ir.ScalarKind.TILE:
                return env[f"tile.{expr.name}"]
            case ir.ScalarKind.BUILTIN:
                return env[f"@{expr.name}"]
        return env[expr.name]
    if isinstance(expr, ir.TensorElement):
        return element(env[element_key(expr.tensor)],
                       [scalar(i, env, kernel_side) for i in expr.indices])
    left = scalar(expr.left, env, kernel_side)
    if expr.op == "not":
        return int(not left)
    operation = _operation(expr) if kernel_side else INTEGER_OPS[expr.op]
    return operation(left, scalar(expr.right, env, kernel_side))


def element_key(tensor: str) -> str:
    """Where an environment holds the data of a tensor whose elements are read as
    scalars (the kernel never stores it, so every block sees the inputs)."""
    return f"[{tensor}]"


def element(data: np.ndarray, indices) -> int | float:
    """A tensor's element as the kernel reads it: 0 where an index is outside
    [0, dim) (the reader's predicate); an i32 element as an int."""
    if not all(0 <= i < n for i, n in zip(indices, data.shape)):
        return 0
    value = float(data[tuple(indices)])
    return int(value) if value.is_integer() else value


def taken_tile(kernel: ir.Kernel, index: int, env: Mapping[str, int],
               walk: ir.TileWalk | None = None) -> dict[str, int]:
    """The grid coordinates (`tile.m`, ...) of a persistent block's tile `index`
    (with clusters: of its tile in its cluster's run `index`); over a ragged
    grid (`walk`), the cursor registers moved to it as well."""
    if walk is not None:
        return walked_tile(walk, index, env)
    extents = tuple(scalar(e, env) for e in raster.run_extents(kernel))
    coords = raster.in_cluster(raster.coordinates(index, extents), kernel.cluster[0],
                               env.get("@rank", 0))
    return {f"tile.{axis.name}": c for axis, c in zip(kernel.grid, coords)}


def started_walk(walk: ir.TileWalk, env: Mapping[str, int]) -> dict[str, int]:
    """A ragged walk's registers at its start: the grid's tiles, the cursor at 0."""
    total = raster.count_tiles(walk, lambda e, g: scalar(e, {**env, f"tile.{walk.slowest}": g}))
    return {raster.WALK_TOTAL: total, raster.WALK_GROUP: 0, raster.WALK_FIRST: 0}


def walked_tile(walk: ir.TileWalk, index: int, env: Mapping[str, int]) -> dict[str, int]:
    """The coordinates of a ragged grid's tile `index`, and the cursor registers
    moved forward to it from where `env` has them (ir/raster.py's walk)."""
    group_env = dict(env)

    def tiles(group: int) -> int:
        group_env[f"tile.{walk.slowest}"] = group
        return scalar(raster.group_tiles(walk, ir.Scalar(ir.ScalarKind.TILE, walk.slowest)),
                      group_env)

    group, first = raster.advance(index, env[raster.WALK_GROUP], env[raster.WALK_FIRST],
                                  scalar(walk.extents[-1], env), tiles)
    group_env[f"tile.{walk.slowest}"] = group
    faster = raster.within_group(index - first, tuple(
        scalar(e, group_env) for e in walk.extents[:-1]))
    return {raster.WALK_GROUP: group, raster.WALK_FIRST: first, f"tile.{walk.slowest}": group,
            **{f"tile.{axis}": c for axis, c in zip(walk.axes, faster)}}


def compile_scalar(expr: ir.ScalarExpr) -> Callable[[Mapping[str, int]], int]:
    """`scalar` as a function of `env`, built once per expression: the simulator
    evaluates the same few expressions at every step, and a closure computes
    exactly what the walk computes without re-dispatching on the tree."""
    if isinstance(expr, ir.Scalar):
        if expr.kind is ir.ScalarKind.CONST:
            value = expr.value
            return lambda env: value
        name = {ir.ScalarKind.TILE: f"tile.{expr.name}",
                ir.ScalarKind.BUILTIN: f"@{expr.name}"}.get(expr.kind, expr.name)
        return lambda env: env[name]
    if isinstance(expr, ir.TensorElement):
        key, indices = element_key(expr.tensor), [compile_scalar(i) for i in expr.indices]
        return lambda env: element(env[key], [index(env) for index in indices])
    left = compile_scalar(expr.left)
    if expr.op == "not":
        return lambda env: int(not left(env))
    right, op = compile_scalar(expr.right), _operation(expr)
    return lambda env: op(left(env), right(env))


@lru_cache(maxsize=None)
def per_lane(expr: ir.ScalarExpr, names: tuple[str, ...] = ("lane", "thread")) -> bool:
    """Whether the value differs between the lanes of a warp (uses lane or thread);
    with `names` = all builtins: between any threads."""
    if isinstance(expr, ir.Scalar):
        return expr.kind is ir.ScalarKind.BUILTIN and expr.name in names
    return any(per_lane(operand, names) for operand in ir.operands(expr))


PER_THREAD = ("lane", "thread", "warp", "wg")
