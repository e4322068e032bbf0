"""Warp-specialized samples end to end: the SASS shows the pipeline we meant.

Figures are worked out from the samples: gemm_bf16 has one producer role and
4 stages (2 x 4 x 1 = 8 mbarriers), BK = 64 is 4 k16 steps per iteration;
gemm_chain has two 2-stage rings (8); two_producers two 2-stage rings, one
per producer role (8).
"""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend import cubin_tools
from hopperc.backend.cubin_tools import opcode
from hopperc.codegen.names import kernel_symbol
from tests.conftest import SAMPLES

WS_SAMPLES = ("gemm_bf16", "gemm_bias_relu", "gemm_bias_gelu", "mlp_two_mma", "two_producers",
              "gemm_chain", "gemm_persistent", "gemm_pipelined")
MBARRIERS = {"gemm_bf16": 8, "gemm_bias_relu": 8, "gemm_bias_gelu": 8, "mlp_two_mma": 8,
             "two_producers": 8, "gemm_chain": 8, "gemm_persistent": 8, "gemm_pipelined": 8}
# the math role's bias load: one barrier, one stage
OWN_LOADS = {"gemm_bias_relu": 1, "gemm_bias_gelu": 1}
FLUSHES = {"gemm_bf16": 1, "gemm_bias_relu": 1, "gemm_bias_gelu": 1, "mlp_two_mma": 1,
           "two_producers": 0, "gemm_chain": 2,
           "gemm_persistent": 1,  # in the code: it runs once per tile
           "gemm_pipelined": 1}


@pytest.fixture(scope="module")
def built():
    out = {}
    for name in WS_SAMPLES:
        b = driver.build(driver.read_source(next(p for p in SAMPLES if p.stem == name)))
        out[name] = (b, cubin_tools.sass_instructions(b.result.cubin)[kernel_symbol(name)],
                     cubin_tools.disassemble(b.result.cubin))
    return out


def main_loop(listing: str) -> list[str]:
    """The instructions of the smallest loop (label ... backward branch to it)
    that holds the HGMMAs: the consumer's main loop."""
    lines = [line.strip() for line in listing.splitlines()]
    labels = {m.group(1): i for i, line in enumerate(lines)
              if (m := re.match(r"(\.L_x_\d+):", line))}
    best = None
    for i, line in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i:
            body = lines[labels[m.group(1)]:i + 1]
            if any("HGMMA" in x for x in body) and (best is None or len(body) < len(best)):
                best = body
    assert best is not None, "no loop around the HGMMAs"
    return best


def test_gemm_bf16_sass(built):
    b, sass, listing = built["gemm_bf16"]
    ops = [opcode(i) for i in sass]
    # one product of 4 k16 steps, in the loop's first iteration (rendered apart,
    # the first with scale-d 0) and in the loop
    assert ops.count("HGMMA.64x256x16.F32.BF16") == 8
    assert sum(i.startswith("HGMMA") and i.endswith("RZ,!UPT") for i in sass) == 1
    # C's 128 x 256 tile is four 128B-swizzled column blocks: one store each.
    assert ops.count("UTMALDG.2D") == 2 and ops.count("UTMASTG.2D") == 4
    # 64 x 256 bf16 per warpgroup: 16 stmatrix.x4 per thread, as CUTLASS's epilogue
    assert ops.count("STSM.16.M88.4") == 16 and not any(op.startswith("STS.") for op in ops)
    assert any(re.fullmatch(r"USETMAXREG\.DEALLOC\.CTAPOOL 0x28", i) for i in sass)
    assert any(re.fullmatch(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL UP\d,0xe8", i) for i in sass)
    assert b.generated.launch.dynamic_shared_bytes > 0 and b.generated.kernel.threads == 384


@pytest.mark.parametrize("name", ["gemm_bf16", "gemm_bias_relu", "gemm_bias_gelu",
                                  "mlp_two_mma", "gemm_chain", "gemm_persistent", "gemm_pipelined"])
def test_main_loop_keeps_one_batch_in_flight_and_nothing_else_waits(built, name):
    """Steady state: wait for the stage, fence, the batch, wait_group 1, release.
    No block-wide or named barrier, no proxy fence, no flush inside the loop."""
    loop = main_loop(built[name][2])
    text = "\n".join(loop)
    assert text.count("WARPGROUP.DEPBAR.LE gsb0, 0x1") == 1
    assert "gsb0, 0x0" not in text
    assert "BAR.SYNC" not in text and "FENCE.VIEW.ASYNC" not in text
    assert sum("HGMMA" in x and "gsb0" in x for x in loop) == 1  # one commit per iteration
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in text and "SYNCS.ARRIVE.TRANS64.A1T0" in text


@pytest.mark.parametrize("name", WS_SAMPLES)
def test_one_flush_per_epilogue(built, name):
    _, sass, _ = built[name]
    assert sass.count("WARPGROUP.DEPBAR.LE gsb0,0x0") == FLUSHES[name]


@pytest.mark.parametrize("name", WS_SAMPLES)
def test_mbarriers_are_two_per_stage_per_pipeline(built, name):
    b, _, _ = built[name]
    kernel = b.generated.kernel
    assert sum(2 * p.stages for p in kernel.pipelines) == MBARRIERS[name]
    attrs = cubin_tools.elf_attributes(b.result.cubin)[kernel_symbol(name)]
    assert attrs["EIATTR_NUM_MBARRIERS"] == MBARRIERS[name] + OWN_LOADS.get(name, 0)


def test_two_producers_each_arm_their_own_barrier(built):
    b, sass, _ = built["two_producers"]
    pipelines = b.generated.kernel.pipelines
    assert [(p.producer, p.consumer, p.buffers) for p in pipelines] == [
        ("load_x", "add", ("sx",)), ("load_y", "add", ("sy",))]
    assert len({p.full for p in pipelines}) == 2 and len({p.empty for p in pipelines}) == 2
    assert [opcode(i) for i in sass].count("SYNCS.ARRIVE.TRANS64") == 2  # one expect_tx each


def test_mlp_issues_both_products_as_one_batch(built):
    loop = main_loop(built["mlp_two_mma"][2])
    assert sum("HGMMA.64x128x16.F32.BF16" in x for x in loop) == 8  # 2 products x 4 k-steps


def test_role_dispatch_is_one_if_else_chain_with_padded_producer(built):
    cu = built["gemm_bf16"][0].generated.cuda
    dispatch = re.findall(r"^\s*(?:else )?if \(hk_warp < \d+\) \{  // role .*$", cu, re.M)
    assert [d.strip().split("  //")[0] for d in dispatch] == [
        "if (hk_warp < 8) {", "else if (hk_warp < 12) {"]
    producer = cu.split("// role load")[1]
    assert producer.index("setmaxnreg.dec.sync.aligned.u32 40") < producer.index(
        "if (hk_warp < 9) {")
