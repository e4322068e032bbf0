"""Mutations of a correctly lowered kernel, one per classic synchronization bug.

Each takes the lowered IR and returns it with one bug planted; the simulator
must report it with the right category."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from hopperc.ir import nodes as ir

Edit = Callable[[ir.Stmt], "list[ir.Stmt] | None"]  # None: keep the statement


def edit(kernel: ir.Kernel, fn: Edit, limit: int = 1) -> ir.Kernel:
    """Apply `fn` to the first `limit` statements it changes, depth first."""
    done = [0]

    def block(b: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for stmt in b.stmts:
            changed = fn(stmt) if done[0] < limit else None
            if changed is not None:
                done[0] += 1
                out.extend(changed)
                continue
            for field in ("body", "then", "orelse"):
                if isinstance(getattr(stmt, field, None), ir.Block):
                    stmt = replace(stmt, **{field: block(getattr(stmt, field))})
            out.append(stmt)
        return ir.Block(tuple(out))

    mutated = replace(kernel, body=block(kernel.body))
    assert done[0] == limit, f"the mutation applied {done[0]} times, expected {limit}"
    return mutated


def remove(kind: type, where: Callable[[ir.Stmt], bool] = lambda s: True) -> Edit:
    return lambda s: [] if isinstance(s, kind) and where(s) else None


def remove_proxy_fence(kernel: ir.Kernel, role: str | None = None) -> ir.Kernel:
    """Remove the first proxy fence (of `role`, if given)."""
    if role is None:
        return edit(kernel, remove(ir.ProxyFence))
    return edit(kernel, lambda s: [replace(s, body=edit(replace(kernel, body=s.body),
                                                        remove(ir.ProxyFence)).body)]
                if isinstance(s, ir.RoleBlock) and s.role.name == role else None)


def share_full_barrier(kernel: ir.Kernel) -> ir.Kernel:
    """Both producers arm and complete on the first producer's full barriers."""
    first, second = (p.full for p in kernel.pipelines[:2])

    def uses_second(s) -> bool:
        ref = getattr(s, "barrier", None)
        return isinstance(ref, ir.BarrierRef) and ref.array == second and not isinstance(
            s, (ir.MBarrierInit, ir.MBarrierInval))

    def fn(s):
        return [replace(s, barrier=replace(s.barrier, array=first))] if uses_second(s) else None
    return edit(kernel, fn, limit=_count(kernel, uses_second))


def drop_wait_before_release(kernel: ir.Kernel) -> ir.Kernel:
    return edit(kernel, remove(ir.WgmmaWait, lambda s: s.pending == 1))


def release_before_wgmma_completes(kernel: ir.Kernel) -> ir.Kernel:
    """In the main loop, move the release of the previous stage before the wait."""
    def fn(s):
        if isinstance(s, ir.ForLoop) and any(isinstance(x, ir.WgmmaWait) for x in s.body.stmts):
            stmts = list(s.body.stmts)
            wait = next(i for i, x in enumerate(stmts) if isinstance(x, ir.WgmmaWait))
            release = stmts.pop(wait + 1)
            stmts.insert(wait, release)
            return [replace(s, body=ir.Block(tuple(stmts)))]
        return None
    return edit(kernel, fn)


def wrong_parity(kernel: ir.Kernel) -> ir.Kernel:
    """The consumer waits for the full barrier with the opposite parity."""
    fulls = {p.full for p in kernel.pipelines}

    def fn(s):
        if isinstance(s, ir.MBarrierWait) and s.barrier.array in fulls:
            return [replace(s, parity=ir.ScalarOp("-", ir.const(1), s.parity))]
        return None
    return edit(kernel, fn)


def wrong_expect_tx(kernel: ir.Kernel, delta: int) -> ir.Kernel:
    def fn(s):
        if isinstance(s, ir.MBarrierExpectTx):
            return [replace(s, nbytes=ir.ScalarOp("+", s.nbytes, ir.const(delta)))]
        return None
    return edit(kernel, fn)


def drop_bulk_wait(kernel: ir.Kernel) -> ir.Kernel:
    return edit(kernel, remove(ir.BulkWaitRead), limit=_count(
        kernel, lambda s: isinstance(s, ir.BulkWaitRead)))


def wrong_named_barrier_count(kernel: ir.Kernel) -> ir.Kernel:
    def fn(s):
        if isinstance(s, ir.NamedBarrier) and s.id != 0:
            return [replace(s, threads=s.threads // 2)]
        return None
    return edit(kernel, fn)


def extra_arrival(kernel: ir.Kernel) -> ir.Kernel:
    return edit(kernel, lambda s: [s, s] if isinstance(s, ir.StageRelease) else None)


def _count(kernel: ir.Kernel, pred) -> int:
    from hopperc.ir.accesses import walk
    return sum(1 for s in walk(kernel.body) if pred(s))
