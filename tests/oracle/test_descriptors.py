"""wgmma shared-memory matrix descriptors of every k-step, from hopperc's
generated code, against CuTe's make_gmma_desc and DescriptorIterator for the
same shared-memory layout, bit for bit."""
from __future__ import annotations

import pytest

from tests.oracle.gmma_cases import PRODUCTS, SMEM_BASES, operands
from tests.oracle.hopperc_side import Operand, nbytes, span

# Descriptor fields (PTX ISA, matrix descriptor format): name -> (low bit, width).
FIELDS = {"start": (0, 14), "lbo": (16, 14), "sbo": (32, 14), "base_offset": (49, 3),
          "swizzle": (62, 2)}

CASES = [(p, label, op, base) for p in PRODUCTS for label, op, _ in operands(p)
         for base in SMEM_BASES]


def field_mask(name: str) -> int:
    low, width = FIELDS[name]
    return ((1 << width) - 1) << low


def fields(desc: int) -> dict[str, int]:
    return {name: (desc & field_mask(name)) >> FIELDS[name][0] for name in FIELDS}


def unread_fields(op: Operand) -> set[str]:
    """Strides the hardware never applies for this operand, where CuTe writes 0
    (the stride of a mode of extent 1) and hopperc a constant: SBO steps between
    8-row groups of a K-major operand, of which an MN of 8 has one; LBO steps
    between swizzle atoms along MN of an MN-major operand, of which one that is
    one span wide has one."""
    unread = set()
    if op.k_major and op.mn == 8:
        unread.add("sbo")
    if not op.k_major and op.mn * nbytes(op.dtype) == span(op.swizzle):
        unread.add("lbo")
    return unread


@pytest.mark.parametrize("product, label, op, base", CASES,
                         ids=[f"{p.name}.{label}@{base:#x}" for p, label, _, base in CASES])
def test_descriptor_of_every_k_step_matches_cute(gmma, product, label, op, base):
    found = gmma.output.descriptors[f"{product.name}.{label}@{base:#x}"]
    assert len(found) == op.k // product.k_step == len(gmma.generated[product.name].steps)
    mask = ~sum(field_mask(f) for f in unread_fields(op))
    for step, (_, cute, hopperc) in enumerate(found):
        assert cute & mask == hopperc & mask, (
            f"k-step {step}: CuTe {cute:#018x} {fields(cute)}, hopperc {hopperc:#018x} "
            f"{fields(hopperc)}")


def test_unread_fields_are_only_those_cute_leaves_zero(gmma):
    """The exemption above covers nothing else: where hopperc and CuTe differ it
    is in a field CuTe encodes as 0, a stride over a single group."""
    for product, label, op, base in CASES:
        for _, cute, hopperc in gmma.output.descriptors[f"{product.name}.{label}@{base:#x}"]:
            differ = {f for f in FIELDS if fields(cute)[f] != fields(hopperc)[f]}
            assert differ <= unread_fields(op), (product.name, label, differ)
            assert all(fields(cute)[f] == 0 for f in differ)


@pytest.mark.parametrize("product", PRODUCTS, ids=[p.name for p in PRODUCTS])
def test_transpose_immediates_match_cute_major(gmma, product):
    """imm-trans-a / imm-trans-b are CuTe's GMMA::Major of each shared operand
    (K = 0, MN = 1); fp8 and tf32 wgmma have none (K-major only), and a register A none
    (an A in warpgroups' parts has one major, its first part's)."""
    majors = [gmma.output.descriptors[f"{product.name}.{label}@0x0"][0][0]
              for label, _, _ in operands(product) if label[1:] in ("", "0")]
    expected = () if product.k_step != 16 else tuple(majors)
    for step in gmma.generated[product.name].steps:
        assert step.immediates == (1, 1) + expected
