"""samples/attention_bwd.hk's SASS: the query loop without a spill, its products
as the schedule asks (per iteration and warpgroup: S^T, dP^T and the dQ share as
8 m64n64k16 each, dV and dK as 4 m64n128k16 each), and the loop's instructions
per 64x64 tile (bench/attention_bwd_sass.py). And the code generation
rule that keeps it from spilling: a loop with more than INVARIANT_DESCRIPTORS
loop-invariant wgmma descriptors forms them from the window read through
hk_opaque each iteration; one with fewer (attention_fwd's) keeps them hoisted."""
from __future__ import annotations

from collections import Counter

import pytest

from bench.attention_bwd_sass import hopperc_loops
from hopperc import driver
from hopperc.codegen.loop_descriptors import INVARIANT_DESCRIPTORS, invariant_descriptors
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from tests.conftest import ROOT

SAMPLE = ROOT / "samples" / "attention_bwd.hk"


@pytest.mark.parametrize("causal", [0, 1])
def test_no_spill(causal):
    built = driver.build(driver.read_source(SAMPLE), {"CAUSAL": causal})
    used = built.result.resources
    assert (used.spill_stores, used.spill_loads, used.stack_bytes) == (0, 0, 0), used


@pytest.mark.parametrize("causal, loops", [(0, 1), (1, 2)])
def test_query_loop_products_and_length(causal, loops):
    """Causal: the diagonal's masked iterations are a loop of their own."""
    found, _, _ = hopperc_loops(SAMPLE, {"CAUSAL": causal})
    assert len(found) == loops
    for loop in found:
        shapes = Counter(i.opcode for i in loop.body if i.is_wgmma)
        assert shapes == {"HGMMA.64x64x16.F32.BF16": 24, "HGMMA.64x128x16.F32.BF16": 8}
        assert loop.tiles == 1
        assert not any(i.base in ("STL", "LDL") for i in loop.body)
    # docs/perf.md's figures: 480 per 64x64 tile (causal interior 485), 34 of them
    # the keys-past-L mask that ptxas predicates into every block's loop
    assert found[-1].per_tile <= 490


def _loop_bodies(path, defines=None):
    kernel = driver.lower(driver.check(driver.read_source(path), defines or {}))
    return kernel, [s.body for s in walk(kernel.body) if isinstance(s, ir.ForLoop)]


def test_many_invariant_descriptors_are_formed_in_the_loop():
    kernel, bodies = _loop_bodies(SAMPLE)
    # K, V (8 k-steps each), dS^T and K's column block for dQ (8 each), dS^T for dK (4)
    assert max(invariant_descriptors(kernel, b) for b in bodies) == 36 > INVARIANT_DESCRIPTORS
    cuda = driver.generate(driver.read_source(SAMPLE)).cuda
    assert cuda.count("const unsigned hk_loop_window = hk_opaque(hk_smem_base >> 4);") == 1
    assert "hk_wgmma_desc(hk_loop_window + " in cuda


def test_negative_few_invariant_descriptors_stay_hoisted():
    """attention_fwd's key loop: Q's 16 descriptors at D = 256 (K and V move with
    their stage) stay where ptxas hoists them, 17 instructions shorter a loop."""
    path = ROOT / "samples" / "attention_fwd.hk"
    kernel, bodies = _loop_bodies(path, {"HEAD_DIM": 256})
    assert max(invariant_descriptors(kernel, b) for b in bodies) == 16
    assert "hk_loop_window" not in driver.generate(driver.read_source(path)).cuda


def test_delta_kernel_sass():
    """attention_bwd_delta: O's and dO's tiles as two 64-column TMA boxes each on
    one barrier, 64 products per thread fused into its sum (FFMA), the quad's two
    shuffles for each of its two rows, and one predicated STG of the row sums."""
    from hopperc.backend import sass_metrics as sm

    built = driver.build(driver.read_source(ROOT / "samples" / "attention_bwd_delta.hk"))
    used = built.result.resources
    assert (used.spill_stores, used.spill_loads) == (0, 0)
    (code,) = sm.functions(built.result.cubin).values()
    ops = Counter(i.opcode for i in code)
    assert ops["UTMALDG.4D"] == 4 and ops["SYNCS.ARRIVE.TRANS64"] == 1
    assert ops["FFMA"] + ops["FMUL"] == 64
    assert ops["SHFL.BFLY"] == 4 and ops["STG.E"] == 1
