"""The `hopperc` command line: the command group, `build`, `emit` and `explain`;
`sim`/`check` live in cli_sim.py, `run`/`bench` in cli_gpu.py, and what they
all share (exit codes, error reports, options) in cli_common.py.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from hopperc import __version__, driver
from hopperc.cli_common import (EXIT_TOOLCHAIN, Failure, Group, arch_option, define_option,
                                diag_option, guarded, parse_defines)
from hopperc.cli_gpu import bench, run
from hopperc.cli_sim import check_command, sim
from hopperc.diagnostics import ToolchainError
from hopperc.explain import inserted_syncs
from hopperc.frontend.ast import dump
from hopperc.ir.printer import print_kernel
from hopperc.metadata import launch_metadata
from hopperc.outputs import remove_stale, write_atomically
from hopperc.passes import PASS_NAMES


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


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version, NVRTC's, the PTX ISA and the "
                                            "minimum driver, and exit.")
def main() -> None:
    """hopperc: compile .hk kernels for NVIDIA Hopper (sm_90a), synchronization included."""


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output cubin (one input file); the JSON goes beside it.")
@click.option("--out-dir", type=click.Path(file_okay=False),
              help="Directory for NAME.cubin and NAME.json of each input.")
@define_option
@arch_option
@diag_option
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
    defs = parse_defines(defines)
    cubins = [Path(output) if output else Path(out_dir or ".") / (Path(file).stem + ".cubin")
              for file in files]
    depfiles = [Path(depfile_path) if depfile_path else cubin.with_suffix(".d") if depfile
                else None for cubin in cubins]
    _refuse_clobbering(files, cubins, depfiles)
    worst = 0
    for file, cubin, deps in zip(files, cubins, depfiles):
        outputs = [cubin, cubin.with_suffix(".json")] + ([deps] if deps else [])
        try:
            guarded(lambda src: _build_one(src, cubin, defs, arch, quiet, deps), file,
                     diagnostics)
        except Failure as failure:
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
@define_option
@arch_option
@diag_option
def emit(file, what, after, output, defines, arch, diagnostics):
    """Print an intermediate form of FILE."""
    if what is None:
        raise click.UsageError("choose one of --ptx, --cu, --ir, --ast, --sass")
    if after and what != "ir":
        raise click.UsageError("--after goes with --ir")
    if output and _same_file_key(Path(output)) == _same_file_key(Path(file)):
        raise click.UsageError(f"-o {output} would overwrite the input {file}")
    defs = parse_defines(defines)

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
        text = guarded(produce, file, diagnostics)
    except Failure as failure:
        if output:
            remove_stale([Path(output)])
        sys.exit(failure.code)
    if output:
        write_atomically({Path(output): text.encode()})
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@diag_option
def explain(file, defines, diagnostics):
    """List every synchronization hopperc inserts in FILE, with its reason."""
    defs = parse_defines(defines)
    try:
        lines = guarded(lambda src: inserted_syncs(driver.lower(driver.check(src, defs))),
                         file, diagnostics)
    except Failure as failure:
        sys.exit(failure.code)
    click.echo("\n".join(lines) if lines else "no synchronization inserted")


for _command in (sim, check_command, run, bench):
    main.add_command(_command)
