"""`hopperc bench`: GPU time of a kernel (CUDA events, warm-up, median, cold
L2), and for kernels made of matrix products, TFLOP/s and the time of the
same products with torch.matmul (cuBLAS), measured in the same process.

The 256 MB L2 flush before each timed run also hides the host's launch cost:
while the GPU clears it, the host has recorded the start event and enqueued
the launch, so the events time the kernel, not Python."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc import driver
from hopperc.buildsys.artifact import build_source
from hopperc.diagnostics import SourceFile
from hopperc.harness.matmuls import Matmul, matmuls
from hopperc.harness.torch_bridge import require_torch, torch_dtype
from hopperc.runtime import Kernel
from hopperc.runtime.kernel import stream_handle
from hopperc.runtime.timing import Timer, Timing


@dataclass(frozen=True)
class BenchResult:
    kernel: str
    dims: dict[str, int]
    timing: Timing
    products: tuple[Matmul, ...]
    flops: int
    baseline: Timing | None  # torch.matmul of the same products

    @property
    def tflops(self) -> float:
        return self.flops / (self.timing.median_ms * 1e-3) / 1e12

    @property
    def baseline_tflops(self) -> float:
        return self.flops / (self.baseline.median_ms * 1e-3) / 1e12

    @property
    def ratio(self) -> float:
        """The kernel's speed as a fraction of cuBLAS's (1.0: as fast)."""
        return self.baseline.median_ms / self.timing.median_ms


def random_inputs(torch, kernel, dims: dict[str, int], seed: int, device: int) -> dict:
    """Uniform [-1, 1) inputs in each tensor's dtype; stored tensors start at 0."""
    gen = torch.Generator(device=f"cuda:{device}").manual_seed(seed)
    tensors = {}
    for t in kernel.tensors:
        shape = tuple(dims[d] if isinstance(d, str) else d for d in t.dims)
        values = torch.rand(shape, generator=gen, device=f"cuda:{device}") * 2 - 1
        tensors[t.name] = values.to(torch_dtype(torch, t.dtype))
    return tensors


def bench(source: SourceFile, defines: dict[str, int] | None = None,
          shapes: dict[str, int] | None = None, warmup: int = 10, runs: int = 50,
          device: int = 0, seed: int = 0) -> BenchResult:
    compiled = build_source(source, dict(defines or {}))
    lowered = driver.lower(driver.check(source, defines))
    dims = driver.problem_dims(lowered, shapes, source.name)
    kernel = Kernel(compiled.cubin, compiled.metadata, device)
    torch = require_torch()
    tensors = random_inputs(torch, lowered, dims, seed, device)
    scalars = {s.name: 1.0 if s.dtype.is_float else 1 for s in lowered.scalars}
    stream = torch.cuda.current_stream(device)
    launch = kernel.prepare(**tensors, **scalars, stream=stream)
    products = matmuls(driver.check(source, defines)) or ()
    shapes_of = {name: tuple(t.shape) for name, t in tensors.items()}
    with Timer(stream_handle(stream)) as timer:
        timing = timer.time(launch, warmup, runs)
        baseline = None
        if products:
            # A is [M, K] (stored [K, M] when transposed), B is [K, N] (stored [N, K]).
            operands = [(tensors[p.a].T if p.a_transposed else tensors[p.a],
                         tensors[p.b].T if p.b_transposed else tensors[p.b]) for p in products]
            outs = [torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
                    for a, b in operands]

            def cublas() -> None:
                for (a, b), out in zip(operands, outs):
                    torch.matmul(a, b, out=out)
            # wgmma reads f32 operands as tf32: time cuBLAS's tf32 path, not its f32 one.
            tf32 = any(a.dtype == torch.float32 for a, _ in operands)
            allowed = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = allowed or tf32
            try:
                baseline = timer.time(cublas, warmup, runs)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.cuda.synchronize(device)
    return BenchResult(lowered.name, dims, timing, tuple(products),
                       sum(p.flops(shapes_of) for p in products), baseline)

