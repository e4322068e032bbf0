"""insert_barriers

Requires: mbarrier waits placed for loads (complete_async_loads),
wait_group.read for stores (complete_bulk_stores) and wgmma waits
(wait_wgmma_batches).
Establishes: whenever a thread may access shared memory another thread of the
same role accessed before (at least one of them writing; slices or stages known
to differ are different memory), a named barrier
`bar.sync id, n` over exactly the role's n threads orders them; ids are 1 + the
role's index, so concurrent roles never share one and id 0 stays block-wide.
Where every such pair is a warpgroup's own rows (`buf[wg]`, accessed by that
warpgroup's threads, its wgmma or its store issuer), each warpgroup meets
alone: `bar.sync id + wg, 128` on ids past the roles' (see
`warpgroup_barrier`). Global memory is handed on the same way: a store's
writes, completed by its issuer's plain wait_group, reach another thread's
later access of the box through a barrier; none is needed where one
warpgroup's issuer makes both and no other warpgroup's box meets them
(`own_boxes`). Element-wise accesses that put every element on the same
thread (one grid, layout and thread count: `owned`) need none: a thread
rereads and rewrites its own elements in program order, in one iteration or
the next; so do stmatrix stores of one view (each lane rewrites the rows it
addresses), but not a stmatrix store and a per-element access.
The same holds for an mbarrier's phase: the issuer arms it again
(arrive.expect_tx) only after every other thread that waited on the previous
phase has passed its wait. What the issuing thread finished before it issued a
load (a TMA store's reads completed by its wait_group.read) needs no barrier
for the threads that wait for that load's phase: the load, and so the phase,
completes after it. A barrier a loop (or if) needs as a whole is placed
before it, once, unless the loop's body already places it before the access
(ir/dataflow.py). Manual code gets barriers only for the buffers the front end
added inside one statement (a row reduction's partials, which the user cannot
name nor sync around), on an id of their own (`_ManualHandoffs`).

Hardware rule: ordinary shared-memory accesses of different threads are
ordered only by a barrier (or an mbarrier); the TMA issuer reads what other
threads wrote only after they all reached a barrier with it. `try_wait.parity`
compares parities only: a waiter still at its wait when the phase after next
starts waits forever.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import (Access, Proxy, bodies, completed, finished_by_issuer, in_flight,
                                 is_store_read, is_wgmma_read, leaf_accesses, leaves,
                                 manual_accesses, may_overlap, mbarrier_arms, mbarrier_waits,
                                 own_rows, phase_word, same_rows, source_order, varies, walk,
                                 writes_global)
from hopperc.ir.global_accesses import global_accesses, own_boxes
from hopperc.ir.dataflow import ForwardRewrite, insert_before_trailing
from hopperc.ir.rewrite import map_bodies
from hopperc.ir.layout import element_grid, element_threads, part_shape, stores_by_matrix

Pending = frozenset[Access]
NAMED_BARRIERS = 16  # bar.sync ids 0..15


def insert_barriers(kernel: ir.Kernel) -> ir.Kernel:
    return _Barriers(kernel).run(_sync_manual_handoffs(kernel))


def role_barrier(kernel: ir.Kernel, role: ir.RoleInfo | None) -> tuple[int, int]:
    """(id, threads) of the named barrier private to `role` (None: the whole block)."""
    if role is None:
        return 1, kernel.threads
    return 1 + kernel.roles.index(role), role.active_warps * 32


def warpgroup_barrier(kernel: ir.Kernel, role: ir.RoleInfo | None) -> int | None:
    """The id of warpgroup 0's barrier of `role` (warpgroup w uses id + w), after
    the roles' ids and the earlier roles' warpgroups; None where the role has
    one warpgroup (its own barrier is as narrow) or the 16 ids run out."""
    roles = kernel.roles
    if role is None and roles:
        return None  # code outside the roles: the block's setup
    warpgroups = _warpgroups(kernel)
    index = roles.index(role) if role is not None else 0
    first = 1 + max(1, len(roles)) + sum(warpgroups[:index])
    count = warpgroups[index]
    return first if count > 1 and first + count <= NAMED_BARRIERS else None


def first_unallotted_barrier(kernel: ir.Kernel) -> int:
    """The first named barrier id past every id this pass may use."""
    return 1 + max(1, len(kernel.roles)) + sum(_warpgroups(kernel))


def _warpgroups(kernel: ir.Kernel) -> list[int]:
    """Each role's warpgroups (0 for a role of other warps), or the block's."""
    return [r.active_warps // 4 if r.active_warps % 4 == 0 else 0 for r in kernel.roles] \
        or [kernel.threads // 128]


class _Barriers(ForwardRewrite[Pending]):
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.role: ir.RoleInfo | None = None
        self.single_thread = False  # inside an elected block
        self.each_warpgroup = False  # inside a block one thread of each warpgroup runs
        self.guards: dict[str, set[str]] = {}
        for stmt in walk(kernel.body):
            if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is not None:
                self.guards.setdefault(stmt.barrier.array, set()).add(
                    stmt.dst.storage or stmt.dst.buffer)
        self.armed = _armed_loads(kernel.body)
        # Buffers in one memory with one layout: a warpgroup's rows of one are its
        # rows of the other.
        self.layout = {b.name: (b.reuses or b.name, b.shape, b.dtype, b.swizzle, b.stages)
                       for b in kernel.buffers}
        self.tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}
        # A one-role ring's issuer re-arms a stage only after every reader released it.
        self.ordered_phases = {phase_word(a) for p in kernel.pipelines
                               if p.producer == p.consumer for a in (p.full, p.empty)}

    def initial(self) -> Pending:
        return frozenset()

    def join(self, a: Pending, b: Pending) -> Pending:
        return a | b

    def step(self, stmt, state):
        if isinstance(stmt, ir.RoleBlock):
            self.role = stmt.role
        if not isinstance(stmt, ir.OneThread):
            return super().step(stmt, state)
        outer = self.single_thread, self.each_warpgroup
        self.single_thread, self.each_warpgroup = True, stmt.per_warpgroup
        try:
            return super().step(stmt, state)
        finally:
            self.single_thread, self.each_warpgroup = outer

    def before(self, stmt: ir.Stmt, state: Pending):
        # A barrier the loads need goes before their arm, and says why they need it.
        loads = [a for load in self.armed.get(stmt, ()) for a in self.accesses(load)]
        # A wait after an arm needs no barrier: the waiters of a phase wait on
        # every phase in order (complete_async_loads), so only the arm is checked.
        conflicts = [(prior, access)
                     for access in loads + self.accesses(stmt) + self.arms(stmt)
                     for prior in sorted(state, key=source_order)
                     if self.needs_barrier(prior, access)]
        if not conflicts:
            return [], state
        # A barrier of the whole role is explained by a conflict that needs it.
        prior, access = next(((p, a) for p, a in conflicts if not self.same_rows(p, a)),
                             conflicts[0])
        what = prior.what if prior.buffer == access.buffer else f"{prior.what} as '{prior.buffer}'"
        reason = ir.Reason(ir.Hazard.THREAD_HANDOFF, access.buffer, what, prior.span,
                           access.what, access.span)
        barrier = self.barrier(conflicts, access.span, reason)
        return [barrier], self.transfer(barrier, state)

    def barrier(self, conflicts: list[tuple[Access, Access]], span, reason: ir.Reason
                ) -> ir.NamedBarrier:
        own = warpgroup_barrier(self.kernel, self.role)
        if own is not None and all(self.same_rows(p, a) for p, a in conflicts):
            return ir.NamedBarrier(own, 128, span, reason, per_warpgroup=True)
        return ir.NamedBarrier(*role_barrier(self.kernel, self.role), span, reason)

    def arms(self, stmt: ir.Stmt) -> list[Access]:
        return [a for a in mbarrier_arms(stmt) if a.buffer not in self.ordered_phases]

    def accesses(self, stmt: ir.Stmt) -> list[Access]:
        """The accesses of `stmt` and everything nested in it (manual code as any
        thread's), element-wise ones with the owner of each element."""
        return [a for leaf in leaves(stmt) for a in self.owned(leaf)] + manual_accesses(stmt) + \
            global_accesses(stmt)

    def owned(self, leaf: ir.Stmt) -> list[Access]:
        """Element-wise code runs per element of its grid, each element on the
        thread the layout gives it (as in code generation): a shared view of that
        grid read or written per element is touched by that thread. A stmatrix
        store writes each 16-byte row on the lane that addresses it, not on the
        lane holding its elements: its owner is another function, the same for
        every stmatrix store of that view shape, layout and thread count. A row
        vector's values lie in other threads than a tile's elements (a
        warpgroup's quads, or every thread), so its reads have no owner."""
        accesses = leaf_accesses(leaf)
        if isinstance(leaf, ir.SharedStore) and leaf.row_layout is not None:
            # a row vector's store: row r by a thread that holds it (its own mapping)
            grid = self.grid(leaf.dst)
            return [replace(a, owner=self.owner(a, grid, leaf.row_threads,
                                                f"row vector {leaf.row_layout.name}"))
                    if a.write else a for a in accesses]
        if isinstance(leaf, ir.SharedStore):
            buf = self.kernel.buffer(leaf.dst.buffer)
            threads = element_threads(self.running)
            grid = self.grid(leaf.dst)
            matrix = stores_by_matrix(buf, leaf.dst, threads)
        elif isinstance(leaf, (ir.TileDef, ir.TileAssign)):
            tile = self.tiles[leaf.name]
            if tile.layout in (ir.Layout.ROWS, ir.Layout.ROW_PARTS, ir.Layout.EVERY_ROW):
                return accesses
            threads, grid, matrix = tile.threads, element_grid(tile.shape), False
        else:
            return accesses
        return [replace(a, owner=self.owner(a, grid, threads, "stmatrix" if matrix and a.write
                                            else "element")) for a in accesses]

    def owner(self, access: Access, grid: tuple[int, int], threads: int,
              mapping: str) -> tuple | None:
        view = access.view
        if view is None or access.proxy is not Proxy.GENERIC or self.grid(view) != grid:
            return None
        # With several element groups (warpgroups), only buf[wg] keeps a group on
        # its own part; any other index lets every group touch the same part.
        if threads != self.running and not own_rows(access):
            return None
        return (mapping, self.layout[access.buffer], view.part.count if view.part else None,
                view.transposed, grid, threads)

    def grid(self, view: ir.BufferView) -> tuple[int, int]:
        shape = part_shape(self.kernel.buffer(view.buffer), view.part)
        return element_grid(shape[::-1] if view.transposed else shape)

    @property
    def running(self) -> int:
        return role_barrier(self.kernel, self.role)[1]

    def same_rows(self, a: Access, b: Access) -> bool:
        """Both a warpgroup's own rows of one buffer, or of two buffers in one
        memory with one layout (an mbarrier's phase word is no buffer: never)."""
        layout = self.layout.get(a.buffer)
        return layout is not None and layout == self.layout.get(b.buffer) and same_rows(a, b)

    def needs_barrier(self, prior: Access, access: Access) -> bool:
        if not may_overlap(prior, access) or not (prior.write or access.write):
            return False
        if prior.proxy is Proxy.ASYNC:
            return False  # ordered by an mbarrier wait or wait_group, placed by earlier passes
        if prior.warpgroup_ordered and self.same_rows(prior, access):
            return False
        if prior.owner is not None and prior.owner == access.owner:
            return False  # each element stays with one thread: program order suffices
        return not self.same_thread(prior, access)

    def same_thread(self, a: Access, b: Access) -> bool:
        """Both made by the role's one issuing thread, or by one warpgroup's issuing
        thread on that warpgroup's own rows (of shared memory, or of a global
        tensor: boxes that no other warpgroup's box meets)."""
        if a.per_warpgroup or b.per_warpgroup:
            return a.per_warpgroup and b.per_warpgroup and (
                self.same_rows(a, b) or own_boxes(a, b, self.running // 128))
        return a.single_thread and b.single_thread

    def manual(self, region: ir.ManualRegion, state: Pending) -> Pending:
        """Hand-written accesses stay unordered for the automatic code after them
        (a barrier the user wrote inside is not relied on)."""
        return state | frozenset(manual_accesses(region))

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        """An arrive.expect_tx belongs to the load after it: the barrier goes first."""
        insert_before_trailing(out, inserted, (ir.MBarrierExpectTx,))

    def transfer(self, stmt: ir.Stmt, state: Pending) -> Pending:
        match stmt:
            case ir.NamedBarrier(per_warpgroup=True):
                # Ordered for the warpgroup's own rows only; still unordered for
                # whatever another warpgroup or the role's issuer does.
                return frozenset(replace(a, warpgroup_ordered=True)
                                 if own_rows(a) and not in_flight(a) else a for a in state)
            case ir.NamedBarrier():
                return frozenset(a for a in state if in_flight(a))
            case ir.MBarrierWait(barrier=bar):
                landed = self.guards.get(bar.array, set())
                return frozenset(a for a in state if not (
                    a.proxy is Proxy.ASYNC and a.write and a.memory in landed
                    or bar.array in a.handed_on and not self.single_thread)
                ) | frozenset(a for a in mbarrier_waits(stmt, self.single_thread)
                              if a.buffer not in self.ordered_phases)
            case ir.AsyncLoad(barrier=ir.BarrierRef(array=array)) if not self.each_warpgroup:
                # The issuer's finished accesses come before this load's phase.
                return frozenset(replace(a, handed_on=a.handed_on | {array})
                                 if finished_by_issuer(a) else a for a in state) \
                    | frozenset(self.accesses(stmt))
            case ir.BulkWaitRead(pending=0, read=read):
                return frozenset(completed(a) if is_store_read(a) or not read and writes_global(a)
                                 else a for a in state)
            case ir.BulkWaitRead(views=done, read=read):
                finished = {a for a in state if is_store_read(a) and a.view in done
                            or not read and writes_global(a)}
                # One access stands for every instance of its store: where its
                # indices vary, a younger instance may stay in flight for a later
                # wait to complete.
                return frozenset(a for a in state if a not in finished or varies(a)) | \
                    frozenset(map(completed, finished))
            case ir.WgmmaWait(buffers=done):
                return frozenset(completed(a) if is_wgmma_read(a) and a.memory in done else a
                                 for a in state)
        return state | frozenset(self.accesses(stmt))


def _sync_manual_handoffs(kernel: ir.Kernel) -> ir.Kernel:
    """Manual code with the barriers of its row reductions (see `_ManualHandoffs`)."""
    hidden = {s.partials.buffer for s in walk(kernel.body) if isinstance(s, ir.RowPartials)}
    regions = [s for s in walk(kernel.body) if isinstance(s, ir.ManualRegion)]
    if not hidden or not regions:
        return kernel
    taken = {s.id for r in regions for s in walk(r.body) if isinstance(s, ir.NamedBarrier)}
    # Past every id automatic code may use (pingpong turns included), highest first.
    lowest = first_unallotted_barrier(kernel) + (sum(_warpgroups(kernel)) if kernel.pingpong else 0)
    free = [i for i in range(NAMED_BARRIERS - 1, lowest - 1, -1) if i not in taken]
    ids: dict[tuple[str | None, bool], int] = {}

    def rewrite(block: ir.Block, role: ir.RoleInfo | None) -> ir.Block:
        out = []
        for stmt in block.stmts:
            if isinstance(stmt, ir.RoleBlock):
                out.append(replace(stmt, body=rewrite(stmt.body, stmt.role)))
            elif isinstance(stmt, ir.ManualRegion):
                out.append(replace(stmt, body=_ManualHandoffs(kernel, role, hidden, free, ids)
                                   .rewrite(stmt.body)))
            else:
                out.append(map_bodies(stmt, lambda b: rewrite(b, role)))
        return ir.Block(tuple(out))
    return replace(kernel, body=rewrite(kernel.body, None))


class _ManualHandoffs(_Barriers):
    """The hand-offs hidden inside one statement of manual code, which the user
    cannot place a barrier in: a row reduction of a row-major tile stores each
    warp's partials and combines them from every thread (and stores them again
    the next time it runs). The compiler orders those accesses of the buffers it
    added (`hidden`) as in automatic code, on barrier ids of their own (taken
    from `free` into `ids`): per role, one over the role's threads, and where
    each warpgroup reduces its own tile (`buf[wg]`), one per warpgroup that
    meets alone (a pingpong turn runs one warpgroup). A barrier the user wrote
    is not relied on (it may leave threads out)."""

    def __init__(self, kernel: ir.Kernel, role: ir.RoleInfo | None, hidden: set[str],
                 free: list[int], ids: dict[tuple[str | None, bool], int]):
        super().__init__(kernel)
        self.role, self.hidden, self.free, self.ids = role, hidden, free, ids

    def rewrite(self, body: ir.Block) -> ir.Block:
        self.loops = {}
        return self.block(body, self.initial())[0]

    def accesses(self, stmt: ir.Stmt) -> list[Access]:
        return [a if a.write else replace(a, what="read by their combine, in one statement "
                                                   "of manual code")
                for leaf in leaves(stmt) for a in self.owned(leaf) if a.buffer in self.hidden]

    def arms(self, stmt: ir.Stmt) -> list[Access]:
        return []

    def barrier(self, conflicts, span, reason: ir.Reason) -> ir.NamedBarrier:
        warpgroups = self.running // 128 if self.running % 128 == 0 else 1
        apart = warpgroups > 1 and all(self.same_rows(p, a) for p, a in conflicts)
        key = (self.role.name if self.role is not None else None, apart)
        if key not in self.ids:
            self.ids[key] = _take_ids(self.free, warpgroups if apart else 1, span)
        if apart:
            return ir.NamedBarrier(self.ids[key], 128, span, reason, per_warpgroup=True)
        return ir.NamedBarrier(self.ids[key], self.running, span, reason)

    def transfer(self, stmt: ir.Stmt, state: Pending) -> Pending:
        if isinstance(stmt, ir.NamedBarrier) and stmt.reason is None:
            return state  # the user's
        return frozenset(a for a in super().transfer(stmt, state) if a.buffer in self.hidden)


def _take_ids(free: list[int], count: int, span) -> int:
    """The first of the highest `count` consecutive ids in `free`, taken out of it."""
    for first in free:
        run = set(range(first, first + count))
        if run <= set(free):
            free[:] = [i for i in free if i not in run]
            return first
    raise CompileError(span, "no named barrier id is left for the barrier this row reduction "
                             "needs in manual code (the compiler writes it on an id no "
                             "'bar.sync' of the kernel names): use fewer ids in manual code")


def _armed_loads(block: ir.Block) -> dict[ir.Stmt, tuple[ir.AsyncLoad, ...]]:
    """Each arrive.expect_tx, with the loads of the phase it arms (they follow it)."""
    armed: dict[ir.Stmt, tuple[ir.AsyncLoad, ...]] = {}
    for body in [block] + [b for stmt in walk(block) for b in bodies(stmt)]:
        _arms_in(body, armed)
    return armed


def _arms_in(block: ir.Block, armed: dict) -> None:
    stmts = block.stmts
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, ir.MBarrierExpectTx):
            continue
        loads = []
        for later in stmts[i + 1:]:
            if isinstance(later, ir.AsyncLoad) and later.barrier == stmt.barrier:
                loads.append(later)
            elif not isinstance(later, ir.BulkWaitRead):
                break
        armed[stmt] = tuple(loads)
