"""bench/kernels/mha_fwd_overlap.hk: attention in FlashAttention-3's
intra-warpgroup overlap form, K and V each read at two sites (the k-th read of
a ring takes the k-th fill), checked against attention in float64 numpy on the
simulator, and its loop in SASS."""
from __future__ import annotations

from itertools import groupby

import numpy as np
import pytest

from hopperc import driver
from hopperc.sim.reference import expected_outputs
from tests.conftest import ROOT

KERNEL = ROOT / "bench" / "kernels" / "mha_fwd_overlap.hk"


@pytest.mark.parametrize("length", [300, 400])
def test_every_schedule_matches_attention_in_float64(length):
    """L = 300: 3 key tiles of 128, the last one partial (44 keys, the rest
    zero-filled and masked to -inf), 3 query blocks (the last one partial);
    L = 400: 4 key tiles, the last holding 16 keys. Both rings wrap (2 stages),
    and the reads before, in and after the loop take the fills in order: the
    simulated kernel matches the reference on every schedule tried, and the
    reference matches softmax(Q K^T / 8) V in float64."""
    source = driver.read_source(KERNEL)
    report = driver.simulate(source, shapes={"L": length, "H": 2}, seeds=3, search=30)
    assert report.ok, [f.headline() for f in report.findings]
    assert report.max_error["O"] <= 2 ** -7
    got = expected_outputs(driver.check(source), report.problem)["O"]
    q, k, v = (report.problem.inputs[n].astype(np.float64) for n in "QKV")
    s = q @ k.transpose(0, 2, 1) / 8.0
    p = np.exp(s - s.max(axis=2, keepdims=True))
    want = p / p.sum(axis=2, keepdims=True) @ v
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


def test_sass_loop_overlaps_the_softmax_with_the_previous_p_v():
    """The key loop in SASS: S_j (4 HGMMA 64x128x16) and P_{j-1} V_{j-1} (8
    HGMMA 64x64x16) issued back to back, each after its `WARPGROUP.ARRIVE`,
    then `DEPBAR.LE gsb0, 0x1` (S_j done, P V in flight) before the softmax and
    `0x0` before O's rescale; no spills."""
    from hopperc.backend import sass_metrics as sm
    built = driver.build(driver.read_source(KERNEL))
    assert built.result.resources.spill_stores == built.result.resources.spill_loads == 0
    (code,) = sm.functions(built.result.cubin).values()
    body = sm.loop_holding(code, "HGMMA").body(code)
    marks = [i.operands.replace(" ", "") if i.opcode.startswith("WARPGROUP.DEPBAR") else i.opcode
             for i in body if i.base == "HGMMA" or i.opcode.startswith("WARPGROUP")]
    assert [(mark, len(list(run))) for mark, run in groupby(marks)] == [
        ("WARPGROUP.ARRIVE", 1), ("HGMMA.64x128x16.F32.BF16", 4),
        ("WARPGROUP.ARRIVE", 1), ("HGMMA.64x64x16.F32.BF16", 8),
        ("gsb0,0x1", 1), ("gsb0,0x0", 1)]
