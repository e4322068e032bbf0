"""The cases of gmma_oracle.cpp: products whose descriptors and fragments are
compared, the header that hands hopperc's generated expressions to the
program, and the parser of its output."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from tests.oracle.hopperc_side import (CUTE_TYPES, SWIZZLE_BITS, Generated, Operand, Product,
                                       fragment_expressions, host_prelude)

# Every swizzle for K-major and MN-major operands, 16-bit, fp8 and tf32 (f32
# operands, K-major only), shared and register A; K spans several k-steps
# wherever the row width allows.
PRODUCTS = (
    Product("bf16_k128_k128", Operand("bf16", "128B", True, 64, 64),
            Operand("bf16", "128B", True, 128, 64)),
    Product("f16_k64_k64", Operand("f16", "64B", True, 64, 32), Operand("f16", "64B", True, 64, 32)),
    Product("bf16_k32_k32", Operand("bf16", "32B", True, 64, 16),
            Operand("bf16", "32B", True, 256, 16)),
    Product("bf16_mn128_mn128", Operand("bf16", "128B", False, 64, 64),
            Operand("bf16", "128B", False, 64, 64)),
    Product("f16_k128_mn64", Operand("f16", "128B", True, 64, 64),
            Operand("f16", "64B", False, 32, 64)),
    Product("bf16_k64_mn32", Operand("bf16", "64B", True, 64, 32),
            Operand("bf16", "32B", False, 16, 32)),
    Product("f16_mn128_k32", Operand("f16", "128B", False, 64, 16),
            Operand("f16", "32B", True, 8, 16)),
    Product("e4m3_k128_k128", Operand("e4m3", "128B", True, 64, 128),
            Operand("e4m3", "128B", True, 256, 128)),
    Product("e4m3_k64_e5m2_k64", Operand("e4m3", "64B", True, 64, 64),
            Operand("e5m2", "64B", True, 64, 64)),
    Product("e5m2_k32_k32", Operand("e5m2", "32B", True, 64, 32), Operand("e5m2", "32B", True, 8, 32)),
    Product("tf32_k128_k128", Operand("f32", "128B", True, 64, 32),
            Operand("f32", "128B", True, 128, 32)),
    Product("tf32_k64_k64", Operand("f32", "64B", True, 64, 16), Operand("f32", "64B", True, 64, 16)),
    Product("tf32_k32_k32", Operand("f32", "32B", True, 64, 8), Operand("f32", "32B", True, 8, 8)),
    Product("bf16_reg_k128", Operand("bf16", "128B", True, 64, 64),
            Operand("bf16", "128B", True, 64, 64), a_register=True),
    Product("f16_reg_mn64", Operand("f16", "128B", True, 64, 64),
            Operand("f16", "64B", False, 32, 64), a_register=True),
    Product("bf16_reg_mn128", Operand("bf16", "128B", True, 64, 64),
            Operand("bf16", "128B", False, 64, 64), a_register=True),
    # fp8 register A: the accumulator layout's values exchanged into the fragment.
    Product("e4m3_reg_k128", Operand("e4m3", "128B", True, 64, 128),
            Operand("e4m3", "128B", True, 64, 128), a_register=True),
    Product("e4m3_reg_e5m2_k64_n256", Operand("e4m3", "64B", True, 64, 64),
            Operand("e5m2", "64B", True, 256, 64), a_register=True),
    Product("e5m2_reg_k32_n8", Operand("e5m2", "32B", True, 64, 32),
            Operand("e5m2", "32B", True, 8, 32), a_register=True),
    # Rows wider than the span (column blocks one span wide): K-major K of 2 to
    # 4 spans, MN-major N (and an f16 64B A's M) of 2 to 4 spans, shared and
    # register A (attention's P V), N up to 256.
    Product("bf16_kw128_kw128", Operand("bf16", "128B", True, 64, 128),
            Operand("bf16", "128B", True, 128, 128)),
    Product("bf16_kw256_kw256", Operand("bf16", "128B", True, 64, 256),
            Operand("bf16", "128B", True, 64, 256)),
    Product("bf16_kw64_k32_n256", Operand("bf16", "32B", True, 64, 64),
            Operand("bf16", "32B", True, 256, 64)),
    Product("e4m3_kw256_kw256", Operand("e4m3", "128B", True, 64, 256),
            Operand("e4m3", "128B", True, 128, 256)),
    Product("tf32_kw128_kw128", Operand("f32", "128B", True, 64, 64),
            Operand("f32", "128B", True, 256, 64)),
    Product("tf32_kw64_kw64", Operand("f32", "64B", True, 64, 48),
            Operand("f32", "64B", True, 64, 48)),
    Product("f16_kw64_kw64", Operand("f16", "64B", True, 64, 64),
            Operand("f16", "64B", True, 176, 64)),
    Product("bf16_k128_mnw128", Operand("bf16", "128B", True, 64, 64),
            Operand("bf16", "128B", False, 128, 64)),
    Product("bf16_kw128_mnw256", Operand("bf16", "128B", True, 64, 128),
            Operand("bf16", "128B", False, 256, 128)),
    Product("f16_mnw64_mnw64", Operand("f16", "64B", False, 64, 32),
            Operand("f16", "64B", False, 64, 32)),
    Product("bf16_k32_mnw32_n64", Operand("bf16", "32B", True, 64, 16),
            Operand("bf16", "32B", False, 64, 16)),
    Product("bf16_mnw32_k32", Operand("bf16", "32B", False, 64, 16),
            Operand("bf16", "32B", True, 64, 16)),
    Product("bf16_reg_mnw128", Operand("bf16", "128B", True, 64, 128),
            Operand("bf16", "128B", False, 128, 128), a_register=True),
    Product("bf16_reg_mnw256", Operand("bf16", "128B", True, 64, 64),
            Operand("bf16", "128B", False, 256, 64), a_register=True),
    # A^T per warpgroup: each of two warpgroups its block of a [K, 2 * 64]
    # buffer's columns (sa^T[wg]), one span or two spans (64B) wide.
    Product("bf16_mnpart128_k128", Operand("bf16", "128B", False, 128, 64),
            Operand("bf16", "128B", True, 64, 64), a_parts=2),
    Product("f16_mnpart64_mnw64", Operand("f16", "64B", False, 128, 32),
            Operand("f16", "64B", False, 64, 32), a_parts=2),
    Product("bf16_mnpart32_k32", Operand("bf16", "32B", False, 128, 16),
            Operand("bf16", "32B", True, 32, 16), a_parts=2),
)
# Two shared-window bases (both aligned as the kernel aligns its window): the
# address field, not only the offsets within the window, is compared.
SMEM_BASES = (0, 0x1C000)
SWIZZLE_BYTES = 16 * 1024

# CuTe's MMA atom of each product's shape: accumulator layouts for several N
# and both input widths, register-A layouts for the 16-bit register products.
ATOM_KIND = {("bf16", False): "F32BF16BF16_SS", ("f16", False): "F32F16F16_SS",
             ("bf16", True): "F32BF16BF16_RS", ("f16", True): "F32F16F16_RS"}
# CuTe's main header names the atoms of these N; the others (m64n176) are in
# its extension headers, too large to compile here: those products'
# descriptors are compared, their accumulator (the same per-8-column pattern) is not.
CUTE_ATOM_N = (8, 16, 32, 64, 96, 128, 192, 256)
FRAGMENT_PRODUCTS = tuple(p for p in PRODUCTS if p.b.mn in CUTE_ATOM_N and p.a_parts == 1) + (
    Product("bf16_n8", Operand("bf16", "128B", True, 64, 64), Operand("bf16", "128B", True, 8, 64)),
    Product("f16_n16", Operand("f16", "64B", True, 64, 32), Operand("f16", "64B", True, 16, 32),
            a_register=True),
    Product("e4m3_n64", Operand("e4m3", "128B", True, 64, 128),
            Operand("e4m3", "128B", True, 64, 128)),
)


def atom(product: Product) -> str:
    a, b = product.a, product.b
    shape = f"SM90_64x{b.mn}x{product.k_step}"
    if product.k_step == 32:  # fp8: K-major only ("TN"), A and B types in the name
        where = "RS" if product.a_register else "SS"
        return f"{shape}_F32{a.dtype.upper()}{b.dtype.upper()}_{where}_TN<>"
    if product.k_step == 8:  # tf32: K-major only
        return f"{shape}_F32TF32TF32_SS_TN<>"
    return f"{shape}_{ATOM_KIND[(a.dtype, product.a_register)]}<{major(a)}, {major(b)}>"


def major(op: Operand) -> str:
    return "Major::K" if op.k_major else "Major::MN"


def operands(product: Product) -> list[tuple[str, Operand, str]]:
    """(label, operand, buffer) of each shared operand, in descriptor order; an A
    in warpgroups' parts is one operand per part (label A0, A1, ..., M one part's)."""
    a = product.a
    if product.a_parts > 1:
        part = replace(a, mn=a.mn // product.a_parts)
        found = [(f"A{p}", part, "sa") for p in range(product.a_parts)]
    else:
        found = [] if product.a_register else [("A", a, "sa")]
    return found + [("B", product.b, "sb")]


def cases_header(generated: dict[str, Generated]) -> str:
    lines = [f"#define HK_SWIZZLE_BYTES {SWIZZLE_BYTES}u", "",
             "static void hk_descriptor_cases() {"]
    for product in PRODUCTS:
        gen = generated[product.name]
        for label, op, buffer in operands(product):
            # one descriptor expression per operand, the parts of A sharing A's
            index = 0 if label.startswith("A") else len(gen.steps[0].descriptors) - 1
            part = int(label[1:]) if label[1:] else 0
            parts = product.a_parts if label.startswith("A") else 1
            exprs = [step.descriptors[index] for step in gen.steps]
            for base in SMEM_BASES:
                name = f"{product.name}.{label}@{base:#x}"
                lines += [f"  {{  // {name}: {op.dtype}{list(op.shape)} {op.swizzle}",
                          f"    const unsigned hk_smem_base = {base}u;",
                          f"    [[maybe_unused]] const int hk_warp = {4 * part};",
                          "    const unsigned long long hopperc[] = {",
                          *(f"      {e}," for e in exprs), "    };",
                          f"    descriptors<{CUTE_TYPES[op.dtype]}, {major(op)}, "
                          f"{SWIZZLE_BITS[op.swizzle]}, {op.mn * parts}, {op.k}, "
                          f"{product.k_step}, {parts}>"
                          f'("{name}", hk_smem_base + {gen.offsets[buffer]}u, {part}, hopperc, '
                          f"{len(exprs)});", "  }"]
    lines += ["}", "", "static void hk_fragment_cases() {"]
    for product in FRAGMENT_PRODUCTS:
        gen = generated[product.name]
        row, col = fragment_expressions(gen.cuda)
        # hopperc's formula for every slot of the accumulator (and of register A)
        slots = max(product.b.mn, product.a.k if product.a_register else 0) // 2
        lines += [f"  accumulator<{atom(product)}>(\"{product.name}\");",
                  f'  slots("{product.name}", {slots}, [](int hk_t, int hk_k) {{ return {row}; }},',
                  f"        [](int hk_t, int hk_k) {{ return {col}; }});"]
        if product.a_register:
            lines.append(f"  register_a<{atom(product)}>(\"{product.name}\");")
        if product.a_register and product.k_step == 32:
            lines += [f'  fp8_register_a<{slots}>("{product.name}", '
                      f"[](int hk_t, int hk_k) {{ return {row}; }},",
                      f"                 [](int hk_t, int hk_k) {{ return {col}; }});"]
    return "\n".join(lines + ["}", ""])


def prelude_header() -> str:
    return host_prelude("hk_wgmma_desc", "hk_swizzle", "hk_byte_perm", "hk_fp8_quad_exchange",
                        "hk_fp8_a_exchange")


@dataclass
class GmmaOutput:
    """What gmma_oracle printed, by case."""

    descriptors: dict[str, list[tuple[int, int, int]]] = field(
        default_factory=lambda: defaultdict(list))  # name -> [(major, cute, hopperc)] by step
    swizzle: dict[int, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(dict))  # bits -> {"cute"|"hopperc": values}
    fragments: dict[tuple[str, str], list[list[tuple[int, int]]]] = field(
        default_factory=lambda: defaultdict(list))  # (product, "C"|"A") -> by thread
    slots: dict[str, list[list[tuple[int, int]]]] = field(
        default_factory=lambda: defaultdict(list))  # product -> by thread
    tiled: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: defaultdict(dict))  # buffer -> {"cute"|"hopperc": addresses}
    fp8_registers: dict[str, list[list[list[tuple[int, int]]]]] = field(
        default_factory=lambda: defaultdict(list))  # product -> thread -> register -> bytes
    stsm_src: list[list[int]] = field(default_factory=list)  # lane -> bit of each register bit
    stsm_dst: list[tuple[int, int]] = field(default_factory=list)  # lane -> (row's bit, bits)


def parse(stdout: str) -> GmmaOutput:
    out = GmmaOutput()
    for line in stdout.splitlines():
        tag, *rest = line.split()
        if tag == "desc":
            name, step, major_value, cute, hopperc = rest
            assert int(step) == len(out.descriptors[name])
            out.descriptors[name].append((int(major_value), int(cute, 16), int(hopperc, 16)))
        elif tag == "swizzle":
            out.swizzle[int(rest[0])][rest[1]] = [int(x) for x in rest[2:]]
        elif tag == "frag":
            name, operand, thread, *pairs = rest
            assert int(thread) == len(out.fragments[(name, operand)])
            out.fragments[(name, operand)].append(_pairs(pairs))
        elif tag == "slot":
            name, thread, *pairs = rest
            assert int(thread) == len(out.slots[name])
            out.slots[name].append(_pairs(pairs))
        elif tag == "fp8a":
            name, thread, *pairs = rest
            assert int(thread) == len(out.fp8_registers[name])
            values = _pairs(pairs)
            out.fp8_registers[name].append([values[i:i + 4] for i in range(0, len(values), 4)])
        elif tag == "stsm" and rest[0] == "src":
            assert int(rest[1]) == len(out.stsm_src)
            out.stsm_src.append([int(x) for x in rest[2:]])
        elif tag == "stsm":
            assert int(rest[1]) == len(out.stsm_dst)
            out.stsm_dst.append((int(rest[2]), int(rest[3])))
        elif tag == "tiled":
            out.tiled[rest[0]][rest[1]] = [int(x) for x in rest[2:]]
        # anything else is CuTe's own host warning (no shared window on the host)
    return out


def _pairs(texts: list[str]) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in t.split(",")) for t in texts]
