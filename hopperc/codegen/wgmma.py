"""wgmma operands: shared-memory matrix descriptors, register fragments and the
inline-PTX operand lists of each k-step of a product.

A product of K columns runs as K / k wgmma instructions (k = 32 bytes of K:
16 for 16-bit inputs, 32 for fp8, 8 for f32 operands, which run as .tf32),
one batch. Shared operands are swizzle atoms of 8 rows x the swizzle
span, the layout a TMA load with that swizzle writes (checked in the front
end); rows wider than the span lie in column blocks one span wide, each
holding every row (ir/layout.py). The descriptor's fields (PTX ISA, matrix
descriptor; CuTe's make_gmma_desc canonical layouts):
- K-major: SBO is the stride between 8-row groups, 8 spans; LBO is unused
  (a k-step's K fits in one span) and encoded as 1. A k-step starts at its
  byte offset along K: column block (offset // span), then offset % span in it.
- MN-major: SBO is the stride between 8-row (8 K) groups, 8 spans; LBO the
  stride between span-wide column blocks along MN, one block's bytes (1 when
  MN is one span, so never applied). A k-step starts k rows further.
The hardware applies the swizzle to the address bits, so no re-swizzling is
needed (buffers, stages, parts and column blocks are aligned to the swizzle's
repeat, base offset 0).
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir.dtypes import DType, Swizzle
from hopperc.ir import nodes as ir
from hopperc.ir.layout import block_bytes, column_blocks, wgmma_k

DESCRIPTOR_SWIZZLE = {Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}


@dataclass(frozen=True)
class WgmmaForm:
    """One wgmma instruction form (shape, types, where A lives, immediates),
    emitted once per kernel as a device function templated on scale-d: the C++
    front end parses its hundred-odd operands once, however often the kernel
    issues it (a loop's first iteration rendered apart issues it twice)."""

    instruction: str  # wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B
    acc_slots: int
    register_a: bool  # A as 4 packed registers per k-step, else a descriptor
    immediates: str  # imm-scale-a, imm-scale-b[, imm-trans-a][, imm-trans-b]

    @property
    def name(self) -> str:
        shape_and_types = self.instruction.split(".", 4)[4].replace(".", "_")
        trans = "".join(self.immediates.split(", ")[2:])
        return (f"hk_wgmma_{shape_and_types}_{'rs' if self.register_a else 'ss'}"
                f"{'_t' + trans if trans else ''}")

    @property
    def params(self) -> str:
        a = ("const unsigned hk_a0, const unsigned hk_a1, const unsigned hk_a2, "
             "const unsigned hk_a3" if self.register_a else "const unsigned long long hk_a")
        return f"float (&hk_d)[{self.acc_slots}], {a}, const unsigned long long hk_b"

    @property
    def operands(self) -> str:
        """The instruction's operand text, scale-d as predicate p."""
        slot = self.acc_slots
        d = ", ".join(f"%{i}" for i in range(slot))
        a = "{ " + ", ".join(f"%{slot + j}" for j in range(4)) + " }" if self.register_a \
            else f"%{slot}"
        b = slot + (4 if self.register_a else 1)
        return f"{{ {d} }}, {a}, %{b}, p, {self.immediates}"

    @property
    def scale_d_slot(self) -> int:
        return self.acc_slots + (4 if self.register_a else 1) + 1

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(f'"+f"(hk_d[{i}])' for i in range(self.acc_slots))

    @property
    def inputs(self) -> tuple[str, ...]:
        a = tuple(f'"r"(hk_a{j})' for j in range(4)) if self.register_a else ('"l"(hk_a)',)
        return a + ('"l"(hk_b)', '"n"(hk_scale_d)')


@dataclass(frozen=True)
class WgmmaStep:
    """One wgmma instruction: a call of its form's device function."""

    form: WgmmaForm
    scale_d: int
    acc: str
    a: tuple[str, ...]  # a descriptor, or 4 registers
    b: str


@dataclass(frozen=True)
class SharedOperand:
    base: str  # C++ expression: shared address of the operand's first byte, in 16-byte units
    buffer: ir.SharedBuffer
    k_major: bool


def descriptor(op: SharedOperand, step: int, k: int) -> str:
    """C++ expression of the 64-bit matrix descriptor for k-step `step`. The
    address is summed in 16-byte units, the descriptor's own, so a k-step adds a
    constant to the stage's descriptor (as CUTLASS's `+2`) instead of rebuilding it."""
    buf = op.buffer
    span = buf.swizzle.span
    if op.k_major:
        along_k = step * k * buf.dtype.nbytes
        advance = along_k // span * block_bytes(buf) + along_k % span
    else:
        advance = step * k * span
    address = op.base if advance == 0 else f"{op.base} + {advance // 16}u"
    leading = f", {block_bytes(buf)}u" if not op.k_major and column_blocks(buf) > 1 else ""
    return (f"hk_wgmma_desc({address}, {8 * span}u, "
            f"{DESCRIPTOR_SWIZZLE[buf.swizzle]}ull{leading})")


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
    # Only 16-bit inputs take transpose immediates (PTX ISA); fp8 and tf32 are K-major.
    trans = [] if a_dtype.nbytes != 2 else (
        ["1" if not b.k_major else "0"] if register_a
        else ["0" if a.k_major else "1", "0" if b.k_major else "1"])
    form = WgmmaForm(f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32."
                     f"{_input_type(a_dtype)}.{_input_type(b.buffer.dtype)}",
                     acc_slots, register_a, ", ".join(["1", "1", *trans]))
    out = []
    for step in range(k_total // k):
        a_args = tuple(f"{a}[{4 * step + j}]" for j in range(4)) if register_a \
            else (descriptor(a, step, k),)
        scale_d = 0 if step == 0 and (overwrites or not mma.accumulate) else 1
        out.append(WgmmaStep(form, scale_d, acc, a_args, descriptor(b, step, k)))
    return out


def _input_type(dtype: DType) -> str:
    """The instruction's name of an input type: f32 in shared memory is read as tf32."""
    return "tf32" if dtype is DType.F32 else str(dtype)
