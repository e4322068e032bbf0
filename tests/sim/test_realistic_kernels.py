"""The kernels `bench/check.py` times (bench/kernels: multi-head attention, GQA, an
FP8 GEMM, a long-row softmax, rotary embedding, written as a user would) build and
pass `check`; the simulator's worker processes report what one process does."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.warp import SimUnsupported
from tests.sim.test_manual_kernels import variant

KERNELS = sorted((Path(__file__).parents[2] / "bench" / "kernels").glob("*.hk"))


def test_the_realistic_kernels_are_there():
    assert {p.stem for p in KERNELS} >= {"mha_fwd", "gqa_fwd", "gemm_fp8", "softmax_long",
                                         "rotary"}


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_realistic_kernel_builds_and_passes_check(path):
    source = driver.read_source(path)
    built = driver.build(source)
    assert built.result.cubin[:4] == b"\x7fELF"
    assert built.result.resources.spill_stores == 0
    # Fewer schedules than `check`'s 16 seeds and 3,000 search runs: the suite
    # stays fast; `bench/check.py --kernels` runs them with the defaults.
    report = driver.simulate(source, seeds=2, search=100)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
    assert report.reference == "numpy reference"
    # A row sum kept as per-lane parts (defer_row_sums) is the reference's sum in
    # another order: f32 rounding apart, which `check` allows (report.ok above);
    # everything else computes in the reference's order, exactly.
    lowered = driver.lower(driver.check(source))
    if not any(isinstance(s, ir.TileDef) and s.layout is ir.Layout.ROW_PARTS
               for s in walk(lowered.body)):
        assert all(error == 0.0 for error in report.max_error.values()), report.max_error


def _record(report) -> tuple:
    return ([(f.lines(), f.schedule, f.trace) for f in report.findings], report.schedules,
            report.exhaustive, report.exhaustive_complete, report.max_error, report.reference)


def test_worker_processes_report_what_one_process_reports():
    """A kernel whose missing fence several schedules find: the same findings in
    the same order, with their schedules and traces, and the same run counts."""
    source = variant(28, "fence.proxy.async", None)
    one = driver.simulate(source, seeds=8, search=300, jobs=1)
    two = driver.simulate(source, seeds=8, search=300, jobs=2)
    assert one.findings and _record(two) == _record(one)


def test_worker_processes_report_a_passing_kernel_as_one_process_does():
    source = driver.read_source(Path(__file__).parents[2] / "samples" / "tma_copy.hk")
    one = driver.simulate(source, seeds=5, search=3000, jobs=1)
    two = driver.simulate(source, seeds=5, search=3000, jobs=2)
    assert one.ok and one.exhaustive_complete and _record(two) == _record(one)


def test_code_the_simulator_cannot_model_reads_the_same_from_a_worker():
    error = SimUnsupported("k.hk:3:5: a load without an mbarrier")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is SimUnsupported and str(again) == str(error)


def _killed(index: int):
    os._exit(9)


def test_a_killed_worker_is_an_error_not_a_hang(monkeypatch):
    """A worker the OOM killer ends: a clear error, never a wait forever."""
    from hopperc.diagnostics import CompileError
    from hopperc.sim import explore

    monkeypatch.setattr(explore, "_task", _killed)
    source = driver.read_source(Path(__file__).parents[2] / "samples" / "tma_copy.hk")
    with pytest.raises(CompileError, match="worker process of the simulation was killed"):
        driver.simulate(source, seeds=2, search=10, jobs=2)
