"""The consumer main loop of every pipelined GEMM sample, read from its SASS and
held to CUTLASS's cooperative 128x256x64 kernel (HOPPER_SYNC.md, "The CUTLASS
reference"): 48 instructions per k-step, 21 from the wgmma wait to the next
HGMMA, stage and phase as counters, descriptors advanced by constants, and the
stage release predicated rather than branched around."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend import sass_metrics as sm
from tests.conftest import ROOT

# Per k-step (one iteration of the source loop, BK = 64: 4 HGMMA k16 per product).
# CUTLASS's 48 is for one product; a second product adds its 4 HGMMA with two
# descriptor adds and two high-word moves each (4 x 5 = 20 instructions at most).
# gemm_fp8_blockscaled (BK = 128: 4 QGMMA k32 per product) next to CUTLASS's
# block-scaled FP8 kernel of the same tile (bench/cutlass_sass.py): 116, of which 64
# are the promotion's FFMA; the sample reads its B scale from global memory (a
# scalar: address, bounds predicate, LDG: 10 more), where CUTLASS's is in shared.
# gemm_tf32 (BK = 32 f32, one 128B span: 4 HGMMA k8 per product) is gemm_bf16's loop.
# gemm_splitk is gemm_bf16's loop (42 measured) plus 5 instructions that re-derive the
# shared base per k-step (docs/perf.md): 47 measured, held there.
BUDGET = {"gemm_bf16": (1, 48), "gemm_bias_relu": (1, 48), "gemm_bias_gelu": (1, 48),
          "gemm_chain": (1, 48),
          "gemm_persistent": (1, 48), "gemm_pipelined": (1, 48),
          "mlp_two_mma": (2, 68), "gemm_fp8_blockscaled": (1, 126), "gemm_tf32": (1, 48),
          "gemm_splitk": (1, 47)}

# Rings a consumer also reads with ld.shared (the fp8 sample's row scales): every
# thread releases the stage after its own reads, so the arrive is not elected.
READ_BY_EVERY_THREAD = {"gemm_fp8_blockscaled"}


@pytest.fixture(scope="module")
def sass():
    out = {}
    for name in BUDGET:
        built = driver.build(driver.read_source(ROOT / "samples" / f"{name}.hk"))
        (code,) = sm.functions(built.result.cubin).values()
        out[name] = (code, built.generated.cuda)
    return out


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_consumer_loop_within_cutlass_instruction_budget(sass, name):
    products, budget = BUDGET[name]
    code, _ = sass[name]
    per_step = sm.per_iteration(code, sm.WGMMA, 4 * products)
    assert per_step is not None and per_step <= budget, (name, per_step)


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_consumer_loop_branches_only_to_retry_the_wait_and_to_loop(sass, name):
    """The stage release is an elected, predicated arrive (every thread's, where
    every thread reads the stage): one BRA per full-barrier wait (its out-of-line
    retry) and the back edge, nothing around the release."""
    code, _ = sass[name]
    loop = sm.loop_holding(code, sm.WGMMA)
    body = loop.body(code)
    waits = sum(i.opcode.startswith("SYNCS.PHASECHK") for i in body)
    assert sum(i.base == "BRA" for i in body) == waits + 1
    assert [i.predicate for i in body if i.opcode.startswith("SYNCS.ARRIVE")] != []
    if name in READ_BY_EVERY_THREAD:
        return
    assert all(i.predicate for i in body if i.opcode.startswith("SYNCS.ARRIVE"))


def test_wait_to_next_hgmma_is_shorter_than_cutlass(sass):
    code, _ = sass["gemm_bf16"]
    assert sm.wait_to_mma(code) <= 21


def test_descriptors_add_a_stage_and_a_k_step_in_16_byte_units(sass):
    """sa's stage is 128 x 64 bf16 = 16384 B = 1024 units, a warpgroup's half 512
    units, a k-step 32 B = 2 units; sb's stage 256 x 64 bf16 = 2048 units. The
    product appears twice: the first iteration is rendered apart (scale-d 0)."""
    _, cuda = sass["gemm_bf16"]
    a = re.findall(r"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ 0u \+ \((\w+)\) \* 1024u "
                   r"\+ \(\(hk_warp / 4\)\) \* 512u(?: \+ (\d+)u)?, 1024u, 1ull\)", cuda)
    assert [step for _, step in a] == ["", "2", "4", "6"] * 2
    assert all(stage.endswith("_stage") for stage, _ in a)  # the carried counter
    b = re.findall(r"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ 4096u \+ \(\w+_stage\) \* 2048u"
                   r"(?: \+ (\d+)u)?, 1024u, 1ull\)", cuda)
    assert b == ["", "2", "4", "6"] * 2


def test_in_loop_release_is_predicated_on_a_later_iteration(sass):
    """Iteration k releases stage k - 1: the first iteration has none to release,
    so the arrive's predicate is the elected lane and k > 0 (in the first
    iteration, rendered apart, k is the constant 0). gemm_bf16 computes one
    tile per block, so nothing releases the last stage after the loop: no load
    would wait for it."""
    _, cuda = sass["gemm_bf16"]
    code = "\n".join(line for line in cuda.splitlines() if not line.startswith("#line"))
    conditions = re.findall(r'and\.pred p, p, q; ".*?"r"\(static_cast<int>\((.*?)\)\) : "memory"',
                            code, re.DOTALL)
    assert conditions == ["(u_k > 0)", "(u_k > 0)"]
    assert "[[maybe_unused]] const int u_k = 0;" in code


def _code(*opcodes: str) -> list[sm.Instruction]:
    """A listing whose last instruction branches back to the first."""
    return [sm.Instruction(op, "", "") for op in opcodes[:-1]] + [
        sm.Instruction("BRA", "@P0", "0x0")]


def test_wait_to_mma_counts_around_the_back_edge_when_the_wait_ends_the_body():
    """Wait after the products (a ring): the 2 instructions after it, the branch
    included, and the 1 before the first HGMMA."""
    code = _code("NOP", "HGMMA.64x256x16.F32.BF16", "WARPGROUP.DEPBAR.LE", "IADD3", "BRA")
    assert sm.wait_to_mma(code) == 3


def test_wait_to_mma_takes_the_wait_ahead_of_the_first_product():
    """Wait at the top of the body (a refill): only what lies between them."""
    code = _code("WARPGROUP.DEPBAR.LE", "BAR.SYNC", "UTMALDG.2D", "HGMMA.64x128x16.F32.BF16",
                 "ISETP", "BRA")
    assert sm.wait_to_mma(code) == 2


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_negative_gemm_loops_are_not_split(name):
    """A GEMM's loops mask nothing: split_boundary_iterations leaves them whole."""
    from hopperc.ir import nodes as ir
    from hopperc.ir.accesses import walk
    kernel = driver.lower(driver.check(driver.read_source(ROOT / "samples" / f"{name}.hk")))
    assert not any(isinstance(s, ir.ForLoop) and s.split for s in walk(kernel.body))
