"""Happens-before race detection over shared memory, with proxies.

Every actor has a vector clock: each warp, and each asynchronous unit (a TMA
load; the wgmma queue of a warp; the bulk-store queue of a thread, whose
operations complete in order). Synchronization joins clocks: an mbarrier phase
collects its arrivals' clocks and a waiter that observes the phase takes them;
`bar.sync` joins all participants; `wgmma.wait_group` and `wait_group.read`
join the completed operations. An access is ordered after an earlier one when
the accessor's clock covers the earlier access's epoch, so a race is found
whatever the interleaving of the accesses themselves.

Proxies (PTX memory model, generic vs async proxy): an async access (TMA,
wgmma operand, bulk store) after a generic write needs a `fence.proxy.async`
by each writing thread after its write, ordered before the async access: a
fence orders only the executing thread's own accesses, so the shadow memory
keeps the mask of lanes that wrote each chunk, and one elected lane fencing
does not cover the others. An async write after a generic read needs such a
fence, by any thread, ordered between the read and the async write (the
hand-off that orders the reads, e.g. an mbarrier the readers arrive on, is
then followed by the writer's fence, as every pipeline does).

Dtypes: buffers that reuse memory may see it through different dtypes, and
shared memory holds bytes: a read through one dtype of bytes last written
through another reinterprets them (an f32 read of two bf16 values), which the
simulator's values do not model. Each chunk keeps the dtype of its last write,
and such a read is a finding at the read, naming the write; bytes written again
through the reader's dtype (a staging tile over a ring of another dtype, filled
before it is read) read clean.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hopperc.diagnostics import Span
from hopperc.ir.dtypes import DType
from hopperc.sim.findings import Category, fail, line

Clock = dict[int, int]
_DTYPES = list(DType)  # a chunk's last write's dtype is kept as its index here


def join(into: Clock, other: Clock) -> None:
    if not into:  # a phase's or a meeting's first clock
        into.update(other)
        return
    for agent, tick in other.items():
        if tick > into.get(agent, 0):
            into[agent] = tick


@dataclass(frozen=True)
class Site:
    """An access for messages: `wgmma read of 'sa stage 1'` at a source span."""

    what: str
    span: Span | None

    def __str__(self) -> str:
        return f"{self.what}{line(self.span)}"


class Agents:
    """Actor ids: which are generic (warps) and how to name them."""

    def __init__(self):
        self.names: list[str] = []
        self.generic: list[bool] = []

    def add(self, name: str, generic: bool) -> int:
        self.names.append(name)
        self.generic.append(generic)
        return len(self.names) - 1


class ShadowMemory:
    """Per 16-byte chunk: the last write (actor, clock, proxy, site) and, per
    reader, the clock of its last read since that write."""

    def __init__(self, chunks: int, agents: Agents):
        self.agents = agents
        self.w_agent = np.full(chunks, -1, dtype=np.int32)
        self.w_clock = np.zeros(chunks, dtype=np.int64)
        self.w_site = np.full(chunks, -1, dtype=np.int32)
        self.w_lanes = np.zeros(chunks, dtype=np.uint32)  # lanes of a warp's last write
        self.w_dtype = np.full(chunks, -1, dtype=np.int8)  # _DTYPES index of the last write
        self.reads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.sites: list[Site] = []
        self.site_ids: dict[Site, int] = {}
        # warp -> (its clock, a clock snapshot, the mask of fencing lanes) per fence
        self.fences: dict[int, list[tuple[int, Clock, int]]] = {}

    def site(self, site: Site) -> int:
        known = self.site_ids.get(site)
        if known is None:
            known = self.site_ids[site] = len(self.sites)
            self.sites.append(site)
        return known

    def fence(self, warp: int, clock: Clock, lanes: int) -> None:
        """`fence.proxy.async` by the lanes in mask `lanes` of `warp`."""
        self.fences.setdefault(warp, []).append((clock[warp], dict(clock), lanes))

    def _fence_lanes(self, earlier: int, tick: int, clock: Clock, by_writer: bool) -> int:
        """The mask of lanes whose `fence.proxy.async` follows `earlier`'s access at
        `tick` and is ordered before `clock`: lanes of the writing warp `earlier`
        (`by_writer`), else of any warp (non-zero when some thread fenced)."""
        covered = 0
        for fencer, events in self.fences.items():
            if by_writer and fencer != earlier:
                continue
            seen = clock.get(fencer, 0)
            for fclock, snap, lanes in events:
                if fclock <= seen and snap.get(earlier, 0) >= tick:
                    covered |= lanes
        return covered

    def read(self, agent: int, clock: Clock, chunks: np.ndarray, site: Site,
             dtype: DType | None = None) -> None:
        """`chunks`: distinct chunk indices (as `SharedSpace.region` gives them);
        `dtype`: the one the reader sees them through (module docstring)."""
        writers = self.w_agent[chunks]
        distinct = _distinct(writers)
        if distinct and distinct[0] < 0:
            raise fail(Category.RACE, f"{site} reads shared memory that no completed write has "
                                      "filled: its producing write is not ordered before it",
                       site.span)
        for writer, tick, earlier in self._last_writes(agent, chunks, writers, distinct):
            if clock.get(writer, 0) < tick:
                raise fail(Category.RACE, f"{site} is not ordered after {earlier}, which "
                                          "wrote that memory", site.span, earlier.span)
            if not self.agents.generic[agent] and self.agents.generic[writer]:
                wrote = int(np.bitwise_or.reduce(self.w_lanes[chunks][self.w_agent[chunks]
                                                                      == writer]))
                unfenced = wrote & ~self._fence_lanes(writer, tick, clock, by_writer=True)
                if unfenced or not wrote and not self._fence_lanes(writer, tick, clock, True):
                    raise fail(Category.MISSING_FENCE, _unfenced(earlier, site, wrote, unfenced),
                               earlier.span, site.span)
        if dtype is not None:
            self._same_dtype(chunks, site, dtype)
        if agent not in self.reads:
            self.reads[agent] = (np.zeros_like(self.w_clock), np.full_like(self.w_site, -1))
        ticks_of, sites_of = self.reads[agent]
        ticks_of[chunks] = clock[agent]
        sites_of[chunks] = self.site(site)

    def write(self, agent: int, clock: Clock, chunks: np.ndarray, site: Site,
              lanes: np.ndarray | None = None, dtype: DType | None = None) -> None:
        """`chunks`: distinct chunk indices (none for a warp that holds no element);
        `lanes`: for a warp's write, the mask of lanes writing each chunk; `dtype`:
        the one the writer writes them through."""
        if not chunks.size:
            return
        for writer, tick, earlier in self._last_writes(agent, chunks):
            self._ordered(agent, clock, writer, tick, earlier, site, "wrote")
        for reader, (ticks_of, sites_of) in self.reads.items():
            if reader == agent:
                continue
            seen = ticks_of[chunks]
            tick = int(seen.max())
            if tick == 0:
                continue
            earlier = self.sites[int(sites_of[chunks][seen.argmax()])]
            self._ordered(agent, clock, reader, tick, earlier, site, "may still read")
        self.w_agent[chunks] = agent
        self.w_clock[chunks] = clock[agent]
        self.w_site[chunks] = self.site(site)
        self.w_lanes[chunks] = 0 if lanes is None else lanes
        self.w_dtype[chunks] = -1 if dtype is None else _DTYPES.index(dtype)
        for ticks_of, _ in self.reads.values():
            ticks_of[chunks] = 0

    def _same_dtype(self, chunks: np.ndarray, site: Site, dtype: DType) -> None:
        written = self.w_dtype[chunks]
        other = np.flatnonzero((written >= 0) & (written != _DTYPES.index(dtype)))
        if not other.size:
            return
        first = other[0]
        earlier, wrote = self.sites[int(self.w_site[chunks[first]])], _DTYPES[int(written[first])]
        raise fail(Category.WRONG_RESULT,
                   f"{site} reads as {dtype} the bytes written as {wrote} by {earlier}: "
                   "a buffer over the same memory in another dtype reinterprets its bytes, it "
                   f"does not convert them: convert in registers ({dtype}(...)) and write the "
                   f"values through a {dtype} buffer",
                   site.span, earlier.span)

    def _last_writes(self, agent: int, chunks: np.ndarray, writers: np.ndarray | None = None,
                     distinct: list[int] | None = None):
        """(writer, its latest clock, the site of that write) for each other actor
        that last wrote some of `chunks` (`writers`: their last writers, and
        `distinct` those, sorted, if known)."""
        if writers is None:
            writers = self.w_agent[chunks]
        ticks = self.w_clock[chunks]
        if distinct is None:
            distinct = _distinct(writers)
        if len(distinct) == 1:  # most regions: one writer, no mask to build
            writer = distinct[0]
            if writer not in (agent, -1):
                latest = int(ticks.argmax())
                yield writer, int(ticks[latest]), self.sites[int(self.w_site[chunks[latest]])]
            return
        for writer in distinct:
            if writer in (agent, -1):
                continue
            mine = writers == writer
            latest = int(ticks[mine].argmax())
            site = self.sites[int(self.w_site[chunks][mine][latest])]
            yield writer, int(ticks[mine][latest]), site

    def _ordered(self, agent: int, clock: Clock, other: int, tick: int, earlier: Site,
                 site: Site, verb: str) -> None:
        if clock.get(other, 0) < tick:
            raise fail(Category.RACE, f"{site} overwrites memory that {earlier} {verb}: "
                                      "nothing orders that access before the write",
                       site.span, earlier.span)
        if not self.agents.generic[agent] and self.agents.generic[other] and \
                not self._fence_lanes(other, tick, clock, by_writer=False):
            raise fail(Category.MISSING_FENCE,
                       f"{site} writes through the async proxy over memory that {earlier} "
                       "accessed through the generic proxy, with no fence.proxy.async ordered "
                       "between them", site.span, earlier.span)


@dataclass(frozen=True)
class GlobalWrite:
    """A bulk store's box of a global tensor, written by `agent` (the issuing
    thread's store queue, as a writer of global memory) at `tick`."""

    tensor: str
    origin: tuple[int, ...]
    box: tuple[int, ...]
    agent: int
    tick: int
    site: Site
    adds: bool = False  # a reduce-add: commutes with other adds

    def overlaps(self, tensor: str, origin: tuple[int, ...], box: tuple[int, ...] | None) -> bool:
        """`box` None: anywhere in the tensor. A box clipped to nothing (a ragged
        copy past its END) meets none."""
        return tensor == self.tensor and (box is None or all(
            a < b + m and b < a + n and n and m
            for a, n, b, m in zip(origin, box, self.origin, self.box)))


