"""The `hopperc` command line.

Exit codes: 0 success, 1 an error in the user's input (the `.hk` file, a
finding of `check`, or the command line: a bad option, `-D`, `--shape` or
`--arch`, a missing or clashing file), 2 a toolchain or internal error.
Errors print as `file:line:col: error: ...` with the source line and a caret;
no traceback unless HOPPERC_TRACEBACK=1.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import click

from hopperc import __version__, driver
from hopperc.diagnostics import CompileError, ToolchainError, format_diagnostic
from hopperc.explain import inserted_syncs
from hopperc.frontend.ast import dump
from hopperc.ir.printer import print_kernel
from hopperc.metadata import launch_metadata
from hopperc.outputs import remove_stale, write_atomically
from hopperc.passes import PASS_NAMES

EXIT_USER, EXIT_TOOLCHAIN = 1, 2


class _Failure(Exception):
    """An error already reported; carries the exit code."""

    def __init__(self, code: int):
        self.code = code


def _parse_defines(values: tuple[str, ...]) -> dict[str, int]:
    defines = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"expected NAME=INTEGER, got {item!r}", param_hint="-D")
        try:
            defines[name] = int(value, 0)
        except ValueError:
            raise click.BadParameter(f"{name}: {value!r} is not an integer",
                                     param_hint="-D") from None
    return defines


def _check_arch(arch: str) -> str:
    """A bad target is a usage error (exit 1), like a malformed -D."""
    try:
        driver.check_arch(arch)
    except driver.UnsupportedArchError as exc:
        raise click.BadParameter(exc.message, param_hint="--arch") from None
    return arch


def _report(exc: Exception, source, diagnostics: str) -> int:
    """Print one error the user can read; return its exit code."""
    if isinstance(exc, CompileError):
        code, text = EXIT_USER, format_diagnostic(exc, source)
        where = exc.span
    elif isinstance(exc, ToolchainError):
        code, text, where = EXIT_TOOLCHAIN, f"error: {exc}", None
    else:
        code, where = EXIT_TOOLCHAIN, None
        text = f"internal error: {type(exc).__name__}: {exc}\nnote: this is a bug in hopperc"
        if os.environ.get("HOPPERC_TRACEBACK"):
            text += "\n" + traceback.format_exc()
    if diagnostics == "json":
        record = {"severity": "error", "exit_code": code, "message": str(getattr(exc, "message", exc)),
                  "file": where.file if where else getattr(exc, "file", None) or getattr(source, "name", None),
                  "line": where.line if where else None, "column": where.col if where else None}
        click.echo(json.dumps(record), err=True)
    else:
        click.echo(text, err=True)
    return code


def _guarded(action, source_path: str | None, diagnostics: str):
    """Run `action(source)`, turning every error into a report and a _Failure."""
    source = None
    try:
        if source_path is not None:
            source = driver.read_source(source_path)
        return action(source)
    except (CompileError, ToolchainError, Exception) as exc:  # noqa: BLE001 - the CLI boundary
        raise _Failure(_report(exc, source, diagnostics)) from None


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """hopperc's version and the toolchain it builds with (loads NVRTC)."""
    if not value or ctx.resilient_parsing:
        return
    from hopperc.backend import nvrtc
    click.echo(f"hopperc {__version__}")
    try:
        major, minor = nvrtc.nvrtc_version()
        isa = nvrtc.ptx_isa_version(driver.DEFAULT_ARCH)
    except ToolchainError as exc:
        click.echo(f"NVRTC: not available ({exc})")
        ctx.exit(EXIT_TOOLCHAIN)
    click.echo(f"NVRTC {major}.{minor}, PTX ISA {isa}, target {driver.DEFAULT_ARCH}")
    click.echo(f"minimum driver: {nvrtc.MINIMUM_DRIVER.get(major, 'unknown')} "
               f"(CUDA {major}.x)")
    ctx.exit(0)


class _InputErrors:
    """A command line click refuses is an error in the input: exit 1, as for a bad
    `.hk` file (click's own code for it, 2, is hopperc's for internal errors)."""

    def make_context(self, *args, **kwargs):
        with _usage_is_input():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _usage_is_input():
            return super().invoke(ctx)


class _Command(_InputErrors, click.Command):
    pass


class _Group(_InputErrors, click.Group):
    command_class = _Command


@contextmanager
def _usage_is_input():
    try:
        yield
    except click.UsageError as exc:
        exc.exit_code = EXIT_USER
        raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version, NVRTC's, the PTX ISA and the "
                                            "minimum driver, and exit.")
