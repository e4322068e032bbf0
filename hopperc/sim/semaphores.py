"""Flags between blocks (`signal` / `wait`, ir.Signal and ir.Wait) and the
blocks that must run interleaved because of them.

A kernel whose blocks wait on each other cannot run one block (or cluster)
after another, as the simulator runs other kernels: a block that waits for a
flag a later block signals would never go on. Such a kernel's blocks all run
in one schedule (`run_grid`): one set of clocks, one record of global writes
(`GridWrites`), one set of flags, and the scheduler interleaves the warps of
every block. A wait no block's signal can satisfy leaves every warp blocked:
a deadlock, reported at the wait with the flag's value.

The memory model (PTX ISA, release and acquire patterns):
- `red.release.gpu` by one thread releases its clock (all that happens before
  it: the block's bar.sync brings the other threads' writes in) into the flag;
  `ld.acquire.gpu` that reads a value at least the count joins the flag's
  clock (every signal so far: adds are read-modify-writes, so a later value
  carries the earlier releases) into the waiting thread's.
- A read (TMA load or ld.global) of global memory another block wrote (a bulk
  store, st.global or red.global.add) is a race unless the write is ordered
  before it; a TMA load reads through the async proxy, so for another block's
  writes the reader's clock at its last `fence.proxy.async.global` must cover
  them (an acquire alone orders the generic proxy only). Within a block the
  rules of `memory.GlobalWrites` stand (a bulk store's completion implies the
  proxy fence for its own thread).
- A counter (`n: i32 = signal F[i]`, ir.Count) returns the flag's value at its
  atom in this schedule: whichever block's add comes last reads the final
  count. Its release is a signal's; with acq_rel it also joins the flag's clock
  (every earlier add's release) into the thread's. The old value goes to the
  block's broadcast slot with the writer's clock; a CountRead by a thread
  whose clock does not cover that write (no barrier between) is a race.
"""
from __future__ import annotations

from collections import deque
from typing import Iterator

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.block import TRACE_LENGTH, Block, Program
from hopperc.sim.findings import Category, fail
from hopperc.sim.memory import Agents, Clock, GlobalWrites, Site, join


def uses_semaphores(kernel: ir.Kernel) -> bool:
    return any(isinstance(s, (ir.Signal, ir.Wait, ir.Count)) for s in walk(kernel.body))


class Flag:
    """One flag: its value and the clock its signals released."""

    def __init__(self, name: str, value: int):
        self.name, self.value = name, value
        self.clock: Clock = {}

    @property
    def label(self) -> str:  # how a trace names what a wait waits on
        return f"flag {self.name}"

    def describe(self) -> str:
        return f"{self.name} holds {self.value}"


