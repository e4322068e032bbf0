"""mbarriers and named barriers as the PTX ISA defines them.

An mbarrier has a phase, a pending arrival count and a transaction count. A
phase completes when every expected arrival has come and the transaction
count is back to zero; the pending count then reloads. `try_wait.parity P`
succeeds once the current phase's parity differs from P (so parity 1 passes
on a fresh barrier: "the phase before the first" counts as complete) and
acquires what the arrivals of the completed phase released.

Release and acquire have a scope (PTX `.cta` or `.cluster`) and synchronize only
when each scope holds the other's thread (morally strong): an arrival from
another block of the cluster releases to a waiter only if it is
`.release.cluster` and the wait `.acquire.cluster`. A remote arrival at `.cta`
scope still counts towards the phase, but orders nothing: the waiter's later
accesses (a multicast refilling the arriving block's stage) race with the
arriver's earlier ones.

An init becomes visible to other threads and to the async proxy (a load
completing its bytes on the barrier) only through `fence.mbarrier_init` by the
initializing thread after the init, ordered before the use; the initializing
thread's own arrivals and waits follow it in program order.

`bar.sync id, n` releases when n threads (whole warps) have arrived; the
generations belong to the id, whichever statements arrive. Warps that reach one
statement together (the same occurrence of it, nothing ordering one after the
other) but meet in two generations were split by a count too small for them;
the same statement reached again once an earlier generation is ordered before
it (another warpgroup's turn) is a generation of its own. One id
used with two thread counts by code that may run concurrently is misuse,
whether or not a schedule makes the two uses meet: every use is remembered
and checked by happens-before against the uses with another count.
`bar.arrive` counts without waiting: a generation that completes with no
bar.sync in it, or one still open at block exit, holds an arrival no sync
consumed (unbalanced turns), which hardware would count into a later use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hopperc.diagnostics import Span
from hopperc.sim.findings import Category, fail, line
from hopperc.sim.memory import Clock, join


@dataclass
class MBarrier:
    name: str
    carries_bytes: bool  # some expect_tx or load targets it: its phases carry data
    initialized: bool = False
    invalidated: bool = False
    count: int = 0
    pending: int = 0
    tx: int = 0
    phase: int = 0  # the phase in progress; phases 0 .. phase-1 completed
    in_flight: int = 0  # loads issued on it that have not completed
    init_by: tuple[int, int, int] | None = None  # (warp, lane, clock) of the init
    init_span: Span | None = None
    init_fence: int | None = None  # the initializing warp's clock at fence.mbarrier_init
    collecting: Clock = field(default_factory=dict)
    released: Clock = field(default_factory=dict)  # clocks of the last completed phase
    # what other blocks released at cluster scope: acquired by .acquire.cluster only
    collecting_cluster: Clock = field(default_factory=dict)
    released_cluster: Clock = field(default_factory=dict)
    arrived: set = field(default_factory=set)  # (warp label, lane) in the phase in progress
    last_arrival: Span | None = None  # the latest arrival of the phase in progress

    def describe(self) -> str:
        if not self.initialized:
            return f"{self.name} (not initialized)"
        return (f"{self.name} phase {self.phase} (parity {self.phase % 2}): "
                f"{self.count - self.pending} of {self.count} arrivals, "
                f"{self.tx} transaction bytes outstanding, {self.in_flight} loads in flight")

    # ---- checks shared by every use
    def usable(self, who: str, clock: Clock, span: Span | None,
               thread: tuple[int, int] | None = None) -> None:
        """A use by `thread` (warp, lane), or by the async proxy (None)."""
        if self.invalidated:
            raise fail(Category.BARRIER_MISUSE, f"{who} uses {self.name} after mbarrier.inval",
                       span)
        if not self.initialized:
            raise fail(Category.BARRIER_MISUSE, f"{who} uses {self.name} before mbarrier.init",
                       span)
        warp, lane, tick = self.init_by
        if clock.get(warp, 0) < tick:
            raise fail(Category.BARRIER_MISUSE,
                       f"{who} uses {self.name} before its initialization is visible to it: "
                       "fence.mbarrier_init and a barrier must order the init first", span,
                       self.init_span)
        if thread == (warp, lane):
            return
        if self.init_fence is None or clock.get(warp, 0) < self.init_fence:
            user = "the async proxy" if thread is None else "another thread"
            raise fail(Category.BARRIER_MISUSE,
                       f"{who} uses {self.name}, but no fence.mbarrier_init by the initializing "
                       f"thread orders its mbarrier.init before this use: the init is not "
                       f"visible to {user}", span, self.init_span)

    def init_fenced(self, warp: int, lanes: tuple[int, ...], tick: int) -> None:
        """`fence.mbarrier_init` by `lanes` of `warp`: publishes an earlier init by one
        of them."""
        if self.initialized and not self.invalidated and self.init_fence is None and \
                self.init_by[0] == warp and self.init_by[1] in lanes:
            self.init_fence = tick

    # ---- operations
    def init(self, count: int, thread: tuple[int, int], clock: Clock, span: Span | None) -> None:
        if self.initialized and not self.invalidated:
            raise fail(Category.BARRIER_MISUSE, f"{self.name} is initialized twice without "
                                                "mbarrier.inval in between", span)
        self.initialized, self.invalidated = True, False
        self.count = self.pending = count
        self.tx, self.phase, self.in_flight = 0, 0, 0
        self.init_by = (*thread, clock[thread[0]])
        self.init_span, self.init_fence = span, None
        self.collecting, self.released, self.arrived = {}, {}, set()
        self.collecting_cluster, self.released_cluster = {}, {}

    def arrive(self, who: tuple[int, int], clock: Clock, span: Span | None,
               remote_scope: str | None = None) -> None:
        """An arrival; `remote_scope`: from another block of the cluster, with
        .release at that scope ("cta" or "cluster")."""
        if self.pending == 0:
            raise fail(Category.BARRIER_MISUSE,
                       f"arrival overflow on {self.name}: all {self.count} arrivals of phase "
                       f"{self.phase} have come and it only waits for transaction bytes",
                       span, state=(self.describe(),))
        if who in self.arrived:
            raise fail(Category.BARRIER_MISUSE,
                       f"extra arrival: {who[0]} lane {who[1]} arrives on {self.name} "
                       f"twice in phase {self.phase}", span, state=(self.describe(),))
        self.arrived.add(who)
        self.last_arrival = span
        self.pending -= 1
        if remote_scope is None:
            join(self.collecting, clock)
        elif remote_scope == "cluster":
            join(self.collecting_cluster, clock)
        self._maybe_complete(span)

    def arrive_warp(self, who: str, agent: int, lanes: tuple[int, ...], clock: Clock,
                    span: Span | None, trace, event: str) -> bool:
        """The arrivals of `lanes` of warp `who` (actor `agent`), one per lane in
        turn, each after its `usable` check, its `event` in `trace` and then a tick
        of the warp's clock, as `arrive` makes them, in one call: where every check
        passes for every lane and the phase completes at the last lane at the
        earliest. Otherwise False, with nothing done: the caller makes them one by
        one, so each finding comes at the same lane with the same trace."""
        count = len(lanes)
        if self.invalidated or not self.initialized or self.pending < count:
            return False
        warp, _, tick = self.init_by
        seen = clock.get(warp, 0)  # the clock only grows between the lanes
        if seen < tick or (self.init_fence is None or seen < self.init_fence) and \
                any((agent, lane) != self.init_by[:2] for lane in lanes):
            return False
        arrivals = [(who, lane) for lane in lanes]
        if not self.arrived.isdisjoint(arrivals):
            return False
        trace.extend([event] * min(count, trace.maxlen or count))
        self.arrived.update(arrivals)
        self.last_arrival = span
        self.pending -= count
        clock[agent] += count - 1  # the last lane's arrival carries the highest tick
        join(self.collecting, clock)
        self._maybe_complete(span)
        clock[agent] += 1
        return True

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes

    def complete_tx(self, nbytes: int, clock: Clock, span: Span | None) -> None:
        self.tx -= nbytes
        self.in_flight -= 1
        join(self.collecting, clock)
        if self.pending == 0 and self.tx < 0:
            raise fail(Category.BARRIER_MISUSE,
                       f"{self.name} phase {self.phase} received {-self.tx} more transaction "
                       "bytes than its expect_tx announced", span, state=(self.describe(),))
        self._maybe_complete(span)

    def _maybe_complete(self, span: Span | None) -> None:
        if self.pending or self.tx:
            return
        if self.in_flight:
            raise fail(Category.BARRIER_MISUSE,
                       f"{self.name} phase {self.phase} completed with {self.in_flight} of its "
                       "loads still in flight: its expect_tx announced fewer bytes than they "
                       "bring", span, state=(self.describe(),))
        self.released, self.collecting = self.collecting, {}
        self.released_cluster, self.collecting_cluster = self.collecting_cluster, {}
        self.phase += 1
        self.pending = self.count
        self.arrived = set()

    def passes(self, parity: int) -> bool:
        return self.phase % 2 != parity

    def acquire(self, clock: Clock, parity: int, span: Span | None,
                scope: str = "cta") -> None:
        if self.phase == 0 and self.carries_bytes:
            raise fail(Category.BARRIER_MISUSE,
                       f"parity misuse: waiting on {self.name} with parity {parity} before its "
                       "first phase completes passes at once, without the data it carries",
                       span, state=(self.describe(),))
        join(clock, self.released)
        if scope == "cluster":
            join(clock, self.released_cluster)

    def inval(self, span: Span | None, waiters: int) -> None:
        if waiters:
            raise fail(Category.BARRIER_MISUSE, f"{self.name} is invalidated while {waiters} "
                                                "warps still wait on it", span)
        self.leftover(span, "invalidated")
        self.invalidated = True

    def leftover(self, span: Span | None, when: str) -> None:
        """A phase some arrivals started and none completed; the finding points at
        the latest of those arrivals (else at `span`) and at the init."""
        if self.initialized and not self.invalidated and (
                self.pending != self.count or self.tx or self.in_flight):
            raise fail(Category.BARRIER_MISUSE,
                       f"{self.name} is {when} with phase {self.phase} half done "
                       f"({self.count - self.pending} of {self.count} arrivals, {self.tx} "
                       "bytes): an arrival or transaction has no matching wait",
                       self.last_arrival if self.pending != self.count else span,
                       self.init_span, state=(self.describe(),))


@dataclass
class Meeting:
    """The warps gathered at one generation of a named barrier."""

    threads: int
    warps: list[int] = field(default_factory=list)
    sites: set = field(default_factory=set)  # (statement, occurrence) of each arrival
    clock: Clock = field(default_factory=dict)
    waiters: int = 0  # warps that wait (bar.sync), not only count (bar.arrive)
    span: Span | None = None  # the latest arrival


class NamedBarrier:
    """`bar.sync ident` of one block, or (with a `label`) the cluster's barrier."""

    def __init__(self, ident: int, label: str | None = None):
        self.ident = ident
        self.label = label or f"bar.sync {ident}"
        self.meeting: Meeting | None = None
        self.generation = 0
        # (statement, occurrence) -> the generation it met in and that meeting
        self.met: dict[tuple, tuple[int, Meeting]] = {}
        self.uses: dict[tuple[int, int], tuple[int, Span | None]] = {}  # latest per (actor, n)

    def arrive(self, warp: int, threads: int, occurrence: tuple, clock: Clock,
               span: Span | None, agent: int | None = None, waits: bool = True) -> Meeting:
        """Warp `warp` (actor `agent`, by default the same number) arrives; with
        `waits` (bar.sync) it waits for the generation, else (bar.arrive) not."""
        agent = warp if agent is None else agent
        self._check_concurrent_counts(agent, threads, clock, span)
        meeting = self.meeting
        if meeting is None:
            meeting = self.meeting = Meeting(threads)
        elif meeting.threads != threads:
            raise fail(Category.BARRIER_MISUSE,
                       f"{self.label} is reached with {threads} threads here and "
                       f"{meeting.threads} elsewhere: a barrier's thread count must agree", span)
        earlier = self.met.get(occurrence)
        if earlier is not None and earlier[0] != self.generation and \
                not _ordered_after(clock, earlier[1].clock):
            raise fail(Category.BARRIER_MISUSE,
                       f"{self.label}, {threads}: the warps reaching this statement "
                       f"together are split over two barrier generations, so {threads} is not "
                       "the number of threads that meet here", span)
        meeting.warps.append(warp)
        meeting.sites.add(occurrence)
        meeting.waiters += waits
        related, meeting.span = meeting.span, span
        self.met[occurrence] = (self.generation, meeting)
        join(meeting.clock, clock)
        if 32 * len(meeting.warps) == threads:
            self.meeting = None
            self.generation += 1
            if not meeting.waiters:
                raise fail(Category.BARRIER_MISUSE,
                           f"{self.label.replace('bar.sync', 'bar.arrive')}, {threads}: all "
                           f"{threads} threads arrived without waiting, so this generation "
                           "releases no bar.sync: an arrival that no bar.sync consumed (the "
                           "arrivals and syncs on this id are unbalanced)", span, related)
        return meeting

    def unmatched(self, span: Span | None) -> None:
        """At block exit: a generation still open holds arrivals no bar.sync met."""
        meeting = self.meeting
        if meeting is not None:
            raise fail(Category.BARRIER_MISUSE,
                       f"the block exits with {32 * len(meeting.warps)} of {meeting.threads} "
                       f"threads arrived at named barrier {self.ident} by bar.arrive: an "
                       "arrival that no bar.sync consumed (the arrivals and syncs on this id "
                       "are unbalanced)",
                       meeting.span or span, span)

    def _check_concurrent_counts(self, agent: int, threads: int, clock: Clock,
                                 span: Span | None) -> None:
        for (other, count), (tick, where) in self.uses.items():
            if count != threads and clock.get(other, 0) < tick:
                raise fail(Category.BARRIER_MISUSE,
                           f"{self.label} is used with {threads} threads here and with "
                           f"{count} threads{line(where)} by code that may run at the same time "
                           "(nothing orders that use before this one): concurrent uses of one "
                           "barrier id must agree on its thread count", span, where)
        self.uses[(agent, threads)] = (clock[agent], span)

    def describe(self) -> str:
        m = self.meeting
        if m is None:
            return f"{self.label}: idle"
        return (f"{self.label}, {m.threads}: {32 * len(m.warps)} of {m.threads} threads "
                f"arrived (warps {', '.join(map(str, sorted(m.warps)))})")



def _ordered_after(clock: Clock, earlier: Clock) -> bool:
    """Whether every arrival joined in `earlier` happens before `clock`."""
    return all(clock.get(agent, 0) >= tick for agent, tick in earlier.items())
