"""The numpy reference: what the kernel computes, from its own statements
before any synchronization is added (the front-end IR), one whole tile at a
time and in program order.

Each role runs to its end before the next, in the order of the data they hand
each other (a role that writes a buffer another reads runs first), so data
handed from one role to another cannot be late; a buffer two roles share is versioned by
the loop iteration that fills and reads it (iteration i of the loader's loop
feeds iteration i of the reader's), which is the meaning a stage ring
implements. A buffer its reader reads at several sites (ir/read_sites) is
versioned by fill instead: the k-th read (a site's execution) takes the k-th
fill. Per-warpgroup tiles run once per warpgroup, in step; in a pingpong
turn, only for the warpgroup whose turn it is. Shared memory's arrays, their
versions and the buffers that reuse another's memory: reference_memory.py.
"""
from __future__ import annotations

from collections import deque
from typing import Mapping

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import issued_per_warpgroup, leaf_accesses, walk
from hopperc.ir.integer_exprs import integer_test
from hopperc.ir.handoffs import uses
from hopperc.ir.read_sites import multi_site_buffers
from hopperc.ir.layout import element_threads
from hopperc.ir.raster import TILE_LOOP, turn_warpgroups
from hopperc.sim.block import WorkBudget
from hopperc.sim.problem import Problem
from hopperc.sim.reference_memory import ReferenceSharedMemory
from hopperc.sim.row_stores import added_tile_elements, stored_elements
from hopperc.sim.scalars import PER_THREAD, per_lane, scalar, started_walk, taken_tile
from hopperc.sim.tile_values import elementwise, row_partials
from hopperc.sim.values import add_box, added, matrix_product, read_box, undefined, write_box
from hopperc.sim.views import Place, alias_root


class ReferenceUnavailable(Exception):
    """The kernel's meaning depends on which thread runs what (hand-written code)."""


def reference(kernel: ir.Kernel, env: Mapping[str, int], tensors: dict[str, np.ndarray],
              budget: WorkBudget | None = None, added: dict | None = None) -> None:
    """Run one block (`env` holds its tile coordinates) over `tensors` in place,
    charging each loop iteration to `budget`; `added` (Expected.added) counts
    the atomic adds."""
    _Block(kernel, env, tensors, budget, added).run()


class Expected(dict):
    """The outputs by tensor; `added`: per tensor the kernel adds to (`+=`, red),
    each element's count of adds and the sum of their magnitudes, which bound
    how far another order of the adds may round (values.added_tolerance)."""

    def __init__(self, outputs: dict[str, np.ndarray], added: dict[str, tuple]):
        super().__init__(outputs)
        self.added = added


def expected_outputs(front_end: ir.Kernel, problem: Problem,
                     budget: WorkBudget | None = None) -> Expected:
    """What every block of the grid stores, from the problem's inputs."""
    tensors = problem.fresh_tensors()
    added = {s.tensor: (np.zeros(tensors[s.tensor].shape), np.zeros(tensors[s.tensor].shape))
             for s in walk(front_end.body) if isinstance(s, ir.GlobalRowStore) and s.atomic}
    blocks = deque(problem.grid)
    waited = 0  # blocks set back in a row, each at a wait not yet satisfied
    while blocks:
        block = blocks.popleft()
        before = ({k: v.copy() for k, v in tensors.items()},
                  {k: (a.copy(), m.copy()) for k, (a, m) in added.items()})
        try:
            reference(front_end, problem.env(block), tensors, budget, added)
            waited = 0
        except _Blocked as blocked:
            # Undo its writes and run it again after the others (flags: a block
            # waits for those that signal, whatever the grid order).
            tensors.update(before[0])
            added.update(before[1])
            blocks.append(block)
            waited += 1
            if waited > len(blocks):
                raise ReferenceUnavailable(f"{blocked}: no order of the blocks satisfies it")
    return Expected({name: tensors[name] for name in problem.outputs}, added)


class _Blocked(Exception):
    """A block reached a `wait` its flag does not yet satisfy."""


def _top_level(kernel: ir.Kernel) -> list[ir.Stmt]:
    """Top-level statements, looking through a kernel-wide `manual` region."""
    out: list[ir.Stmt] = []
    for stmt in kernel.body.stmts:
        out.extend(stmt.body.stmts if isinstance(stmt, ir.ManualRegion) else (stmt,))
    return out


