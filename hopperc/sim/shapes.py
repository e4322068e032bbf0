"""Default problem sizes, from what each dimension is used for in the lowered
kernel, so that `check` runs every path of it on a small problem:

- a grid axis gets two tiles (three in a pingpong kernel, and in one whose blocks
  signal each other, where loops do not grow it: every block runs), a whole number of
  clusters along it, and two clusters where that stays within the blocks the
  simulator runs; the slowest axis of a ragged grid gets four, so that its
  values' tile counts differ (and some are 0 where the extents allow);
- a loop bound gets 2 x ring depth + 1 iterations (every slot of the longest
  ring filled more than twice: both parities and the wrap-around), found by
  evaluating the loop's bounds, whatever expression they are (a loop split at
  its boundary iterations: the bounds of the loop as written);
- nested loops multiply: past NEST_ITERATIONS iterations of a nest's innermost
  body, the outer loops run fewer times (twice, then once), the innermost keeps
  its ring's iterations;
- every dimension ends in a partial tile (of its grid divisor, loop divisor, or
  the TMA box along it), cut past the middle of the tile, while every TMA
  stride stays a multiple of 16 bytes (`runtime.launch_rules`); a dimension a
  bulk copy walks, or that divides another, stays whole;
- a dimension divided by another (`H / HKV`, a group count) is at least twice
  it, so each group has two members or more;
- a dimension holds every box's start along it (`_reach`), at the coordinate's
  farthest over the grid's tiles, the role's warps and the loops around the copy
  (`X[tile.m, 2 * tile.h + 1]` on `grid(h: H)`: box 2H - 1), grown by whole boxes,
  the last partial: a box wholly past the tensor's end is neither read nor
  written, so whatever orders it would go untested;
- a dimension only tensors read as scalars have reaches past the indices the
  last tile reads (`element_inputs.py`, which also draws their values);
- a flag tensor's dimension (`signal F[t]`) holds every flag index, as a box's.
"""
from __future__ import annotations

import dataclasses
import math

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, scalars_in, walk
from hopperc.ir.raster import TILE_LOOP, ragged_walk
from hopperc.runtime.launch_rules import TMA_ALIGNMENT
from hopperc.sim.element_inputs import reach_element_dims
from hopperc.sim.scalars import scalar

GRID_TILES = 2
RAGGED_VALUES = 4  # a ragged grid's slowest axis: values with different tile counts
MAX_BLOCKS = 8  # a larger grid is simulated on a representative subset of its blocks
NEST_ITERATIONS = 128  # most default iterations of the innermost body of nested loops
MAX_TRIPS = 64  # the most tiles a default loop dimension is searched over


@dataclasses.dataclass
class _Use:
    units: set[int] = dataclasses.field(default_factory=set)  # grid and loop divisors
    boxes: set[int] = dataclasses.field(default_factory=set)  # TMA box extents along it
    granule: int = 1  # the size is a multiple of this (TMA strides, bulk slices)
    whole: bool = False  # no partial tile
    tiles: int = 0  # tiles along a grid axis (0: not one)
    loops: bool = False  # in a loop's bounds
    fixed: bool = False  # a grid axis whose tile count loops do not grow

    @property
    def unit(self) -> int:
        return math.lcm(*self.units) if self.units else max(self.boxes, default=1)


