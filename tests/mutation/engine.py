"""Mutation testing of `hopperc check`: every synchronization of a lowered
kernel removed or altered, one at a time, must be reported.

Operators, over the lowered IR (what `check` simulates and `build` renders):
- remove each synchronization statement (fences, barriers, waits, arrivals,
  `expect_tx`, inits, invalidations, wgmma and bulk-group commits and waits,
  phase flips and stage advances); inside a loop it goes from every iteration;
- alter each count (an mbarrier init count by one, a named barrier's thread
  count by one warp: a phase or barrier that completes early races, one that
  never completes hangs), each parity (a wait waits for the other one), each
  `expect_tx` (16 bytes more, 16 fewer, half), each stage index (a view's ring
  stage or rank-3 plane, an mbarrier index: the next one, modulo the ring) and
  each `wait_group N` (N + 1; a smaller N only waits more);
- turn each TMA reduce-add into a plain store: another block's adds into the
  same box then meet a plain store (a race across blocks), or the tensor's first
  values are lost (a wrong result);
- narrow each cluster-scope release (a remote `mbarrier.arrive.release.cluster`)
  and acquire (`try_wait.acquire.cluster`) to `.cta`: the other block's refill
  is then not ordered after this block's reads, a race.

A mutant is caught when the first finding has a category the operator can
cause and points (its line or its related line) at a line the mutated
statement involves: its own; the two accesses its `Reason` orders (inserted
syncs; the setup barrier and fence order the inits before every barrier use);
every use of the same mbarrier array or named-barrier id; the accesses of the
memory it touches or that loads on its barrier write; and, for hand-written
statements, the code around it in its block (hand-written fences and barriers,
which order whatever comes before and after them: any line of the kernel that
touches shared memory or a barrier).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Iterator

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, leaf_accesses, walk
from hopperc.ir.printer import statement
from hopperc.sim.findings import Category, Finding

Path = tuple[tuple[int, str | None], ...]  # (index in a block, child block to enter) per level

SYNC = frozenset({Category.RACE, Category.DEADLOCK, Category.MISSING_FENCE,
                  Category.BARRIER_MISUSE})
HANG = frozenset({Category.DEADLOCK, Category.BARRIER_MISUSE})

# What removing each kind of statement can be reported as.
REMOVED: dict[type, frozenset[Category]] = {
    ir.ProxyFence: frozenset({Category.MISSING_FENCE}),
    ir.WgmmaFence: frozenset({Category.MISSING_FENCE}),
    ir.NamedBarrier: SYNC,
    ir.TurnBarrier: SYNC | {Category.WRONG_RESULT},
    ir.ClusterBarrier: SYNC,
    ir.MBarrierWait: SYNC,
    ir.MBarrierArrive: HANG,
    ir.StageRelease: HANG,
    ir.MBarrierExpectTx: HANG | {Category.RACE},
    ir.MBarrierInit: frozenset({Category.BARRIER_MISUSE}),
    ir.MBarrierInitFence: frozenset({Category.BARRIER_MISUSE}),
    ir.MBarrierInval: frozenset({Category.BARRIER_MISUSE}),
    ir.WgmmaCommit: frozenset({Category.RACE}),
    ir.WgmmaWait: frozenset({Category.RACE}),
    ir.BulkCommit: frozenset({Category.RACE}),
    ir.BulkWaitRead: frozenset({Category.RACE}),
    ir.PhaseFlip: SYNC,
    ir.StageAdvance: SYNC,
    # flags between blocks: a missing signal hangs its waiters; a missing wait or
    # fence leaves another block's writes unordered before the reads (or not yet
    # made: the reader loads what was there before)
    ir.Signal: HANG,
    ir.Wait: frozenset({Category.RACE, Category.MISSING_FENCE, Category.WRONG_RESULT}),
    ir.GlobalProxyFence: frozenset({Category.MISSING_FENCE}),
    # a counter's atom taken out leaves its block's broadcast slot unwritten
    ir.Count: frozenset({Category.RACE}),
}
ORDERING = (ir.ProxyFence, ir.WgmmaFence, ir.NamedBarrier, ir.MBarrierInitFence, ir.WgmmaCommit,
            ir.WgmmaWait, ir.BulkCommit, ir.BulkWaitRead)


@dataclass(frozen=True)
class Mutant:
    id: str  # kernel:role:line:operator:Kind#occurrence, stable across unrelated edits
    operator: str
    description: str
    expected: frozenset[Category]
    lines: frozenset[int]  # where its first finding may point
    kernel: ir.Kernel  # the mutated kernel


def mutants(kernel: ir.Kernel, file: str) -> list[Mutant]:
    """Every mutant of `kernel` (lowered IR), in program order."""
    context = _Context(kernel)
    copies = _split_copies(kernel.body)
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for path, stmt, role, block in _statements(kernel.body):
        if path in copies and copies[path] is None:
            continue  # mutated with its first part's statement
        for operator, replacement, expected, description in _operators(stmt, kernel):
            base = f"{file}:{role or '-'}:{stmt.span.line}:{operator}:{type(stmt).__name__}"
            seen[base] = seen.get(base, 0) + 1
            mutated = kernel
            for at in reversed((path, *copies.get(path, ()))):
                mutated = apply(mutated, at, replacement)
            out.append(Mutant(f"{base}#{seen[base]}", operator, description, expected,
                              context.lines(stmt, block), mutated))
    return out


def _split_copies(block: ir.Block) -> dict[Path, tuple[Path, ...] | None]:
    """The parts of a loop split at its boundary iterations hold copies of the
    syncs the passes placed before the split: a mutant of one, as a bug of those
    passes, is in every copy. Per statement of a first part, the paths of its
    copies in the other parts (the same kind, line and occurrence), which map to
    None."""
    out: dict[Path, tuple[Path, ...] | None] = {}
    for path, stmt, _, holder in _statements(block):
        if not (isinstance(stmt, ir.ForLoop) and stmt.split is not None):
            continue
        source = (stmt.split.start, stmt.split.stop, stmt.span)
        parts = [(path[:-1] + ((k, None),), s) for k, s in enumerate(holder.stmts)
                 if isinstance(s, ir.ForLoop) and s.split is not None
                 and (s.split.start, s.split.stop, s.span) == source]
        if parts[0][0] != path:
            continue
        keyed = [_keyed(s.body, part[:-1] + ((part[-1][0], "body"),)) for part, s in parts]
        for key, first in keyed[0].items():
            others = tuple(k[key] for k in keyed[1:] if key in k)
            out[first] = others
            out.update(dict.fromkeys(others))
    return out


def _keyed(body: ir.Block, prefix: Path) -> dict[tuple, Path]:
    """Each statement's path by (kind, span, occurrence of that kind and span)."""
    seen: dict[tuple, int] = {}
    out = {}
    for path, stmt, _, _ in _statements(body, prefix):
        kind = (type(stmt).__name__, getattr(stmt, "span", None))
        seen[kind] = seen.get(kind, 0) + 1
        out[(*kind, seen[kind])] = path
    return out


