"""`hopperc emit` (one intermediate form of a kernel) and `hopperc explain` (every
synchronization hopperc inserts, with its reason)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from hopperc.cli.common import (Command, Failure, arch_option, define_option, diag_option,
                                guarded, parse_defines)
from hopperc.passes import PASS_NAMES


@click.command(cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--ptx", is_flag=True, help="PTX from NVRTC.")
@click.option("--cu", is_flag=True, help="The generated CUDA C++.")
@click.option("--ir", is_flag=True, help="The IR (after all passes, or --after).")
@click.option("--ast", is_flag=True, help="The parsed AST.")
@click.option("--sass", is_flag=True, help="SASS (needs the hopperc[sass] extra).")
@click.option("--after", type=click.Choice(("front-end",) + PASS_NAMES),
              help="With --ir: stop after this pass.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to a file.")
@define_option
@arch_option
@diag_option
def emit(file, ptx, cu, ir, ast, sass, after, output, defines, arch, diagnostics):
    """Print one intermediate form of FILE."""
    chosen = [name for name, given in (("ptx", ptx), ("cu", cu), ("ir", ir), ("ast", ast),
                                       ("sass", sass)) if given]
    if not chosen:
        raise click.UsageError("choose one of --ptx, --cu, --ir, --ast, --sass")
    if len(chosen) > 1:
        raise click.UsageError(f"choose one form: {' and '.join('--' + c for c in chosen)} "
                               "were given (run emit once per form)")
    what = chosen[0]
    if after and what != "ir":
        raise click.UsageError("--after goes with --ir")
    if output and Path(output).resolve() == Path(file).resolve():
        raise click.UsageError(f"-o {output} would overwrite the input {file}")
    defs = parse_defines(defines)

    def produce(source) -> str:
        from hopperc import driver
        from hopperc.frontend.ast import dump
        from hopperc.ir.printer import print_kernel

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
        if output:
            from hopperc.buildsys.outputs import write_atomically
            guarded(lambda _: write_atomically({Path(output): text.encode()}), None,
                    diagnostics)
    except Failure as failure:
        sys.exit(failure.code)
    if not output:
        click.echo(text, nl=False)


@click.command(cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@diag_option
def explain(file, defines, diagnostics):
    """List every synchronization hopperc inserts in FILE, with its reason."""
    defs = parse_defines(defines)

    def syncs(source) -> list[str]:
        from hopperc import driver
        from hopperc.ir.explain import inserted_syncs, schedule
        kernel = driver.lower(driver.check(source, defs))
        return schedule(kernel) + inserted_syncs(kernel)

    try:
        lines = guarded(syncs, file, diagnostics)
    except Failure as failure:
        sys.exit(failure.code)
    click.echo("\n".join(lines) if lines else "no synchronization inserted")
