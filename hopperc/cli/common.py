"""What every `hopperc` command shares: exit codes, where problems are reported,
the parsing of `-D`, `--arch` and `--shape`, and the exit code of usage errors.

Exit codes: 0 success, 1 an error in the user's input (the `.hk` file, a
finding of `check`, or the command line: a bad option, `-D`, `--shape` or
`--arch`, a missing or clashing file), 2 a toolchain or internal error.
Errors print as `file:line:col: error: ...` with the source line and a caret;
no traceback unless HOPPERC_TRACEBACK=1. Only light modules load here: the
compiler loads when a command needs it.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager

import click

from hopperc import target
from hopperc.diagnostics import read_source
from hopperc.diagnostics.problems import EXIT_TOOLCHAIN, EXIT_USER, Problem, describe  # noqa: F401


class Failure(Exception):
    """An error already reported; carries the exit code."""

    def __init__(self, code: int):
        self.code = code


class Diagnostics:
    """Where a command's problems go: text or JSON lines on stderr, or one SARIF
    log on stdout when the command ends (`--diagnostics sarif`)."""

    def __init__(self, form: str):
        self.form = form
        self.problems: list[Problem] = []

    def emit(self, problem: Problem) -> None:
        if self.form == "text":
            click.echo(problem.text, err=True)
        elif self.form == "json":
            click.echo(json.dumps(problem.record()), err=True)
        self.problems.append(problem)

    def finish(self) -> None:
        if self.form == "sarif":
            from hopperc.diagnostics.sarif import sarif_log
            click.echo(json.dumps(sarif_log(self.problems), indent=2))

    @property
    def machine_readable_stdout(self) -> bool:
        """SARIF owns stdout: what a command prints for people goes to stderr."""
        return self.form == "sarif"


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
        target.check_arch(arch)
    except target.UnsupportedArchError as exc:
        raise click.BadParameter(exc.message, param_hint="--arch") from None
    return arch


def guarded(action, source_path: str | None, diagnostics: Diagnostics):
    """Run `action(source)`, turning every error into a report and a Failure."""
    source = None
    try:
        if source_path is not None:
            source = read_source(source_path)
        return action(source)
    except Exception as exc:  # noqa: BLE001 - the CLI boundary: every error is reported
        problem = describe(exc, source)
        diagnostics.emit(problem)
        raise Failure(problem.exit_code) from None


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
    `.hk` file (click's own code for it, 2, is hopperc's for internal errors).
    Under `--diagnostics json|sarif` it is reported as every other error is, as a
    JSON record or in the SARIF log, instead of click's usage text."""

    def make_context(self, info_name, args, parent=None, **extra):
        command_line = list(args)
        try:
            with usage_is_input():
                _refuse_nul(command_line)
                ctx = super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            # a subcommand's parent (the group) keeps the whole command line
            whole = parent.meta.get(_COMMAND_LINE, command_line) if parent else command_line
            _report_usage(exc, None, whole)
            raise
        ctx.meta.setdefault(_COMMAND_LINE, command_line)  # contexts share their meta
        return ctx

    def invoke(self, ctx):
        try:
            with usage_is_input():
                return super().invoke(ctx)
        except click.UsageError as exc:
            _report_usage(exc, ctx.params.get("diagnostics"), ctx.meta.get(_COMMAND_LINE, []))
            raise


def _refuse_nul(args: list[str]) -> None:
    """A NUL in an argument (only a caller in this process can pass one: execve's
    arguments end at it) is a usage error, before click's Path type hands it to
    os.stat, which raises ValueError."""
    for arg in args:
        if "\0" in arg:
            raise click.UsageError(f"the argument {arg!r} holds a NUL character, which no "
                                   "path or option value can hold")


class Command(InputErrors, click.Command):
    pass


class Group(InputErrors, click.Group):
    command_class = Command


_COMMAND_LINE = "hopperc.command_line"


@contextmanager
def usage_is_input():
    try:
        yield
    except click.UsageError as exc:
        exc.exit_code = EXIT_USER
        raise


def _report_usage(exc: click.UsageError, sink, command_line: list[str]) -> None:
    """A refused command line as a problem (rule `command-line`) where the
    diagnostics are for programs; then exit 1 without click's usage text. The
    command's sink prints its SARIF log when its context closes; a command line
    refused before the sink was made gets one of its own."""
    form = sink.form if isinstance(sink, Diagnostics) else requested_form(command_line)
    if form == "text":
        return
    owned = not isinstance(sink, Diagnostics)
    if owned:
        sink = Diagnostics(form)
    sink.emit(Problem("error", "command-line", exc.format_message(),
                      f"error: {exc.format_message()}"))
    if owned:
        sink.finish()
    raise click.exceptions.Exit(EXIT_USER) from None


def requested_form(command_line: list[str]) -> str:
    """The `--diagnostics` form a command line asks for (text if none or unknown),
    read from the words themselves: click may refuse the line before it parsed it."""
    form = "text"
    for index, word in enumerate(command_line):
        if word == "--":
            break
        if word == "--diagnostics" and index + 1 < len(command_line):
            form = command_line[index + 1]
        elif word.startswith("--diagnostics="):
            form = word.partition("=")[2]
    return form if form in DIAGNOSTIC_FORMS.choices else "text"


define_option = click.option("-D", "defines", multiple=True, metavar="NAME=VALUE",
                              help="Override a tile constant (repeatable).")
arch_option = click.option("--arch", default=target.DEFAULT_ARCH, show_default=True,
                            callback=lambda c, p, v: check_arch(v),
                            help="Target architecture (wgmma and setmaxnreg need sm_90a).")


def _diagnostics(ctx: click.Context, _param, form: str) -> Diagnostics:
    sink = Diagnostics(form)
    ctx.call_on_close(sink.finish)
    return sink


DIAGNOSTIC_FORMS = click.Choice(["text", "json", "sarif"])
diag_option = click.option(
    "--diagnostics", type=DIAGNOSTIC_FORMS, default="text", show_default=True,
    callback=_diagnostics, help="Errors and warnings as text or JSON lines on stderr, or as "
                                "one SARIF 2.1.0 log on stdout.")
findings_option = click.option(
    "--diagnostics", type=DIAGNOSTIC_FORMS, default="text", show_default=True,
    callback=_diagnostics, help="text; json: errors on stderr and each finding, then a "
                                "summary, as JSON lines on stdout; sarif: errors and findings "
                                "as one SARIF 2.1.0 log on stdout.")


def default_jobs() -> int:
    """The cores this process may run on (`-j`'s default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
