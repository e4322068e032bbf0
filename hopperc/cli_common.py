"""What every `hopperc` command shares: exit codes, error reports, the parsing
of `-D`, `--arch` and `--shape`, and the exit code of usage errors.

Exit codes: 0 success, 1 an error in the user's input (the `.hk` file, a
finding of `check`, or the command line: a bad option, `-D`, `--shape` or
`--arch`, a missing or clashing file), 2 a toolchain or internal error.
Errors print as `file:line:col: error: ...` with the source line and a caret;
no traceback unless HOPPERC_TRACEBACK=1.
"""
from __future__ import annotations

import json
import os
import traceback
from contextlib import contextmanager

import click

from hopperc import driver
from hopperc.diagnostics import CompileError, ToolchainError, format_diagnostic

EXIT_USER, EXIT_TOOLCHAIN = 1, 2


class Failure(Exception):
    """An error already reported; carries the exit code."""

    def __init__(self, code: int):
        self.code = code


def parse_defines(values: tuple[str, ...]) -> dict[str, int]:
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


def check_arch(arch: str) -> str:
    """A bad target is a usage error (exit 1), like a malformed -D."""
    try:
        driver.check_arch(arch)
    except driver.UnsupportedArchError as exc:
        raise click.BadParameter(exc.message, param_hint="--arch") from None
    return arch


def report(exc: Exception, source, diagnostics: str) -> int:
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
        file = where.file if where else getattr(exc, "file", None) or getattr(source, "name",
                                                                              None)
        record = {"severity": "error", "exit_code": code,
                  "message": str(getattr(exc, "message", exc)), "file": file,
                  "line": where.line if where else None, "column": where.col if where else None}
        click.echo(json.dumps(record), err=True)
    else:
        click.echo(text, err=True)
    return code


def guarded(action, source_path: str | None, diagnostics: str):
    """Run `action(source)`, turning every error into a report and a Failure."""
    source = None
    try:
        if source_path is not None:
            source = driver.read_source(source_path)
        return action(source)
    except (CompileError, ToolchainError, Exception) as exc:  # noqa: BLE001 - the CLI boundary
        raise Failure(report(exc, source, diagnostics)) from None


def parse_shape(_ctx, _param, value: str | None) -> dict[str, int]:
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


class InputErrors:
    """A command line click refuses is an error in the input: exit 1, as for a bad
    `.hk` file (click's own code for it, 2, is hopperc's for internal errors)."""

    def make_context(self, *args, **kwargs):
        with usage_is_input():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with usage_is_input():
            return super().invoke(ctx)


class Command(InputErrors, click.Command):
    pass


class Group(InputErrors, click.Group):
    command_class = Command


@contextmanager
def usage_is_input():
    try:
        yield
    except click.UsageError as exc:
        exc.exit_code = EXIT_USER
        raise


define_option = click.option("-D", "defines", multiple=True, metavar="NAME=VALUE",
                              help="Override a tile constant (repeatable).")
arch_option = click.option("--arch", default=driver.DEFAULT_ARCH, show_default=True,
                            callback=lambda c, p, v: check_arch(v),
                            help="Target architecture (wgmma and setmaxnreg need sm_90a).")
diag_option = click.option("--diagnostics", type=click.Choice(["text", "json"]), default="text",
                            show_default=True, help="Error format on stderr.")
findings_option = click.option(
    "--diagnostics", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="Error format on stderr; json also prints each finding, then a summary, as one JSON "
         "record per line on stdout.")
