"""Run blocks under a scheduler: at every step it picks a runnable warp (which
runs to its next synchronization) or an asynchronous operation to complete.
The choosers are the exploration strategies: async work as early or as late
as possible, uniformly random, one role starved (each in turn), or a replayed choice list
(for exhaustive search)."""
from __future__ import annotations

import random
from collections import deque

from hopperc.sim.barriers import MBarrier, NamedBarrier
from hopperc.sim.block import TRACE_LENGTH, Block, Program, runnable_stores
from hopperc.sim.findings import Category, SimFailure, fail
from hopperc.sim.memory import Agents
from hopperc.sim.semaphores import starve_block
from hopperc.sim.warp import Warp

MODES = ("async-early", "async-late", "random", "starve")


class Chooser:
    """Picks one candidate (kind, object); kinds: warp, load, product, store."""

    def __init__(self, mode: str, seed: int):
        self.mode, self.rng = mode, random.Random(seed)
        self.turn = seed // len(MODES)  # which role (or warp) this starve schedule starves
        self.starved: int | None = None

    def describe(self) -> str:
        return self.mode

    def __call__(self, candidates: list[tuple[str, object]], block_index: int, block: Block):
        rng, mode = self.rng, self.mode
        if mode == "random":
            return rng.choice(candidates)
        warps = [c for c in candidates if c[0] == "warp"]
        asyncs = [c for c in candidates if c[0] != "warp"]
        if mode == "async-early" and asyncs:
            return rng.choice(asyncs)
        if mode == "async-late" and warps:
            return rng.choice(warps)
        if mode == "starve":
            if getattr(block, "grid_blocks", 1) > 1:  # blocks interleaved: one lags behind
                return rng.choice(starve_block(candidates, self.turn % block.grid_blocks)
                                  or candidates)
            if self.starved is None:
                self.starved = _starved_warp(block, self.turn)
            others = [c for c in candidates if not (c[0] == "warp" and c[1].index == self.starved)]
            return rng.choice(others or candidates)
        return rng.choice(candidates)


def _starved_warp(block: Block, turn: int) -> int:
    """Successive starve schedules starve each role in turn (its first warp: a
    slow producer, a slow consumer), or each warp of a kernel without roles."""
    roles = block.kernel.roles
    if roles:
        return roles[turn % len(roles)].first_warp
    return turn % len(block.warps)


class Pruned(Exception):
    """The replay reached a synchronization state an earlier schedule explored."""


class Replay:
    """Takes choice `prefix[i]` at the i-th choice point, then the first
    candidate, recording how many candidates each point had. Past the prefix,
    a state already in `visited` ends the schedule: what follows it has been
    explored (the state holds every warp's progress, every barrier and every
    operation in flight; clocks are left out, as races are found by
    happens-before on whichever path reaches the state first)."""

    def __init__(self, prefix: list[int], visited: set):
        self.prefix = prefix
        self.visited = visited
        self.branching: list[int] = []

    def describe(self) -> str:
        return f"exhaustive search, choices {self.prefix or '[first]'}"

    def __call__(self, candidates, block_index: int, block: Block):
        if len(candidates) == 1:
            return candidates[0]
        depth = len(self.branching)
        if depth >= len(self.prefix):
            state = _state(block.cluster)
            if state in self.visited:
                raise Pruned
            self.visited.add(state)
        self.branching.append(len(candidates))
        return candidates[self.prefix[depth] if depth < len(self.prefix) else 0]


def _state(blocks: list[Block]) -> tuple:
    return tuple(_block_state(block) for block in blocks)


def _block_state(block: Block) -> tuple:
    warps = tuple((w.steps, w.done, len(w.wgmma.pending), len(w.wgmma.groups),
                   tuple((tuple(s.clock[q.agent] for s in q.pending), len(q.groups),
                          len(q.unwritten)) for q in w.stores.values()))
                  for w in block.warps)
    mbarriers = tuple((b.initialized, b.invalidated, b.phase, b.pending, b.tx, b.in_flight)
                      for b in block.mbarriers.values())
    named = tuple((i, n.generation, tuple(sorted(n.meeting.warps)) if n.meeting else ())
                  for i, n in sorted(block.named.items()))
    loads = tuple(sorted((str(load.site), load.place.stage) for load in block.loads))
    return warps, mbarriers, named, loads, block.exited


def run_block(program: Program, env: dict[str, int], tensors, chooser, block_index: int,
              writers=None) -> None:
    """Run one block to its end (a cluster of one)."""
    run_cluster(program, [env], tensors, chooser, block_index, writers)


