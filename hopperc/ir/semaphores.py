"""Flags in global memory that blocks signal, wait on and count (`signal F[i]`,
`wait F[i] >= n`, `n: i32 = signal F[i]`): the IR nodes. Re-exported by
`hopperc.ir.nodes`.

A flag is an i32 element of a tensor the kernel is given zeroed. The front end
makes one `Signal` or `Wait` per statement; the pass order_semaphores wraps
each in what makes it a release or an acquire of the whole block (a barrier,
the bulk stores' completion, a proxy fence) and hands it to one thread.

PTX memory model (PTX ISA, "Memory Consistency Model": release and acquire
patterns, morally strong operations): a `red.release.gpu` by thread T is a
release; an `ld.acquire.gpu` by thread U that reads its value (or a later
one in the flag's modification order, each add being a read-modify-write)
synchronizes with it, so every write that happens before T's release (the
other threads' writes through the bar.sync before it: causality order is
transitive) is visible to what happens after U's acquire.
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.diagnostics import Span
from hopperc.ir.scalars import ScalarExpr
from hopperc.ir.sync_nodes import Reason


@dataclass(frozen=True)
class Signal:
    """`red.release.gpu.global.add.s32 [F + offset(index)], 1` by the thread that
    runs it (one thread, after order_semaphores)."""

    tensor: str
    index: tuple[ScalarExpr, ...]
    span: Span


@dataclass(frozen=True)
class Wait:
    """Spin on `ld.acquire.gpu.global.b32 [F + offset(index)]` until it reads at
    least `count` (one thread, after order_semaphores)."""

    tensor: str
    index: tuple[ScalarExpr, ...]
    count: ScalarExpr
    span: Span


@dataclass(frozen=True)
class Count:
    """`n: i32 = signal F[i]`, a counter: `atom.{acq_rel|release}.gpu.global.add.s32
    old, [F + offset(index)], 1` by one thread (after order_semaphores), `old`
    written to the block's broadcast slot in shared memory for the CountRead
    that declares register `result`. A release as a Signal's; `acquire` (set by
    order_semaphores) makes the atom acq_rel: it then synchronizes with every
    earlier add's release in the flag's modification order (each add being a
    read-modify-write, a release sequence), so the block that reads the last
    value sees every block's writes that came before their adds."""

    tensor: str
    index: tuple[ScalarExpr, ...]
    result: str
    span: Span
    acquire: bool = False


@dataclass(frozen=True)
class CountRead:
    """Every thread reads the block's broadcast slot (what its Count's one thread
    wrote) into register `result`: the counter's value, uniform over the block."""

    result: str
    span: Span


@dataclass(frozen=True)
class GlobalProxyFence:
    """fence.proxy.async.global: orders the executing thread's generic-proxy view
    of global memory (what its acquire made visible) before its later
    async-proxy accesses (a TMA load of data other blocks wrote). Per thread."""

    span: Span
    reason: Reason | None = None


SemaphoreStmt = Signal | Wait | Count | CountRead | GlobalProxyFence