def _roles_in_order(kernel: ir.Kernel) -> list[ir.Stmt]:
    """Top-level statements, with the roles ordered by the data they hand each
    other: a role that writes a shared buffer another role reads runs before
    it; roles are otherwise in declaration order."""
    top = _top_level(kernel)
    roles = [s for s in top if isinstance(s, ir.RoleBlock)]
    writes: dict[str, set[str]] = {r.role.name: set() for r in roles}
    reads: dict[str, set[str]] = {r.role.name: set() for r in roles}
    for role in roles:
        for leaf in walk(role.body):
            for access in leaf_accesses(leaf):
                (writes if access.write else reads)[role.role.name].add(access.buffer)
    feeders = {r.role.name: {o.role.name for o in roles if o is not r
                             and writes[o.role.name] & reads[r.role.name]} for r in roles}
    ordered: list[ir.RoleBlock] = []
    while len(ordered) < len(roles):
        done = {r.role.name for r in ordered}
        ready = [r for r in roles if r not in ordered and feeders[r.role.name] <= done]
        if not ready:
            raise ReferenceUnavailable(_cycle(roles, ordered, feeders, writes, reads))
        ordered.append(ready[0])
    return [s for s in top if not isinstance(s, ir.RoleBlock)] + ordered


def _cycle(roles, ordered, feeders, writes, reads) -> str:
    """Why no role can run next: roles that hand data to each other both ways."""
    left = [r.role.name for r in roles if r not in ordered]
    hand_offs = [f"'{a}' -> '{b}' through {', '.join(sorted(writes[a] & reads[b]))}"
                 for b in left for a in sorted(feeders[b]) if a in left]
    return ("roles hand shared buffers to each other both ways (" + "; ".join(hand_offs) +
            "), so no order of whole roles computes what the kernel does")


def _shared_between_roles(kernel: ir.Kernel) -> set[str]:
    users: dict[str, set[str]] = {}
    for stmt in _top_level(kernel):
        if isinstance(stmt, ir.RoleBlock):
            for leaf in walk(stmt.body):
                for access in leaf_accesses(leaf):
                    users.setdefault(access.buffer, set()).add(stmt.role.name)
    return {b for b, roles in users.items() if len(roles) > 1}


