"""samples/grouped_gemm.hk (contiguous layout) and samples/grouped_gemm_masked.hk
(masked layout): MoE grouped GEMMs over ragged persistent grids, checked against
float64 numpy on experts of every awkward size, with every row outside the
experts' rows left exactly as it was; and their main loop held to
gemm_persistent's instruction count per k-step."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from hopperc.diagnostics import SourceFile
from hopperc.sim.explore import program, simulate
from hopperc.sim.findings import SimFailure
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.schedule import Chooser, run_cluster
from tests.conftest import ROOT

CONTIGUOUS = ROOT / "samples" / "grouped_gemm.hk"
MASKED = ROOT / "samples" / "grouped_gemm_masked.hk"
BM = 128
# Rows per expert: empty, one row, not a multiple of the tile (two tiles, the
# second partial), shorter than a tile, a whole tile, three rows.
SIZES = [0, 1, 200, 50, 128, 3]
FIRST = 5  # rows before the first expert's, and some after the last: no expert's
SENTINEL = 7.0  # what C holds before the kernel runs


def _kernels(path):
    front_end = driver.check(driver.read_source(path))
    return front_end, driver.lower(front_end)


def _problem(lowered, dims, elements):
    """A problem with these expert offsets (or counts) as its only data set and
    C filled with SENTINEL."""
    problem = make_problem(lowered, dims)
    inputs = {**problem.inputs, **elements}
    inputs["C"] = np.full(problem.inputs["C"].shape, SENTINEL, dtype=np.float32)
    return dataclasses.replace(problem, inputs=inputs, element_sets=())


def _run(lowered, problem, seed: int) -> np.ndarray:
    """C after the lowered kernel (its syncs included) runs under a random schedule."""
    tensors = problem.fresh_tensors()
    for n, cluster in enumerate(problem.clusters()):
        run_cluster(program(lowered), [problem.env(block) for block in cluster], tensors,
                    Chooser("random", seed), n)
    return tensors["C"]


def _offsets() -> np.ndarray:
    return np.cumsum([FIRST, *SIZES]).astype(np.float32)


def test_contiguous_matches_float64_and_leaves_other_rows():
    front_end, lowered = _kernels(CONTIGUOUS)
    offsets = _offsets()
    dims = {"M": int(offsets[-1]) + 9, "N": 384, "K": 192, "E": len(SIZES), "E1": len(SIZES) + 1}
    problem = _problem(lowered, dims, {"OFFS": offsets})
    a = problem.inputs["A"].astype(np.float64)
    b = problem.inputs["B"].astype(np.float64)
    want = np.full(problem.inputs["C"].shape, SENTINEL)
    for g in range(len(SIZES)):
        rows = slice(int(offsets[g]), int(offsets[g + 1]))
        want[rows] = a[rows] @ b[g].T
    inside = np.zeros(want.shape[0], dtype=bool)
    inside[int(offsets[0]):int(offsets[-1])] = True
    for seed in range(2):
        got = _run(lowered, problem, seed)
        assert (got[~inside] == SENTINEL).all(), seed  # no expert's tile wrote them
        np.testing.assert_allclose(got[inside], want[inside], rtol=1e-2,
                                   atol=1e-2 * np.abs(want[inside]).max())


def test_masked_matches_float64_and_leaves_rows_past_each_count():
    front_end, lowered = _kernels(MASKED)
    counts = np.array(SIZES, dtype=np.float32)
    dims = {"E": len(SIZES), "MAX_M": 256, "N": 384, "K": 192}
    problem = _problem(lowered, dims, {"CNT": counts})
    a = problem.inputs["A"].astype(np.float64)
    b = problem.inputs["B"].astype(np.float64)
    want = np.full(problem.inputs["C"].shape, SENTINEL)
    for g, count in enumerate(SIZES):
        want[g, :count] = a[g, :count] @ b[g].T
    for seed in range(2):
        got = _run(lowered, problem, seed)
        for g, count in enumerate(SIZES):
            assert (got[g, count:] == SENTINEL).all(), (seed, g)
            if count:
                np.testing.assert_allclose(got[g, :count], want[g, :count], rtol=1e-2,
                                           atol=1e-2 * np.abs(want[g, :count]).max())


@pytest.mark.parametrize("path", [CONTIGUOUS, MASKED], ids=["contiguous", "masked"])
def test_every_schedule_of_the_drawn_experts_is_right(path):
    """`check`'s own data: its drawn offsets (or counts), the seeded schedules and
    a search, each data set compared with the reference."""
    front_end, lowered = _kernels(path)
    problem = make_problem(lowered, _small_dims(path))
    report = simulate(lowered, front_end, problem, 3, 100)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.reference == "numpy reference"


def _small_dims(path) -> dict[str, int]:
    dims = default_dims(_kernels(path)[1])
    dims.update(N=256, K=128)
    return dims


def test_negative_stores_clipped_only_at_the_tensor_end_write_the_next_experts_rows():
    """The same kernel with C's stores bounded by M instead of the expert's end:
    the one-row expert's tile overwrites the rows after it, the next expert's
    rows, while that expert's store of them may still be in flight: the
    simulator reports the two stores of those elements as a race."""
    text = CONTIGUOUS.read_text().replace("row : end,", "row : M,")
    front_end = driver.check(SourceFile("g.hk", text))
    lowered = driver.lower(front_end)
    offsets = _offsets()
    dims = {"M": int(offsets[-1]) + 9, "N": 256, "K": 64, "E": len(SIZES), "E1": len(SIZES) + 1}
    problem = _problem(lowered, dims, {"OFFS": offsets})
    with pytest.raises(SimFailure, match=r"TMA store from 'sc part \d' \(g.hk:\d+\) "
                                         r"writes global memory of 'C' that TMA store"):
        _run(lowered, problem, 0)


@pytest.fixture(scope="module")
def sass():
    out = {}
    for name in ("gemm_persistent", "grouped_gemm", "grouped_gemm_masked"):
        built = driver.build(driver.read_source(ROOT / "samples" / f"{name}.hk"))
        (out[name],) = sm.functions(built.result.cubin).values()
    return out


@pytest.mark.parametrize("name", ["grouped_gemm", "grouped_gemm_masked"])
def test_main_loop_within_ten_percent_of_gemm_persistent(sass, name):
    """Per k-step (4 HGMMA 64x256x16): the walk over the experts and the element
    reads stay outside the k-loop, whose body is gemm_persistent's: no global
    load in it, one branch per full-barrier wait and the back edge."""
    per_step = sm.per_iteration(sass[name], "HGMMA", 4)
    reference = sm.per_iteration(sass["gemm_persistent"], "HGMMA", 4)
    assert per_step is not None and per_step <= 1.1 * reference, (per_step, reference)
    body = sm.loop_holding(sass[name], "HGMMA").body(sass[name])
    assert not any(i.base in ("LDG", "S2R") for i in body)
    waits = sum(i.opcode.startswith("SYNCS.PHASECHK") for i in body)
    assert sum(i.base == "BRA" for i in body) == waits + 1


def test_check_draws_counts_of_every_awkward_size():
    """CNT bounds C's ragged stores along MAX_M: check draws counts cycling
    through empty, one row, not a multiple of the tile, shorter than a tile,
    a whole tile and a long one, each at most MAX_M, every size in some data set."""
    _, lowered = _kernels(MASKED)
    dims = default_dims(lowered)
    problem = make_problem(lowered, dims)
    drawn = [problem.data_set(i).inputs["CNT"].astype(int) for i in range(problem.data_sets)]
    sizes = {int(c) for counts in drawn for c in counts}
    box = 64  # C's stores: a warpgroup's 64 rows
    assert {0, 1, box // 2, box, box + box // 2 + 1} <= sizes
    assert max(sizes) > 2 * BM and max(sizes) <= dims["MAX_M"]


def test_bench_says_what_it_needs_without_a_gpu():
    """bench/grouped_gemm.py exits 2 with one line on a machine without a GPU."""
    import subprocess
    import sys

    from hopperc.runtime import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present: bench/gpu_check.py runs the benchmark")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "grouped_gemm.py"), "--runs",
                           "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("bench/grouped_gemm.py: "), \
        proc.stderr
    assert "Traceback" not in proc.stderr