def default_dims(kernel: ir.Kernel) -> dict[str, int]:
    names = list(dict.fromkeys(d for t in kernel.tensors for d in t.dims if isinstance(d, str)))
    uses = {name: _Use() for name in names}
    _tensor_uses(kernel, uses)
    _grid_uses(kernel, uses)
    loops = kernel_loops(kernel)
    for loop, _ in loops:
        for dim, divisor in divided_dims(source_bounds(loop)[1]):
            if divisor > 1:  # `K / 64` counts tiles of 64; `K + 63` tiles of nothing
                uses[dim].units.add(divisor)
            uses[dim].loops = True
    groups = _groupings(kernel, set(names))
    for _, divisor in groups:
        uses[divisor].whole = True
    dims = {name: size(use, max(use.tiles, 1)) if use.tiles or use.loops or use.unit > 1
            else GRID_TILES * use.granule for name, use in uses.items()}
    _fitkernel_loops(kernel, loops, uses, dims)
    for _ in range(len(names) + 1):  # boxes in their tensors, groups whole: a fixed point
        before = dict(dims)
        for name, farthest in _reach(kernel, dims).items():
            use = uses[name]
            tiles = max(use.tiles, 1)
            while dims[name] <= farthest:
                tiles += 1
                dims[name] = size(use, tiles)
        for group, divisor in groups:
            if dims[group] < 2 * dims[divisor] or dims[group] % dims[divisor]:
                dims[group] = dims[divisor] * max(2, -(-dims[group] // dims[divisor]))
        if dims == before:
            break
    reach_element_dims(kernel, dims, 2 * ring_depth(kernel) + 1)
    return dims


def size(use: _Use, tiles: int) -> int:
    """`tiles` tiles of the dimension's unit, the last one partial: cut just past
    its middle where a granule allows, else whole."""
    unit, granule = use.unit, use.granule
    base = unit * (tiles - 1)
    cuts = [] if use.whole else [r for r in range(1, unit) if (base + r) % granule == 0]
    if cuts:
        return base + min(cuts, key=lambda r: (abs(r - (unit // 2 + 1)), -r))
    return -(-unit * tiles // granule) * granule


def ring_depth(kernel: ir.Kernel) -> int:
    """The longest ring the kernel may cycle through, compiler-made or written by
    hand: pipeline stages, mbarrier arrays, staged buffers and the planes of
    rank-3 buffers. 2 x depth + 1 iterations fill each of its slots more than
    twice, so both parities and the wrap-around run."""
    depths = [p.stages for p in kernel.pipelines] + [b.count for b in kernel.barriers]
    depths += [b.stages for b in kernel.buffers]
    depths += [b.shape[0] for b in kernel.buffers if len(b.shape) == 3]
    return max(depths + [1])


def _tensor_uses(kernel: ir.Kernel, uses: dict[str, _Use]) -> None:
    """TMA strides (a multiple of 16 bytes), TMA boxes and bulk slices."""
    for stmt in walk(kernel.body):
        if isinstance(stmt, ir.GlobalRowStore):  # a row vector's run of the last dimension
            dims = kernel.tensor(stmt.tensor).dims
            runs = (stmt.rows, stmt.columns) if stmt.columns else (stmt.rows,)
            for dim, run in zip(dims[-len(runs):], runs):  # a tile's add: rows and columns
                if isinstance(dim, str):
                    uses[dim].boxes.add(run)
        if not isinstance(stmt, (ir.AsyncLoad, ir.AsyncStore)):
            continue
        tensor = kernel.tensor(stmt.tensor)
        box = stmt.box[-len(tensor.dims):]
        for dim, extent in zip(tensor.dims[len(tensor.dims) - len(box):], box):
            if isinstance(dim, str):
                uses[dim].boxes.add(extent)
                if stmt.engine is ir.Engine.BULK:  # no clipping at the tensor's end
                    uses[dim].granule = math.lcm(uses[dim].granule, extent)
                    uses[dim].whole = True
        inner = tensor.dims[-1]
        if stmt.engine is ir.Engine.TMA and len(tensor.dims) > 1 and isinstance(inner, str):
            multiple = TMA_ALIGNMENT // math.gcd(TMA_ALIGNMENT, tensor.dtype.nbytes)
            uses[inner].granule = math.lcm(uses[inner].granule, multiple)


def _reach(kernel: ir.Kernel, dims: dict[str, int]) -> dict[str, int]:
    """For each dimension, the farthest start of a box (or stored row) along it
    over every tile of the grid (the blocks' tiles, or the persistent walk's),
    every warp and warpgroup of the role, and every iteration of the loops
    around the copy. A coordinate that reads data, a carried register or a
    parameter is left out, and so is one whose range grows with the dimension
    it indexes (`4 * tile.n + 3` along N on `grid(n: N / 256)`: no size holds
    the last tile's last box, the partial tile's rule)."""
    reach: dict[str, int] = {}
    for stmt, loops, warps in _copies(kernel.body, (), kernel.threads // 32):
        tensor = kernel.tensor(stmt.tensor)
        if isinstance(stmt, ir.GlobalRowStore):
            starts = (stmt.start,) if stmt.row_start is None else (stmt.row_start, stmt.start)
            pairs = zip(tensor.dims, (*stmt.index, *starts))
        elif isinstance(stmt, (ir.Signal, ir.Wait, ir.Count)):  # a flag: one element
            pairs = zip(tensor.dims, stmt.index)
        else:
            box = stmt.box[-len(tensor.dims):]
            pairs = zip(tensor.dims[len(tensor.dims) - len(box):], stmt.coords[-len(box):])
        for dim, coord in pairs:
            if isinstance(dim, str):
                farthest = _farthest(kernel, coord, dim, loops, warps, dims)
                if farthest is not None:
                    reach[dim] = max(reach.get(dim, 0), farthest)
    return reach


def _copies(block: ir.Block, loops: tuple[ir.ForLoop, ...], warps: int):
    """Every box copy, row store and flag, with the loops around it (outermost
    first) and the warps of the role that runs it."""
    for stmt in block.stmts:
        if isinstance(stmt, (ir.AsyncLoad, ir.AsyncStore, ir.GlobalRowStore, ir.Signal, ir.Wait,
                             ir.Count)):
            yield stmt, loops, warps
        inner = loops + (stmt,) if isinstance(stmt, ir.ForLoop) else loops
        role = stmt.role.active_warps if isinstance(stmt, ir.RoleBlock) else warps
        for body in bodies(stmt):
            yield from _copies(body, inner, role)


def _farthest(kernel: ir.Kernel, coord: ir.ScalarExpr, dim: str,
              loops: tuple[ir.ForLoop, ...], warps: int, dims: dict[str, int]) -> int | None:
    """The largest value of `coord` over the values its variables take (None:
    one no default shape decides, or one that grows with `dim`)."""
    extents = {axis.name: axis.extent for axis in kernel.grid}
    needed = list(scalars_in(coord))
    used = []  # the loops it names, and the loops their bounds name, outermost first
    for loop in reversed(loops):
        if any(s.kind is ir.ScalarKind.LOOP and s.name == loop.var for s in needed):
            used.insert(0, loop)
            needed += [s for bound in (loop.start, loop.stop) for s in scalars_in(bound)]
    tiles: set[str] = set()  # the axes it names, and the axes their extents name
    while new := {s.name for s in needed if s.kind is ir.ScalarKind.TILE} - tiles:
        if new - set(extents):
            return None
        tiles |= new
        needed += [s for name in new for s in scalars_in(extents[name])]
    exprs = [coord, *(extents[name] for name in tiles),
             *(b for loop in used for b in (loop.start, loop.stop))]
    if any(s.kind in (ir.ScalarKind.CARRIED, ir.ScalarKind.PARAM) or
           s.kind is ir.ScalarKind.BUILTIN and s.name not in ("warp", "wg") or
           s.kind is ir.ScalarKind.DIM and s.name == dim for s in needed) or \
            any(_reads_elements(e) for e in exprs):
        return None
    zero = ir.Scalar(ir.ScalarKind.CONST, "", 0)
    # the slowest axis first: a ragged grid's extents name it
    ranges = [(f"tile.{axis.name}", zero, axis.extent) for axis in reversed(kernel.grid)
              if axis.name in tiles]
    if any(s.kind is ir.ScalarKind.BUILTIN for s in needed):  # the role's warps
        ranges.append(("@warp", zero, ir.Scalar(ir.ScalarKind.CONST, "", warps)))
    ranges += [(loop.var, loop.start, loop.stop) for loop in used]
    return max(_coordinate_values(coord, ranges, dict(dims)), default=None)


ENDS = 4  # values taken at each end of a long range


def _coordinate_values(coord: ir.ScalarExpr, ranges, env: dict[str, int]):
    """`coord` at the values of the variables `ranges` names, each between its
    bounds (evaluated with the ones before it): every value of a short range, the
    first and last ENDS of a long one (a linear coordinate is farthest at an end;
    the cap keeps a grid of 2^30 tiles or a loop of 10^6 iterations from being
    enumerated)."""
    if not ranges:
        yield max(scalar(coord, env), 0)
        return
    (name, start, stop), inner = ranges[0], ranges[1:]
    values = range(scalar(start, env), scalar(stop, env))
    if len(values) > 2 * ENDS:
        values = [*values[:ENDS], *values[-ENDS:]]
    for value in values:
        step = {name: value, "@wg": value // 4} if name == "@warp" else {name: value}
        yield from _coordinate_values(coord, inner, {**env, **step})


def _reads_elements(expr: ir.ScalarExpr) -> bool:
    return isinstance(expr, ir.TensorElement) or any(_reads_elements(o)
                                                     for o in ir.operands(expr))


def _grid_uses(kernel: ir.Kernel, uses: dict[str, _Use]) -> None:
    """Tiles along each grid axis: whole clusters, two of them where cheap."""
    # Blocks that signal each other: three, so that work shared out evenly over them
    # still splits a tile between two of them more often than two would.
    flags = any(isinstance(s, (ir.Signal, ir.Wait, ir.Count)) for s in walk(kernel.body))
    tiles = [GRID_TILES + 1 if kernel.pingpong or flags else GRID_TILES for _ in kernel.grid]
    if ragged_walk(kernel.grid):  # more values of the slowest axis: empty and uneven ones
        tiles[-1] = RAGGED_VALUES
    tiles = [-(-t // c) * c for t, c in zip(tiles, kernel.cluster)]
    per_cluster = math.prod(kernel.cluster)
    if per_cluster > 1 and not kernel.persistent and math.prod(tiles) // per_cluster < 2 and \
            2 * math.prod(tiles) <= MAX_BLOCKS:
        axis = next(i for i, c in enumerate(kernel.cluster[:len(tiles)]) if c > 1)
        tiles[axis] *= 2
    for axis, count in zip(kernel.grid, tiles):
        for dim, divisor in divided_dims(axis.extent):
            use = uses[dim]
            use.units.add(divisor)
            use.tiles = max(use.tiles, count)
            use.fixed = flags  # all of its blocks run interleaved: loops do not grow it


def kernel_loops(kernel: ir.Kernel) -> list[tuple[ir.ForLoop, tuple[ir.ForLoop, ...]]]:
    """Every loop (not a persistent kernel's tile loop) with the loops around it."""
    out: list[tuple[ir.ForLoop, tuple[ir.ForLoop, ...]]] = []

    def visit(block: ir.Block, outer: tuple[ir.ForLoop, ...]) -> None:
        for stmt in block.stmts:
            inner = outer
            if isinstance(stmt, ir.ForLoop) and not (kernel.persistent and stmt.var == TILE_LOOP):
                out.append((stmt, outer))
                inner = outer + (stmt,)
            for body in bodies(stmt):
                visit(body, inner)
    visit(kernel.body, ())
    return out


def _fitkernel_loops(kernel: ir.Kernel, loops, uses: dict[str, _Use], dims: dict[str, int]) -> None:
    """Grow each loop dimension until its loops run their target iterations:
    2 x ring depth + 1, less for outer loops of a nest past NEST_ITERATIONS."""
    target = {id(loop): 2 * ring_depth(kernel) + 1 for loop, _ in loops}
    innermost = {id(loop) for loop, _ in loops} - {id(o) for _, outer in loops for o in outer}
    for _ in range(2 * len(loops) + 1):
        for loop, _ in loops:
            for dim in loop_dims(loop):
                _grow(dim, [(lp, ou) for lp, ou in loops if dim in loop_dims(lp)],
                      target, uses, dims, kernel)
        over = [(loop, outer) for loop, outer in loops if id(loop) in innermost and math.prod(
            max(_trips(o, ou, dims, kernel) or 1, 1) for o, ou in loops
            if any(o is x for x in outer + (loop,))) > NEST_ITERATIONS]
        if not over:
            return
        loop, outer = over[0]
        lowered = False
        for cap in (2, 1):  # the outermost loop with a dimension in its bounds first
            for o in outer:
                if target[id(o)] > cap and loop_dims(o):
                    target[id(o)] = cap
                    for dim in loop_dims(o):
                        use = uses[dim]
                        dims[dim] = size(use, max(use.tiles, 1))
                    lowered = True
                    break
            if lowered:
                break
        if not lowered:
            return


def _grow(dim: str, loops, target: dict[int, int], uses: dict[str, _Use],
          dims: dict[str, int], kernel: ir.Kernel) -> None:
    use = uses[dim]
    if use.fixed:
        return
    best = None  # the smallest size that comes closest, where none reaches every target
    for tiles in range(max(use.tiles, 1), MAX_TRIPS + 1):
        dims[dim] = size(use, tiles)
        trips = [(_trips(loop, outer, dims, kernel), target[id(loop)]) for loop, outer in loops]
        if all(t is None or t >= want for t, want in trips):  # None: no shape fixes it
            return
        short = sum(want - t for t, want in trips if t is not None and t < want)
        if best is None or short < best[0]:
            best = (short, dims[dim])
    if best is not None:  # a loop no size of this dimension lengthens (a peeled one)
        dims[dim] = best[1]


def _trips(loop: ir.ForLoop, outer, dims: dict[str, int], kernel: ir.Kernel) -> int | None:
    """The loop's iterations in block 0 at the outer loops' first iteration; None
    where its bounds depend on what the default shape cannot fix."""
    env: dict[str, int] = {**dims, **{s.name: 1 for s in kernel.scalars}}
    env.update({f"tile.{axis.name}": 0 for axis in kernel.grid})
    env.update({f"@{b}": 0 for b in ("warp", "lane", "thread", "wg", "block", "blocks")})
    env["@blocks"] = 1
    try:
        for o in outer:
            env[o.var] = scalar(o.start, env)
        start, stop = source_bounds(loop)
        return scalar(stop, env) - scalar(start, env)
    except (KeyError, ZeroDivisionError):
        return None


def source_bounds(loop: ir.ForLoop) -> tuple[ir.ScalarExpr, ir.ScalarExpr]:
    """The bounds of the source loop: a part of one split at its boundary
    iterations runs the iterations the whole loop would (its own are fewer)."""
    return (loop.split.start, loop.split.stop) if loop.split else (loop.start, loop.stop)


def loop_dims(loop: ir.ForLoop) -> list[str]:
    return list(dict.fromkeys(d for e in source_bounds(loop) for d, _ in divided_dims(e)))


def divided_dims(expr: ir.ScalarExpr):
    if isinstance(expr, ir.ScalarOp):
        if expr.op in ("/", "//") and isinstance(expr.left, ir.Scalar) and \
                expr.left.kind is ir.ScalarKind.DIM and isinstance(expr.right, ir.Scalar) and \
                expr.right.kind is ir.ScalarKind.CONST:
            yield expr.left.name, int(expr.right.value)
        for side in (expr.left, expr.right):
            if side is not None:
                yield from divided_dims(side)
    elif isinstance(expr, ir.Scalar) and expr.kind is ir.ScalarKind.DIM:
        yield expr.name, 1


def _groupings(kernel: ir.Kernel, names: set[str]) -> list[tuple[str, str]]:
    """(a, b) for every `a / b` (or `//`, `%`) of two dimensions anywhere."""
    found: dict[tuple[str, str], None] = {}
    for op in _scalar_ops(kernel.body):
        if op.op in ("/", "//", "%") and all(
                isinstance(s, ir.Scalar) and s.kind is ir.ScalarKind.DIM and s.name in names
                for s in (op.left, op.right)) and op.left.name != op.right.name:
            found[(op.left.name, op.right.name)] = None
    return list(found)


def _scalar_ops(node):
    """Every ScalarOp inside `node` (any IR value), outermost first."""
    if isinstance(node, ir.ScalarOp):
        yield node
    if isinstance(node, (tuple, list)):
        for item in node:
            yield from _scalar_ops(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            if f.name != "span":
                yield from _scalar_ops(getattr(node, f.name))
