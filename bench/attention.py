"""samples/attention_fwd.hk against PyTorch's scaled_dot_product_attention on one
head of dimension 128 (bf16, [L, 128]), causal or not, in one process.

For each sequence length L: median GPU time of each over 50 runs after 10
warm-up runs, L2 flushed before every timed run (hopperc.runtime.timing),
TFLOP/s (4 L^2 128 flops, half of them when causal) and the ratio
hopperc / PyTorch speed; the largest difference between the two outputs is
printed too, so a wrong kernel cannot pass for a fast one. The sample computes
one head: a grid of L / 128 blocks, so lengths under 132 * 128 leave SMs idle
(PyTorch gets the same single head).
Usage: python bench/attention.py [--causal] [--markdown] [--runs N]
(needs a Hopper GPU and PyTorch)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hopperc import api  # noqa: E402
from hopperc.diagnostics import ToolchainError  # noqa: E402
from hopperc.driver import read_source  # noqa: E402
from hopperc.harness.torch_bridge import require_torch  # noqa: E402
from hopperc.runtime import Kernel, device, driver_version  # noqa: E402
from hopperc.runtime.kernel import stream_handle  # noqa: E402
from hopperc.runtime.timing import Timer  # noqa: E402
from bench.speed_table import Measured, geometric_mean_speed, print_markdown  # noqa: E402

LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
HEAD = 128


def run(length: int, causal: bool, runs: int) -> tuple[float, float, float]:
    """(hopperc ms, PyTorch ms, largest |difference| of the outputs) at length L."""
    torch = require_torch()
    compiled = api.build(read_source(ROOT / "samples" / "attention_fwd.hk"),
                         {"CAUSAL": int(causal)})
    kernel = Kernel(compiled.cubin, compiled.metadata, 0)
    gen = torch.Generator(device="cuda:0").manual_seed(0)
    q, k, v = (torch.randn((length, HEAD), generator=gen, device="cuda:0").to(torch.bfloat16)
               for _ in range(3))
    o = torch.empty_like(q)
    stream = torch.cuda.current_stream(0)
    launch = kernel.prepare(Q=q, K=k, V=v, O=o, stream=stream)
    heads = [t[None, None] for t in (q, k, v)]

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(*heads, is_causal=causal)
    with Timer(stream_handle(stream)) as timer:
        ours = timer.time(launch, 10, runs)
        theirs = timer.time(sdpa, 10, runs)
    launch()
    error = (o.float() - sdpa()[0, 0].float()).abs().max().item()
    torch.cuda.synchronize(0)
    return ours.median_ms, theirs.median_ms, error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", action="store_true", help="the -D CAUSAL=1 variant")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    rows = []
    try:
        gpu = device(0)
        for length in LENGTHS:
            ours, theirs, error = run(length, options.causal, options.runs)
            flops = 4 * length * length * HEAD / (2 if options.causal else 1)
            rows.append(Measured((length,), ours, theirs, flops, (f"{error:.1e}",)))
            if not options.markdown:
                print(f"L={length:6}  {rows[-1].timings('sdpa')}  max |diff| {error:.2e}",
                      flush=True)
    except ToolchainError as exc:
        print(f"bench/attention.py: {exc}", file=sys.stderr)
        return 2
    if options.markdown:
        print_markdown(f"attention_fwd{' causal' if options.causal else ''}", gpu.name,
                       driver_version(), ["L"], "sdpa", ["max diff"], rows)
    print(f"geometric mean of hopperc / sdpa speed: {geometric_mean_speed(rows):.3f} over "
          f"{len(rows)} lengths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
