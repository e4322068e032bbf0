"""samples/attention_varlen.hk on FlashAttention 3's published varlen shapes
(16k tokens in all, head dimension 128, 16 query heads: a 2048-wide model, GQA
with 8 kv heads) against what a user runs instead: FlashAttention's
`flash_attn_varlen_func` when it is installed, else PyTorch's
scaled_dot_product_attention once per sequence (with the kv heads repeated), in
one process, causal or not.

For each mean sequence length (512 .. 16k), sequence lengths are drawn around it
(half to one and a half times, seeded) until they hold 16384 tokens. Median GPU
time of each over N runs after 10 warm-up runs, L2 flushed before every timed run
(hopperc.runtime.timing), TFLOP/s (4 L^2 128 flops per sequence and query head,
half of them when causal) and the ratio hopperc / baseline speed; the largest
difference between the two O's, and between the sample's LSE and the log-sum-exp
PyTorch computes for the first sequence, are printed too, so a wrong kernel
cannot pass for a fast one.
Usage: python bench/attention_varlen.py [--causal] [--markdown] [--runs N]
(needs a Hopper GPU and PyTorch; without one it says so and exits 2)
"""
from __future__ import annotations

import argparse
import math
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

TOKENS = 16384
MEANS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD, HEADS, GROUP = 128, 16, 2  # GROUP: the sample's G, query heads per kv head


def lengths(mean: int, seed: int) -> list[int]:
    """Sequence lengths drawn in [mean / 2, 3 mean / 2] until TOKENS are held."""
    import random
    draw, out = random.Random(seed), []
    while sum(out) < TOKENS:
        out.append(min(draw.randint(mean // 2, 3 * mean // 2), TOKENS - sum(out)))
    return out


def baseline(torch, causal: bool, cu: list[int], seqlens: list[int]):
    """(name, f(q, k, v) -> O [T, HEADS, HEAD]) of what a user runs instead."""
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        def per_sequence(q, k, v):
            out = torch.empty_like(q)
            for s, e in zip(cu[:-1], cu[1:]):
                heads = [x[s:e].transpose(0, 1)[None] for x in (q, k, v)]
                heads[1:] = [x.repeat_interleave(GROUP, dim=1) for x in heads[1:]]
                out[s:e] = torch.nn.functional.scaled_dot_product_attention(
                    *heads, is_causal=causal)[0].transpose(0, 1)
            return out
        return "sdpa per sequence", per_sequence
    offsets = torch.tensor(cu, dtype=torch.int32, device="cuda:0")

    def flash(q, k, v):
        return flash_attn_varlen_func(q, k, v, offsets, offsets, max(seqlens), max(seqlens),
                                      causal=causal)
    return "flash_attn varlen", flash


def first_sequence_lse(torch, q, k, length: int, causal: bool):
    """[HEADS, length]: the log-sum-exp of sequence 0's scaled scores, a head at a time."""
    out = []
    for h in range(HEADS):
        scores = q[:length, h].float() @ k[:length, h // GROUP].float().T / HEAD ** 0.5
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1),
                                        -math.inf)
        out.append(torch.logsumexp(scores, dim=1))
    return torch.stack(out)


def run(mean: int, causal: bool, runs: int) -> tuple[str, float, float, float, float, float]:
    """(baseline's name, hopperc ms, baseline ms, flops, largest |O difference|,
    largest |LSE difference| on the first sequence)."""
    torch = require_torch()
    compiled = hopperc.build(ROOT / "samples" / "attention_varlen.hk",
                           {"CAUSAL": int(causal)})
    kernel = Kernel(compiled.cubin, compiled.metadata, 0)
    seqlens = lengths(mean, mean)
    cu = [0]
    for n in seqlens:
        cu.append(cu[-1] + n)
    gen = torch.Generator(device="cuda:0").manual_seed(0)
    q = torch.randn((TOKENS, HEADS, HEAD), generator=gen, device="cuda:0").to(torch.bfloat16)
    k, v = (torch.randn((TOKENS, HEADS // GROUP, HEAD), generator=gen,
                        device="cuda:0").to(torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    lse = torch.empty((HEADS, TOKENS), dtype=torch.float32, device="cuda:0")
    offsets = torch.tensor(cu, dtype=torch.int32, device="cuda:0")
    stream = torch.cuda.current_stream(0)
    launch = kernel.prepare(Q=q.view(TOKENS, -1), K=k.view(TOKENS, -1), V=v.view(TOKENS, -1),
                            O=o.view(TOKENS, -1), CU=offsets, LSE=lse, stream=stream)
    name, theirs_fn = baseline(torch, causal, cu, seqlens)
    with Timer(stream_handle(stream)) as timer:
        ours = timer.time(launch, 10, runs)
        theirs = timer.time(lambda: theirs_fn(q, k, v), 10, runs)
    launch()
    error = (o.float() - theirs_fn(q, k, v).float()).abs().max().item()
    want = first_sequence_lse(torch, q, k, seqlens[0], causal)
    lse_error = (lse[:, :seqlens[0]] - want).abs().max().item()
    torch.cuda.synchronize(0)
    flops = sum(4 * n * n * HEAD * HEADS for n in seqlens) / (2 if causal else 1)
    return name, ours.median_ms, theirs.median_ms, flops, error, lse_error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", action="store_true", help="the -D CAUSAL=1 variant")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    rows = []
    try:
        gpu = device(0)
        for mean in MEANS:
            name, ours, theirs, flops, error, lse_error = run(mean, options.causal, options.runs)
            rows.append(Measured((mean,), ours, theirs, flops,
                                 (f"{error:.1e}", f"{lse_error:.1e}")))
            if not options.markdown:
                print(f"mean L={mean:6}  {rows[-1].timings(name)}  max |O diff| {error:.2e}  "
                      f"max |LSE diff| {lse_error:.2e}", flush=True)
    except ToolchainError as exc:
        print(f"bench/attention_varlen.py: {exc}", file=sys.stderr)
        return 2
    if options.markdown:
        print_markdown(f"attention_varlen{' causal' if options.causal else ''} ({TOKENS} tokens, "
                       f"{HEADS} heads, {HEADS // GROUP} kv heads) against {name}", gpu.name,
                       driver_version(), ["mean L"], "baseline", ["O diff", "LSE diff"], rows)
    print(f"geometric mean of hopperc / baseline speed: {geometric_mean_speed(rows):.3f} over "
          f"{len(rows)} mean lengths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
