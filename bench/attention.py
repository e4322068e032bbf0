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
import datetime
import math
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
            rows.append((length, ours * 1e3, flops / ours / 1e9, theirs * 1e3,
                         flops / theirs / 1e9, theirs / ours, error))
            if not options.markdown:
                print(f"L={length:6}  hopperc {rows[-1][1]:9.1f} us {rows[-1][2]:6.1f} TFLOP/s  "
                      f"sdpa {rows[-1][3]:9.1f} us {rows[-1][4]:6.1f} TFLOP/s  "
                      f"ratio {rows[-1][5]:.3f}  max |diff| {error:.2e}", flush=True)
    except ToolchainError as exc:
        print(f"bench/attention.py: {exc}", file=sys.stderr)
        return 2
    geomean = math.exp(sum(math.log(row[5]) for row in rows) / len(rows))
    if options.markdown:
        import torch

        print(f"attention_fwd{' causal' if options.causal else ''} on {gpu.name}, driver "
              f"{driver_version()}, torch {torch.__version__}, {datetime.date.today()}\n")
        print("| L | hopperc us | TFLOP/s | sdpa us | TFLOP/s | ratio | max diff |")
        print("|---|---|---|---|---|---|---|")
        for length, t, f, bt, bf, ratio, error in rows:
            print(f"| {length} | {t:.1f} | {f:.1f} | {bt:.1f} | {bf:.1f} | {ratio:.3f} | "
                  f"{error:.1e} |")
    print(f"geometric mean of hopperc / sdpa speed: {geomean:.3f} over {len(rows)} lengths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
