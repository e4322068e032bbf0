"""Every sample passes the simulator and matches the numpy reference."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.sim.reference import expected_outputs
from hopperc.sim.values import ULP
from hopperc.sim.problem import default_dims, make_problem

SAMPLES = sorted((Path(__file__).parents[2] / "samples").glob("*.hk"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_sample_passes_check(path):
    source = driver.read_source(path)
    report = driver.simulate(source, seeds=8, search=300)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
    assert report.reference == "numpy reference"
    # The simulator and the reference sum each product over different slices (a
    # warp's 16 rows, a warpgroup's 64): their f32 sums may differ in the last
    # bit, so an output rounded from them may differ by one ulp of its dtype.
    front_end = driver.check(source)
    expected = expected_outputs(front_end, report.problem)
    assert report.max_error.keys() == expected.keys()
    for name, error in report.max_error.items():
        dtype = front_end.tensor(name).dtype
        assert error <= ULP[dtype] * max(1.0, float(np.abs(expected[name]).max())), name


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_reference_output_is_not_trivial(path):
    """A comparison with all-zero outputs would prove nothing. A flag tensor
    counts signals, one per tile that blocks share: it must count some."""
    front_end = driver.check(driver.read_source(path))
    lowered = driver.lower(front_end)
    problem = make_problem(lowered, default_dims(lowered))
    flags = {s.tensor for s in walk(front_end.body) if isinstance(s, ir.Signal)}
    for name, values in expected_outputs(front_end, problem).items():
        assert np.count_nonzero(values) > (0 if name in flags else values.size // 4), name


def test_default_shapes_wrap_every_ring_twice():
    """gemm_bf16: 4 stages -> 2 x 4 + 1 = 9 k-tiles of 64, the last one partial (32
    columns); two 128 x 256 tiles per axis, the second partial (65 rows, 128 columns)."""
    lowered = driver.lower(driver.check(driver.read_source(
        Path(__file__).parents[2] / "samples" / "gemm_bf16.hk")))
    assert default_dims(lowered) == {"M": 193, "K": 544, "N": 384}


def test_partial_tiles_match_the_reference():
    """Dimensions that are not multiples of the tile: TMA zero-fills and clips."""
    path = Path(__file__).parents[2] / "samples" / "gemm_bf16.hk"
    report = driver.simulate(driver.read_source(path), shapes={"M": 200, "N": 304, "K": 504},
                             seeds=2, search=0)
    assert report.ok and report.max_error["C"] == 0.0
    assert len(report.problem.grid) == 4
