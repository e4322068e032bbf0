"""wgmma code generation: descriptors, the register fragment layout, the
instruction operands, and ptxas's own verdict on our fences and waits."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend.cubin_tools import sass_instructions
from hopperc.backend.nvrtc import compile_cuda
from hopperc.codegen.names import kernel_symbol
from hopperc.codegen.render import _environment
from hopperc.diagnostics import SourceFile
from tests.conftest import ROOT
from tests.passes import kernels

WGMMA_KERNELS = {name: getattr(kernels, name) for name in dir(kernels) if name.startswith("MMA_")}


def _prelude() -> str:
    return _environment().get_template("prelude.cu.j2").render()


def test_descriptor_bits_match_the_ptx_isa_layout():
    """Bits 0-13 address >> 4, 16-29 LBO >> 4 (1: unused when swizzled), 32-45 SBO >> 4,
    62-63 swizzle (1 = 128B). Address 0x400 (0x40 in 16-byte units), SBO 1024 (8 rows
    of 128 bytes): 0x40 | 0x1 << 16 | 0x40 << 32 | 1 << 62, worked out by hand. The
    highest shared address, 0x3FFF0, fills the 14-bit field without touching LBO, so a
    k-step's units add to the descriptor. An MN-major operand of column blocks 8 KB
    apart has LBO 8192 >> 4 = 0x200."""
    source = _prelude() + """
static_assert(hk_wgmma_desc(0x40u, 1024u, 1ull) == 0x4000004000010040ull, "128B");
static_assert(hk_wgmma_desc(0x1040u, 512u, 2ull) == 0x8000002000011040ull, "64B");
static_assert(hk_wgmma_desc(0x3FFFu, 256u, 3ull) == 0xC000001000013FFFull, "top of 256K");
static_assert(hk_wgmma_desc(0x40u + 2u, 1024u, 1ull) == hk_wgmma_desc(0x40u, 1024u, 1ull) + 2u,
              "a 32-byte k-step adds 2");
static_assert(hk_wgmma_desc(0x40u, 1024u, 1ull, 8192u) == 0x4000004002000040ull, "LBO");
extern "C" __global__ void k() {}
"""
    compile_cuda(source, "desc.cu")


def test_sass_descriptor_high_word_is_sbo_and_swizzle():
    """The constant high half of every descriptor in gemm_relu: SBO 1024 >> 4 = 0x40,
    128B swizzle = 1 << (62 - 32)."""
    built = driver.build(driver.read_source(ROOT / "samples" / "gemm_relu.hk"))
    sass = sass_instructions(built.result.cubin)[kernel_symbol("gemm_relu")]
    assert any(re.fullmatch(r"UMOV UR\d+,0x40000040", i) for i in sass)


def _fragment(cuda: str) -> tuple[str, str]:
    match = re.search(r"hk_r = (16 \* [^,]+), hk_c = ([^;]+);", cuda)
    assert match, "no wgmma-layout element loop"
    return match.group(1), match.group(2)


def test_fragment_layout_covers_each_element_once_as_the_ptx_figure_says():
    cuda = driver.generate(SourceFile("t.hk", kernels.MMA_BIAS_RELU)).cuda
    row, col = (e.replace("/", "//") for e in _fragment(cuda))
    seen = {}
    for t in range(128):
        for k in range(64 * 64 // 128):
            rc = (eval(row, {"hk_t": t, "hk_k": k}), eval(col, {"hk_t": t, "hk_k": k}))
            assert rc not in seen, (t, k, rc, seen.get(rc))
            seen[rc] = (t, k)
    assert len(seen) == 64 * 64
    # Accumulator figure (m64nNk16, D): lane 0 holds (0,0) (0,1) (8,0) (8,1) (0,8);
    # lane 5 starts at row 5 // 4 = 1, column 2 * (5 % 4) = 2; warp 1 starts at row 16.
    assert [rc for rc, tk in seen.items() if tk[0] == 0][:5] == [(0, 0), (0, 1), (8, 0), (8, 1),
                                                               (0, 8)]
    assert seen[(1, 2)] == (5, 0) and seen[(16, 0)] == (32, 0)


def test_k_major_steps_advance_32_bytes_and_mn_major_steps_16_rows():
    k_major = driver.generate(SourceFile("t.hk", kernels.MMA_BIAS_RELU)).cuda
    # in 16-byte units: 32 bytes along the row per k-step
    assert re.findall(r"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ 0u \+ (\d+)u", k_major) == ["2", "4", "6"]
    # B stored [K, N]: a tensor of its own (reading Y, which the kernel stores, would
    # read other blocks' tiles, which the compiler refuses)
    mn_major = kernels.WG_HEADER.replace("shared sb: bf16[BN, BK]", "shared sb: bf16[BK, BN]") \
        .replace("Bias: f32[N])", "Bias: f32[N], BT: bf16[K, N])") + """
    tma sa <- A[tile.m, 0]
    tma sb <- BT[0, tile.n]
    acc: f32[BM, BN] = sa @ sb
    sy = bf16(acc)
    tma Y[tile.m, tile.n] <- sy
}
"""
    built = driver.build(SourceFile("t.hk", mn_major))
    sb = built.generated.launch.buffer_offsets["sb"]
    steps = re.findall(rf"hk_wgmma_desc\(\(hk_smem_base >> 4\) \+ {sb // 16}u \+ (\d+)u",
                       built.generated.cuda)
    assert steps == ["128", "256", "384"]  # 16 rows of 128 bytes per k-step, in 16-byte units
    assert "p, 1, 1, 0, 1;" in built.result.ptx  # imm-trans-b: B is N-major


def test_register_a_operand_is_four_packed_registers_per_step():
    built = driver.build(SourceFile("t.hk", kernels.MMA_REGISTER_A))
    assert "unsigned u_a[16];" in built.generated.cuda  # 32 bf16 slots, two per register
    assert re.search(r"m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{ %r\d+, %r\d+, %r\d+, %r\d+ \}",
                     built.result.ptx)
    # the last k-step passes the last four registers to the register-A form
    assert re.search(r"hk_wgmma_m64n64k16_f32_bf16_bf16_rs_t\d<1>\(u_acc, "
                     r"u_a\[12\], u_a\[13\], u_a\[14\], u_a\[15\], ", built.generated.cuda)
    assert '"r"(hk_a0), "r"(hk_a1), "r"(hk_a2), "r"(hk_a3)' in built.generated.cuda


@pytest.mark.parametrize("name", sorted(WGMMA_KERNELS))
def test_ptxas_agrees_with_our_wgmma_syncs(name):
    """ptxas injects a warpgroup.arrive where registers were touched unfenced (C7519)
    and serializes wgmma around stray register writes (C7515)."""
    built = driver.build(SourceFile("t.hk", WGMMA_KERNELS[name]))
    log = built.result.log
    assert "C7519" not in log and "C7515" not in log, log
    assert built.result.resources.spill_stores == 0
