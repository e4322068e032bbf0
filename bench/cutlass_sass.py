"""CUTLASS's sm90 GEMM kernels beside the samples, built from the nvidia-cutlass
wheel's headers with nvcc -cubin for sm_90a (30-40 s each, no GPU) and counted
as bench/sass.py counts the samples': instructions of the innermost loop holding
the wgmma per k-step, the wait to the next wgmma, and the loop's instruction mix.

--kernel fp8_blockwise (the default): bench/kernels/cutlass_fp8_blockwise.cu,
128x128x128 tiles, cooperative, 1x128 / 128x128 scales (4 QGMMA k32 per k-step
of 128).
--kernel streamk: bench/kernels/cutlass_streamk.cu, bf16 128x256x64 tiles,
cooperative, f32 D, the stream-K tile scheduler (4 HGMMA k16 per k-step of 64),
whose split-K and stream-K launches add the partial tiles in a global workspace;
that fix-up is counted by kind (`sass_metrics.reduction_counts`: the workspace's
stores, loads and float atomics per thread, the per-tile lock's integer atomics,
strong loads and GPU fences) and its flag-polling loops.
Each SAMPLE.hk given (samples/gemm_splitk.hk, samples/gemm_streamk.hk) is counted
the same way: bench/sass.py's main-loop figures and the reductions by kind.

Usage: python bench/cutlass_sass.py [--kernel fp8_blockwise|streamk] [--cubin OUT.cubin]
                                    [SAMPLE.hk ...]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc.backend import sass_metrics as sm  # noqa: E402


@dataclass(frozen=True)
class Anchor:
    source: str  # under bench/kernels
    title: str
    mma_per_k_step: int  # wgmma instructions per k-step of one consumer warpgroup


ANCHORS = {
    "fp8_blockwise": Anchor("cutlass_fp8_blockwise.cu", "CUTLASS block-scaled FP8 128x128x128",
                            4),  # m64n128k32 x 4 for BK = 128
    "streamk": Anchor("cutlass_streamk.cu", "CUTLASS stream-K / split-K bf16 128x256x64", 4),
}


def build(anchor: Anchor, cubin: Path) -> None:
    from tests.oracle.toolchain import toolchain
    tools = toolchain("nvcc")
    if tools.missing:
        raise SystemExit(f"cannot build CUTLASS's kernel: {tools.missing}")
    includes = [f"-I{i}" for i in tools.includes]
    subprocess.run([tools.compiler, "-cubin", "-arch=sm_90a", "-std=c++17",
                    "--expt-relaxed-constexpr", "-DNDEBUG", *includes,
                    str(ROOT / "bench" / "kernels" / anchor.source), "-o", str(cubin)], check=True)


def figures(code: list[sm.Instruction], mma_per_k_step: int) -> dict[str, object]:
    loop = sm.loop_holding(code, sm.WGMMA)
    mix = Counter(i.base for i in loop.body(code))
    return {"consumer": sm.per_iteration(code, sm.WGMMA, mma_per_k_step),
            "wait_to_mma": sm.wait_to_mma(code), "mix": dict(mix.most_common())}


def describe_reductions(code: list[sm.Instruction]) -> list[str]:
    """The reduction instructions by kind and opcode, and the flag-polling loops."""
    lines = [f"  {kind}: " + ", ".join(f"{n} {op}" for op, n in sorted(ops.items()))
             for kind, ops in sm.reduction_counts(code).items()]
    waits = [len(lp) for lp in sm.flag_waits(code)]
    if waits:
        lines.append(f"  flag-polling loops: {len(waits)}, of "
                     f"{', '.join(map(str, waits))} instructions")
    return lines or ["  no cross-block reduction"]


def sample_lines(path: Path) -> list[str]:
    from bench import sass
    from hopperc import driver
    built = driver.build(driver.read_source(path))
    (code,) = sm.functions(built.result.cubin).values()
    main_loop = sass.figures(path)
    res = built.result.resources
    return [f"{path.stem}: consumer {main_loop['consumer']} instructions per k-step, producer "
            f"{main_loop['producer']}, {main_loop['wait_to_mma']} from the wgmma wait to the next "
            f"HGMMA; epilogue stores {main_loop['stores']}; registers {res.registers}, "
            f"spills {res.spill_stores}/{res.spill_loads}",
            *describe_reductions(code)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="*", type=Path)
    parser.add_argument("--kernel", choices=sorted(ANCHORS), default="fp8_blockwise")
    parser.add_argument("--cubin", type=Path, help="keep CUTLASS's cubin here")
    options = parser.parse_args()
    anchor = ANCHORS[options.kernel]
    for path in options.samples:
        if path.is_file():
            print("\n".join(sample_lines(path)))
        else:
            print(f"{path} is absent")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = options.cubin or Path(tmp) / Path(anchor.source).with_suffix(".cubin").name
        build(anchor, cubin)
        (code,) = sm.functions(cubin.read_bytes()).values()
    f = figures(code, anchor.mma_per_k_step)
    print(f"{anchor.title}: {f['consumer']:g} instructions per k-step, "
          f"{f['wait_to_mma']} from the wgmma wait to the next wgmma")
    print("loop:", ", ".join(f"{n} {op}" for op, n in f["mix"].items()))
    if options.kernel == "streamk":
        print("\n".join(describe_reductions(code)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
