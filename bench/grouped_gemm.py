"""samples/grouped_gemm.hk (or, with --masked, grouped_gemm_masked.hk) against
what a PyTorch user runs for a mixture-of-experts layer instead: torch._grouped_mm
where this PyTorch has it and takes the shape, else a loop of one matmul per
expert (cuBLAS), in one process.

Shapes: DeepSeek-V3's expert up-projection (N = 4096, K = 7168, bf16) over E =
8, 32, 64 and 256 experts sharing T routed tokens, split raggedly (a seeded
draw in which some experts get many tokens, some few, some none). For each:
median GPU time of each over 50 runs after 10 warm-up runs, L2 flushed before
every timed run (hopperc.runtime.timing), TFLOP/s (2 T N K) and the ratio
hopperc / PyTorch speed; the largest difference between the two outputs is
printed too, so a wrong kernel cannot pass for a fast one. The masked layout
pads each expert to the largest count (MAX_M, a multiple of 8); only the
experts' rows count as work.
Usage: python bench/grouped_gemm.py [--masked] [--markdown] [--runs N]
(needs a Hopper GPU and PyTorch)
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

N, K = 4096, 7168
SHAPES = ((8, 8192), (32, 16384), (64, 16384), (256, 32768))  # (experts, routed tokens)


def token_counts(torch, experts: int, tokens: int) -> list[int]:
    """A seeded ragged split of `tokens` over `experts`: skewed weights, a few
    experts left empty."""
    gen = torch.Generator().manual_seed(experts)
    weights = torch.rand(experts, generator=gen) ** 3
    weights[torch.randperm(experts, generator=gen)[: max(experts // 8, 1)]] = 0
    counts = (weights / weights.sum() * tokens).floor().long()
    counts[int(weights.argmax())] += tokens - int(counts.sum())
    return counts.tolist()


def grouped_baseline(torch, a, b, offsets):
    """torch._grouped_mm into a fresh C, if this PyTorch has it and takes the
    shape; None otherwise."""
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is None:
        return None
    ends = offsets[1:].to(torch.int32)
    try:
        grouped(a, b.transpose(-2, -1), offs=ends, out_dtype=torch.bfloat16)
    except (RuntimeError, TypeError, ValueError):
        return None
    return lambda: grouped(a, b.transpose(-2, -1), offs=ends, out_dtype=torch.bfloat16)


def run(experts: int, tokens: int, masked: bool, runs: int) -> tuple[float, float, float, str]:
    """(hopperc ms, PyTorch ms, largest |difference| of the outputs, what PyTorch ran)."""
    torch = require_torch()
    counts = token_counts(torch, experts, tokens)
    gen = torch.Generator(device="cuda:0").manual_seed(0)
    b = torch.randn((experts, N, K), generator=gen, device="cuda:0", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream(0)
    if masked:
        compiled = hopperc.build(ROOT / "samples" / "grouped_gemm_masked.hk")
        max_m = -(-max(counts) // 8) * 8
        a = torch.randn((experts, max_m, K), generator=gen, device="cuda:0",
                        dtype=torch.bfloat16)
        c = torch.zeros((experts, max_m, N), device="cuda:0", dtype=torch.bfloat16)
        cnt = torch.tensor(counts, dtype=torch.int32, device="cuda:0")
        launch = Kernel(compiled.cubin, compiled.metadata, 0).prepare(
            A=a, B=b, CNT=cnt, C=c, stream=stream)
        out = torch.empty_like(c)

        def theirs():
            for g, count in enumerate(counts):
                torch.matmul(a[g, :count], b[g].T, out=out[g, :count])
        what = "a matmul per expert"
        valid = torch.arange(max_m, device="cuda:0")[None, :] < cnt[:, None]
    else:
        compiled = hopperc.build(ROOT / "samples" / "grouped_gemm.hk")
        offsets = torch.tensor([0, *counts], device="cuda:0").cumsum(0).to(torch.int32)
        a = torch.randn((tokens, K), generator=gen, device="cuda:0", dtype=torch.bfloat16)
        c = torch.zeros((tokens, N), device="cuda:0", dtype=torch.bfloat16)
        launch = Kernel(compiled.cubin, compiled.metadata, 0).prepare(
            A=a, B=b, OFFS=offsets, C=c, stream=stream)
        bounds = offsets.tolist()
        out = torch.empty_like(c)
        theirs = grouped_baseline(torch, a, b, offsets)
        what = "torch._grouped_mm"
        if theirs is None:
            def theirs():
                for g in range(experts):
                    torch.matmul(a[bounds[g]:bounds[g + 1]], b[g].T,
                                 out=out[bounds[g]:bounds[g + 1]])
            what = "a matmul per expert"
        valid = torch.ones(tokens, dtype=torch.bool, device="cuda:0")
    with Timer(stream_handle(stream)) as timer:
        ours = timer.time(launch, 10, runs)
        baseline = timer.time(theirs, 10, runs)
    launch()
    got = theirs()
    want = out if got is None else got  # a loop writes `out`, _grouped_mm returns C
    error = (c.float() - want.float()).abs()[valid].max().item() if valid.any() else 0.0
    torch.cuda.synchronize(0)
    return ours.median_ms, baseline.median_ms, error, what


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--masked", action="store_true", help="the masked layout's sample")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    rows = []
    try:
        gpu = device(0)
        for experts, tokens in SHAPES:
            ours, theirs, error, what = run(experts, tokens, options.masked, options.runs)
            rows.append(Measured((experts, tokens), ours, theirs, 2 * tokens * N * K,
                                 (f"{error:.1e}", what)))
            if not options.markdown:
                print(f"E={experts:4} T={tokens:6}  {rows[-1].timings(what)}  "
                      f"max |diff| {error:.2e}", flush=True)
    except ToolchainError as exc:
        print(f"bench/grouped_gemm.py: {exc}", file=sys.stderr)
        return 2
    if options.markdown:
        name = "grouped_gemm_masked" if options.masked else "grouped_gemm"
        print_markdown(f"{name} (N = {N}, K = {K})", gpu.name, driver_version(),
                       ["E", "tokens"], "PyTorch", ["max diff", "PyTorch ran"], rows)
    print(f"geometric mean of hopperc / PyTorch speed: {geometric_mean_speed(rows):.3f} over "
          f"{len(rows)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
