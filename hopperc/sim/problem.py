"""The problem a simulation runs: dimension sizes, scalar arguments, input
tensors and the grid. Default sizes (`shapes.py`) are small but exercise what
matters: whole clusters, partial tiles, and loops long enough that every stage
of every ring is filled more than twice, so both parities and the wrap-around
are used."""
from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass

import numpy as np

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.elements import element_tensors
from hopperc.ir.index_algebra import names
from hopperc.ir.raster import count_tiles, launch_grid, ragged_walk, run_extents
from hopperc.runtime.launch_rules import (TensorShape, extent_names, illegal_shape,
                                          tile_count_problem)
from hopperc.sim.semaphores import uses_semaphores
from hopperc.sim.index_inputs import index_ranges
from hopperc.sim.shapes import (  # noqa: F401 - default_dims re-exported
    MAX_BLOCKS, default_dims, ring_depth)
from hopperc.sim.element_inputs import DATA_SETS, draw_elements
from hopperc.sim.scalars import element_key, scalar
from hopperc.sim.values import holding, round_to

PERSISTENT_BLOCKS = 2  # a persistent kernel's blocks, standing for the SMs
# Tensors live as f32 arrays: the inputs, a copy per schedule, the reference's
# copy and its expected outputs. Past this, refuse instead of thrashing.
MAX_TENSOR_BYTES = 2 << 30
COPIES = 4


@dataclass
class Problem:
    dims: dict[str, int]
    scalars: dict[str, float]
    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...]  # tensors the kernel stores to
    grid: list[dict[str, int]]  # tile coordinates of each block simulated (persistent:
    # its index and the blocks, `@block` and `@blocks`; with clusters, `@cluster`,
    # `@clusters` and each block's `@rank`)
    blocks: int = 0  # blocks in the whole grid, when `grid` is a subset of it
    tiles: int = 0  # a persistent kernel's output tiles, which its blocks share
    cluster: int = 1  # blocks per cluster: `grid` lists each cluster's blocks together
    element_tensors: tuple[str, ...] = ()  # read as scalars (TensorElement)
    # Other data sets of the i32 tensors read as scalars (`element_inputs.py`)
    element_sets: tuple[dict[str, np.ndarray], ...] = ()

    @property
    def data_sets(self) -> int:
        return 1 + len(self.element_sets)

    def data_set(self, index: int) -> "Problem":
        """This problem with data set `index` (0: its own inputs) of the tensors
        read as scalars."""
        if index == 0:
            return self
        return dataclasses.replace(self, inputs={**self.inputs,
                                                 **self.element_sets[index - 1]})

    def clusters(self) -> list[list[dict[str, int]]]:
        """The blocks of `grid`, a cluster at a time (each block's `@rank` in it)."""
        return [self.grid[i:i + self.cluster] for i in range(0, len(self.grid), self.cluster)]

    def env(self, block: dict[str, int]) -> dict[str, int]:
        return {**self.dims, **self.scalars, **self.elements(),
                **{k if k.startswith("@") else f"tile.{k}": v for k, v in block.items()}}

    def elements(self) -> dict[str, np.ndarray]:
        """The data of the tensors whose elements the kernel reads as scalars."""
        return {element_key(name): self.inputs[name] for name in self.element_tensors}

    def fresh_tensors(self) -> dict[str, np.ndarray]:
        return {name: data.copy() for name, data in self.inputs.items()}

    def describe(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.dims.items())
        run = f"{len(self.grid)} block{'s' * (len(self.grid) != 1)}"
        if self.cluster > 1:
            run += f" in clusters of {self.cluster}"
        if self.tiles:
            run += f" taking {self.tiles} tiles in turn (persistent)"
        if self.blocks > len(self.grid):
            run = (f"{self.blocks} blocks, {len(self.grid)} simulated (the first, the last, the "
                   "last along each grid axis, and blocks spread between them)")
        if self.element_sets:
            run += (f", {self.data_sets} data sets of {', '.join(self.element_sets[0])} (read as "
                    "scalars)")
        return f"{dims or 'no dimensions'}, {run}"


def check_launch(kernel: ir.Kernel, dims: dict[str, int],
                 scalars: dict[str, int] | None = None,
                 fix: str = "give another with `hopperc sim --shape NAME=VALUE,...`") -> None:
    """Refuse a shape the runtime would refuse (`runtime.launch_rules`, the one
    definition), with its message and `fix`, at the tensor at fault or the grid;
    without `scalars`, the grid axes whose extents read none."""
    grid = [g for g in launch_grid(kernel.grid) if scalars is not None or g.extent is None
            or set(extent_names(g.extent)) <= set(dims)]
    problem = illegal_shape(launch_tensors(kernel), grid, kernel.cluster, kernel.persistent,
                            dims, scalars)
    if problem:
        span = next((t.span for t in kernel.tensors if t.name == problem.tensor),
                    kernel.grid[0].span if kernel.grid and not problem.tensor else kernel.span)
        raise CompileError(span, f"{problem.message}: the GPU cannot launch this shape; {fix}")


