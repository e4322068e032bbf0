"""split_boundary_iterations

Requires: lowered IR (every other pass done): each ring's stage and parity are
registers its role carries and steps at the end of an iteration, and every
sync that depends on the iteration names the loop variable (a deferred
release's `j > start`, a product's `overwrites when j == start`).
Establishes: a loop `for j in a .. b` whose body masks a tile, `where(c, x, y)`
in a tile's definition or assignment with `c` a comparison affine in j, in
the element's row() and col() and in the thread built-ins (lane, warp,
thread, wg), with integer coefficients and the rest invariant in the loop,
runs as up to three loops over consecutive ranges of j: `a .. J0` and
`J1 .. b` (boundaries, the body as written) and `J0 .. J1` (interior: each
such mask replaced by the operand it selects there; `x = x` is dropped). Such
a condition has one value for every element on a prefix of the iterations
and another on a suffix; the interior lies where each mask keeps its
non-constant operand (else in the prefix): a key bound `BN * j + col() < L`
or a causal diagonal bounds J1, a window's left edge J0. J0 and J1 are
ceiling divisions of the affine forms at the extremes of row(), col() and
the built-ins, clamped into [a, b]; the first and the last iteration stay in
their boundary whatever the lengths (J0 >= a + 1, J1 <= b - 1, as
FlashAttention-2's one masking step), so the parts run in the same order on
a shape that ends in a partial tile (the checker's default) as on a whole
one. A loop whose product overwrites its accumulator on the first iteration
(fold_zero_into_first_product; codegen renders that iteration apart, scale-d
an immediate) keeps that iteration in a prefix boundary of its own or the
window's, and the later parts, which never run it, accumulate. Not split: a
loop with no such mask (a GEMM's, a producer's), a loop already split (`ForLoop.split`, which the simulator's default shapes read:
the source loop's bounds); a mask in a branch a constant never takes bounds
nothing.

Rule: j takes the same values in the same order across the parts, so each
thread runs the same statements with the same operands; the carried stage and
parity registers step the same, and `j > start` / `j == start` still name the
source loop's first iteration, so the copied syncs stay correct. J0 and J1
depend on no per-thread value, so every warpgroup runs each wgmma
(`.sync.aligned`) and every warp each `bar.sync` at one instruction. The
masks are f32 arithmetic, exact on integers below 2^24, where the integer
analysis holds.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, scalars_in, walk
from hopperc.ir.dataflow import overwrites_on_first_iteration
from hopperc.ir.iteration_bounds import Bound, affine, as_bound, subexprs, tightest
from hopperc.ir.rewrite import map_bodies, scalar_op

_COMPARISONS = ("<", "<=", ">", ">=")


def split_boundary_iterations(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=_block(kernel.body, kernel, kernel.threads))


def _block(block: ir.Block, kernel: ir.Kernel, threads: int) -> ir.Block:
    out: list[ir.Stmt] = []
    for stmt in block.stmts:
        role_threads = stmt.role.active_warps * 32 if isinstance(stmt, ir.RoleBlock) else threads
        nested = map_bodies(stmt, lambda b: _block(b, kernel, role_threads))
        out.extend(_split(nested, kernel, role_threads) if isinstance(nested, ir.ForLoop)
                   else (nested,))
    return ir.Block(tuple(out))


def _split(loop: ir.ForLoop, kernel: ir.Kernel, threads: int) -> list[ir.Stmt]:
    if loop.split is not None:
        return [loop]
    context = _Context(kernel, loop, threads)
    decided: dict[tuple, bool] = {}
    starts, stops = [], []
    for mask, ranges in context.masks():
        bounds = context.uniform_ranges(mask, ranges)
        if bounds is None:
            continue
        (prefix, prefix_value), (suffix, suffix_value) = bounds
        interior_value = _interior_value(mask)
        if interior_value is None or interior_value == prefix_value:
            stops.append(prefix)
            decided[(mask, ranges)] = prefix_value
        else:
            starts.append(suffix)
            decided[(mask, ranges)] = suffix_value
    if not decided:
        return [loop]
    a, b = loop.start, loop.stop
    # The first iteration of a prefix boundary and the last of a suffix one stay
    # in the boundary whatever the lengths: the parts then run in the same order
    # on a shape that ends in a partial tile (the checker's) as on a whole one.
    # A first iteration whose product overwrites is a prefix boundary too.
    overwrites = overwrites_on_first_iteration(loop)
    j0 = a
    if starts or overwrites:
        j0 = scalar_op("min", tightest("max", [as_bound(a, 1), *starts]), b)
    j1 = b
    if stops:
        j1 = scalar_op("max", tightest("min", [as_bound(b, -1), *stops]), j0)
    later = _accumulating(loop.body, loop.first_iteration) if overwrites else loop.body
    interior = replace(loop, start=j0, stop=j1, body=context.rewrite(later, decided),
                       split=ir.IterationRange(a, b, True))
    parts: list[ir.Stmt] = []
    if starts or overwrites:
        parts.append(replace(loop, stop=j0, split=ir.IterationRange(a, b, False)))
    parts.append(interior)
    if stops:
        parts.append(replace(loop, start=j1, body=later, split=ir.IterationRange(a, b, False)))
    return parts


def _accumulating(body: ir.Block, first: ir.ScalarExpr) -> ir.Block:
    """The body of iterations after the first: its products that overwrite on the
    first iteration accumulate."""
    def stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Mma) and s.overwrite_when == first:
            return replace(s, overwrite_when=None)
        return map_bodies(s, lambda b: ir.Block(tuple(stmt(x) for x in b.stmts)))
    return ir.Block(tuple(stmt(s) for s in body.stmts))


def _interior_value(mask: ir.Elementwise) -> bool | None:
    """The condition's value where the mask keeps its non-constant operand
    (a masked-out `-inf` is the constant one); None where both or neither are."""
    _, chosen, other = mask.args
    keeps = [_varies(chosen), _varies(other)]
    if keeps[0] == keeps[1]:
        return None
    return keeps[0]


def _varies(expr: ir.TileExpr) -> bool:
    match expr:
        case ir.Literal() | ir.ScalarValue():
            return False
        case ir.Elementwise(args=args):
            return any(_varies(a) for a in args)
        case ir.Convert(operand=operand):
            return _varies(operand)
    return True


class _Context:
    """One loop's masks: the statements' element grids, what is invariant."""

    def __init__(self, kernel: ir.Kernel, loop: ir.ForLoop, threads: int):
        self.kernel = kernel
        self.loop = loop
        self.inner = {s.var for s in walk(loop.body) if isinstance(s, ir.ForLoop)}
        shapes: dict[str, set] = {}
        for s in walk(kernel.body):
            if isinstance(s, ir.TileDef):
                shapes.setdefault(s.name, set()).add(s.shape)
        self.shapes = {name: next(iter(v)) for name, v in shapes.items() if len(v) == 1}
        self.builtins = {"lane": 32, "warp": threads // 32, "thread": threads,
                         "wg": max(threads // 128, 1)}

    def masks(self):
        """(where, (rows, cols)) of every mask of a tile statement in the body."""
        for stmt in _automatic(self.loop.body):
            grid = self._grid(stmt)
            if grid is not None:
                for mask in _wheres(_value(stmt)):
                    yield mask, grid

    def _grid(self, stmt: ir.Stmt) -> tuple[int, int] | None:
        """The extents row() and col() range over (at most) in the statement."""
        match stmt:
            case ir.TileDef(shape=shape, init=init) if init is not None:
                pass
            case ir.TileAssign(name=name) if name in self.shapes:
                shape = self.shapes[name]
            case _:
                return None
        if len(shape) == 1:  # a row vector or a 1-D tile: either index spans it
            return shape[0], shape[0]
        return shape[-2], shape[-1]

    def uniform_ranges(self, mask: ir.Elementwise, grid: tuple[int, int]):
        """((P, value), (S, value)): the condition is that value for every element
        on j < P and on j >= S; None where it is not affine as the pass needs."""
        cond = mask.args[0]
        if not (isinstance(cond, ir.Elementwise) and cond.op in _COMPARISONS):
            return None
        left, right = (affine(a) for a in cond.args)
        if left is None or right is None:
            return None
        terms = dict(left[0])
        for key, c in right[0].items():
            terms[key] = terms.get(key, 0) - c
        constant = left[1] - right[1]
        # as `E < 0` over integers
        if cond.op in (">", ">="):
            terms, constant = {k: -c for k, c in terms.items()}, -constant
        if cond.op in ("<=", ">="):
            constant -= 1
        return self._bounds(terms, constant, grid)

    def _bounds(self, terms: dict, constant: int, grid: tuple[int, int]):
        ranges = {"row": grid[0], "col": grid[1]}
        step = 0
        low = high = 0  # the per-thread part's extremes
        rest: dict = {}
        for key, c in terms.items():
            if c == 0:
                continue
            if key in ranges or self._builtin(key):
                extent = ranges[key] if key in ranges else self.builtins[key.name]
                low += min(0, c * (extent - 1))
                high += max(0, c * (extent - 1))
            elif key == ir.Scalar(ir.ScalarKind.LOOP, self.loop.var):
                step = c
            elif self._invariant(key):
                rest[key] = c
            else:
                return None
        if step == 0:
            return None
        # E = step * j + v + r with v in [low, high] and r = rest + constant
        if step > 0:  # true for every element while E(high) < 0, false once E(low) >= 0
            minus_r = tuple((k, -c) for k, c in rest.items())
            return ((Bound(minus_r, -constant - high, step), True),
                    (Bound(minus_r, -constant - low, step), False))
        # false while -step * j <= low + r, true once -step * j > high + r
        r = tuple(rest.items())
        return ((Bound(r, constant + low + 1, -step), False),
                (Bound(r, constant + high + 1, -step), True))

    def _builtin(self, key) -> bool:
        return isinstance(key, ir.Scalar) and key.kind is ir.ScalarKind.BUILTIN and \
            key.name in self.builtins

    def _invariant(self, leaf: ir.ScalarExpr) -> bool:
        """An integer the loop does not change, the same in every thread."""
        if any(isinstance(e, ir.TensorElement) and self.kernel.tensor(e.tensor).dtype.is_float
               for e in subexprs(leaf)):
            return False
        for s in scalars_in(leaf):
            if s.kind is ir.ScalarKind.LOOP and (s.name == self.loop.var or s.name in self.inner):
                return False
            if s.kind is ir.ScalarKind.BUILTIN and s.name in self.builtins:
                return False
            if s.kind is ir.ScalarKind.CARRIED:
                return False
            if s.kind is ir.ScalarKind.PARAM and next(
                    p for p in self.kernel.scalars if p.name == s.name).dtype.is_float:
                return False
        return True

    def rewrite(self, body: ir.Block, decided: dict[tuple, bool]) -> ir.Block:
        """The body with each decided mask replaced by the operand it selects."""
        out: list[ir.Stmt] = []
        for stmt in body.stmts:
            grid = self._grid(stmt)
            if grid is not None:
                stmt = _with_value(stmt, _select(_value(stmt), grid, decided))
                if isinstance(stmt, ir.TileAssign) and stmt.value == ir.TileRef(stmt.name):
                    continue
            out.append(map_bodies(stmt, lambda b: self.rewrite(b, decided)))
        return ir.Block(tuple(out))


def _automatic(block: ir.Block):
    """Every statement of the block that may run, nested ones included, but
    manual code (a branch a constant condition never takes does not run)."""
    for stmt in block.stmts:
        yield stmt
        match stmt:
            case ir.IfThen(cond=ir.Scalar(kind=ir.ScalarKind.CONST, value=value)):
                yield from _automatic(stmt.then if value else stmt.orelse)
            case ir.ManualRegion():
                pass
            case _:
                for body in bodies(stmt):
                    yield from _automatic(body)


def _value(stmt: ir.TileDef | ir.TileAssign) -> ir.TileExpr:
    return stmt.init if isinstance(stmt, ir.TileDef) else stmt.value


def _with_value(stmt, value: ir.TileExpr):
    return replace(stmt, init=value) if isinstance(stmt, ir.TileDef) else replace(stmt, value=value)


def _wheres(expr: ir.TileExpr):
    match expr:
        case ir.Elementwise(op=op, args=args):
            if op == "where":
                yield expr
            for arg in args:
                yield from _wheres(arg)
        case ir.Convert(operand=operand):
            yield from _wheres(operand)


def _select(expr: ir.TileExpr, grid, decided: dict[tuple, bool]) -> ir.TileExpr:
    match expr:
        case ir.Elementwise(op="where", args=(_, yes, no)) if (expr, grid) in decided:
            return _select(yes if decided[(expr, grid)] else no, grid, decided)
        case ir.Elementwise(op=op, args=args):
            return ir.Elementwise(op, tuple(_select(a, grid, decided) for a in args))
        case ir.Convert(dtype=dtype, operand=operand):
            return ir.Convert(dtype, _select(operand, grid, decided))
    return expr