def verdict(mutant: Mutant, findings: list[Finding]) -> str:
    """caught, elsewhere (a finding of another category or at another line) or missed."""
    if not findings:
        return "missed"
    first = findings[0]
    lines = {span.line for span in (first.span, first.related) if span is not None}
    return "caught" if first.category in mutant.expected and lines & mutant.lines else \
        "elsewhere"


# ---------------------------------------------------------------- operators
def _operators(stmt: ir.Stmt, kernel: ir.Kernel) -> Iterator[tuple]:
    """(operator, replacement statements, expected categories, description)."""
    kind = type(stmt).__name__
    if type(stmt) in REMOVED:
        yield "remove", (), REMOVED[type(stmt)], f"{kind} removed"
    if isinstance(stmt, (ir.StageRelease, ir.MBarrierWait)) and \
            stmt.scope is ir.MemoryScope.CLUSTER:
        yield ("scope-cta", (replace(stmt, scope=ir.MemoryScope.CTA),),
               frozenset({Category.RACE}), "its release or acquire narrowed to .cta")
    match stmt:
        case ir.MBarrierInit(count=count):
            for delta in (-1, 1):
                if count + delta >= 1:
                    yield (f"count{delta:+d}", (replace(stmt, count=count + delta),), SYNC,
                           f"init count {count} -> {count + delta}")
        case ir.NamedBarrier(threads=threads):
            for delta in (-32, 32):
                if 32 <= threads + delta <= kernel.threads:
                    yield (f"threads{delta:+d}", (replace(stmt, threads=threads + delta),),
                           SYNC, f"{statement(stmt)} -> {threads + delta}")
        case ir.ProxyFence(cluster=True):
            yield ("cta", (replace(stmt, cluster=False),), frozenset({Category.MISSING_FENCE}),
                   "orders its own block's shared memory only")
        case ir.StageRelease(blocks=blocks) if blocks > 1:
            yield ("local", (replace(stmt, blocks=1),), HANG,
                   "releases the stage in its own block only, not in the others")
        case ir.MBarrierWait(parity=parity):
            yield ("parity", (replace(stmt, parity=ir.ScalarOp("-", ir.const(1), parity)),),
                   SYNC, "waits for the other parity")
        case ir.MBarrierExpectTx(nbytes=nbytes):
            for name, value in (("tx+16", ir.ScalarOp("+", nbytes, ir.const(16))),
                                ("tx-16", ir.ScalarOp("-", nbytes, ir.const(16))),
                                ("tx/2", ir.ScalarOp("//", nbytes, ir.const(2)))):
                # too few bytes can complete a phase before a load lands: a race
                yield (name, (replace(stmt, nbytes=value),), HANG | {Category.RACE},
                       f"expect_tx {name}")
    match stmt:
        case ir.WgmmaWait(pending=n) | ir.BulkWaitRead(pending=n) if n < 7:
            yield ("pending+1", (replace(stmt, pending=n + 1),), frozenset({Category.RACE}),
                   f"wait_group {n} -> {n + 1}")
    match stmt:
        case ir.Wait(count=count):
            yield ("count-1", (replace(stmt, count=ir.ScalarOp("-", count, ir.const(1))),),
                   REMOVED[ir.Wait], "waits for one signal fewer")
        case ir.Count(acquire=True):
            yield ("release", (replace(stmt, acquire=False),),
                   frozenset({Category.RACE, Category.MISSING_FENCE}),
                   "atom.acq_rel -> atom.release: the last block does not acquire")
        case ir.BulkWaitRead(read=False, pending=n):
            # .read frees the shared source only: what the stores write is not complete
            yield ("read", (replace(stmt, read=True),), frozenset({Category.RACE}),
                   f"wait_group {n} -> wait_group.read {n}")
    match stmt:
        case ir.AsyncStore(reduce_add=True):
            yield ("store", (replace(stmt, reduce_add=False),),
                   frozenset({Category.RACE, Category.WRONG_RESULT}), "reduce-add -> plain store")
    for index, (where, shifted) in enumerate(_shifted_indices(stmt, kernel)):
        yield (f"index{index + 1}", (shifted,), SYNC | {Category.WRONG_RESULT},
               f"{where} shifted to the next slot")


