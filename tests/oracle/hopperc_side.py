"""hopperc's side of the oracle, as C++ for the host programs: device helpers cut
from the rendered prelude, and descriptor and fragment expressions cut from
kernels that hopperc generates for each case. Nothing here recomputes an
encoding: whatever hopperc prints is what the oracle compiles and checks."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hopperc import driver
from hopperc.codegen import names
from hopperc.codegen.render import _environment
from hopperc.diagnostics import SourceFile
from hopperc.ir.dtypes import DType, Swizzle

# CuTe's name of each element type (cute/numeric).
CUTE_TYPES = {"bf16": "cute::bfloat16_t", "f16": "cute::half_t", "e4m3": "cute::float_e4m3_t",
              "e5m2": "cute::float_e5m2_t", "f32": "cute::tfloat32_t"}
# CuTe's B of Swizzle<B,4,3>: the span is 2^B 16-byte chunks.
SWIZZLE_BITS = {"32B": 1, "64B": 2, "128B": 3}


def nbytes(dtype: str) -> int:
    return DType.parse(dtype).nbytes


def span(swizzle: str) -> int:
    return Swizzle.parse(swizzle).span


def prelude_function(name: str) -> str:
    """The definition of device helper `name` (with its template head, if any),
    as the rendered prelude has it."""
    prelude = _environment().get_template("prelude.cu.j2").render()
    match = re.search(rf"^(?:template <[^\n]*>\n)?__[^\n]*\b{name}\(", prelude, re.MULTILINE)
    assert match, f"{name} is not in the prelude"
    depth, i = 0, prelude.index("{", match.end())
    while True:
        depth += {"{": 1, "}": -1}.get(prelude[i], 0)
        i += 1
        if depth == 0:
            return prelude[match.start():i]


def host_prelude(*names: str) -> str:
    """The helpers for a host compiler: CUDA's headers (included by CuTe before
    this) define __host__ __device__ __forceinline__ for the host already."""
    return "\n\n".join(prelude_function(n) for n in names) + "\n"


def call_arguments(text: str, start: int) -> tuple[str, int]:
    """The text of a call's parenthesized arguments at text[start] == '('."""
    depth, i = 0, start
    while True:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return text[start + 1:i - 1], i


@dataclass(frozen=True)
class Operand:
    """One shared operand of a wgmma product as hopperc lays it out: a buffer of
    rows of one swizzle span or several (in column blocks), read K-major ([MN, K])
    or MN-major ([K, MN])."""

    dtype: str
    swizzle: str
    k_major: bool
    mn: int  # M or N of the product
    k: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.mn, self.k) if self.k_major else (self.k, self.mn)


@dataclass(frozen=True)
class Product:
    """acc[64, N] = A @ B, A from shared memory or (a_register) a register tile;
    `a_parts` warpgroups each multiply their block of an MN-major A's columns
    (`sa^T[wg]`, a.mn the whole buffer's M)."""

    name: str
    a: Operand
    b: Operand
    a_register: bool = False
    a_parts: int = 1

    @property
    def k_step(self) -> int:
        return 32 // nbytes(self.a.dtype)  # 32 bytes of K: 16, 32 for fp8, 8 for tf32

    def source(self) -> str:
        a, b = self.a, self.b
        lines = [f"kernel {self.name}(TA: {a.dtype}[{a.shape[0]}, {a.shape[1]}], "
                 f"TB: {b.dtype}[{b.shape[0]}, {b.shape[1]}]) grid(m: 1) "
                 f"threads {128 * self.a_parts}", "{",
                 # A leading buffer moves the operands off address 0.
                 "    shared pad: f32[8, 32]",
                 f"    shared sa: {a.dtype}[{a.shape[0]}, {a.shape[1]}] swizzle {a.swizzle}",
                 f"    shared sb: {b.dtype}[{b.shape[0]}, {b.shape[1]}] swizzle {b.swizzle}",
                 "    tma sa <- TA[0, 0]", "    tma sb <- TB[0, 0]"]
        a_expr = "sa" if a.k_major else "sa^T" if self.a_parts == 1 else "sa^T[wg]"
        if self.a_register:
            lines.append(f"    ra: {a.dtype}[64, {a.k}] = {a.dtype}(f32({a_expr}))")
            a_expr = "ra"
        b_expr = "sb^T" if b.k_major else "sb"
        # The zero fill is a loop over acc's elements in the wgmma layout, where
        # fragment_expressions reads the layout (the product alone needs none).
        lines += [f"    acc: f32[64, {b.mn}] = 0.0", f"    acc = {a_expr} @ {b_expr}", "}"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class WgmmaAsm:
    """One generated wgmma instruction: its PTX immediates and C++ inputs."""

    immediates: tuple[int, ...]  # scale-a, scale-b[, trans-a][, trans-b]
    descriptors: tuple[str, ...]  # hk_wgmma_desc(...) calls, A's first when shared
    a_registers: tuple[int, ...]  # register-A indices, in operand order
    d_registers: tuple[int, ...]  # accumulator indices, in operand order


@dataclass(frozen=True)
class Generated:
    cuda: str
    offsets: dict[str, int]  # buffer -> shared offset
    steps: tuple[WgmmaAsm, ...]


def generate(product: Product) -> Generated:
    """Each wgmma the kernel issues: a call of its form's device function, whose
    definition holds the immediates and the accumulator's operand order."""
    built = driver.build(SourceFile(f"{product.name}.hk", product.source()))
    cuda = built.generated.cuda
    forms = {}
    for match in re.finditer(r"void (hk_wgmma_\w+)\(", cuda):
        body = cuda[match.end():cuda.index("\n}\n", match.end())]
        tail = re.search(r"p((?:, \d)+); \}\"", body)
        immediates = tuple(int(x) for x in tail.group(1).split(", ")[1:])
        d = tuple(int(r) for r in re.findall(r'"\+f"\(hk_d\[(\d+)\]\)', body))
        forms[match.group(1)] = immediates, d
    steps = []
    acc, ra = names.user("acc"), names.user("ra")
    for call in re.finditer(rf"(hk_wgmma_\w+)<\d>\({acc}, ", cuda):
        args, _ = call_arguments(cuda, call.end() - len(acc) - 3)
        descriptors = []
        for desc in re.finditer(r"hk_wgmma_desc\(", args):
            inner, _ = call_arguments(args, desc.end() - 1)
            descriptors.append(f"hk_wgmma_desc({inner})")
        registers = tuple(int(r) for r in re.findall(rf"{ra}\[(\d+)\]", args))
        immediates, d = forms[call.group(1)]
        steps.append(WgmmaAsm(immediates, tuple(descriptors), registers, d))
    return Generated(cuda, dict(built.generated.launch.buffer_offsets), tuple(steps))


def fragment_expressions(cuda: str) -> tuple[str, str]:
    """(row, col) C++ expressions of slot hk_k of thread hk_t in the wgmma layout."""
    match = re.search(r"hk_r = (16 \* [^,]+), hk_c = ([^;]+);", cuda)
    assert match, "no wgmma-layout element loop in the generated code"
    return match.group(1), match.group(2)
