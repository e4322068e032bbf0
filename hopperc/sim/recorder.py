"""A simulated run recorded for a trace (`sim/trace.py` writes it as JSON).

The recording replays one schedule of a report (a seeded one, or the search's
choices that found a finding) with blocks and warps that subclass the plain
ones and note what they do; the plain classes carry no recording code, so a
simulation without a trace runs exactly the code it ran before.

Time is the scheduler's step counter: each step runs one warp to its next
synchronization (one synchronization statement and the plain code after it)
or completes one asynchronous operation. What a warp does in step n is a span
[n, n + 1); a wait that blocks spans from the step that reached it to the step
that passed it. Arrivals are kept per barrier phase (an mbarrier's phase, a
named barrier's generation) so that the wait that observes the phase gets an
arrow from each of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from hopperc.diagnostics import Span
from hopperc.ir import nodes as ir
from hopperc.sim.barriers import MBarrier, NamedBarrier
from hopperc.sim.block import Block
from hopperc.sim.explore import Report, program
from hopperc.sim.findings import Finding, SimFailure
from hopperc.sim.block_accesses import block_accesses
from hopperc.sim.schedule import MODES, Chooser, Replay, run_blocks, run_cluster, stuck
from hopperc.sim.semaphores import make_grid, uses_semaphores
from hopperc.sim.warp import Warp

_ARRIVALS = (ir.MBarrierArrive, ir.StageRelease, ir.MBarrierExpectTx)
_BLOCKING = (ir.MBarrierWait, ir.NamedBarrier, ir.TurnBarrier, ir.ClusterBarrier)


def where(span: Span | None) -> str:
    """`k.hk:12`, or "" for a statement the compiler made without a line."""
    return f"{span.file.rsplit('/', 1)[-1]}:{span.line}" if span else ""


@dataclass(eq=False)
class Slice:
    """One span of a track. `track`: ("warp", block, warp), ("tma", block),
    ("stores", block) or ("wgmma", block, warp); `end` None while open."""

    track: tuple
    name: str
    start: int
    end: int | None = None
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Flow:
    """An arrow: an arrival in `source` at step `at` releases the wait `target`."""

    source: Slice
    at: int
    target: Slice
    name: str


@dataclass
class Recording:
    kernel: ir.Kernel
    schedule: str  # which run this is
    blocks: list[tuple[int, str]] = field(default_factory=list)  # (number from 1, name)
    slices: list[Slice] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)
    steps: int = 0
    finding: Finding | None = None
    # What ran the step that found it; None for a hang (found when nothing could
    # run) or a wrong result (found after the run)
    finding_track: tuple | None = None


class Recorder:
    """Passed to `schedule.run_cluster`: its block and warp types record into
    `recording`, and `counted` wraps the chooser to count the steps."""

    def __init__(self, recording: Recording, names: list[str]):
        self.recording = recording
        self.names = names  # each block's name, in the order the clusters make them
        self.now = -1
        self.picked: tuple = ()
        self.arrivals: dict[tuple[int, int], list[tuple[Slice, int]]] = {}
        self.running: dict[int, Slice] = {}  # id(load, store or product) -> its slice
        self.waits: dict[Warp, Slice] = {}  # the waits not yet passed
        self.cluster: list[Block] = []  # the cluster running
        self.types = (self._block, _RecordedWarp)

    def _block(self, *args) -> Block:
        block = _RecordedBlock(*args)
        block.recorder = self
        block.number = len(self.recording.blocks) + 1  # its process id: they start at 1
        self.recording.blocks.append((block.number, self.names[block.number - 1]))
        block.keys = {id(b): key for key, b in block.mbarriers.items()}
        if block.rank == 0:  # a new cluster: new barriers, whose ids may be the old ones'
            self.cluster, self.arrivals = [], {}
        self.cluster.append(block)
        return block

    def counted(self, chooser):
        def choose(candidates, block_index, block):
            picked = chooser(candidates, block_index, block)
            self.now += 1
            self.picked = picked
            return picked
        return choose

    def open(self, track: tuple, name: str, args: dict, start: int | None = None) -> Slice:
        piece = Slice(track, name, self.now if start is None else start, None, args)
        self.recording.slices.append(piece)
        return piece

    def step(self, track: tuple, name: str, args: dict) -> Slice:
        """What a track did in this step."""
        piece = self.open(track, name, args)
        piece.end = self.now + 1
        return piece

    def arrived(self, barrier, phase: int, source: Slice) -> None:
        self.arrivals.setdefault((id(barrier), phase), []).append((source, self.now))

    def released(self, barrier, phase: int, wait: Slice, name: str) -> None:
        for source, at in self.arrivals.get((id(barrier), phase), ()):
            if source is not wait:
                self.recording.flows.append(Flow(source, at, wait, name))

    def finish(self, finding: Finding | None, raised: bool = False) -> Recording:
        """Close what is still open at the last step: a hang's waits, copies in
        flight, products no wait completed. `raised`: the finding stopped the
        run in its last step (not a wrong result compared after it)."""
        recording = self.recording
        recording.steps = end = self.now + 1
        for warp, wait in self.waits.items():
            wait.args["state"] = warp.waiting_on.describe()
        for piece in recording.slices:
            if piece.end is None:
                piece.end = max(end, piece.start + 1)
                piece.args["open"] = True
        recording.finding = finding
        if raised and self.picked and not stuck(self.cluster):
            recording.finding_track = self._track_of(self.picked)
        return recording

    def _track_of(self, picked: tuple) -> tuple:
        kind, what = picked
        if kind == "warp":
            return ("warp", what.block.number, what.index)
        if kind == "product":
            return ("wgmma", what.block.number, what.index)
        block, op = what
        if kind == "load" and id(op) in self.running:
            return self.running[id(op)].track
        return ("tma" if kind == "load" else "stores", block.number)


class _RecordedBlock(Block):
    recorder: Recorder
    number: int
    keys: dict[int, tuple[str, int]]  # id(mbarrier) -> (array, index)

    def complete_load(self, load) -> None:
        rec, phase = self.recorder, load.barrier.phase
        super().complete_load(load)
        piece = rec.running.pop(id(load))
        piece.end = rec.now + 1
        rec.arrived(load.barrier, phase, piece)

    def run_store(self, queue, store=None) -> None:
        rec, store = self.recorder, store or queue.pending[0]
        super().run_store(queue, store)
        rec.running.pop(id(store)).end = rec.now + 1


class _RecordedWarp(Warp):
    block: _RecordedBlock

    @property
    def track(self) -> tuple:
        return ("warp", self.block.number, self.index)

    def wait(self, ready, what: str, on, span):
        rec = self.block.recorder
        piece = rec.open(self.track, what, {"source": where(span), **self._about(on)})
        generation = None
        if isinstance(on, NamedBarrier):  # its arrival is the start of its wait
            generation = self.joining
            rec.arrived(on, generation, piece)
        rec.waits[self] = piece
        yield from super().wait(ready, what, on, span)
        del rec.waits[self]
        piece.end = rec.now + 1
        if isinstance(on, MBarrier):  # the phase it observed: the latest complete one
            piece.args.update(phase=on.phase - 1, parity=(on.phase - 1) % 2)
            rec.released(on, on.phase - 1, piece, "arrive")
        else:
            piece.args["generation"] = generation
            rec.released(on, generation, piece, "arrive")

    def meet(self, stmt, named: NamedBarrier, threads: int, wait: bool):
        self.joining = named.generation  # the generation this arrival joins
        yield from super().meet(stmt, named, threads, wait)
        if not wait:
            rec = self.block.recorder
            piece = rec.step(self.track, f"{named.label.replace('bar.sync', 'bar.arrive')}, "
                                         f"{threads}",
                             {"source": where(stmt.span), "generation": self.joining})
            rec.arrived(named, self.joining, piece)

    def sync(self, stmt: ir.Stmt, lanes):
        """A statement that does not block: what it arrived on, issued and
        completed, found by comparing the state before and after it."""
        if isinstance(stmt, _BLOCKING):
            yield from super().sync(stmt, lanes)
            return
        cluster = self.block.cluster
        phases = [(b, b.phase, b.pending, b.tx) for block in cluster
                  for b in block.mbarriers.values()] if isinstance(stmt, _ARRIVALS) else []
        loads = {id(load) for block in cluster for load in block.loads}
        products = self.wgmma.issued
        stores = {lane: q.issued for lane, q in self.stores.items()}
        retired = self._retiring(stmt)
        yield from super().sync(stmt, lanes)
        rec = self.block.recorder
        piece = rec.step(self.track, _label(stmt), {"source": where(stmt.span)})
        for barrier, phase, pending, tx in phases:
            if (barrier.phase, barrier.pending, barrier.tx) != (phase, pending, tx):
                piece.name += f" {barrier.name}"
                piece.args.update(barrier=barrier.name, phase=phase)
                rec.arrived(barrier, phase, piece)
        self._issued(loads, products, stores)
        for op in retired:  # products this wait_group completed: they end here
            product = rec.running.pop(id(op))
            product.end = rec.now + 1
            rec.recording.flows.append(Flow(product, rec.now, piece, "wgmma complete"))

    def _issued(self, loads: set[int], products: int, stores: dict[int, int]) -> None:
        """Open a span for each load, product and store issued since the counts given."""
        rec, number = self.block.recorder, self.block.number
        for block in self.block.cluster:  # a multicast load lands in every block
            for load in block.loads:
                if id(load) not in loads:
                    rec.running[id(load)] = rec.open(("tma", block.number), load.site.what, {
                        "source": where(load.site.span), "tensor": load.tensor,
                        "origin": list(load.origin), "bytes": load.nbytes,
                        "barrier": load.barrier.name, "stage": load.place.stage,
                        "issued by": self.name})
        if self.wgmma.issued > products:
            op = self.wgmma.open[-1]
            rec.running[id(op)] = rec.open(("wgmma", number, self.index), f"wgmma {op.acc}",
                                           {"source": where(op.site.span),
                                            "reads": op.site.what})
        for lane, queue in self.stores.items():
            for store in queue.open[len(queue.open) - (queue.issued - stores.get(lane, 0)):]:
                rec.running[id(store)] = rec.open(("stores", number), store.site.what, {
                    "source": where(store.site.span), "tensor": store.tensor,
                    "origin": list(store.origin), "issued by": f"{self.name} lane {lane}"})

    def _retiring(self, stmt: ir.Stmt) -> list:
        if not isinstance(stmt, ir.WgmmaWait):
            return []
        groups = list(self.wgmma.groups)
        return [op for group in groups[:max(len(groups) - stmt.pending, 0)] for op in group]

    def _about(self, on) -> dict:
        if isinstance(on, MBarrier):
            return {"barrier": on.name, "stage": self.block.keys[id(on)][1]}
        return {"barrier": on.label}


def _label(stmt: ir.Stmt) -> str:
    """A synchronization statement as the trace names it (its PTX)."""
    match stmt:
        case ir.AsyncLoad() | ir.AsyncStore():
            verb = "load" if isinstance(stmt, ir.AsyncLoad) else "store"
            return f"{stmt.engine.label} {verb} {stmt.tensor}"
        case ir.Mma(acc=acc):
            return f"wgmma {acc}"
        case ir.WgmmaWait(pending=keep):
            return f"wgmma.wait_group {keep}"
        case ir.BulkWaitRead(pending=keep, read=read):
            return f"cp.async.bulk.wait_group{'.read' if read else ''} {keep}"
        case ir.MBarrierExpectTx():
            return "mbarrier.arrive.expect_tx"
        case ir.MBarrierArrive() | ir.StageRelease():
            return "mbarrier.arrive"
    return _NAMES.get(type(stmt), type(stmt).__name__)


_NAMES = {ir.MBarrierInit: "mbarrier.init", ir.MBarrierInval: "mbarrier.inval",
          ir.MBarrierInitFence: "fence.mbarrier_init", ir.ProxyFence: "fence.proxy.async",
          ir.WgmmaFence: "wgmma.fence", ir.WgmmaCommit: "wgmma.commit_group",
          ir.BulkCommit: "cp.async.bulk.commit_group", ir.SetMaxRegisters: "setmaxnreg"}


def replay(report: Report, finding: Finding | None = None) -> Recording:
    """The run of `finding` (else seeded schedule 0) of `report`, recorded."""
    prog, problem = program(report.lowered), report.problem
    how, what = finding.run if finding is not None and finding.run else ("seed", 0)
    if how == "seed":
        problem = problem.data_set(what % problem.data_sets)
        chooser = Chooser(MODES[what % len(MODES)], what)
        clusters, tensors = problem.clusters(), problem.fresh_tensors()
        schedule = f"seed {what} ({chooser.describe()})"
    else:  # the search's runs are of the first cluster, without data
        chooser = Replay(list(what), set())
        clusters, tensors = problem.clusters()[:1], None
        schedule = chooser.describe()
    flags = uses_semaphores(prog.kernel)
    if flags:  # its blocks wait on each other: all of them, interleaved, as `check` ran them
        clusters = problem.clusters()
    names = [_block_name(block, len(cluster)) for cluster in clusters for block in cluster]
    recorder = Recorder(Recording(report.lowered, schedule), names)
    between = block_accesses(prog.kernel, tensors)
    try:
        if flags:
            make_block, make_warp = recorder.types
            run_blocks(prog, make_grid(prog, [[problem.env(b) for b in c] for c in clusters],
                                       tensors, None, make_warp, make_block, between),
                       recorder.counted(chooser), 0)
        for index, cluster in enumerate([] if flags else clusters):
            run_cluster(prog, [problem.env(block) for block in cluster], tensors, chooser, index,
                        recorder=recorder, between=between)
    except SimFailure as failure:  # with its last events, as the finding shows them
        return recorder.finish(replace(failure.finding, trace=failure.trace), raised=True)
    return recorder.finish(finding)


def _block_name(block: dict[str, int], cluster: int) -> str:
    coords = " ".join(f"{k}={v}" for k, v in block.items() if not k.startswith("@"))
    rank = f" (cluster rank {block.get('@rank', 0)})" if cluster > 1 else ""
    return f"block {coords}{rank}".rstrip()