def _shifted_indices(stmt: ir.Stmt, kernel: ir.Kernel) -> Iterator[tuple[str, ir.Stmt]]:
    """Each ring index the statement uses (view stage, rank-3 plane, mbarrier
    index), in turn moved to the next slot of its ring."""
    counts = {b.name: b.count for b in kernel.barriers}
    buffers = {b.name: b for b in kernel.buffers}

    def next_slot(index: ir.ScalarExpr, slots: int) -> ir.ScalarExpr:
        return ir.ScalarOp("%", ir.ScalarOp("+", index, ir.const(1)), ir.const(slots))

    def shifts(node) -> Iterator[tuple[str, object]]:
        if isinstance(node, ir.BarrierRef) and counts.get(node.array, 1) > 1:
            yield (f"mbarrier index of {node.array}",
                   replace(node, index=next_slot(node.index, counts[node.array])))
        elif isinstance(node, ir.BufferView):
            buf = buffers[node.buffer]
            if node.stage is not None and buf.stages > 1:
                yield f"stage of {node.buffer}", replace(node, stage=next_slot(node.stage,
                                                                                buf.stages))
            if node.part is not None and len(buf.shape) == 3 and node.part.count > 1:
                yield f"plane of {node.buffer}", replace(node, part=replace(
                    node.part, index=next_slot(node.part.index, node.part.count)))

    for where, path, new in _find(stmt, shifts):
        yield where, _put(stmt, path, new)