def launch_tensors(kernel: ir.Kernel) -> list[TensorShape]:
    tma = {s.tensor for s in walk(kernel.body) if isinstance(s, (ir.AsyncLoad, ir.AsyncStore))
           and s.engine is ir.Engine.TMA}
    return [TensorShape(t.name, t.dtype.nbytes, t.dims, t.name in tma) for t in kernel.tensors]


def stored_tensors(kernel: ir.Kernel) -> set[str]:
    """The tensors the kernel stores to (the outputs, and inputs it rewrites),
    flag tensors among them: they are given zeroed, as the caller must."""
    return {s.tensor for s in walk(kernel.body)
            if isinstance(s, (ir.AsyncStore, ir.GlobalRowStore, ir.Signal, ir.Wait,
                              ir.Count))}


def reduced_tensors(kernel: ir.Kernel) -> set[str]:
    """The tensors the kernel adds into (TMA reduce-adds): their first values matter."""
    return {s.tensor for s in walk(kernel.body) if isinstance(s, ir.AsyncStore) and s.reduce_add}


def make_problem(kernel: ir.Kernel, dims: dict[str, int], seed: int = 0,
                 max_blocks: int | None = None) -> Problem:
    """Random inputs for `dims`; with `max_blocks`, a grid larger than that is
    represented by a subset of its blocks (the reference runs the same ones)."""
    check_launch(kernel, dims)
    rng = np.random.default_rng(seed)
    stored, reduced = stored_tensors(kernel), reduced_tensors(kernel)
    inputs = {}
    indices = index_ranges(kernel, dims)
    elements = tuple(element_tensors(kernel))
    element_sets = []
    drawn = any(t.name in elements and t.dtype is ir.DType.I32 for t in kernel.tensors)
    for data_set in range(DATA_SETS if drawn else 1):
        element_sets.append({t.name: draw_elements(kernel, t, dims, rng, data_set,
                                                   2 * ring_depth(kernel) + 1)
                             for t in kernel.tensors
                             if t.name in elements and t.dtype is ir.DType.I32})
    for t in kernel.tensors:
        shape = tuple(dims[d] if isinstance(d, str) else d for d in t.dims)
        if t.name in element_sets[0]:
            inputs[t.name] = element_sets[0][t.name]
        elif t.name in stored and t.name not in reduced:
            inputs[t.name] = np.zeros(shape, dtype=holding(t.dtype))
        elif t.name in indices:  # valid indices or lengths, not -1 / 0 / 1
            inputs[t.name] = rng.integers(0, max(indices[t.name], 1), shape).astype(
                holding(t.dtype))
        else:
            inputs[t.name] = round_to(t.dtype, rng.uniform(-1, 1, shape))
    scalars = {s.name: (float(round_to(s.dtype, rng.uniform(0.5, 2))) if s.dtype.is_float
                        and s.dtype is not ir.DType.I32 else int(rng.integers(1, 4)))
               for s in kernel.scalars}
    return given_problem(kernel, dims, inputs, scalars, tuple(element_sets[1:]), max_blocks)