class Flags:
    """The run's flags, made at their first use with the value the tensor holds
    (0 in a run without data: the kernel is given them zeroed)."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.flags: dict[tuple[str, tuple[int, ...]], Flag] = {}

    def get(self, tensor: str, index: tuple[int, ...], span) -> Flag:
        flag = self.flags.get((tensor, index))
        if flag is None:
            value = 0
            if self.tensors is not None:
                data = self.tensors[tensor]
                if len(index) != data.ndim or not all(0 <= i < n for i, n in
                                                      zip(index, data.shape)):
                    raise fail(Category.OUT_OF_RANGE, f"flag {tensor}{list(index)} is outside "
                                                      f"'{tensor}' (shape {list(data.shape)})",
                               span)
                value = int(data[index])
            flag = self.flags[(tensor, index)] = Flag(f"{tensor}{list(index)}", value)
        return flag

    def store(self, flag: Flag, tensor: str, index: tuple[int, ...]) -> None:
        if self.tensors is not None:
            self.tensors[tensor][index] = flag.value


def signal(warp, stmt: ir.Signal, lanes: tuple[int, ...]) -> None:
    """red.release.gpu.global.add.s32 by each running lane (one, after the pass)."""
    flags: Flags = warp.block.flags
    index = tuple(warp.value(i, lanes, stmt.span) for i in stmt.index)
    flag = flags.get(stmt.tensor, index, stmt.span)
    for _ in lanes:
        flag.value += 1
        join(flag.clock, warp.clock)
        warp.tick()
    flags.store(flag, stmt.tensor, index)
    warp.block.event(warp.name, stmt.span, f"red.release.gpu {flag.name} += 1: {flag.value}")


def wait(warp, stmt: ir.Wait, lanes: tuple[int, ...]) -> Iterator:
    """ld.acquire.gpu in a loop until the flag reaches the count, then acquire."""
    index = tuple(warp.value(i, lanes, stmt.span) for i in stmt.index)
    count = warp.value(stmt.count, lanes, stmt.span)
    flag = warp.block.flags.get(stmt.tensor, index, stmt.span)
    yield from warp.wait(lambda: flag.value >= count, f"the spin on {flag.name} >= {count}",
                         flag, stmt.span)
    join(warp.clock, flag.clock)
    warp.tick()
    warp.block.event(warp.name, stmt.span, f"ld.acquire.gpu {flag.name}: {flag.value} >= {count}")


def count(warp, stmt: ir.Count, lanes: tuple[int, ...]) -> None:
    """atom.{acq_rel|release}.gpu.global.add.s32 by the one running lane; its old
    value to the block's broadcast slot."""
    flags: Flags = warp.block.flags
    index = tuple(warp.value(i, lanes, stmt.span) for i in stmt.index)
    flag = flags.get(stmt.tensor, index, stmt.span)
    old = flag.value
    flag.value += len(lanes)
    if stmt.acquire:
        join(warp.clock, flag.clock)
    join(flag.clock, warp.clock)
    warp.tick()
    flags.store(flag, stmt.tensor, index)
    generation = warp.block.count_slot[0] + 1
    warp.block.count_slot = (generation, old, warp.agent, warp.clock[warp.agent], stmt.span)
    warp.tick()
    order = "acq_rel" if stmt.acquire else "release"
    warp.block.event(warp.name, stmt.span, f"atom.{order}.gpu {flag.name} += 1: was {old}")


def count_read(warp, stmt: ir.CountRead) -> None:
    """Each thread's load of the broadcast slot into its register: of the store
    its block's counter made for this read (the warp's how-manieth), ordered
    before it (a load before that store reads a stale value: a race either
    way)."""
    generation, old, agent, tick, span = warp.block.count_slot
    warp.count_reads += 1
    if generation != warp.count_reads or warp.clock.get(agent, 0) < tick:
        raise fail(Category.RACE, f"{warp.block.label}warp {warp.local} reads the counter's "
                                  "value from the block's shared-memory slot, and no barrier "
                                  "orders the one thread's store of it before the read",
                   stmt.span, span)
    warp.env[stmt.result] = old
    warp.tick()


def proxy_fence(warp, stmt: ir.GlobalProxyFence) -> None:
    """fence.proxy.async.global: what this thread's clock covers now is ordered
    before its later async-proxy reads of global memory."""
    warp.global_fenced = dict(warp.clock)
    warp.tick()
    warp.block.event(warp.name, stmt.span, "fence.proxy.async.global")


class GridWrites(GlobalWrites):
    """The global writes of every block of an interleaved run, with the reads of
    another block's writes checked (module docstring); `owner[agent]` is the
    block an actor belongs to."""

    def __init__(self, owner: list[int]):
        super().__init__()
        self.owner = owner

    def read(self, clock: Clock, tensor: str, origin: tuple[int, ...],
             box: tuple[int, ...] | None, site: Site, reader=None, async_proxy=False) -> None:
        if reader is not None:
            mine = self.owner[reader.agent]
            seen = reader.global_fenced if async_proxy else clock
            for write in self.writes.get(tensor, ()):
                if self.owner[write.agent] != mine and seen.get(write.agent, 0) < write.tick \
                        and write.overlaps(tensor, origin, box):
                    raise _unordered(site, write.site, tensor, async_proxy,
                                     clock.get(write.agent, 0) >= write.tick)
            for element, (agent, tick, other, _) in self.stored.get(tensor, {}).items():
                if self.owner[agent] != mine and seen.get(agent, 0) < tick and \
                        _inside(element, origin, box):
                    raise _unordered(site, other, tensor, async_proxy,
                                     clock.get(agent, 0) >= tick)
        super().read(clock, tensor, origin, box, site)


