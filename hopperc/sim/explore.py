"""Exploration: run the lowered kernel under many schedules and compare what
it stores with the numpy reference.

Seeded schedules cycle through the strategies of `schedule.MODES`; then a
depth-first search replays every order of the choices the first cluster (block 0,
or the blocks of its cluster) makes at its synchronization points, up to a budget
(complete when the tree is smaller). A schedule stops at its first finding;
findings are merged across schedules. The reference and the seeded schedules share
a budget of steps (`block.WorkBudget`), and the search has as many again: past it,
the seeded schedules stop (the report says how many ran) or the search ends, never
minutes of silence. Each schedule's steps are fixed by its seed, so the report is
the same whether the schedules run in this process or in workers.
"""
from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.block import BudgetReached, Program, WorkBudget
from hopperc.sim.block_accesses import BlockAccesses, block_accesses
from hopperc.sim.findings import Category, Finding, SimFailure
from hopperc.sim.problem import Problem
from hopperc.sim.reference import ReferenceUnavailable, expected_outputs
from hopperc.sim.interleave import run_clusters, searched_clusters
from hopperc.sim.schedule import MODES, Chooser, Pruned, Replay
from hopperc.sim.user_inputs import in_dtypes
from hopperc.sim.values import added_tolerance, tolerance
from hopperc.target import DEFAULT_STEPS


@dataclass
class Report:
    problem: Problem
    schedules: int = 0
    exhaustive: int = 0  # schedules of the exhaustive search
    exhaustive_complete: bool = False
    findings: list[Finding] = field(default_factory=list)
    reference: str = ""  # how the result was checked
    max_error: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    budget: int = 0  # steps allowed (`block.WorkBudget`)
    stopped: str = ""  # "seeds" or "search": where the step budget ran out
    # What seeded schedule 0 stored, when it ran to the end, each tensor in its
    # dtype (`hopperc.simulate`)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    # The lowered kernel simulated: a finding's run is replayed from it (`recorder.py`)
    lowered: ir.Kernel | None = field(default=None, repr=False, compare=False)

    @property
    def incomplete(self) -> bool:
        """The budget stopped the seeded schedules: what `check` claims was not run."""
        return self.stopped == "seeds"

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, finding: Finding) -> None:
        if all(f.key != finding.key for f in self.findings):
            self.findings.append(finding)


def program(kernel: ir.Kernel) -> Program:
    tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}
    targets = {s.barrier.array for s in walk(kernel.body)
               if isinstance(s, (ir.AsyncLoad, ir.MBarrierExpectTx)) and s.barrier is not None}
    return Program(kernel, tiles, frozenset(targets))


def simulate(lowered: ir.Kernel, front_end: ir.Kernel, problem: Problem, seeds: int,
             exhaustive_budget: int, first_finding: bool = False,
             steps: int = DEFAULT_STEPS, jobs: int = 1, progress=None) -> Report:
    """Raises `warp.SimUnsupported` for code the simulator cannot model.
    `first_finding`: stop at the first finding instead of merging the findings of
    every schedule (a yes/no answer, e.g. for mutation testing). `steps`: the
    work budget (`block.WorkBudget`) of the reference and the seeded schedules
    together, and again of the search. `jobs` > 1: the seeded schedules and the
    search run in that many worker processes; the report is the same, merged in
    the order one process makes it. `progress(done, seeds + 1)` is called as
    each seeded schedule and the search end (the command line's progress line)."""
    start = time.perf_counter()
    report = Report(problem, budget=steps, lowered=lowered)
    prog = program(lowered)
    reference_budget = WorkBudget(steps)
    try:  # the reference's loops count too: it runs every block's iterations
        wants = [_reference(front_end, problem.data_set(i), reference_budget, report)
                 for i in range(problem.data_sets)]
    except BudgetReached:
        report.stopped = "seeds"
        report.reference = "the work budget ran out in the reference"
        report.seconds = time.perf_counter() - start
        return report
    left = reference_budget.left
    search = None
    tick = progress or (lambda done, total: None)
    if jobs > 1 and not first_finding and _forks():
        seeded, search = _in_workers(prog, problem, seeds, exhaustive_budget, wants, left,
                                     steps, jobs, tick)
    else:
        seeded = (_seeded(prog, problem, seed, wants, left) for seed in range(seeds))
    in_order = search is None  # the schedules run here, one after another
    for part, used in seeded:
        # Each schedule's steps are fixed by its seed: one that needs more than the
        # budget has left stops the seeded schedules wherever it was run.
        if part is None or used > left:
            report.stopped = "seeds"
            break
        left -= used
        _merge(report, part)
        report.schedules += 1
        if in_order:
            tick(report.schedules, seeds + 1)
        if first_finding and report.findings:
            break
    if not report.stopped and not (first_finding and report.findings):
        search = search or _searched(prog, problem, exhaustive_budget, steps, first_finding)
        for finding in search.findings:
            report.add(finding)
        report.exhaustive, report.exhaustive_complete = search.exhaustive, \
            search.exhaustive_complete
        report.stopped = search.stopped
    report.seconds = time.perf_counter() - start
    return report