def main() -> None:
    """hopperc: compile .hk kernels for NVIDIA Hopper (sm_90a), synchronization included."""


_define_option = click.option("-D", "defines", multiple=True, metavar="NAME=VALUE",
                              help="Override a tile constant (repeatable).")
_arch_option = click.option("--arch", default=driver.DEFAULT_ARCH, show_default=True,
                            callback=lambda c, p, v: _check_arch(v),
                            help="Target architecture (wgmma and setmaxnreg need sm_90a).")
_diag_option = click.option("--diagnostics", type=click.Choice(["text", "json"]), default="text",
                            show_default=True, help="Error format on stderr.")
_findings_option = click.option(
    "--diagnostics", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="Error format on stderr; json also prints each finding, then a summary, as one JSON "
         "record per line on stdout.")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output cubin (one input file); the JSON goes beside it.")
@click.option("--out-dir", type=click.Path(file_okay=False),
              help="Directory for NAME.cubin and NAME.json of each input.")
@_define_option
@_arch_option
@_diag_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.option("-MD", "depfile", is_flag=True,
              help="Also write NAME.d beside each cubin: a make/ninja dependency file.")
@click.option("-MF", "depfile_path", type=click.Path(dir_okay=False),
              help="Write the dependency file here (one input file; implies -MD).")
def build(files, output, out_dir, defines, arch, diagnostics, quiet, depfile, depfile_path):
    """Compile FILES to cubins with launch metadata JSON beside each."""
    if output and len(files) > 1:
        raise click.UsageError("-o takes one input file; use --out-dir for several")
    if depfile_path and len(files) > 1:
        raise click.UsageError("-MF takes one input file; use -MD for several")
    if output and out_dir:
        raise click.UsageError("give either -o or --out-dir, not both")
    defs = _parse_defines(defines)
    cubins = [Path(output) if output else Path(out_dir or ".") / (Path(file).stem + ".cubin")
              for file in files]
    depfiles = [Path(depfile_path) if depfile_path else cubin.with_suffix(".d") if depfile
                else None for cubin in cubins]
    _refuse_clobbering(files, cubins, depfiles)
    worst = 0
    for file, cubin, deps in zip(files, cubins, depfiles):
        outputs = [cubin, cubin.with_suffix(".json")] + ([deps] if deps else [])
        try:
            _guarded(lambda src: _build_one(src, cubin, defs, arch, quiet, deps), file,
                     diagnostics)
        except _Failure as failure:
            remove_stale(outputs)
            worst = max(worst, failure.code)
    sys.exit(worst)


def _refuse_clobbering(files, cubins: list[Path], depfiles: list[Path | None]) -> None:
    """Before anything is written: no output may be an input, a cubin and its
    metadata must be two files, and no two inputs may share outputs."""
    inputs = {_same_file_key(Path(f)): f for f in files}
    owner: dict[str, str] = {}
    for file, cubin, deps in zip(files, cubins, depfiles):
        for out in (cubin, cubin.with_suffix(".json"), *([deps] if deps else [])):
            if _same_file_key(out) in inputs:
                raise click.UsageError(f"{out} would overwrite the input "
                                       f"{inputs[_same_file_key(out)]}")
        if cubin.suffix == ".json":
            raise click.UsageError(f"-o {cubin}: name the cubin (e.g. "
                                   f"{cubin.with_suffix('.cubin')}); its metadata goes beside "
                                   "it as .json")
        key = _same_file_key(cubin)
        if key in owner:
            raise click.UsageError(f"{owner[key]} and {file} would both write {cubin}; build "
                                   "them into different directories")
        owner[key] = file


def _same_file_key(path: Path) -> str:
    """Two paths that name one file get one key (through links and `..`)."""
    return str(path.resolve())


def _build_one(source, cubin: Path, defines, arch: str, quiet: bool,
               depfile: Path | None) -> None:
    start = time.perf_counter()
    built = driver.build(source, defines, arch)
    res = built.result.resources
    meta = launch_metadata(built.generated.kernel, built.generated.launch, source.name, arch,
                           defines, res)
    outputs = {cubin: built.result.cubin,
               cubin.with_suffix(".json"): (json.dumps(meta, indent=2) + "\n").encode()}
    if depfile is not None:
        from hopperc.depfile import depfile_text
        outputs[depfile] = depfile_text(list(outputs), Path(source.name)).encode()
    write_atomically(outputs)
    if not quiet:
        regs = res.registers if res else "-"
        spills = f"{res.spill_stores}/{res.spill_loads}" if res else "-"
        click.echo(f"{built.generated.kernel.name:<18} regs {regs:>3}  spills {spills:<5} "
                   f"smem {built.generated.launch.dynamic_shared_bytes:>6} B  "
                   f"nvrtc {built.result.seconds * 1000:5.0f} ms  total "
                   f"{(time.perf_counter() - start) * 1000:5.0f} ms  -> {cubin}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--ptx", "what", flag_value="ptx", help="PTX from NVRTC.")