def _inside(element: tuple[int, ...], origin: tuple[int, ...], box) -> bool:
    return box is None or all(o <= e < o + n for e, o, n in zip(element, origin, box))


def _unordered(site: Site, write: Site, tensor: str, async_proxy: bool, acquired: bool):
    if acquired:  # ordered for the generic proxy, not for the TMA engine
        return fail(Category.MISSING_FENCE,
                    f"{site} reads '{tensor}' that {write} wrote in another block: the "
                    "acquire orders it for the generic proxy only, and no "
                    "fence.proxy.async.global of the issuing thread comes between the "
                    "acquire and this async-proxy read", site.span, write.span)
    return fail(Category.RACE,
                f"{site} reads global memory of '{tensor}' that {write} writes in another "
                "block, and nothing orders the write before the read: the writing block must "
                "signal a flag after it (release) and this block wait on it (acquire), or "
                "count it with an acq_rel atom"
                + (" before the load" if async_proxy else ""), site.span, write.span)


class _BlockAgents:
    """A block's view of the run's actors: each one it adds is recorded as its."""

    def __init__(self, agents: Agents, owner: list[int], block: int):
        self.agents, self.owner, self.block = agents, owner, block
        self.names, self.generic = agents.names, agents.generic

    def add(self, name: str, generic: bool) -> int:
        self.owner.append(self.block)
        return self.agents.add(name, generic)


class GridBlock(Block):
    """A block of an interleaved run, named by its tile in messages; make_grid
    gives it (as any block it makes) `grid_index`, its place in the run, of
    `grid_blocks`."""

    @property
    def label(self) -> str:
        tile = ", ".join(f"{k[5:]}={v}" for k, v in self.env.items() if k.startswith("tile."))
        return f"block ({tile}) "


def make_grid(program: Program, clusters: list[list[dict[str, int]]], tensors, writers,
              make_warp, make_block=GridBlock, between=None) -> list[Block]:
    """Every block of `clusters` (each of one block: the front end refuses
    flags with clusters), sharing clocks, global writes and flags; `make_block`
    and `make_warp` make them (a recorder's types, for a trace); `between`: the
    record of reduce-adds across blocks (`block_accesses.py`)."""
    agents, owner = Agents(), []
    trace: deque = deque(maxlen=TRACE_LENGTH)
    writes, flags = GridWrites(owner), Flags(tensors)
    blocks = []
    for number, cluster in enumerate(clusters):
        for env in cluster:
            block = make_block(program, env, tensors, writers,
                               _BlockAgents(agents, owner, number), trace, between, (number, 0))
            block.global_writes, block.flags = writes, flags
            block.grid_index = len(blocks)
            block.warps = [make_warp(block, i) for i in range(program.kernel.threads // 32)]
            blocks.append(block)
    for block in blocks:
        block.grid_blocks = len(blocks)
    return blocks


def starve_block(candidates: list[tuple[str, object]], number: int) -> list:
    """The candidates that are not block `number`'s (its warps and its
    asynchronous work): a starve schedule of an interleaved run keeps one block
    behind the others, so a wait that lets its block read too early (another
    block's write not yet made) shows."""
    def block_of(candidate) -> object:
        kind, what = candidate
        return what.block if kind in ("warp", "product") else what[0]
    return [c for c in candidates if block_of(c).grid_index != number]
