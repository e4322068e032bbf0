"""The cases of gmma_oracle.cpp's `tiled_layout`: swizzled buffers wider than
their swizzle span, whose element addresses hopperc's generated code computes
(cut from a kernel that writes every element: `v`, a warpgroup's [64, N] tile,
with stmatrix, whose row addresses use the same expression) and CuTe lays out
as a tile of its K-major swizzle atoms."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir.dtypes import DType
from tests.oracle.hopperc_side import CUTE_TYPES, SWIZZLE_BITS, call_arguments

# Every swizzle, 1- and 2-byte elements, 2 to 8 column blocks; a leading buffer
# moves them off address 0.
WIDE = """kernel wide(X: f32[M, N]) grid(m: 1) threads 128 {
    shared pad: f32[8, 32]
    shared w: bf16[128, 256] swizzle 128B
    shared v: f16[64, 128] swizzle 64B
    shared x: e4m3[16, 256] swizzle 32B
    w = 1.0
    v = 1.0
    x = 1.0
}
"""


@dataclass(frozen=True)
class TiledCase:
    buffer: str
    dtype: str
    swizzle: str
    shape: tuple[int, int]
    offset: int  # of the buffer in the shared window
    address: str  # hopperc's C++ address of element (hk_r, hk_c)


def generate() -> list[TiledCase]:
    built = driver.build(SourceFile("wide.hk", WIDE))
    cuda = built.generated.cuda
    stores = [call_arguments(cuda, m.end() - 1)[0]
              for m in re.finditer(r"(?:hk_st_shared_u(?:16|8)|hk_stmatrix_x4)\((?=hk_smem_base)",
                                   cuda)]
    cases = []
    for buf, store in zip(built.generated.kernel.buffers[1:], stores, strict=True):
        address = _first_argument(store)
        cases.append(TiledCase(buf.name, _dtype_name(buf.dtype), buf.swizzle.text, buf.shape,
                               built.generated.launch.buffer_offsets[buf.name], address))
    return cases


def _first_argument(arguments: str) -> str:
    depth = 0
    for i, ch in enumerate(arguments):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            return arguments[:i]
    raise AssertionError(f"one argument only: {arguments}")


def _dtype_name(dtype: DType) -> str:
    return next(name for name in CUTE_TYPES if DType.parse(name) is dtype)


def cases_header(cases: list[TiledCase]) -> str:
    lines = ["static void hk_layout_cases() {", "  const unsigned hk_smem_base = 0u;"]
    for case in cases:
        rows, cols = case.shape
        lines += [f"  tiled_layout<{CUTE_TYPES[case.dtype]}, {SWIZZLE_BITS[case.swizzle]}, {rows}, "
                  f'{cols}>("{case.buffer}", {case.offset}u,',
                  f"    [&](int hk_r, int hk_c) {{ return unsigned({case.address}); }});"]
    return "\n".join(lines + ["}", ""])
