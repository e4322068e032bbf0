"""A GEMM sample (gemm_bf16 unless --sample names another with A, B and C, such
as gemm_persistent) against cuBLAS (torch.matmul) on LLM shapes, in one process.

For each M x (N, K): median GPU time of each over 50 runs after 10 warm-up
runs, L2 flushed before every timed run (hopperc.harness.bench), TFLOP/s and
the ratio hopperc / cuBLAS speed; then the geometric mean of the ratios.
Usage: python bench/gemm.py [--sample NAME] [--markdown] [--runs N]
(needs a Hopper GPU and PyTorch)
"""
from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc.diagnostics import ToolchainError  # noqa: E402
from hopperc.driver import read_source  # noqa: E402
from hopperc.harness.bench import bench  # noqa: E402
from hopperc.runtime import device, driver_version  # noqa: E402
from hopperc.runtime.errors import ArgumentError  # noqa: E402

MS = (128, 1024, 4096, 8192)
NKS = ((4096, 4096), (11008, 4096), (4096, 11008), (8192, 8192))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--sample", default="gemm_bf16", help="a sample computing C = A @ B^T")
    options = parser.parse_args()
    source = read_source(ROOT / "samples" / f"{options.sample}.hk")
    try:
        gpu = device(0)
        rows = []
        for m in MS:
            for n, k in NKS:
                try:
                    r = bench(source, shapes={"M": m, "N": n, "K": k}, runs=options.runs)
                except ArgumentError as exc:  # e.g. a grid that is not whole clusters
                    print(f"M={m:5} N={n:5} K={k:5}  skipped: {exc}", flush=True)
                    continue
                rows.append((m, n, k, r.timing.median_ms * 1e3, r.tflops,
                             r.baseline.median_ms * 1e3, r.baseline_tflops, r.ratio))
                if not options.markdown:
                    print(f"M={m:5} N={n:5} K={k:5}  hopperc {rows[-1][3]:8.1f} us "
                          f"{r.tflops:6.1f} TFLOP/s  cuBLAS {rows[-1][5]:8.1f} us "
                          f"{r.baseline_tflops:6.1f} TFLOP/s  ratio {r.ratio:.3f}", flush=True)
    except ToolchainError as exc:
        print(f"bench/gemm.py: {exc}", file=sys.stderr)
        return 2
    geomean = math.exp(sum(math.log(row[-1]) for row in rows) / len(rows))
    if options.markdown:
        import torch

        print(f"{options.sample} on {gpu.name}, driver {driver_version()}, torch "
              f"{torch.__version__}, {datetime.date.today()}\n")
        print("| M | N | K | hopperc us | TFLOP/s | cuBLAS us | TFLOP/s | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for m, n, k, t, f, bt, bf, ratio in rows:
            print(f"| {m} | {n} | {k} | {t:.1f} | {f:.1f} | {bt:.1f} | {bf:.1f} | {ratio:.3f} |")
    print(f"geometric mean of hopperc / cuBLAS speed: {geomean:.3f} over {len(rows)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
