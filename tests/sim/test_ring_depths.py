"""Rings between roles of every depth, read by wgmma and element-wise, in one
and several tiles per block: the simulator finds no deadlock or race. A ring
of one stage read by wgmma once deadlocked (its stage released one iteration
late, after the next iteration's full wait); this sweeps the class, not that
kernel."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile

WGMMA = """kernel rings(A: bf16[M, K], B: bf16[N, K], C: f32[M, N])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) {schedule}
{{
    shared sa: bf16[BM, BK] stages {stages} swizzle 128B
    shared sb: bf16[BN, BK] stages {stages} swizzle 128B
    shared sc: f32[BM, BN]
    role math: warpgroup x2 regs 232 {{
        acc: f32[64, BN] = 0
        for k in 0 .. K / BK {{
            acc += sa[wg] @ sb^T
        }}
        sc[wg] = acc
        tma C[tile.m, tile.n] <- sc
    }}
    role load: warp regs 40 {{
        for k in 0 .. K / BK {{
            tma sa <- A[tile.m, k]
            tma sb <- B[tile.n, k]
        }}
    }}
}}
"""

ELEMENTS = """kernel rows(X: f32[M, N], Y: f32[M, 64]) tile(BM = 64) grid(m: M / BM) {schedule}
{{
    shared sx: f32[BM, 64] stages {stages}
    shared sy: f32[BM, 64]
    role add: warpgroup {{
        acc: f32[BM, 64] = 0.0
        for k in 0 .. N / 64 {{
            acc = acc + sx
        }}
        sy = acc
        tma Y[tile.m, 0] <- sy
    }}
    role load: warp {{
        for k in 0 .. N / 64 {{
            tma sx <- X[tile.m, k]
        }}
    }}
}}
"""


@pytest.mark.parametrize("template", [WGMMA, ELEMENTS], ids=["wgmma", "elements"])
@pytest.mark.parametrize("stages, schedule", [
    (1, ""), (2, ""), (3, ""), (1, "persistent"), (2, "persistent")])
def test_a_ring_of_any_depth_passes_check(template, stages, schedule):
    text = template.format(stages=stages, schedule=schedule)
    report = driver.simulate(SourceFile("rings.hk", text), seeds=4, search=100)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