# Fields the passes read and the generated code does not (what a wait completes).
_BOOKKEEPING = {(ir.BulkWaitRead, "views")}


def _find(node, shifts, path=()) -> Iterator[tuple[str, tuple, object]]:
    """(description, path, replacement) for every shift of every node below `node`
    (not into nested blocks, reasons or bookkeeping), depth first."""
    for where, new in shifts(node):
        yield where, path, new
    if is_dataclass(node) and not isinstance(node, (ir.Block, ir.Reason)):
        for f in fields(node):
            if (type(node), f.name) in _BOOKKEEPING:
                continue
            value = getattr(node, f.name)
            if isinstance(value, tuple):
                for i, child in enumerate(value):
                    yield from _find(child, shifts, path + ((f.name, i),))
            elif is_dataclass(value):
                yield from _find(value, shifts, path + ((f.name, None),))


def _put(node, path: tuple, new):
    """`node` with the node at `path` (field name, tuple index or None) replaced."""
    if not path:
        return new
    (name, i), rest = path[0], path[1:]
    value = getattr(node, name)
    if i is None:
        return replace(node, **{name: _put(value, rest, new)})
    items = list(value)
    items[i] = _put(items[i], rest, new)
    return replace(node, **{name: tuple(items)})


# ---------------------------------------------------------------- where a finding may point
class _Context:
    def __init__(self, kernel: ir.Kernel):
        self.barrier_lines: dict[str, set[int]] = {}
        self.memory_lines: dict[str, set[int]] = {}
        self.all_lines: set[int] = set()
        self.named_lines: dict[int, set[int]] = {}
        # `wgmma.wait_group N` counts batches: a commit taken out merges its batch
        # into the next one, so any wait after it may leave a needed batch running.
        self.wgmma_wait_lines: set[int] = set()
        loaded_on: dict[str, set[str]] = {}
        stored: set[str] = set()
        for stmt in walk(kernel.body):
            if isinstance(stmt, ir.AsyncStore):
                stored.add(_memory(stmt.src, kernel))
            if isinstance(stmt, ir.NamedBarrier):
                self.named_lines.setdefault(stmt.id, set()).add(stmt.span.line)
            if isinstance(stmt, ir.WgmmaWait) and stmt.reason is not None:
                self.wgmma_wait_lines |= {s.line for s in (stmt.reason.before_span,
                                                           stmt.reason.after_span) if s}
            ref = getattr(stmt, "barrier", None)
            if isinstance(ref, ir.BarrierRef):
                self.barrier_lines.setdefault(ref.array, set()).add(stmt.span.line)
                self.all_lines.add(stmt.span.line)
                if isinstance(stmt, ir.AsyncLoad):
                    loaded_on.setdefault(ref.array, set()).add(_memory(stmt.dst, kernel))
            for access in leaf_accesses(stmt):
                memory = access.storage or access.buffer
                self.memory_lines.setdefault(memory, set()).add(access.span.line)
                self.all_lines.add(access.span.line)
        for array, memories in loaded_on.items():
            for memory in memories:
                self.barrier_lines[array] |= self.memory_lines.get(memory, set())
        # an empty barrier hands its ring's stage from the readers to the refill
        for p in kernel.pipelines:
            for buffer in p.buffers:
                self.barrier_lines.setdefault(p.empty, set()).update(
                    self.memory_lines.get(kernel.buffer(buffer).storage, set()))
        # `wait_group.read N` counts groups: a commit taken out merges two groups and
        # shifts the count for every store, so the race shows at any store's memory.
        self.store_lines = set().union(*(self.memory_lines.get(m, set()) for m in stored))
        self.stored_buffers = {s.src.buffer for s in walk(kernel.body)
                               if isinstance(s, ir.AsyncStore)}
        # A flag orders global accesses of different blocks: what it leaves unordered
        # shows at a global read or write, or at a wait that never passes.
        flag_kinds = (ir.Signal, ir.Wait, ir.Count)
        self.flags = {s.tensor for s in walk(kernel.body) if isinstance(s, flag_kinds)}
        self.global_lines = {s.span.line for s in walk(kernel.body) if isinstance(
            s, (ir.AsyncLoad, ir.AsyncStore, ir.GlobalRowStore, *flag_kinds))}

    def lines(self, stmt: ir.Stmt, block: ir.Block) -> frozenset[int]:
        """Its own line, the accesses it orders, and the users of what it touches."""
        lines = {stmt.span.line}
        reason = getattr(stmt, "reason", None)
        if reason is not None:
            lines |= {s.line for s in (reason.before_span, reason.after_span) if s is not None}
            if reason.hazard is ir.Hazard.SETUP:  # orders the inits before every use
                lines |= set().union(*self.barrier_lines.values())
        else:  # hand-written: it orders the code around it in its thread
            lines |= {s.span.line for s in walk(block)}
            if isinstance(stmt, ORDERING):
                lines |= self.all_lines
        ref = getattr(stmt, "barrier", None)
        if isinstance(ref, ir.BarrierRef):
            lines |= self.barrier_lines.get(ref.array, set())
        if isinstance(stmt, ir.NamedBarrier):
            lines |= self.named_lines.get(stmt.id, set())
        if isinstance(stmt, ir.BulkCommit) or isinstance(stmt, ir.BulkWaitRead) or (
                isinstance(stmt, ir.NamedBarrier) and reason is not None
                and reason.subject in self.stored_buffers):
            # A wait completes every older group of its thread, whichever store's, and
            # the barrier after it hands that on: taken out, the race may show first at
            # any store's memory.
            lines |= self.store_lines
        if isinstance(stmt, ir.WgmmaCommit):
            lines |= self.wgmma_wait_lines
        if isinstance(stmt, (ir.Signal, ir.Wait, ir.Count, ir.GlobalProxyFence)) or \
                getattr(reason, "subject", None) in self.flags:
            lines |= self.global_lines
        for access in leaf_accesses(stmt):
            lines |= self.memory_lines.get(access.storage or access.buffer, set())
        return frozenset(lines)