class GlobalWrites:
    """The global writes of a cluster's bulk stores, for the reads after them.

    A bulk store writes global memory asynchronously until a plain
    `cp.async.bulk.wait_group` of its issuing thread completes its group
    (`wait_group.read` completes only its read of shared memory); its completion
    implies a generic-async proxy fence, so a read (TMA load or ld.global) of
    those elements is ordered after the write when its thread's clock covers
    that plain wait. Bulk operations are not ordered with each other (one
    thread's two stores may write in either order, whatever their groups), so a
    later write of those elements (a bulk store, unless both add; st.global) is
    ordered after it only so too. Nothing orders one block's writes before another block's
    reads: a reader of another cluster never sees these records (the clusters
    run one after another), and the compiler refuses what it can see of that."""

    def __init__(self):
        self.writes: dict[str, list[GlobalWrite]] = {}
        # st.global from registers: per tensor, element -> (agent, tick, site)
        self.stored: dict[str, dict[tuple[int, ...], tuple[int, int, Site, bool]]] = {}

    def store(self, agent: int, clock: Clock, tensor: str, elements, site: Site,
              atomic: bool = False) -> None:
        """st.global (or, `atomic`, red.global.add) of `elements` (index tuples)
        by the warp `agent`: another thread's store of one of them must be ordered
        before it, or which value the element keeps depends on the schedule; so
        must a bulk store's write of one (its issuer's plain wait, then a
        hand-off). Adds commute with each other, not with a store: an add and a
        store of one element race unless ordered."""
        known = self.stored.setdefault(tensor, {})
        elements = list(elements)
        for element in elements:
            earlier = known.get(element)
            if earlier is not None and earlier[0] != agent and clock.get(earlier[0], 0) < \
                    earlier[1] and not (atomic and earlier[3]):
                raise fail(Category.RACE,
                           f"{site} writes element {list(element)} of '{tensor}', which "
                           f"{earlier[2]} also writes, and nothing orders the two stores: each "
                           "element needs one writer (with several warpgroups, each stores its "
                           "own rows: start at a multiple of 64 * wg)", site.span,
                           earlier[2].span)
            if not (atomic and earlier is not None and earlier[3]
                    and clock.get(earlier[0], 0) < earlier[1]):
                known[element] = (agent, clock[agent], site, atomic)
        for write in self.writes.get(tensor, ()):
            if clock.get(write.agent, 0) < write.tick and not (atomic and write.adds):
                hit = next((e for e in elements if write.overlaps(tensor, e, (1,) * len(e))),
                           None)
                if hit is not None:
                    raise _unordered_writes(site, write.site, tensor)

    def write(self, write: GlobalWrite, clock: Clock) -> None:
        """A bulk store's write, issued by a thread whose clock is `clock`."""
        for earlier in self.writes.get(write.tensor, ()):
            if clock.get(earlier.agent, 0) < earlier.tick and not (earlier.adds and write.adds) \
                    and earlier.overlaps(write.tensor, write.origin, write.box):
                raise _unordered_writes(write.site, earlier.site, write.tensor)
        self.writes.setdefault(write.tensor, []).append(write)

    def read(self, clock: Clock, tensor: str, origin: tuple[int, ...],
             box: tuple[int, ...] | None, site: Site, reader=None, async_proxy=False) -> None:
        """`reader` (the reading warp) and `async_proxy` (a TMA load) are for the
        reads of other blocks' writes, which only an interleaved run sees
        (`semaphores.GridWrites`)."""
        for write in self.writes.get(tensor, ()):
            if clock.get(write.agent, 0) < write.tick and write.overlaps(tensor, origin, box):
                raise fail(Category.RACE,
                           f"{site} reads global memory of '{tensor}' that {write.site} writes "
                           "through the async proxy, and that write is not complete for the "
                           "reader: the issuing thread's plain cp.async.bulk.wait_group (not "
                           ".read) and a hand-off to the reading threads must come between",
                           site.span, write.site.span)


