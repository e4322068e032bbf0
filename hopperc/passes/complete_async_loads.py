"""complete_async_loads

Requires: every automatic async load names its mbarrier (allocate_load_barriers);
loads between roles already armed and awaited (connect_role_pipelines).
Establishes:
- Loads on one barrier that are in flight together (no statement between them
  touches what they write) share one phase: the issuer arms it once, before
  the first, with arrive.expect_tx of all their bytes. A load that overlaps
  memory an earlier in-flight load writes first waits for that load.
- The waiters of a phase wait on the carried parity, then flip it, right
  before the first later statement of the same block that touches the loaded
  memory (or at the block's end), so independent work overlaps the copy; a run
  of wgmma products waits for all its operands before the first.
- Who waits: when every other access of a barrier's memory is made by the
  issuing thread itself (a TMA store or reload of the data), only the issuer
  waits (in its elected block); otherwise every thread of the role waits on
  every phase of that barrier, in order.

Hardware rule: an mbarrier phase completes when its pending arrivals and
transaction bytes reach zero; `try_wait.parity` on the completed phase makes
the TMA-written data visible to the waiting threads, so async write -> generic
or async read needs the wait and no proxy fence. `try_wait.parity` only
compares parities: a thread that skipped a phase, or that waits after the
barrier moved two phases on, waits on the wrong phase. So a phase is armed
again only after its waiters passed (insert_barriers orders the waits before
the next arm when other threads wait), and a thread waits on every phase of a
barrier or on none.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import Access, all_accesses, may_overlap, walk
from hopperc.ir.rewrite import map_bodies


def complete_async_loads(kernel: ir.Kernel) -> ir.Kernel:
    piped = frozenset(p.full for p in kernel.pipelines)
    return replace(kernel, body=_Loads(piped, _issuer_waits(kernel, piped)).block(kernel.body))


def _issuer_waits(kernel: ir.Kernel, piped: frozenset[str]) -> frozenset[str]:
    """Barriers whose loaded memory only the issuing thread accesses otherwise:
    its own TMA/bulk stores and loads (manual code counts as any thread's; a
    store issued per warpgroup, as another warpgroup's thread's)."""
    loads = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad)
             and s.barrier is not None and s.barrier.array not in piped]
    memory: dict[str, set[str]] = {}
    for load in loads:
        memory.setdefault(load.barrier.array, set()).add(load.dst.storage or load.dst.buffer)
    accesses = [a for stmt in kernel.body.stmts for a in all_accesses(stmt)]
    return frozenset(array for array, guarded in memory.items()
                     if all(a.single_thread and not a.per_warpgroup
                            for a in accesses if a.memory in guarded))


@dataclass
class _Phase:
    """Loads in flight together on one barrier: one arm, one wait."""

    barrier: ir.BarrierRef
    loads: list[ir.AsyncLoad] = field(default_factory=list)
    arm_at: int = 0  # index of the arrive.expect_tx in the output block

    def writes(self) -> list[Access]:
        return [a for load in self.loads for a in all_accesses(load)]


class _Loads:
    def __init__(self, piped: frozenset[str], issuer_waits: frozenset[str]):
        self.piped = piped
        self.issuer_waits = issuer_waits

    def block(self, block: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        pending: list[_Phase] = []
        stmts = block.stmts
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ir.ManualRegion):
                for phase in pending:
                    out.extend(self.wait(phase, stmt))
                pending = []
                out.append(stmt)
                continue
            touched = [a for s in _unit(stmts, i) for a in all_accesses(s)]
            for phase in [p for p in pending if _touches(touched, p)]:
                out.extend(self.wait(phase, stmt))
                pending.remove(phase)
            if isinstance(stmt, ir.AsyncLoad) and stmt.barrier is not None \
                    and stmt.barrier.array not in self.piped:
                phase = next((p for p in pending if p.barrier == stmt.barrier), None)
                if phase is None:
                    phase = _Phase(stmt.barrier, arm_at=len(out))
                    out.append(None)  # the arm, written once the phase's loads are known
                    pending.append(phase)
                phase.loads.append(stmt)
                out[phase.arm_at] = self.arm(phase)
                out.append(stmt)
                continue
            out.append(map_bodies(stmt, self.block))
        for phase in pending:
            out.extend(self.wait(phase, None))
        return ir.Block(tuple(out))

    def arm(self, phase: _Phase) -> ir.MBarrierExpectTx:
        first = phase.loads[0]
        nbytes = sum(load.nbytes for load in phase.loads)
        return ir.MBarrierExpectTx(phase.barrier, ir.const(nbytes), first.span,
                                   _reason(phase.loads, "armed before the load"))

    def wait(self, phase: _Phase, user: ir.Stmt | None) -> list[ir.Stmt]:
        first = phase.loads[0]
        register = ir.phase_register(phase.barrier.array)
        span = getattr(user, "span", None)
        reason = _reason(phase.loads, "used next" if span else "complete before the block ends",
                         span)
        stmts = [ir.MBarrierWait(phase.barrier, ir.Scalar(ir.ScalarKind.CARRIED, register),
                                 first.span, reason),
                 ir.PhaseFlip(register, first.span)]
        if phase.barrier.array in self.issuer_waits:
            return [ir.OneThread(ir.Block(tuple(stmts)), first.span)]
        return stmts


def _touches(accesses: list[Access], phase: _Phase) -> bool:
    return any(may_overlap(a, w) for a in accesses for w in phase.writes())


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


def _reason(loads: list[ir.AsyncLoad], after: str, after_span=None) -> ir.Reason:
    """Why a phase is armed or waited for: what its loads write (every buffer)."""
    first = loads[0]
    buffers = ", ".join(dict.fromkeys(load.dst.buffer for load in loads))
    what = f"written by {first.engine.label} load" + ("s" if len(loads) > 1 else "")
    return ir.Reason(ir.Hazard.ASYNC_WRITE_READ, buffers, what, first.span, after, after_span)
