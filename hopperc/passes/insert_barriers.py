"""insert_barriers

Requires: mbarrier waits placed for loads (complete_async_loads),
wait_group.read for stores (complete_bulk_stores) and wgmma waits
(wait_wgmma_batches).
Establishes: whenever a thread may access shared memory another thread of the
same role accessed before (at least one of them writing), a named barrier
`bar.sync id, n` over exactly the role's n threads orders them; ids are 1 + the
role's index, so concurrent roles never share one and id 0 stays block-wide.
A barrier a loop (or if) needs as a whole is placed before it, once.

Hardware rule: ordinary shared-memory accesses of different threads are
ordered only by a barrier (or an mbarrier); the TMA issuer reads what other
threads wrote only after they all reached a barrier with it.
"""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, Proxy, all_accesses, leaf_accesses, source_order, walk
from hopperc.ir.dataflow import ForwardRewrite, insert_before_trailing

Pending = frozenset[Access]


def insert_barriers(kernel: ir.Kernel) -> ir.Kernel:
    return _Barriers(kernel).run(kernel)


def role_barrier(kernel: ir.Kernel, role: ir.RoleInfo | None) -> tuple[int, int]:
    """(id, threads) of the named barrier private to `role` (None: the whole block)."""
    if role is None:
        return 1, kernel.threads
    return 1 + kernel.roles.index(role), role.active_warps * 32


class _Barriers(ForwardRewrite[Pending]):
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self.role: ir.RoleInfo | None = None
        self.guards: dict[str, set[str]] = {}
        for stmt in walk(kernel.body):
            if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is not None:
                self.guards.setdefault(stmt.barrier.array, set()).add(
                    stmt.dst.storage or stmt.dst.buffer)

    def initial(self) -> Pending:
        return frozenset()

    def join(self, a: Pending, b: Pending) -> Pending:
        return a | b

    def step(self, stmt, state):
        if isinstance(stmt, ir.RoleBlock):
            self.role = stmt.role
        return super().step(stmt, state)

    def before(self, stmt: ir.Stmt, state: Pending):
        for access in all_accesses(stmt):
            for prior in sorted(state, key=source_order):
                if _needs_barrier(prior, access):
                    bar_id, threads = role_barrier(self.kernel, self.role)
                    what = prior.what if prior.buffer == access.buffer else (
                        f"{prior.what} as '{prior.buffer}'")
                    reason = ir.Reason(ir.Hazard.THREAD_HANDOFF, access.buffer, what,
                                       prior.span, access.what, access.span)
                    barrier = ir.NamedBarrier(bar_id, threads, access.span, reason)
                    return [barrier], self.transfer(barrier, state)
        return [], state

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        """An arrive.expect_tx belongs to the load after it: the barrier goes first."""
        insert_before_trailing(out, inserted, (ir.MBarrierExpectTx,))

    def transfer(self, stmt: ir.Stmt, state: Pending) -> Pending:
        match stmt:
            case ir.NamedBarrier():
                return frozenset(a for a in state if _in_flight(a))
            case ir.MBarrierWait(barrier=bar):
                landed = self.guards.get(bar.array, set())
                return frozenset(a for a in state if not (
                    a.proxy is Proxy.ASYNC and a.write and a.memory in landed))
            case ir.BulkWaitRead(pending=0):
                return frozenset(_completed(a) if _is_store(a) else a for a in state)
            case ir.WgmmaWait(buffers=done):
                return frozenset(_completed(a) if _is_wgmma_read(a) and a.memory in done else a
                                 for a in state)
        return state | frozenset(leaf_accesses(stmt))


def _is_store(access: Access) -> bool:
    return access.proxy is Proxy.ASYNC and not access.write and access.single_thread


def _is_wgmma_read(access: Access) -> bool:
    return access.proxy is Proxy.ASYNC and not access.write and not access.single_thread


def _in_flight(access: Access) -> bool:
    """Async operations a barrier does not complete."""
    return access.proxy is Proxy.ASYNC


def _completed(read: Access) -> Access:
    """An async read known complete by the threads that waited for it (the store's
    issuer; each warpgroup for its own wgmma): still unordered for the others."""
    return Access(read.buffer, Proxy.GENERIC, False, read.single_thread, read.what, read.span,
                  read.storage)


def _needs_barrier(prior: Access, access: Access) -> bool:
    if prior.memory != access.memory or not (prior.write or access.write):
        return False
    if prior.proxy is Proxy.ASYNC:
        return False  # ordered by an mbarrier wait or wait_group, placed by earlier passes
    return not (prior.single_thread and access.single_thread)