def _unordered_writes(site: Site, earlier: Site, tensor: str):
    return fail(Category.RACE,
                f"{site} writes global memory of '{tensor}' that {earlier} writes through the "
                "async proxy, and that write is not complete for this thread: bulk copies "
                "complete in any order, so which value each element keeps depends on the "
                "schedule; the issuing thread's plain cp.async.bulk.wait_group (not .read), "
                "and a hand-off where another thread writes next, must come between",
                site.span, earlier.span)


def _unfenced(earlier: Site, site: Site, wrote: int, unfenced: int) -> str:
    head = f"{earlier} is read by {site} through the async proxy, but "
    if unfenced == wrote or not wrote:
        return head + ("the writing warp runs no fence.proxy.async between its write and the "
                       "hand-off")
    return head + (f"{_lanes(unfenced)} of the {_lanes(wrote)} that wrote it run no "
                   "fence.proxy.async between their write and the hand-off (a proxy fence "
                   "orders only its own thread's accesses)")


def _lanes(mask: int) -> str:
    """`lanes 0-31`, `lane 5` or `lanes 0, 4, 8` of a lane mask."""
    lanes = [lane for lane in range(32) if mask >> lane & 1]
    if len(lanes) == 1:
        return f"lane {lanes[0]}"
    if lanes == list(range(lanes[0], lanes[-1] + 1)):
        return f"lanes {lanes[0]}-{lanes[-1]}"
    return "lanes " + ", ".join(map(str, lanes))


def _distinct(values: np.ndarray) -> list[int]:
    """Distinct values; most regions were last written by one actor."""
    if values.size == 0:
        return []
    low, high = int(values.min()), int(values.max())
    return [low] if low == high else np.unique(values).tolist()
