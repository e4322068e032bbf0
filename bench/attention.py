"""samples/attention_fwd.hk against FlashAttention-3 (`flash_attn_interface`, when it
is installed) and PyTorch's scaled_dot_product_attention, bf16 [B, H, L, D], causal
or not, in one process.

FlashAttention-3's benchmark shapes: B * L = 16k tokens and H * D = 2048 (16 heads
of 128), L from 1k to 16k. For each: median GPU time of each kernel over N runs after
10 warm-up runs, L2 flushed before every timed run (hopperc.runtime.timing), TFLOP/s
(4 B H L^2 D flops, half of them when causal), the ratio of hopperc's speed to each
baseline's, and the largest difference between hopperc's output and SDPA's, so a
wrong kernel cannot pass for a fast one.
Usage: python bench/attention.py [--causal] [--head-dim D] [--markdown] [--runs N]
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

LENGTHS = (1024, 2048, 4096, 8192, 16384)
TOKENS = 16384
WIDTH = 2048  # H * D


def baselines(torch, causal: bool) -> dict:
    """name -> f(q, k, v) on [B, H, L, D] tensors: FA3 where installed, and SDPA."""
    found = {}
    try:
        from flash_attn_interface import flash_attn_func
    except ImportError:
        pass
    else:
        def fa3(q, k, v):  # FA3 takes [B, L, H, D]
            out = flash_attn_func(*(t.transpose(1, 2) for t in (q, k, v)), causal=causal)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)
        found["fa3"] = fa3
    found["sdpa"] = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal)
    return found


def run(length: int, causal: bool, runs: int, head_dim: int = 128,
        batch: int | None = None, heads: int | None = None) -> tuple[float, dict, float]:
    """(hopperc ms, {baseline: ms}, largest |hopperc - SDPA|) at length L."""
    torch = require_torch()
    compiled = hopperc.build(ROOT / "samples" / "attention_fwd.hk",
                           {"CAUSAL": int(causal), "HEAD_DIM": head_dim})
    kernel = Kernel(compiled.cubin, compiled.metadata, 0)
    batch = batch or max(1, TOKENS // length)
    heads = heads or WIDTH // head_dim
    gen = torch.Generator(device="cuda:0").manual_seed(0)
    q, k, v = (torch.randn((batch, heads, length, head_dim), generator=gen,
                           device="cuda:0").to(torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty((batch, heads, length), device="cuda:0", dtype=torch.float32)
    stream = torch.cuda.current_stream(0)
    launch = kernel.prepare(Q=q, K=k, V=v, O=o, LSE=lse, stream=stream)
    theirs = {}
    with Timer(stream_handle(stream)) as timer:
        ours = timer.time(launch, 10, runs).median_ms
        for name, f in baselines(torch, causal).items():
            theirs[name] = timer.time(lambda: f(q, k, v), 10, runs).median_ms
    launch()
    want = baselines(torch, causal)["sdpa"](q, k, v)
    error = (o.float() - want.float()).abs().max().item()
    torch.cuda.synchronize(0)
    return ours, theirs, error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", action="store_true", help="the -D CAUSAL=1 variant")
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128, 256))
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    rows: dict[str, list[Measured]] = {}
    try:
        gpu = device(0)
        for length in LENGTHS:
            ours, theirs, error = run(length, options.causal, options.runs, options.head_dim)
            batch, heads = max(1, TOKENS // length), WIDTH // options.head_dim
            flops = 4 * batch * heads * length * length * options.head_dim
            flops /= 2 if options.causal else 1
            for name, ms in theirs.items():
                row = Measured((batch, heads, length), ours, ms, flops, (f"{error:.1e}",))
                rows.setdefault(name, []).append(row)
                if not options.markdown:
                    print(f"L={length:6}  {row.timings(name)}  max |diff| {error:.2e}",
                          flush=True)
    except ToolchainError as exc:
        print(f"bench/attention.py: {exc}", file=sys.stderr)
        return 2
    title = (f"attention_fwd D={options.head_dim}{' causal' if options.causal else ''}")
    for name, measured in rows.items():
        if options.markdown:
            print_markdown(title, gpu.name, driver_version(), ["B", "H", "L"], name,
                           ["max diff vs sdpa"], measured)
        print(f"geometric mean of hopperc / {name} speed: "
              f"{geometric_mean_speed(measured):.3f} over {len(measured)} lengths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
