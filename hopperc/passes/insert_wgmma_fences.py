"""insert_wgmma_fences

Requires: wgmma batches committed and waited for (commit_wgmma_batches,
wait_wgmma_batches).
Establishes: a warpgroup executes wgmma.fence before its first wgmma, and
between any other instruction's access to a wgmma's registers (accumulator or
register A: zero-initialization, epilogue reads, a register A computed by
element-wise code) and that wgmma. A fence a loop needs as a whole goes before
the loop when nothing else in the loop touches those registers, so a main loop
of products runs fence-free. Products of the same shape on one accumulator
need no fence between them. A wgmma after a wait_group that completed its
accumulator starts a new chain and gets a fence, and so does a wgmma issued
after an mbarrier wait since the last fence (a ring read at several sites: S_j,
then V's wait, then P V): ptxas requires both and would otherwise inject the
fence itself (C7519), unexplained. (Measured on attention_fwd with NVRTC 13.0:
with V's waits moved ahead of S's fence ptxas injects nothing; with the
releases between S and P V removed it still injects: the wait's retry loop is
what it does not see across, not S's commit.) The same holds for a wgmma issued
after one thread's code (a TMA copy, a bulk commit or wait, which
elect_async_issue puts behind elect.sync and a branch, or a OneThread or
elect block already there): ptxas orders no earlier fence across the branch's
join. (Measured on attention_bwd with NVRTC 13.0: dK's product after dQ's TMA
reduce-add got a fence injected when ours stood before the elected block,
none when it stood after, and none with the block emptied, which drops the
branch.)

Hardware rule: wgmma.mma_async reads its accumulator and A registers
asynchronously; wgmma.fence orders earlier register accesses of the warpgroup
before it (PTX ISA, wgmma.fence). Without it the result is undefined; an
extra one inside a loop serializes the tensor cores.
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import Span
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import leaves, mma_registers, register_uses
from hopperc.ir.dataflow import ForwardRewrite
from hopperc.passes.elect_async_issue import ELECTED


@dataclass(frozen=True)
class _Touch:
    """A register access since the last wgmma.fence; tile None: no fence yet."""

    tile: str | None
    shape: tuple | None  # the wgmma instruction shape, for accesses by wgmma
    what: str
    span: Span | None


_AFTER_BRANCH = "issued after one thread's code (a branch)"
_NO_FENCE_YET = _Touch(None, None, "not fenced since the warpgroup started", None)
Touched = frozenset[_Touch]


def insert_wgmma_fences(kernel: ir.Kernel) -> ir.Kernel:
    return _Fences(kernel).run(kernel)


def _touches(leaf: ir.Stmt) -> list[_Touch]:
    """Register accesses of a leaf other than a wgmma. A wait_group hands the
    accumulators it completes back to the threads: ptxas treats the next wgmma
    on them as a new chain that needs its own fence (it would inject one)."""
    if isinstance(leaf, ir.WgmmaWait):
        return [_Touch(t, None, "completed by wgmma.wait_group", leaf.span) for t in leaf.tiles]
    if isinstance(leaf, ir.MBarrierWait):
        # A wait spins on try_wait, a loop: ptxas orders no earlier fence across
        # its retry branch and injects one before the next wgmma (C7519).
        return [_Touch(None, None, "issued after an mbarrier wait's retry loop", leaf.span)]
    if isinstance(leaf, ELECTED):
        return [_Touch(None, None, _AFTER_BRANCH, leaf.span)]
    if isinstance(leaf, ir.TileDef) and leaf.init is None:
        # Its first product overwrites it, but ptxas may give it registers other
        # instructions wrote: it wants a fence first (else it injects one, C7519).
        return [_Touch(leaf.name, None, "declared, its registers last written by other code",
                       leaf.span)]
    return [_Touch(u.tile, None, u.what, u.span) for u in register_uses(leaf)]


class _Fences(ForwardRewrite[Touched]):
    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel

    def initial(self) -> Touched:
        return frozenset({_NO_FENCE_YET})

    def join(self, a: Touched, b: Touched) -> Touched:
        return a | b

    def before(self, stmt: ir.Stmt, state: Touched):
        mmas = [leaf for leaf in leaves(stmt) if isinstance(leaf, ir.Mma)]
        if not mmas:
            return [], state
        registers = {t for m in mmas for t in mma_registers(m)}
        if not isinstance(stmt, ir.Mma) and any(
                touch.tile in registers for leaf in leaves(stmt) for touch in _touches(leaf)):
            return [], state  # touched inside: fence next to the wgmma that needs it
        for mma in mmas:
            touch = self._hazard(mma, state)
            if touch is not None:
                reason = ir.Reason(ir.Hazard.REGISTERS_TO_WGMMA, touch.tile or mma.acc,
                                   touch.what, touch.span, "used by wgmma", mma.span)
                return [ir.WgmmaFence(mma.span, reason, tuple(sorted(registers)))], frozenset()
        return [], state

    def step(self, stmt: ir.Stmt, state: Touched) -> tuple[ir.Stmt, Touched]:
        stmt, state = super().step(stmt, state)
        if isinstance(stmt, (ir.OneThread, ir.ElectLane)) and stmt.body.stmts:
            return stmt, state | {_Touch(None, None, _AFTER_BRANCH, stmt.span)}
        return stmt, state

    def transfer(self, stmt: ir.Stmt, state: Touched) -> Touched:
        match stmt:
            case ir.WgmmaFence():
                return frozenset()
            case ir.Mma(span=span):
                shape = self._shape(stmt)
                return state | {_Touch(t, shape, "used by wgmma", span)
                                for t in mma_registers(stmt)}
        return state | set(_touches(stmt))

    def _hazard(self, mma: ir.Mma, state: Touched) -> _Touch | None:
        """The earliest access that must be fenced before `mma` (real ones first)."""
        registers, shape = mma_registers(mma), self._shape(mma)
        found = [t for t in state if (t.tile in registers and t.shape != shape)
                 or (t.tile is None and t is not _NO_FENCE_YET)]
        if found:
            # Register accesses first, then a wait, then a branch; a total order
            # (a frozenset's iteration order varies between runs).
            return min(found, key=lambda t: (t.tile is None, t.what == _AFTER_BRANCH,
                                             t.span.line, t.span.col,
                                             t.tile or "", t.what))
        return _NO_FENCE_YET if _NO_FENCE_YET in state else None

    def _shape(self, mma: ir.Mma) -> tuple:
        """Products of one instruction shape on an accumulator are ordered without a fence."""
        return (mma.shape[1], self.kernel.buffer(mma.b.buffer).dtype)