def _memory(view: ir.BufferView, kernel: ir.Kernel) -> str:
    return kernel.buffer(view.buffer).storage


# ---------------------------------------------------------------- paths
def _statements(block: ir.Block, path: Path = (), role: str | None = None
                ) -> Iterator[tuple[Path, ir.Stmt, str | None, ir.Block]]:
    """(path, statement, its role, the block holding it) in program order."""
    for index, stmt in enumerate(block.stmts):
        here = role
        if isinstance(stmt, ir.RoleBlock):
            here = stmt.role.name
        yield path + ((index, None),), stmt, here, block
        for name in _block_fields(stmt):
            yield from _statements(getattr(stmt, name), path + ((index, name),), here)


def _block_fields(stmt: ir.Stmt) -> list[str]:
    children = bodies(stmt)
    return [f.name for f in fields(stmt) if any(getattr(stmt, f.name) is b for b in children)]


def apply(kernel: ir.Kernel, path: Path, replacement: tuple[ir.Stmt, ...]) -> ir.Kernel:
    """`kernel` with the statement at `path` replaced by `replacement`."""
    def rebuild(block: ir.Block, path: Path) -> ir.Block:
        (index, name), rest = path[0], path[1:]
        stmts = list(block.stmts)
        if name is None:
            stmts[index:index + 1] = replacement
        else:
            stmt = stmts[index]
            stmts[index] = replace(stmt, **{name: rebuild(getattr(stmt, name), rest)})
        return ir.Block(tuple(stmts))
    return replace(kernel, body=rebuild(kernel.body, path))

