"""The `hopperc` command group. Each command lives in its own module and loads
when it runs (or when `--help` lists it): `build` in cli/build.py, `cache` in
cli/cache.py, `emit`/`explain` in cli/emit.py, `sim`/`check` in cli/sim.py,
`run`/`bench` in cli/gpu.py; what they share (exit codes, error reports,
options) is in cli/common.py.

The command modules load only click and light modules: the compiler (parser,
passes, templates, NVRTC) loads inside a command when it needs it, so that
`--help` and a cached `build` start fast.
"""
from __future__ import annotations

from importlib import import_module

import click

from hopperc import __version__, target
from hopperc.cli.common import EXIT_TOOLCHAIN, Group
from hopperc.diagnostics import ToolchainError

COMMANDS = {
    "build": "hopperc.cli.build:build",
    "emit": "hopperc.cli.emit:emit",
    "explain": "hopperc.cli.emit:explain",
    "sim": "hopperc.cli.sim:sim",
    "check": "hopperc.cli.sim:check_command",
    "run": "hopperc.cli.gpu:run",
    "bench": "hopperc.cli.gpu:bench",
    "cache": "hopperc.cli.cache:cache",
}


class _Commands(Group):
    """The commands of COMMANDS, each imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(import_module(module), attribute)


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """hopperc's version and the toolchain it builds with (loads NVRTC)."""
    if not value or ctx.resilient_parsing:
        return
    from hopperc.backend import nvrtc
    click.echo(f"hopperc {__version__}")
    try:
        major, minor = nvrtc.nvrtc_version()
        isa = nvrtc.ptx_isa_version(target.DEFAULT_ARCH)
    except ToolchainError as exc:
        click.echo(f"NVRTC: not available ({exc})")
        ctx.exit(EXIT_TOOLCHAIN)
    click.echo(f"NVRTC {major}.{minor}, PTX ISA {isa}, target {target.DEFAULT_ARCH}")
    click.echo(f"minimum driver: {nvrtc.MINIMUM_DRIVER.get(major, 'unknown')} "
               f"(CUDA {major}.x)")
    ctx.exit(0)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version, NVRTC's, the PTX ISA and the "
                                            "minimum driver, and exit.")
def main() -> None:
    """hopperc: compile .hk kernels for NVIDIA Hopper (sm_90a), synchronization included."""
