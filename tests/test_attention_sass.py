"""bench/attention_sass.py: a key loop's work in 64x64 tiles from its HGMMA shapes,
innermost HGMMA loops only, and the choice of FlashAttention-3's plainest Hopper
kernel among its wheel's variants (no cubin needed: synthetic listings)."""
from __future__ import annotations

from pathlib import Path

from bench.attention_sass import FLAGS, Fa3Kernel, key_loops
from hopperc.backend.sass_metrics import Instruction


def _listing() -> list[Instruction]:
    """An outer loop (0 .. 7) around an inner key loop (2 .. 6) holding two
    HGMMA.64x128x16 and an FSEL; the outer loop holds one more HGMMA."""
    return [Instruction("NOP", "", ""), Instruction("HGMMA.64x64x16.F32.BF16", "", ""),
            Instruction("HGMMA.64x128x16.F32.BF16", "", ""),
            Instruction("HGMMA.64x128x16.F32.BF16", "", ""), Instruction("FSEL", "", ""),
            Instruction("FADD", "", ""), Instruction("BRA", "@P0", "0x20"),
            Instruction("BRA", "@P1", "0x0")]


def test_a_loops_work_is_its_multiply_adds_over_a_tiles():
    (inner,) = key_loops(_listing(), 128)
    assert (inner.start, inner.length) == (2, 5)
    # 2 x 64 * 128 * 16 multiply-adds over 2 * 64 * 64 * 128 per tile
    assert inner.tiles == 0.25 and inner.per_tile == 20 and inner.masks == 1


def test_fa3_prefers_its_hopper_schedule_unsplit_and_the_largest_tile(monkeypatch):
    from bench import attention_sass

    def kernel(tile, **on):
        return Fa3Kernel(Path("k.cubin"), f"k{tile}{sorted(on)}", tile,
                         {f: on.get(f, False) for f in FLAGS})
    kernels = [kernel((128, 96, 128), pv_rs=True), kernel((128, 176, 128), split=True,
                                                          intra_wg_overlap=True),
               kernel((128, 176, 128), intra_wg_overlap=True),
               kernel((128, 128, 128), intra_wg_overlap=True),
               kernel((128, 176, 128), intra_wg_overlap=True, varlen=True),
               kernel((128, 128, 128), intra_wg_overlap=True, causal=True)]
    monkeypatch.setattr(attention_sass.sm, "functions",
                        lambda cubin: {k.symbol: [] for k in kernels})
    monkeypatch.setattr(Path, "read_bytes", lambda self: b"")
    monkeypatch.setattr(attention_sass, "key_loops", lambda code, d: [])
    picked, _ = attention_sass.fa3_loops(kernels, 128, False)
    assert picked is kernels[2]
    picked, _ = attention_sass.fa3_loops(kernels, 128, True)
    assert picked is kernels[5]
    assert attention_sass.fa3_loops(kernels, 64, False) is None