@click.option("--cu", "what", flag_value="cu", help="The generated CUDA C++.")
@click.option("--ir", "what", flag_value="ir", help="The IR (after all passes, or --after).")
@click.option("--ast", "what", flag_value="ast", help="The parsed AST.")
@click.option("--sass", "what", flag_value="sass", help="SASS (needs nvidia-cuda-nvdisasm).")
@click.option("--after", type=click.Choice(("front-end",) + PASS_NAMES),
              help="With --ir: stop after this pass.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to a file.")
@_define_option
@_arch_option
@_diag_option
def emit(file, what, after, output, defines, arch, diagnostics):
    """Print an intermediate form of FILE."""
    if what is None:
        raise click.UsageError("choose one of --ptx, --cu, --ir, --ast, --sass")
    if after and what != "ir":
        raise click.UsageError("--after goes with --ir")
    if output and _same_file_key(Path(output)) == _same_file_key(Path(file)):
        raise click.UsageError(f"-o {output} would overwrite the input {file}")
    defs = _parse_defines(defines)

    def produce(source) -> str:
        if what == "ast":
            return dump(driver.parse_source(source)) + "\n"
        if what == "ir":
            kernel = driver.check(source, defs)
            if after != "front-end":
                kernel = driver.lower(kernel, after)
            return print_kernel(kernel)
        if what == "cu":
            return driver.generate(source, defs).cuda
        built = driver.build(source, defs, arch)
        if what == "ptx":
            return built.result.ptx
        from hopperc.backend.cubin_tools import disassemble

        return disassemble(built.result.cubin)

    try:
        text = _guarded(produce, file, diagnostics)
    except _Failure as failure:
        if output:
            remove_stale([Path(output)])
        sys.exit(failure.code)
    if output:
        write_atomically({Path(output): text.encode()})
    else:
        click.echo(text, nl=False)


def _parse_shape(_ctx, _param, value: str | None) -> dict[str, int]:
    shapes: dict[str, int] = {}
    for item in filter(None, (value or "").split(",")):
        name, sep, number = item.strip().partition("=")
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"expected NAME=INTEGER, got {item!r}")
        try:
            shapes[name] = int(number, 0)
        except ValueError:
            raise click.BadParameter(f"{name}: {number!r} is not an integer") from None
    return shapes


def _simulate(file: str, defines, diagnostics: str, shapes, seeds: int, search: int,
              verbose: bool) -> None:
    defs = _parse_defines(defines)
    try:
        report = _guarded(lambda src: driver.simulate(src, defs, shapes, seeds, search), file,
                          diagnostics)
    except _Failure as failure:
        sys.exit(failure.code)
    if diagnostics == "json":
        for finding in report.findings:
            click.echo(json.dumps(finding.record()))
        click.echo(json.dumps({"kind": "summary", "ok": report.ok,
                               "findings": len(report.findings),
                               "lines": _summary(report, verbose)}))
    else:
        for finding in report.findings:
            lines = finding.lines()
            click.echo("\n".join(lines if verbose else lines[:1] + [
                line for line in lines[1:] if not line.startswith("    ")
                and line != "  last events:"]))
        click.echo("\n".join(_summary(report, verbose)))
    sys.exit(EXIT_USER if report.findings else 0)


def _summary(report, verbose: bool) -> list[str]:
    problem = report.problem
    runs = f"{report.schedules} seeded schedules and {report.exhaustive} search runs"
    search = (f"all {report.exhaustive} runs of the exhaustive search of block 0"
              if report.exhaustive_complete else
              f"{report.exhaustive} runs of the exhaustive search of block 0 (budget reached: "
              "not exhaustive)" if report.exhaustive else "no exhaustive search")
    lines = [f"shapes: {problem.describe()}",
             f"schedules: {report.schedules} seeded, {search}"]
    if report.max_error:
        errors = ", ".join(f"{t} max error {e:.3g}" for t, e in report.max_error.items())
        lines.append(f"result: {errors} against the {report.reference}")
    elif report.reference != "numpy reference":
        lines.append(f"result: not compared: {report.reference}")
    if report.findings:
        n = len(report.findings)
        lines.append(f"FAILED: {n} finding{'s' * (n != 1)} in {runs} ({report.seconds:.1f} s)")
    else:
        lines.append(f"ok: no deadlock, race, missing fence, barrier misuse or wrong result in "
                     f"{runs} ({report.seconds:.1f} s)")
    return lines


