"""complete_async_loads

Requires: every automatic async load names its mbarrier (allocate_load_barriers);
loads between roles already armed and awaited (connect_role_pipelines).
Establishes: the issuer arms the barrier with arrive.expect_tx of exactly the
load's bytes just before the load; every thread of the role waits on the
barrier's carried phase, then flips it, before the first later statement of the
same block that touches the buffer (or at the block's end), so independent
work overlaps the copy; a run of wgmma products waits for all its operands
before the first.

Hardware rule: an mbarrier phase completes when its pending arrivals and
transaction bytes reach zero; `try_wait.parity` on the completed phase makes
the TMA-written data visible to the waiting threads, so async write -> generic
or async read needs the wait and no proxy fence.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import all_accesses
from hopperc.ir.rewrite import map_bodies


def complete_async_loads(kernel: ir.Kernel) -> ir.Kernel:
    piped = frozenset(p.full for p in kernel.pipelines)
    return replace(kernel, body=_block(kernel.body, piped))


def _block(block: ir.Block, piped: frozenset[str]) -> ir.Block:
    out: list[ir.Stmt] = []
    pending: list[ir.AsyncLoad] = []  # loads whose wait is not yet placed
    stmts = block.stmts
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ir.ManualRegion):
            for load in pending:
                out.extend(_wait(load, stmt))
            pending = []
            out.append(stmt)
            continue
        touched = {a.memory for s in _unit(stmts, i) for a in all_accesses(s)}
        due = [load for load in pending if (load.dst.storage or load.dst.buffer) in touched]
        for load in due:
            out.extend(_wait(load, stmt))
            pending.remove(load)
        if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is not None \
                and stmt.barrier.array not in piped:
            out.append(ir.MBarrierExpectTx(stmt.barrier, ir.const(stmt.nbytes), stmt.span,
                                           _reason(stmt, "armed before the load")))
            out.append(stmt)
            pending.append(stmt)
            continue
        out.append(map_bodies(stmt, lambda b: _block(b, piped)))
    for load in pending:
        out.extend(_wait(load, None))
    return ir.Block(tuple(out))


def _unit(stmts: tuple[ir.Stmt, ...], i: int) -> tuple[ir.Stmt, ...]:
    """What must find its operands landed when stmts[i] runs: a run of wgmma
    products is one batch, so the waits for all of them go before the first
    (a wait loop inside the batch would split ptxas's wgmma chain)."""
    if not isinstance(stmts[i], ir.Mma) or (i and isinstance(stmts[i - 1], ir.Mma)):
        return (stmts[i],)
    end = i
    while end < len(stmts) and isinstance(stmts[end], ir.Mma):
        end += 1
    return stmts[i:end]


def _wait(load: ir.AsyncLoad, user: ir.Stmt | None) -> list[ir.Stmt]:
    phase = ir.phase_register(load.barrier.array)
    span = getattr(user, "span", None)
    reason = _reason(load, "used next" if span else "complete before the block ends", span)
    return [ir.MBarrierWait(load.barrier, ir.Scalar(ir.ScalarKind.CARRIED, phase), load.span,
                            reason),
            ir.PhaseFlip(phase, load.span)]


def _reason(load: ir.AsyncLoad, after: str, after_span=None) -> ir.Reason:
    return ir.Reason(ir.Hazard.ASYNC_WRITE_READ, load.dst.buffer,
                     f"written by {load.engine.label} load", load.span, after, after_span)
