"""samples/gemm_streamk.hk against float64 numpy on ragged shapes: every split
tile finished through its flag and the workspace, the flags and workspace as
the schedule of shares says, `check` clean with every block interleaved, and
the instructions the flags become in the SASS."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hopperc
from hopperc import driver
from hopperc.backend import sass_metrics as sm
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "gemm_streamk.hk"


def _inputs(m: int, n: int, k: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal((m, k)).astype(np.float32),
            "B": rng.standard_normal((n, k)).astype(np.float32)}


def _shares(m: int, n: int, k: int, blocks: int) -> tuple[int, int, int]:
    """The sample's arithmetic: k-blocks per tile, all iterations, each block's share."""
    kt, tiles = -(-k // 64), -(-m // 128) * -(-n // 128)
    return kt, tiles * kt, max(-(-tiles * kt // blocks), kt)


@pytest.mark.parametrize("m, n, k, blocks", [(300, 200, 328, 4), (130, 136, 200, 8)])
def test_matches_float64_numpy_on_ragged_shapes(m, n, k, blocks):
    tiles = -(-m // 128) * -(-n // 128)
    t = _inputs(m, n, k)
    out = hopperc.simulate(driver.read_source(SAMPLE), t, shapes={"P": blocks, "T": tiles},
                           schedules=2)
    a = t["A"].astype(ml_dtypes.bfloat16).astype(np.float64)
    b = t["B"].astype(ml_dtypes.bfloat16).astype(np.float64)
    want = a @ b.T
    got = out["C"].astype(np.float64)
    bound = 2 ** -8 * np.abs(want) + k * 2 ** -23 * (np.abs(a) @ np.abs(b).T)
    assert np.all(np.abs(got - want) <= bound)
    kt, total, share = _shares(m, n, k, blocks)
    split = [tile for tile in range(tiles) if any(
        tile * kt < s < (tile + 1) * kt for s in range(share, total, share))]
    np.testing.assert_array_equal(np.flatnonzero(out["F"]), split)
    assert (out["F"][split] == 1).all()


def test_a_tile_is_shared_by_two_blocks_at_most():
    """Blocks past the work take empty shares; each split tile has one flag."""
    kt, total, share = _shares(130, 136, 200, 8)
    assert share == kt and -(-total // share) < 8


def test_check_is_clean_on_a_ragged_shape_with_blocks_interleaved():
    report = driver.simulate(driver.read_source(SAMPLE),
                             shapes={"M": 300, "N": 200, "K": 328, "P": 4, "T": 6},
                             seeds=4, search=100)
    assert report.ok, [f.headline() for f in report.findings]
    assert len(report.problem.grid) == 4 and report.reference == "numpy reference"


def test_sass_has_the_release_the_acquire_and_the_proxy_fence():
    built = driver.build(driver.read_source(SAMPLE))
    (code,) = sm.functions(built.result.cubin).values()
    opcodes = [i.opcode for i in code]
    for prefix in ("HGMMA.64x128x16.F32.BF16", "REDG.E.ADD.S32.STRONG.GPU", "LDG.E.STRONG.GPU",
                   "FENCE.VIEW.ASYNC.G", "UTMALDG.3D", "UTMASTG.3D", "UTMASTG.2D",
                   "MEMBAR.ALL.GPU"):
        assert any(op.startswith(prefix) for op in opcodes), prefix
    assert built.result.resources.spill_stores == 0