_shape_option = click.option("--shape", callback=_parse_shape, metavar="M=..,N=..",
                             help="Dimension sizes (default: two tiles per grid axis, "
                                  "2 x ring depth + 1 loop iterations).")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_define_option
@_shape_option
@click.option("--seeds", type=click.IntRange(0, 100000), default=driver.DEFAULT_SEEDS,
              show_default=True, help="Seeded random schedules to run.")
@click.option("--search", type=click.IntRange(0, 10 ** 7), default=driver.DEFAULT_SEARCH,
              show_default=True, help="Budget of the exhaustive search (runs).")
@click.option("-q", "--quiet", is_flag=True, help="No event trace under findings.")
@_findings_option
def sim(file, defines, shape, seeds, search, quiet, diagnostics):
    """Run FILE on a CPU model under many schedules: deadlocks, races, missing
    fences, barrier misuse and wrong results, with a trace of each."""
    _simulate(file, defines, diagnostics, shape, seeds, search, verbose=not quiet)


@main.command(name="check")
@click.argument("file", type=click.Path(dir_okay=False))
@_define_option
@_findings_option
def check_command(file, defines, diagnostics):
    """Simulate FILE with the default small shapes; exit 1 on any finding."""
    _simulate(file, defines, diagnostics, {}, driver.DEFAULT_SEEDS, driver.DEFAULT_SEARCH,
              verbose=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_define_option
@_diag_option
def explain(file, defines, diagnostics):
    """List every synchronization hopperc inserts in FILE, with its reason."""
    defs = _parse_defines(defines)
    try:
        lines = _guarded(lambda src: inserted_syncs(driver.lower(driver.check(src, defs))),
                         file, diagnostics)
    except _Failure as failure:
        sys.exit(failure.code)
    click.echo("\n".join(lines) if lines else "no synchronization inserted")


_gpu_shape_option = click.option("--shape", callback=_parse_shape, metavar="M=..,N=..",
                                 help="Dimension sizes (default: those of `hopperc sim`).")
_device_option = click.option("--device", type=click.IntRange(0), default=0, show_default=True,
                              help="GPU ordinal.")


def _on_gpu(action, file: str, diagnostics: str):
    """Run a GPU command; argument errors are the user's (exit 1), a missing
    GPU, driver or PyTorch is the toolchain's (exit 2)."""
    from hopperc.runtime import ArgumentError

    def guarded(source):
        try:
            return action(source)
        except ArgumentError as exc:
            raise CompileError(None, str(exc), file=source.name) from None
    try:
        return _guarded(guarded, file, diagnostics)
    except _Failure as failure:
        sys.exit(failure.code)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_define_option
@_gpu_shape_option
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random inputs.")
@_device_option
@_diag_option
def run(file, defines, shape, seed, device, diagnostics):
    """Run FILE on the GPU with random inputs and compare every output with the
    reference of the kernel's statements; exit 1 on a mismatch."""
    from hopperc.harness.check import GPU_ULPS, run_check

    defs = _parse_defines(defines)
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


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@_define_option
@_gpu_shape_option
@click.option("--warmup", type=click.IntRange(0), default=10, show_default=True,
              help="Untimed runs first.")
@click.option("--runs", type=click.IntRange(1), default=50, show_default=True,
              help="Timed runs; the median is reported.")
@_device_option
@_diag_option
def bench(file, defines, shape, warmup, runs, device, diagnostics):
    """Time FILE on the GPU (CUDA events, cold L2, median); for kernels made of
    matrix products, TFLOP/s and the ratio to torch.matmul (cuBLAS)."""
    from hopperc.harness.bench import bench as run_bench

    defs = _parse_defines(defines)
    result = _on_gpu(lambda src: run_bench(src, defs, shape, warmup, runs, device), file,
                     diagnostics)
    dims = " ".join(f"{k}={v}" for k, v in result.dims.items())
    t = result.timing
    click.echo(f"{result.kernel}: {dims}")
    line = f"  hopperc  {t.median_ms * 1e3:9.1f} us median (min {t.min_ms * 1e3:.1f}, {t.runs} runs)"
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