def given_problem(kernel: ir.Kernel, dims: dict[str, int], inputs: dict[str, np.ndarray],
                  scalars: dict[str, float], element_sets: tuple[dict[str, np.ndarray], ...] = (),
                  max_blocks: int | None = None) -> Problem:
    """The problem of these tensors (f32 arrays of their dtype's values, the stored
    ones included) and scalar arguments: its grid, from the dimensions, the
    scalars and the elements read as scalars; `element_sets`: other data sets of
    the latter."""
    check_launch(kernel, dims, {s.name: scalars[s.name] for s in kernel.scalars
                                if s.dtype is ir.DType.I32})
    stored = stored_tensors(kernel)
    elements = tuple(element_tensors(kernel))
    env = {**dims, **scalars, **{element_key(name): inputs[name] for name in elements}}
    names = [axis.name for axis in kernel.grid]
    ragged = ragged_walk(kernel.grid)
    if ragged is not None:  # a ragged grid: the tiles its walk counts, on each data set
        counts = [count_tiles(ragged, lambda e, g: scalar(e, {
            **env, **{element_key(n): v for n, v in data.items()}, f"tile.{ragged.slowest}": g}))
            for data in ({n: inputs[n] for n in elements}, *element_sets)]
        problem = next(filter(None, map(tile_count_problem, counts)), None)
        if problem:
            raise CompileError(kernel.grid[0].span, f"{problem}: the kernel would stop (trap) "
                               "when it counts them; give smaller dimensions with `hopperc sim "
                               "--shape NAME=VALUE,...`")
        blocks = counts[0]
    else:
        blocks = math.prod(scalar(axis.extent, env, kernel_side=False) for axis in kernel.grid)
    if kernel.persistent:
        # Fewer blocks than tiles, as SMs: each block takes several tiles, so the
        # rings wrap across tiles and the tile loop's syncs are exercised. With
        # clusters, fewer clusters than runs of tiles.
        size = kernel.cluster[0]
        runs = blocks if ragged else math.prod(scalar(e, env, kernel_side=False)
                                               for e in run_extents(kernel))
        resident = max(1, min(runs // 2, PERSISTENT_BLOCKS))
        if size == 1:
            grid = [{"@block": b, "@blocks": resident} for b in range(resident)]
        else:
            grid = [{"@cluster": c, "@clusters": resident, "@rank": r}
                    for c in range(resident) for r in range(size)]
        return Problem(dims, scalars, inputs, tuple(sorted(stored)), grid, tiles=blocks,
                       cluster=size, element_tensors=elements, element_sets=element_sets)
    extents = [scalar(axis.extent, env, kernel_side=False) for axis in kernel.grid]
    shape = list(kernel.cluster[:len(extents)])
    size = math.prod(kernel.cluster)
    # Whole clusters, each block with its rank (x fastest, as %cluster_ctarank).
    clusters = [e // c for e, c in zip(extents, shape)]
    # Blocks that wait on each other's flags all run: a subset could wait forever.
    picks = representative_blocks(clusters, max(1, max_blocks // size), shared_axes(kernel)) \
        if max_blocks and blocks > max_blocks and not uses_semaphores(kernel) \
        else list(np.ndindex(*clusters))
    grid = []
    for cluster in picks:
        for rank, within in enumerate(np.ndindex(*reversed(shape))):
            block = [c * n + w for c, n, w in zip(cluster, shape, reversed(within))]
            grid.append({**{n: int(c) for n, c in zip(names, block)},
                         **({"@rank": rank} if size > 1 else {})})
    return Problem(dims, scalars, inputs, tuple(sorted(stored)), grid,
                   blocks if len(grid) < blocks else 0, cluster=size, element_tensors=elements,
                   element_sets=element_sets)


def shared_axes(kernel: ir.Kernel) -> list[int]:
    """The grid axes along which two blocks may store the same box: those the
    coordinates of some store (TMA, bulk, a row vector's) do not name."""
    stores = [s.coords if isinstance(s, ir.AsyncStore) else (*s.index, s.start)
              for s in walk(kernel.body) if isinstance(s, (ir.AsyncStore, ir.GlobalRowStore))]
    named = [{n for c in coords for n in names(c, ir.ScalarKind.TILE)} for coords in stores]
    return [i for i, axis in enumerate(kernel.grid) if any(axis.name not in n for n in named)]


def representative_blocks(extents: list[int], limit: int, shared: list[int] = ()
                          ) -> list[tuple[int, ...]]:
    """At most `limit` blocks of a grid, in grid order: the first and the last,
    the last along each axis (where partial tiles are), then their neighbours
    along each axis in `shared` (blocks that may store the same box meet, for
    the record across blocks, sim/block_accesses.py), then blocks spread evenly
    over the rest, without enumerating the grid."""
    total = math.prod(extents)
    edges = [(0,) * len(extents), tuple(e - 1 for e in extents)]
    edges += [tuple(e - 1 if i == axis else 0 for i, e in enumerate(extents))
              for axis in range(len(extents))]
    picks = list(dict.fromkeys(edges))
    picks += [tuple(c + (1 if c + 1 < extents[axis] else -1) if i == axis else c
                    for i, c in enumerate(pick))
              for pick in picks for axis in shared if extents[axis] > 1]
    picks += [tuple(int(c) for c in np.unravel_index(round(k * (total - 1) / limit), extents))
              for k in range(1, limit)]
    chosen = list(dict.fromkeys(picks))[:limit]
    return sorted(chosen, key=lambda c: int(np.ravel_multi_index(c, extents)))


def check_size(kernel: ir.Kernel, dims: dict[str, int]) -> None:
    """Refuse to simulate, at the largest tensor, a problem whose tensors would not
    fit in host memory (a fixed extent of 2^20 makes the default shapes huge)."""
    sizes = {t.name: math.prod(dims[d] if isinstance(d, str) else d for d in t.dims)
             for t in kernel.tensors}
    needed = COPIES * 4 * sum(sizes.values())
    if needed > MAX_TENSOR_BYTES:
        largest = max(kernel.tensors, key=lambda t: sizes[t.name])
        shape = " ".join(f"{k}={v}" for k, v in dims.items()) or "fixed extents only"
        raise CompileError(largest.span, f"simulating this kernel at {shape} needs about "
                           f"{needed / 2**30:.1f} GiB of host memory for its tensors "
                           f"('{largest.name}' alone has {sizes[largest.name]:,} elements), "
                           f"more than the simulator's {MAX_TENSOR_BYTES / 2**30:.0f} GiB; "
                           "give smaller dimensions with `hopperc sim --shape NAME=VALUE,...` "
                           "or smaller fixed extents")