def _reference(front_end: ir.Kernel, problem: Problem, budget: WorkBudget, report: Report):
    try:
        want = expected_outputs(front_end, problem, budget)
        report.reference = "numpy reference"
        return want
    except ReferenceUnavailable as exc:
        report.reference = f"no numpy reference ({exc})"
        return None


def _seeded(prog: Program, problem: Problem, seed: int, wants: list, steps: int
            ) -> tuple[Report | None, int]:
    """Seeded schedule `seed` within `steps`: its findings and maximum errors, and
    the steps it took (None where it needed more). The seeded schedules take the
    problem's data sets in turn (`wants`: each one's expected outputs)."""
    want = wants[seed % len(wants)]
    problem = problem.data_set(seed % len(wants))
    budget = WorkBudget(steps)
    chooser = Chooser(MODES[seed % len(MODES)], seed)
    one = Report(problem)
    try:
        stored = _one(replace(prog, budget=budget), problem, budget.guard(chooser),
                      f"seed {seed} ({chooser.describe()})", want, one, ("seed", seed))
    except BudgetReached:
        return None, steps
    if seed == 0 and stored is not None:
        one.outputs = in_dtypes(prog.kernel, {name: stored[name] for name in problem.outputs})
    return one, steps - budget.left


def _searched(prog: Program, problem: Problem, runs: int, steps: int,
              first_finding: bool = False) -> Report:
    """The exhaustive search within `runs` runs and `steps` steps."""
    part = Report(problem)
    budget = WorkBudget(steps)
    try:
        _search(replace(prog, budget=budget), problem, runs, part, first_finding, budget)
    except BudgetReached:
        part.stopped = "search"
    return part


def _merge(report: Report, part: Report) -> None:
    for finding in part.findings:
        report.add(finding)
    for tensor, error in part.max_error.items():
        report.max_error[tensor] = max(report.max_error.get(tensor, 0.0), error)
    report.outputs = report.outputs or part.outputs


def _forks() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


_TASK: tuple = ()  # what forked workers run: set before the pool forks them


def _task(index: int):
    """Task 0 is the search, task i > 0 seeded schedule i - 1. An exception
    (code the simulator cannot model) comes back as a value, raised in order."""
    prog, problem, runs, wants, left, steps = _TASK
    try:
        if index == 0:
            return _searched(prog, problem, runs, steps)
        return _seeded(prog, problem, index - 1, wants, left)
    except Exception as exc:  # noqa: BLE001 - re-raised by the parent, in schedule order
        return exc