def run_cluster(program: Program, envs: list[dict[str, int]], tensors, chooser,
                block_index: int, writers=None, recorder=None, between=None) -> None:
    """Run the blocks of one cluster together to their end; raises SimFailure at
    the first finding. A block's exit is checked when its last warp is done.
    `tensors` None: without data (see `Block`); `writers`: see `Block`.
    `recorder` (`recorder.Recorder`, for a trace): makes the blocks and warps,
    which record what they do, and counts the steps; None runs the plain ones.
    `between` (`block_accesses.BlockAccesses`): the grid's record of global
    accesses across blocks, each block named (cluster index, rank)."""
    agents, trace = Agents(), deque(maxlen=TRACE_LENGTH)
    make_block, make_warp = (Block, Warp) if recorder is None else recorder.types
    if recorder is not None:
        chooser = recorder.counted(chooser)
    blocks = [make_block(program, env, tensors, writers, agents, trace, between,
                         (block_index, env.get("@rank", 0))) for env in envs]
    for block in blocks:
        block.cluster = blocks
        block.cluster_barrier = blocks[0].cluster_barrier
        block.global_writes = blocks[0].global_writes
        block.warps = [make_warp(block, i) for i in range(program.kernel.threads // 32)]
    run_blocks(program, blocks, chooser, block_index)


def run_blocks(program: Program, blocks: list[Block], chooser, block_index: int) -> None:
    """Run `blocks`, their warps made, together to their end (one schedule);
    raises SimFailure at the first finding, with the blocks' trace."""
    trace = blocks[0].trace
    warps = [w for block in blocks for w in block.warps]
    runs = {w: w.run() for w in warps}
    try:
        while True:
            candidates = _candidates(blocks, warps)
            if not candidates:
                if all(w.done for w in warps):
                    return
                raise _deadlock(blocks)
            kind, what = chooser(candidates, block_index, blocks[0])
            if kind == "warp":
                what.steps += 1
                try:
                    next(runs[what])
                except StopIteration:
                    block = what.block
                    if all(w.done for w in block.warps):
                        block.exit_checks(program.kernel.span)
            elif kind == "load":
                block, load = what
                block.complete_load(load)
            elif kind == "product":
                what.run_product()
            else:
                block, queue, store = what
                block.run_store(queue, store)
    except SimFailure as failure:
        failure.trace = tuple(trace)
        raise
    finally:
        for run in runs.values():
            run.close()


def stuck(blocks: list[Block]) -> bool:
    """Nothing can run: every live warp waits and nothing is in flight (a hang)."""
    return not _candidates(blocks, [w for block in blocks for w in block.warps])


def _candidates(blocks: list[Block], warps: list[Warp]) -> list[tuple[str, object]]:
    """Runnable warps, then loads, then each warp's pending wgmma and stores (the
    order the choosers index into). Rebuilt at every step with plain loops: any
    event may release a waiter, and a blocked warp's test is a cheap comparison.
    `warps`: every warp of `blocks`, in order."""
    out: list[tuple[str, object]] = []
    queued: list[tuple[str, object]] = []
    for w in warps:
        if not w.done:
            ready = w.ready
            if ready is None or ready():
                out.append(w.as_candidate)
        if w.wgmma.pending:
            queued.append(w.product_candidate)
        if w.stores:
            for q in w.stores.values():
                if q.pending:
                    queued += [("store", (w.block, q, s)) for s in runnable_stores(q)]
    for block in blocks:
        for load in block.loads:
            out.append(("load", (block, load)))
    out += queued
    return out


def _deadlock(blocks: list[Block]) -> SimFailure:
    warps = [w for block in blocks for w in block.warps]
    blocked = [w for w in warps if not w.done]
    groups: dict[tuple[str, str], list[int]] = {}
    for w in blocked:
        role = f" ({w.role.name})" if w.role else ""
        groups.setdefault((w.block.label, f"{role} wait{{s}} at {w.waiting}{_at(w)}: "
                                          f"{w.waiting_on.describe()}"), []).append(w.index)
    state = tuple(f"{label}{_warps(ids)}{text.format(s='s' if len(ids) == 1 else '')}"
                  for (label, text), ids in groups.items())
    first = blocked[0]
    # The other side of the cycle: a wait elsewhere that this one waits on.
    other = next((w.waiting_span for w in blocked if w.waiting_span != first.waiting_span), None)
    for w in blocked:
        barrier = w.waiting_on
        if isinstance(barrier, MBarrier) and barrier.initialized and barrier.pending == 0 \
                and barrier.tx and not barrier.in_flight:
            more = f"{barrier.tx} more" if barrier.tx > 0 else f"{-barrier.tx} fewer"
            return fail(Category.BARRIER_MISUSE,
                        f"{barrier.name} phase {barrier.phase} waits for {more} transaction "
                        "bytes than its loads brought: its expect_tx does not match them, so "
                        f"{w.name} waits forever", w.waiting_span, state=state)
    if all(isinstance(w.waiting_on, NamedBarrier) for w in blocked):
        named = first.waiting_on
        return fail(Category.BARRIER_MISUSE,
                    f"{named.describe()}, and no other warp can arrive: the thread count does "
                    "not match the warps that reach it", first.waiting_span, other, state=state)
    return fail(Category.DEADLOCK, f"every live warp is blocked ({len(blocked)} of "
                                   f"{len(warps)} warps) and nothing in flight can "
                                   "release them", first.waiting_span, other, state=state)


def _warps(ids: list[int]) -> str:
    if len(ids) == 1:
        return f"warp {ids[0]}"
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"warps {ids[0]}-{ids[-1]}"
    return "warps " + ", ".join(map(str, ids))


def _at(warp: Warp) -> str:
    span = warp.waiting_span
    return f" ({span.file.rsplit('/', 1)[-1]}:{span.line})" if span else ""
