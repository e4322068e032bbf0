"""CUTLASS's sm90 block-scaled FP8 GEMM (bench/kernels/cutlass_fp8_blockwise.cu:
128x128x128 tiles, cooperative, 1x128 / 128x128 scales), built from the
nvidia-cutlass wheel's headers with nvcc -cubin for sm_90a (about 40 s, no GPU),
and its main loop counted as bench/sass.py counts the samples': instructions of
the innermost loop holding the wgmma per k-step (4 QGMMA k32 per k-step of 128),
the wait to the next wgmma, and the loop's instruction mix.

Usage: python bench/cutlass_sass.py [OUT.cubin]
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hopperc.backend import sass_metrics as sm

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "kernels" / "cutlass_fp8_blockwise.cu"
QGMMA_PER_K_STEP = 4  # m64n128k32 x 4 for BK = 128, per consumer warpgroup


def build(cubin: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.oracle.toolchain import toolchain
    tools = toolchain("nvcc")
    if tools.missing:
        raise SystemExit(f"cannot build CUTLASS's kernel: {tools.missing}")
    includes = [f"-I{i}" for i in tools.includes]
    subprocess.run([tools.compiler, "-cubin", "-arch=sm_90a", "-std=c++17",
                    "--expt-relaxed-constexpr", "-DNDEBUG", *includes, str(SOURCE),
                    "-o", str(cubin)], check=True)


def figures(cubin: bytes) -> dict[str, object]:
    (code,) = sm.functions(cubin).values()
    loop = sm.loop_holding(code, sm.WGMMA)
    mix = Counter(i.base for i in loop.body(code))
    return {"consumer": sm.per_iteration(code, sm.WGMMA, QGMMA_PER_K_STEP),
            "wait_to_mma": sm.wait_to_mma(code), "mix": dict(mix.most_common())}


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(argv[0]) if argv else Path(tmp) / "cutlass_fp8_blockwise.cubin"
        build(cubin)
        f = figures(cubin.read_bytes())
    print(f"CUTLASS block-scaled FP8 128x128x128: {f['consumer']:g} instructions per k-step, "
          f"{f['wait_to_mma']} from the wgmma wait to the next QGMMA")
    print("loop:", ", ".join(f"{n} {op}" for op, n in f["mix"].items()))


if __name__ == "__main__":
    main(sys.argv[1:])