def _in_workers(prog: Program, problem: Problem, seeds: int, runs: int, wants, left: int,
                steps: int, jobs: int, tick) -> tuple[list[tuple[Report | None, int]], Report]:
    """The search (the longest task, started first) and each seeded schedule as
    tasks of a pool of forked workers: the seeded results in order, and the search's."""
    global _TASK
    _TASK = (prog, problem, runs, wants, left, steps)
    try:
        # An executor, not a Pool: a worker killed (out of memory) raises
        # BrokenProcessPool here instead of leaving the map waiting forever.
        with ProcessPoolExecutor(min(jobs, seeds + 1),
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            tasks = [pool.submit(_task, index) for index in range(seeds + 1)]
            for done, _ in enumerate(as_completed(tasks), 1):
                tick(done, seeds + 1)
            results = [task.result() for task in tasks]
    finally:
        _TASK = ()
    for part in results[1:] + results[:1]:
        if isinstance(part, Exception):
            raise part
    return results[1:], results[0]


def _search(prog: Program, problem: Problem, budget: int, report: Report,
            first_finding: bool = False, steps: WorkBudget | None = None) -> None:
    """Depth-first search over the choices of block 0's cluster (the other blocks
    run the same code on other tiles), pruning states already explored. Data is
    compared on the seeded schedules, which run every block; the search runs
    without data (no tensors: the same synchronization and access checks)."""
    # A pending schedule is a node (the node of the run that found it, a depth,
    # an alternative there), its choices built when it is taken: the pending
    # schedules cost memory in their number, not in their runs' lengths.
    stack: list[_Pending | None] = [None]
    visited: set = set()
    clusters = searched_clusters(prog, [[problem.env(block) for block in cluster]
                                        for cluster in problem.clusters()])
    while stack and report.exhaustive < budget:
        node = stack.pop()
        prefix = _choices(node)
        replay = Replay(prefix, visited)
        try:
            run_clusters(prog, clusters, None, steps.guard(replay) if steps else replay)
        except Pruned:
            pass
        except SimFailure as failure:
            report.add(replace(failure.finding, trace=getattr(failure, "trace", ()),
                               schedule=replay.describe(), run=("search", tuple(prefix))))
        report.exhaustive += 1
        if first_finding and report.findings:
            return
        for depth in range(len(replay.branching) - 1, len(prefix) - 1, -1):
            for alternative in range(replay.branching[depth] - 1, 0, -1):
                stack.append(_Pending(node, depth, alternative))
    report.exhaustive_complete = budget > 0 and not stack


@dataclass(frozen=True)
class _Pending:
    """A schedule of the search still to run: its parent's choices, then the
    first candidate up to `depth`, and `alternative` there."""
    parent: "_Pending | None"
    depth: int
    alternative: int


def _choices(node: _Pending | None) -> list[int]:
    chain = []
    while node is not None:
        chain.append(node)
        node = node.parent
    prefix: list[int] = []
    for step in reversed(chain):
        prefix += [0] * (step.depth - len(prefix)) + [step.alternative]
    return prefix


def _one(prog: Program, problem: Problem, chooser, name: str, want, report: Report,
         run: tuple = ()) -> dict[str, np.ndarray] | None:
    """One schedule of every block: what it stored, or None where it stopped at a finding."""
    tensors = problem.fresh_tensors()
    writers = {name: np.full(tensors[name].shape, None, dtype=object) for name in want or ()}
    between = block_accesses(prog.kernel, tensors)
    try:
        run_clusters(prog, [[problem.env(block) for block in cluster]
                            for cluster in problem.clusters()], tensors, chooser, writers, between)
    except SimFailure as failure:
        report.add(replace(failure.finding, trace=getattr(failure, "trace", ()), schedule=name,
                           run=run))
        return None
    if want is not None:
        _compare(prog.kernel, tensors, want, writers, name, report, run, between)
    return tensors


def _compare(kernel: ir.Kernel, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
             writers: dict[str, np.ndarray], name: str, report: Report, run: tuple = (),
             between: BlockAccesses | None = None) -> None:
    """A wrong element is blamed on the TMA store that wrote it, else (never
    written) on the kernel's first store to that tensor. An element reduced
    into may differ by what the order of its adds changes (`between.slack`)."""
    for tensor, expect in want.items():
        dtype = kernel.tensor(tensor).dtype
        # NaN (or an infinity) where the reference has the same is equal (rsqrt of a
        # negative number); NaN where it has a number (registers nothing wrote) is
        # wrong, and so is anything but the same infinity where it has an infinity.
        same = (got[tensor] == expect) | (np.isnan(got[tensor]) & np.isnan(expect))
        with np.errstate(invalid="ignore"):
            error = np.where(same, 0.0, np.abs(got[tensor] - expect))
        report.max_error[tensor] = max(report.max_error.get(tensor, 0.0), float(error.max(
            initial=0.0)))
        allowed = tolerance(dtype, expect) + (between.slack(tensor) if between else 0.0)
        if tensor in getattr(want, "added", {}):  # adds in any order (red.global.add)
            allowed = allowed + added_tolerance(dtype, *want.added[tensor])
        with np.errstate(invalid="ignore"):
            bad = ~(same | (np.isfinite(expect) & (error <= allowed)))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            store = writers[tensor][where] or next(
                (s.span for s in walk(kernel.body)
                 if isinstance(s, (ir.AsyncStore, ir.GlobalRowStore)) and s.tensor == tensor),
                kernel.span)
            report.add(Finding(
                Category.WRONG_RESULT,
                f"{tensor} differs from the numpy reference at {int(bad.sum())} of {bad.size} "
                f"elements (first at {list(where)}: {got[tensor][where]:g}, expected "
                f"{expect[where]:g})", store, schedule=name, run=run))
