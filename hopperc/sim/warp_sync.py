"""A warp's synchronization statements: mbarrier waits, named barriers (with the
checks that every lane and the right threads reach them), pingpong turn
barriers, the cluster barrier, proxy and mbarrier-init fences, flags
(sim/semaphores.py), and wgmma fence, commit and wait; arrivals of many lanes
at once. A mixin of `warp.Warp`, whose state it uses: the block, the warp's
clock, lanes and queues, its `wait` and `per_lane`, which runs what is issued
lane by lane."""
from __future__ import annotations

from typing import Iterator

from hopperc.ir import nodes as ir
from hopperc.sim import semaphores
from hopperc.sim.barriers import NamedBarrier
from hopperc.sim.block import trace_line
from hopperc.sim.findings import Category, fail
from hopperc.sim.memory import join


class WarpSync:
    def sync(self, stmt: ir.Stmt, lanes: tuple[int, ...]) -> Iterator:
        block, span = self.block, stmt.span
        match stmt:
            case ir.MBarrierWait(barrier=ref, parity=parity):
                barrier = self.barrier(ref, lanes, span)
                barrier.usable("mbarrier.wait", self.clock, span,
                               (self.agent, lanes[0] if len(lanes) == 1 else -1))
                p = self.value(parity, lanes, span)
                yield from self.wait(lambda: barrier.passes(p),
                                     f"mbarrier.wait {barrier.name} parity {p}", barrier, span)
                barrier.acquire(self.clock, p, span, stmt.scope.value)
                block.event(self.name, span, f"wait {barrier.name} parity {p}: passes "
                                             f"(phase {barrier.phase - 1} complete)")
            case ir.NamedBarrier(id=ident, threads=threads):
                if stmt.per_warpgroup:  # each warpgroup meets alone
                    ident += self.local // 4
                if len(lanes) != 32:
                    raise fail(Category.BARRIER_MISUSE, f"bar.sync {ident} is reached by "
                                                        f"{len(lanes)} lanes of {self.name}: the "
                                                        "warp diverged before a barrier", span)
                if not self.divergent and not stmt.per_warpgroup and threads < self.running_threads:
                    where = f"role '{self.role.name}'" if self.role else "the block"
                    raise fail(Category.BARRIER_MISUSE,
                               f"bar.sync {ident}, {threads} is reached by all "
                               f"{self.running_threads} threads of {where} (no condition "
                               f"separates them), so they meet in unordered groups of {threads}",
                               span)
                yield from self.meet(stmt, block.named_barrier(ident), threads, True)
            case ir.TurnBarrier(id=ident, warpgroups=n, threads=threads, hand_over=hand_over):
                mine = self.local // 4
                ident += mine if hand_over else (mine + n - 1) % n
                yield from self.meet(stmt, block.named_barrier(ident), threads, not hand_over)
            case ir.ClusterBarrier():
                threads = block.kernel.threads * len(block.cluster)
                yield from self.meet(stmt, block.cluster_barrier, threads, True)
            case ir.ProxyFence(cluster=cluster):
                for target in block.cluster if cluster else (block,):
                    target.memory.fence(self.agent, self.clock, sum(1 << lane for lane in lanes))
                self.tick()
                block.event(self.name, span, "fence.proxy.async")
            case ir.MBarrierInitFence():
                for barrier in block.mbarriers.values():
                    barrier.init_fenced(self.agent, lanes, self.clock[self.agent])
                self.tick()
                block.event(self.name, span, "fence.mbarrier_init")
            case ir.SetMaxRegisters():
                pass
            case ir.Signal():
                semaphores.signal(self, stmt, lanes)
            case ir.Wait():
                yield from semaphores.wait(self, stmt, lanes)
            case ir.Count():
                semaphores.count(self, stmt, lanes)
            case ir.CountRead():
                semaphores.count_read(self, stmt)
            case ir.GlobalProxyFence():
                semaphores.proxy_fence(self, stmt)
            case ir.Mma():
                self.issue_mma(stmt, lanes)
            case ir.WgmmaFence():
                self.touched.clear()
                self.fenced = True
            case ir.WgmmaCommit():
                self.wgmma.commit()
            case ir.WgmmaWait(pending=keep):
                for op in self.wgmma.retire(keep):
                    while not op.done:
                        self.run_product()
                    join(self.clock, op.clock)
                block.event(self.name, span, f"wgmma.wait_group {keep}")
            case ir.MBarrierArrive(barrier=ref) if len(lanes) > 1:
                self.arrive_lanes(stmt, ref, lanes)
            case ir.StageRelease(barrier=ref, blocks=blocks) if blocks <= 1 and len(lanes) > 1:
                self.arrive_lanes(stmt, ref, lanes)
            case _:
                for lane in lanes:
                    self.per_lane(stmt, lane)

    def arrive_lanes(self, stmt: ir.Stmt, ref: ir.BarrierRef, lanes: tuple[int, ...]) -> None:
        """Each lane's arrival in turn, as `per_lane` makes them (an element-wise
        reader's release is one arrival per thread), with the barrier found once
        where its index is the same for every lane."""
        span = stmt.span
        if self.block.program.scalar(ref.index).per_lane:
            for lane in lanes:
                self.per_lane(stmt, lane)
            return
        barrier = self.barrier(ref, lanes, span)
        block, clock, agent, who = self.block, self.clock, self.agent, self.who
        event = trace_line(self.name, span, f"arrives on {barrier.name}")
        if barrier.arrive_warp(who, agent, lanes, clock, span, block.trace, event):
            return
        joined = None  # the phase's clock that this warp's clock is joined into
        for lane in lanes:
            barrier.usable("mbarrier.arrive", clock, span, (agent, lane))
            block.trace.append(event)
            # Between lanes only the warp's own tick moves: once its clock is in
            # the phase's, joining the tick alone gives the same clock.
            same = barrier.collecting is joined
            joined = barrier.collecting
            barrier.arrive((who, lane), {agent: clock[agent]} if same else clock, span)
            clock[agent] += 1

    def meet(self, stmt: ir.Stmt, named: NamedBarrier, threads: int, wait: bool) -> Iterator:
        """Arrive at `named` and, with `wait`, wait for the others (bar.sync,
        barrier.cluster), else go on (bar.arrive)."""
        block, span = self.block, stmt.span
        key = id(stmt)
        occurrence = (key, self.occurrences[key])
        self.occurrences[key] += 1
        meeting = named.arrive(self.index, threads, occurrence, self.clock, span, self.agent,
                               wait)
        generation = named.generation if named.meeting is meeting else named.generation - 1
        verb = named.label if wait else named.label.replace("bar.sync", "bar.arrive")
        block.event(self.name, span, f"arrives at {verb}, {threads}")
        if wait:
            yield from self.wait(lambda: named.generation > generation,
                                 f"{named.label}, {threads}", named, span)
            join(self.clock, meeting.clock)
        self.tick()