class _Block(ReferenceSharedMemory):
    def __init__(self, kernel: ir.Kernel, env: Mapping[str, int], tensors,
                 budget: WorkBudget | None = None, added: dict | None = None):
        self.budget = budget
        self.added = {} if added is None else added
        self.kernel = kernel
        self.env = dict(env)
        self.tensors = tensors
        self.tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}
        self.integer_exact = integer_test(kernel, self.tiles)
        self.versioned = _shared_between_roles(kernel)
        found = [u for r in _top_level(kernel) if isinstance(r, ir.RoleBlock) for u in uses(r)]
        sites = multi_site_buffers(found)
        # The buffers versioned by fill, each leaf's read site, and per (role, buffer) the
        # context (site, loop indices) of its latest access and how many it has seen.
        self.by_fill = set(sites)
        self.site_of = {id(u.leaf): n for groups in sites.values()
                        for n, group in enumerate(groups) for u in group}
        self.fills: dict[tuple[str, str], tuple[tuple, int]] = {}
        self.role = self.leaf = None
        self.smem: dict[tuple, np.ndarray] = {}
        self.aliases = {b.name: alias_root(kernel, b.name) for b in kernel.buffers
                        if b.reuses is not None}
        self.loops: list[str] = []
        self.threads = self.instances = 0
        self.values: list[dict[str, np.ndarray]] = []

    def run(self) -> None:
        self.enter(self.kernel.threads)
        for stmt in _roles_in_order(self.kernel):
            if isinstance(stmt, ir.RoleBlock):
                self.role = stmt.role.name
                self.enter(stmt.role.active_warps * 32)
                self.block(stmt.body)
            else:
                self.stmt(stmt)

    def enter(self, threads: int) -> None:
        """Run code on `threads` threads: one set of tiles per warpgroup."""
        self.threads = threads
        self.instances = threads // element_threads(threads)
        self.values = [{} for _ in range(self.instances)]
        self.turn: int | None = None  # in a pingpong turn: the warpgroup it belongs to

    def block(self, block: ir.Block) -> None:
        for stmt in block.stmts:
            self.stmt(stmt)

    def scalar(self, expr: ir.ScalarExpr, instance: int = 0, span=None) -> int:
        if per_lane(expr):
            raise ReferenceUnavailable(f"{span}: a value that differs between lanes")
        return scalar(expr, dict(self.env, **{"@wg": instance, "@warp": 4 * instance}))

    def stmt(self, stmt: ir.Stmt) -> None:
        self.leaf = stmt
        match stmt:
            case ir.ForLoop(var=var, start=start, stop=stop, body=body, span=span):
                self.loops.append(var)
                for i in range(self.scalar(start, span=span), self.scalar(stop, span=span)):
                    if self.budget is not None:
                        self.budget.charge()
                    self.env[var] = i
                    self.block(body)
                self.loops.pop()
            case ir.IfThen(then=then) if turn_warpgroups(stmt):
                # A pingpong turn: the tile is the one warpgroup's whose turn it is.
                tile = ir.Scalar(ir.ScalarKind.LOOP, TILE_LOOP)
                self.turn = self.scalar(ir.ScalarOp("%", tile, ir.const(turn_warpgroups(stmt))))
                self.block(then)
                self.turn = None
            case ir.IfThen(cond=cond, then=then, orelse=orelse, span=span) if per_lane(
                    cond, PER_THREAD):
                outcomes = {bool(scalar(cond, dict(self.env, **{
                    "@thread": t, "@lane": t % 32, "@warp": t // 32, "@wg": t // 128})))
                    for t in range(self.threads)}
                for taken, body in ((True, then), (False, orelse)):
                    if taken in outcomes:
                        self.some_threads(body, span)
            case ir.IfThen(cond=cond, then=then, orelse=orelse, span=span):
                self.block(then if self.scalar(cond, span=span) else orelse)
            case ir.OneThread(body=body) | ir.ElectLane(body=body) | ir.ManualRegion(body=body):
                self.block(body)
            case ir.AsyncLoad(dst=dst, tensor=tensor, coords=coords, box=box, ragged=ragged):
                origin = tuple(self.scalar(c) for c in coords)
                place = self.place(dst, 0)
                clip = ragged and (ragged.dim, self.scalar(ragged.end))
                data = read_box(self.tensors[tensor], origin, box, clip)
                self.write(place, data.reshape(self.shape(place)))
            case ir.AsyncStore(src=src, tensor=tensor, coords=coords, box=box, ragged=ragged):
                # A store that names `wg` is issued by each warpgroup.
                for instance in self.running() if issued_per_warpgroup(stmt) else (0,):
                    origin = tuple(self.scalar(c, instance) for c in coords)
                    clip = ragged and (ragged.dim, self.scalar(ragged.end, instance))
                    values = self.read(self.place(src, instance)).reshape(box)
                    if stmt.reduce_add:  # the grid's blocks add in their order
                        add_box(self.tensors[tensor], origin, values,
                                self.kernel.tensor(tensor).dtype, clip)
                    else:
                        write_box(self.tensors[tensor], origin, values, clip)
            case ir.TileDef() | ir.TileAssign() | ir.SharedStore() | ir.Mma():
                for instance in self.running():
                    self.per_warpgroup(stmt, instance)
            case ir.GlobalRowStore(threads=threads):
                # a scalar's add over more threads than a warpgroup's is added once
                running = self.running()
                for instance in running if threads <= element_threads(self.threads) else \
                        running[:1]:
                    self.row_store(stmt, instance)
            case ir.RowPartials(op=op, tile=tile, partials=partials):
                width = self.kernel.buffer(partials.buffer).shape[1]
                for instance in self.running():
                    self.write(self.place(partials, instance),
                               row_partials(op, self.values[instance][tile],
                                            self.tiles[tile].threads, width))
            case ir.TakeTile(index=index, span=span, walk=walk):
                self.env.update(taken_tile(self.kernel, self.scalar(index, span=span), self.env,
                                           walk))
            case ir.StartTileWalk(walk=walk):
                self.env.update(started_walk(walk, self.env))
            case ir.Signal(tensor=tensor, index=index, span=span):
                self.tensors[tensor][self.flag(tensor, index, span)] += 1
            case ir.Count(tensor=tensor, index=index, result=result, span=span):
                where = self.flag(tensor, index, span)
                self.env[result] = int(self.tensors[tensor][where])
                self.tensors[tensor][where] += 1
            case ir.Wait(tensor=tensor, index=index, count=count, span=span):
                where = self.flag(tensor, index, span)
                if self.tensors[tensor][where] < self.scalar(count):
                    raise _Blocked(f"{span.file}:{span.line}: wait {tensor}{list(where)}")
            case _:
                pass  # synchronization: the reference has no concurrency to order

    def flag(self, tensor: str, index: tuple[ir.ScalarExpr, ...], span) -> tuple[int, ...]:
        where = tuple(self.scalar(i) for i in index)
        shape = self.tensors[tensor].shape
        if not all(0 <= i < n for i, n in zip(where, shape)):
            # The simulated warps report it as a finding, at its line.
            raise ReferenceUnavailable(f"{span.file}:{span.line}: flag {tensor}{list(where)} "
                                       f"is outside '{tensor}' (shape {list(shape)})")
        return where

    def running(self) -> range | tuple[int]:
        """The warpgroups running: all, in step, or the one whose turn it is."""
        return range(self.instances) if self.turn is None else (self.turn,)

    def some_threads(self, body: ir.Block, span) -> None:
        """A branch some threads take: copies and syncs mean the same run once;
        element-wise code would depend on which threads run it."""
        for stmt in walk(body):
            if isinstance(stmt, (ir.TileDef, ir.TileAssign, ir.SharedStore, ir.Mma,
                                 ir.GlobalRowStore)):
                raise ReferenceUnavailable(
                    f"{stmt.span.file}:{stmt.span.line}: element-wise code or a wgmma under a "
                    f"condition on the thread ({span.file}:{span.line})")
        self.block(body)

    def row_store(self, stmt: ir.GlobalRowStore, instance: int) -> None:
        """The warpgroup's row vector, or tile (a tile add), to the elements it
        reaches (sim/row_stores.py)."""
        data = self.tensors[stmt.tensor]
        shape = (stmt.rows, stmt.columns) if stmt.columns else (stmt.rows,)
        values = elementwise(stmt.value, shape, self.kernel.tensor(stmt.tensor).dtype,
                             self.values[instance].__getitem__,
                             lambda read: self.read(self.place(read.view, instance)),
                             self.tensors, lambda e: self.scalar(e, instance),
                             not stmt.columns, exact=self.integer_exact)
        if stmt.columns:  # a tile's add (sim/row_stores.py)
            keep, index = added_tile_elements(stmt, data.shape,
                                              lambda e: self.scalar(e, instance))
            rows = np.nonzero(keep)
        else:
            rows, index = stored_elements(stmt, data.shape, lambda e: self.scalar(e, instance))
        if not stmt.atomic:
            data[index] = values[rows]
            return
        data[index] = added(data[index], values[rows], self.kernel.tensor(stmt.tensor).dtype)
        if stmt.tensor in self.added:
            adds, magnitude = self.added[stmt.tensor]
            adds[index] += 1
            magnitude[index] += np.abs(values[rows])

    def per_warpgroup(self, stmt: ir.Stmt, instance: int) -> None:
        tiles = self.values[instance]
        if isinstance(stmt, ir.Mma):
            a = tiles[stmt.a.name] if isinstance(stmt.a, ir.TileRef) else \
                self.read(self.place(stmt.a, instance))
            product = matrix_product(a, self.read(self.place(stmt.b, instance)),
                                     self.kernel.buffer(stmt.b.buffer).dtype)
            overwrite = stmt.overwrite_when is not None and self.scalar(stmt.overwrite_when, instance)
            tiles[stmt.acc] = tiles[stmt.acc] + product if stmt.accumulate and not overwrite \
                else product
            return
        if isinstance(stmt, ir.TileDef) and stmt.init is None:
            tiles[stmt.name] = undefined(stmt.shape)
            return
        if isinstance(stmt, ir.SharedStore):
            place = self.place(stmt.dst, instance)
            shape, dtype, expr = self.shape(place), self.kernel.buffer(stmt.dst.buffer).dtype, \
                stmt.value
        else:
            tile = self.tiles[stmt.name]
            shape, dtype = tile.shape, tile.dtype
            expr = stmt.init if isinstance(stmt, ir.TileDef) else stmt.value

        values = elementwise(expr, shape, dtype, tiles.__getitem__,
                             lambda read: self.read(self.place(read.view, instance)), self.tensors,
                             lambda e: self.scalar(e, instance),
                             len(shape) == 1 and (not isinstance(stmt, ir.SharedStore)
                                                  or stmt.row_layout is not None),
                             exact=self.integer_exact)
        if isinstance(stmt, ir.SharedStore):
            self.write(place, values)
        else:
            tiles[stmt.name] = values.copy()

    # ---- shared memory (its arrays, versions and aliases: reference_memory.py)
    def place(self, view: ir.BufferView, instance: int) -> Place:
        part = None if view.part is None else self.scalar(view.part.index, instance)
        if part is not None and not 0 <= part < view.part.count:
            # The simulated warps report the access as a finding, at its line.
            raise ReferenceUnavailable(f"index {part} of '{view.buffer}' is out of range")
        return Place(view.buffer, 0, part, view.part.count if view.part else 1, view.transposed,
                     bool(view.part and view.part.columns))
