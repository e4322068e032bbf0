"""wgmma operands: shared-memory matrix descriptors, register fragments and the
inline-PTX operand lists of each k-step of a product.

A product of K columns runs as K / k wgmma instructions (k = 16, or 32 for
fp8), one batch. Shared operands are swizzle atoms of 8 rows x the swizzle
span, the layout a TMA load with that swizzle writes (checked in the front
end): the stride between 8-row groups (SBO) is 8 spans; the leading offset
(LBO) is unused for these layouts and encoded as 1. A k-step moves the start
address by k elements along a K-major row, or by k rows of an MN-major one;
the hardware applies the swizzle to the address bits, so no re-swizzling is
needed (buffers are aligned to the swizzle's repeat, base offset 0).
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.dtypes import DType, Swizzle
from hopperc.ir import nodes as ir
from hopperc.ir.layout import wgmma_k

DESCRIPTOR_SWIZZLE = {Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}


@dataclass(frozen=True)
class WgmmaStep:
    """One wgmma.mma_async instruction as inline-asm text pieces."""

    instruction: str
    d: str  # "%0, %1, ..."
    a: str  # "%N" (descriptor) or "{ %N, %N+1, %N+2, %N+3 }" (registers)
    b: str
    scale_d: str  # operand slot of the scale-d flag
    immediates: str  # imm-scale-a, imm-scale-b[, imm-trans-a][, imm-trans-b]
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class SharedOperand:
    base: str  # C++ expression: shared address of the operand's first byte, in 16-byte units
    buffer: ir.SharedBuffer
    k_major: bool


def descriptor(op: SharedOperand, step: int, k: int) -> str:
    """C++ expression of the 64-bit matrix descriptor for k-step `step`. The
    address is summed in 16-byte units, the descriptor's own, so a k-step adds a
    constant to the stage's descriptor (as CUTLASS's `+2`) instead of rebuilding it."""
    span = op.buffer.swizzle.span
    advance = step * k * op.buffer.dtype.nbytes if op.k_major else step * k * span
    address = op.base if advance == 0 else f"{op.base} + {advance // 16}u"
    return (f"hk_wgmma_desc({address}, {8 * span}u, "
            f"{DESCRIPTOR_SWIZZLE[op.buffer.swizzle]}ull)")


def steps(mma: ir.Mma, acc: str, acc_slots: int, a: SharedOperand | str, a_dtype: DType,
          b: SharedOperand, overwrites: bool = False) -> list[WgmmaStep]:
    """The instructions of one product. `acc` is the accumulator's C++ name; `a`
    is a SharedOperand or the C++ name of a 16-bit register tile in the wgmma
    layout, packed in pairs (4 registers per k-step); `overwrites`: the first
    instruction ignores the accumulator (scale-d 0) although the product
    accumulates (its loop's first iteration)."""
    _, n, k_total = mma.shape
    k = wgmma_k(a_dtype)
    register_a = isinstance(a, str)
    instruction = (f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32."
                   f"{a_dtype}.{b.buffer.dtype}")
    outputs = tuple(f'"+f"({acc}[{i}])' for i in range(acc_slots))
    d = ", ".join(f"%{i}" for i in range(acc_slots))
    out = []
    for step in range(k_total // k):
        slot = acc_slots
        if register_a:
            a_inputs = tuple(f'"r"({a}[{4 * step + j}])' for j in range(4))
            a_text = "{ " + ", ".join(f"%{slot + j}" for j in range(4)) + " }"
        else:
            a_inputs = (f'"l"({descriptor(a, step, k)})',)
            a_text = f"%{slot}"
        slot += len(a_inputs)
        scale_d = 0 if step == 0 and (overwrites or not mma.accumulate) else 1
        inputs = a_inputs + (f'"l"({descriptor(b, step, k)})', f'"n"({scale_d})')
        trans = [] if a_dtype.is_fp8 else (
            ["1" if not b.k_major else "0"] if register_a
            else ["0" if a.k_major else "1", "0" if b.k_major else "1"])
        out.append(WgmmaStep(instruction, d, a_text, f"%{slot}", f"%{slot + 1}",
                             ", ".join(["1", "1", *trans]), outputs, inputs))
    return out
