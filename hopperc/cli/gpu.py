"""`hopperc run` and `hopperc bench`: the kernel on a GPU."""
from __future__ import annotations

import sys

import click

from hopperc.cli.common import (EXIT_USER, Command, Failure, define_option, diag_option, guarded,
                                parse_defines, parse_shape)
from hopperc.diagnostics import CompileError

_gpushape_option = click.option("--shape", callback=parse_shape, metavar="M=..,N=..",
                                 help="Dimension sizes (default: those of `hopperc sim`).")
device_option = click.option("--device", type=click.IntRange(0), default=0, show_default=True,
                              help="GPU ordinal.")


def _on_gpu(action, file: str, diagnostics: str):
    """Run a GPU command; argument errors are the user's (exit 1), a missing
    GPU, driver or PyTorch is the toolchain's (exit 2)."""
    from hopperc.runtime import ArgumentError

    def with_located_arguments(source):
        try:
            return action(source)
        except ArgumentError as exc:
            raise CompileError(None, str(exc), file=source.name) from None
    try:
        return guarded(with_located_arguments, file, diagnostics)
    except Failure as failure:
        sys.exit(failure.code)


@click.command(cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@_gpushape_option
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random inputs.")
@device_option
@diag_option
def run(file, defines, shape, seed, device, diagnostics):
    """Run FILE on the GPU with random inputs and compare every output with the
    reference of the kernel's statements; exit 1 on a mismatch."""
    from hopperc.harness.check import GPU_ULPS, run_check

    defs = parse_defines(defines)
    result = _on_gpu(lambda src: run_check(src, defs, shape, seed, device), file, diagnostics)
    dims = " ".join(f"{k}={v}" for k, v in result.dims.items())
    click.echo(f"{result.kernel}: {dims}, grid {'x'.join(map(str, result.grid))}")
    if result.reference is None:
        click.echo(f"not compared: no reference for this kernel ({result.unchecked})")
        sys.exit(0)
    for out in result.outputs:
        line = f"  {out.tensor}: max error {out.max_error:.3g}"
        if out.mismatches:
            line += (f", {out.mismatches} of {out.size} elements differ (first at "
                     f"{list(out.first)}: {out.got:g}, expected {out.want:g})")
        click.echo(line)
    verdict = "PASS" if result.passed else "FAIL"
    click.echo(f"{verdict}: against the {result.reference}, within {GPU_ULPS // 2} ulps of "
               "each output's dtype")
    sys.exit(0 if result.passed else EXIT_USER)


@click.command(cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@_gpushape_option
@click.option("--warmup", type=click.IntRange(0), default=10, show_default=True,
              help="Untimed runs first.")
@click.option("--runs", type=click.IntRange(1), default=50, show_default=True,
              help="Timed runs; the median is reported.")
@device_option
@diag_option
def bench(file, defines, shape, warmup, runs, device, diagnostics):
    """Time FILE on the GPU (CUDA events, cold L2, median); for kernels made of
    matrix products, TFLOP/s and the ratio to torch.matmul (cuBLAS)."""
    from hopperc.harness.bench import bench as run_bench

    defs = parse_defines(defines)
    result = _on_gpu(lambda src: run_bench(src, defs, shape, warmup, runs, device), file,
                     diagnostics)
    dims = " ".join(f"{k}={v}" for k, v in result.dims.items())
    t = result.timing
    click.echo(f"{result.kernel}: {dims}")
    line = (f"  hopperc  {t.median_ms * 1e3:9.1f} us median (min {t.min_ms * 1e3:.1f}, "
            f"{t.runs} runs)")
    if result.products:
        line += f"  {result.tflops:7.1f} TFLOP/s"
    click.echo(line)
    if result.baseline is not None:
        b = result.baseline
        products = ", ".join(p.describe() for p in result.products)
        click.echo(f"  cuBLAS   {b.median_ms * 1e3:9.1f} us median (min {b.min_ms * 1e3:.1f}, "
                   f"{b.runs} runs)  {result.baseline_tflops:7.1f} TFLOP/s  ({products})")
        click.echo(f"  ratio    {result.ratio:.3f} of cuBLAS speed")
    else:
        click.echo("  no cuBLAS baseline: the kernel is not made of matrix products of its "
                   "tensors")
