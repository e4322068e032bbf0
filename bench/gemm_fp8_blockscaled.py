"""samples/gemm_fp8_blockscaled.hk on DeepGEMM's published shapes (M x (N, K) of
DeepSeek-V3's projections) against what a PyTorch user runs instead: `torch._scaled_mm`
with one scale per tensor (e4m3 A and B, bf16 out; it has no 128 x 128 block
scales, so it does less work and is less exact), in one process.

For each shape: median GPU time of each over 50 runs after 10 warm-up runs, L2
flushed before every timed run (hopperc.runtime.timing), TFLOP/s (2 M N K) and the
ratio hopperc / _scaled_mm speed; the largest difference between the sample's
output and the block-scaled product computed by PyTorch in f32 (dequantize, then
matmul) is printed too, relative to the largest output, so a wrong kernel cannot
pass for a fast one.
Usage: python bench/gemm_fp8_blockscaled.py [--markdown] [--runs N]
(needs a Hopper GPU and PyTorch; without one it says so and exits 2)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import hopperc  # noqa: E402
from hopperc.diagnostics import ToolchainError  # noqa: E402
from hopperc.harness.torch_bridge import require_torch  # noqa: E402
from hopperc.runtime import Kernel, device, driver_version  # noqa: E402
from hopperc.runtime.kernel import stream_handle  # noqa: E402
from hopperc.runtime.timing import Timer  # noqa: E402
from bench.speed_table import Measured, geometric_mean_speed, print_markdown  # noqa: E402

MS = (128, 4096)
NKS = ((2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168),
       (7168, 2048))
BLOCK = 128  # the scale block: 1 x 128 of A, 128 x 128 of B


def quantize(torch, x, rows: int):
    """e4m3 values with an f32 scale per `rows` x 128 block (row-wise for rows = 1;
    a last block of fewer rows where `rows` does not divide them), each block's
    largest magnitude mapped to e4m3's 448."""
    m, k = x.shape
    padded = torch.nn.functional.pad(x, (0, 0, 0, -m % rows))
    blocks = padded.reshape(-1, rows, k // BLOCK, BLOCK).abs().amax(dim=(1, 3))
    scale = blocks.clamp(min=1e-4) / 448
    expanded = scale.repeat_interleave(rows, 0)[:m].repeat_interleave(BLOCK, 1)
    return (x / expanded).to(torch.float8_e4m3fn), scale


def run(m: int, n: int, k: int, runs: int) -> tuple[float, float, float]:
    """(hopperc ms, _scaled_mm ms, largest relative |difference|) at M x N x K."""
    torch = require_torch()
    compiled = hopperc.build(ROOT / "samples" / "gemm_fp8_blockscaled.hk")
    kernel = Kernel(compiled.cubin, compiled.metadata, 0)
    gen = torch.Generator(device="cuda:0").manual_seed(0)
    a, sa = quantize(torch, torch.randn((m, k), generator=gen, device="cuda:0"), 1)
    b, sb = quantize(torch, torch.randn((n, k), generator=gen, device="cuda:0"), BLOCK)
    sa_m_major = sa.T.contiguous()  # [K / 128, M]: a k-block's row scales are one TMA box
    c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda:0")
    stream = torch.cuda.current_stream(0)
    launch = kernel.prepare(A=a, B=b, SA=sa_m_major, SB=sb, C=c, stream=stream)
    one = torch.ones((), device="cuda:0")

    def scaled_mm():
        return torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    with Timer(stream_handle(stream)) as timer:
        ours = timer.time(launch, 10, runs)
        theirs = timer.time(scaled_mm, 10, runs)
    launch()
    want = ((a.float() * sa.repeat_interleave(BLOCK, 1))
            @ (b.float() * sb.repeat_interleave(BLOCK, 0)[:n].repeat_interleave(BLOCK, 1)).T)
    error = ((c.float() - want).abs().max() / want.abs().max()).item()
    torch.cuda.synchronize(0)
    return ours.median_ms, theirs.median_ms, error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    rows = []
    try:
        gpu = device(0)
        for m in MS:
            for n, k in NKS:
                ours, theirs, error = run(m, n, k, options.runs)
                rows.append(Measured((m, n, k), ours, theirs, 2 * m * n * k, (f"{error:.1e}",)))
                if not options.markdown:
                    print(f"M={m:5} N={n:5} K={k:5}  {rows[-1].timings('_scaled_mm')}  "
                          f"max rel |diff| {error:.1e}", flush=True)
    except ToolchainError as exc:
        print(f"bench/gemm_fp8_blockscaled.py: {exc}", file=sys.stderr)
        return 2
    if options.markdown:
        print_markdown("gemm_fp8_blockscaled", gpu.name, driver_version(), ["M", "N", "K"],
                       "_scaled_mm", ["max rel diff"], rows)
    print(f"geometric mean of hopperc / _scaled_mm speed: {geometric_mean_speed(rows):.3f} over "
          f"{len(rows)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
