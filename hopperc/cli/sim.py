"""`hopperc sim` and `hopperc check`: the CPU model's findings and summary."""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager

import click

from hopperc import target
from hopperc.cli.common import (EXIT_USER, Command, Diagnostics, Failure, default_jobs,
                                define_option, findings_option, guarded, parse_defines,
                                parse_shape)
from hopperc.diagnostics.problems import Problem

# `check` / `sim` stopped at the step budget before its seeded schedules ran, with
# no finding: nothing wrong was seen, but the kernel was not checked either.
EXIT_INCOMPLETE = 3


def _simulate(file: str, defines, diagnostics: Diagnostics, shapes, seeds: int, search: int,
              verbose: bool, jobs: int, steps: int = target.DEFAULT_STEPS,
              inputs: dict | None = None, save: str | None = None,
              quiet: bool = False, trace: str | None = None) -> None:
    # The simulator's products are small (at most 64 x 256 per warpgroup) and
    # run in `jobs` processes: BLAS threads would only contend with them, and on
    # a busy machine their spin-waits made a product up to 100 times slower.
    # Set before numpy loads (it loads with the simulator), in this process only.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from hopperc import driver
    defs = parse_defines(defines)

    def simulated(source):
        with _progress_line(file, seeds + 1, diagnostics, quiet) as progress:
            return driver.simulate(source, defs, shapes, seeds, search, steps, jobs,
                                   inputs=inputs, progress=progress)

    try:
        traces = guarded(lambda _: _trace_target(trace), None, diagnostics) if trace else None
        report = guarded(simulated, file, diagnostics)
        written = guarded(lambda _: traces.write(report), None, diagnostics) if traces else []
    except Failure as failure:
        sys.exit(failure.code)
    summary = _summary(report, verbose) + _saved(report, save, diagnostics)
    if diagnostics.form == "sarif":
        for finding in report.findings:
            diagnostics.emit(_problem(finding))
        click.echo("\n".join(written + summary), err=True)
    elif diagnostics.form == "json":
        for finding in report.findings:
            click.echo(json.dumps(finding.record()))
        click.echo(json.dumps({"kind": "summary", "ok": report.ok and not report.incomplete,
                               "complete": not report.incomplete,
                               "findings": len(report.findings),
                               "lines": written + summary}))
    else:
        for finding in report.findings:
            lines = finding.lines()
            click.echo("\n".join(lines if verbose else lines[:1] + [
                line for line in lines[1:] if not line.startswith("    ")
                and line != "  last events:"]))
        click.echo("\n".join(written + summary))
    sys.exit(EXIT_USER if report.findings else EXIT_INCOMPLETE if report.incomplete else 0)


@contextmanager
def _progress_line(file: str, total: int, diagnostics: Diagnostics, quiet: bool):
    """`[5/17] simulating k.hk ...` on a terminal: how many of the seeded
    schedules and the search ended; erased before anything is reported."""
    from hopperc.cli.progress import Progress
    line = Progress.on_stderr(total, diagnostics.form, quiet)
    line.show(0, f"simulating {file}")
    try:
        yield lambda done, _total: line.show(done, f"simulating {file}")
    finally:
        line.clear()


def _trace_target(path: str):
    """`--trace PATH`, refused before the simulation if it cannot be written."""
    from hopperc.cli.trace import TraceTarget
    return TraceTarget(path)


def _problem(finding) -> Problem:
    """A finding as a reported problem; its rule is its category."""
    return Problem("error", finding.rule, finding.message,
                   "\n".join(finding.lines()), EXIT_USER, finding.span,
                   related=(finding.related,) if finding.related else (),
                   notes=finding.state + ((f"trace: {finding.trace_file}",)
                                          if finding.trace_file else ()))


def _distinct_paths(file: str, inputs: str | None, save: str | None,
                    trace: str | None) -> None:
    """Every output of one command is a path of its own: none is an input (the
    kernel, --inputs) or another output, compared as real paths (a link, `./`)."""
    reads = [(f"the input {path}", path) for path in (file, inputs) if path]
    writes = [(option, path) for option, path in (("--save", save), ("--trace", trace)) if path]
    for number, (option, path) in enumerate(writes):
        for other, other_path in reads + [(f"the output of {o} {p}", p)
                                          for o, p in writes[:number]]:
            if os.path.realpath(path) == os.path.realpath(other_path):
                raise click.UsageError(f"{option} {path} would overwrite {other}: give each "
                                       "output a path of its own")


def _inputs(file: str, inputs: str | None, save: str | None, seeds: int, search: int,
            diagnostics: Diagnostics) -> tuple[dict | None, int, int]:
    """`sim --inputs/--save`: the arrays, and the schedules to run on them (one
    seeded, no search, unless --seeds or --search are given)."""
    if inputs is None:
        if save is not None:
            raise click.UsageError("--save needs --inputs: it writes what the kernel stores "
                                   "from your arrays")
        return None, seeds, search
    ctx = click.get_current_context()
    if ctx.get_parameter_source("seeds") is click.core.ParameterSource.DEFAULT:
        seeds = 1
    elif seeds < 1:
        raise click.UsageError("--inputs needs --seeds 1 or more: the outputs come from a "
                               "seeded schedule")
    if ctx.get_parameter_source("search") is click.core.ParameterSource.DEFAULT:
        search = 0
    from hopperc.cli.arrays import load_arrays
    try:
        return guarded(lambda _: load_arrays(inputs), None, diagnostics), seeds, search
    except Failure as failure:
        sys.exit(failure.code)


def _saved(report, save: str | None, diagnostics: Diagnostics) -> list[str]:
    """`sim --save`: write what a clean run stored (never a file after a finding)."""
    if save is None or report.findings or report.incomplete:
        return []
    from hopperc.cli.arrays import save_arrays
    try:
        guarded(lambda _: save_arrays(save, report.outputs), None, diagnostics)
    except Failure as failure:
        sys.exit(failure.code)
    return [f"saved: {', '.join(report.outputs)} to {save}"]


def _summary(report, verbose: bool) -> list[str]:
    problem = report.problem
    runs = f"{report.schedules} seeded schedules and {report.exhaustive} search runs"
    from hopperc.sim.semaphores import uses_semaphores  # the simulator is loaded by now

    # Blocks that wait on each other's flags are searched together (sim/interleave.py).
    searched = "every block" if report.lowered is not None and uses_semaphores(
        report.lowered) else "block 0"
    search = (f"all {report.exhaustive} runs of the exhaustive search of {searched}"
              if report.exhaustive_complete else
              f"{report.exhaustive} runs of the exhaustive search of {searched} (budget "
              "reached: not exhaustive)" if report.exhaustive else "no exhaustive search")
    lines = [f"shapes: {problem.describe()}",
             f"schedules: {report.schedules} seeded, {search}"]
    if report.stopped:
        left = ("the other seeded schedules and the exhaustive search did not run"
                if report.incomplete else "the exhaustive search ended there")
        lines.append(f"stopped: the work budget of {report.budget:,} steps (scheduler steps "
                     "and loop iterations) ran out "
                     f"after {report.schedules} whole seeded schedule"
                     f"{'s' * (report.schedules != 1)}; {left}. Give smaller sizes with "
                     "`hopperc sim --shape`, or a larger `hopperc sim --budget`")
    if report.max_error:
        errors = ", ".join(f"{t} max error {e:.3g}" for t, e in report.max_error.items())
        lines.append(f"result: {errors} against the {report.reference}")
    elif report.reference != "numpy reference":
        lines.append(f"result: not compared: {report.reference}")
    if report.findings:
        n = len(report.findings)
        lines.append(f"FAILED: {n} finding{'s' * (n != 1)} in {runs} ({report.seconds:.1f} s)")
    elif report.incomplete:
        lines.append(f"INCOMPLETE: no finding in {runs} ({report.seconds:.1f} s), but the "
                     "kernel was not checked to the end")
    else:
        lines.append(f"ok: no deadlock, race, missing fence, barrier misuse or wrong result in "
                     f"{runs} ({report.seconds:.1f} s)")
    return lines


jobs_option = click.option("-j", "--jobs", type=click.IntRange(1), default=default_jobs,
                           show_default="the cores",
                           help="Worker processes: the search and the seeded schedules run "
                                "at once (the report is the same for any number).")
trace_option = click.option(
    "--trace", metavar="PATH", help="Write the simulated run as a Chrome/Perfetto trace: PATH "
                                    "ending in .json gets the run of the first finding (else "
                                    "of seeded schedule 0); another PATH is a directory that "
                                    "gets one trace per finding.")
shape_option = click.option("--shape", callback=parse_shape, metavar="M=..,N=..",
                             help="Dimension sizes (default: whole clusters of two tiles per "
                                  "grid axis, 2 x ring depth + 1 loop iterations, each with a "
                                  "partial last tile).")


@click.command(cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@shape_option
@click.option("--seeds", type=click.IntRange(0, 100000), default=target.DEFAULT_SEEDS,
              show_default=True, help="Seeded random schedules to run.")
@click.option("--search", type=click.IntRange(0, 10 ** 7), default=target.DEFAULT_SEARCH,
              show_default=True, help="Budget of the exhaustive search (runs).")
@click.option("--budget", type=click.IntRange(1, 10 ** 10), default=target.DEFAULT_STEPS,
              show_default=True, help="Steps (scheduler steps and loop iterations) of the "
                                      "whole simulation; past them "
                                      "it stops and says what it ran (exit 3 if no finding).")
@click.option("-q", "--quiet", is_flag=True, help="No event trace under findings.")
@click.option("--inputs", type=click.Path(dir_okay=False), metavar="IN.npz",
              help="Run on these arrays (np.savez, named as the tensors and scalars), every "
                   "block, one seeded schedule unless --seeds/--search say more; the shapes "
                   "come from the arrays (--shape only for dimensions no array has).")
@click.option("--save", type=click.Path(dir_okay=False), metavar="OUT.npz",
              help="With --inputs: write every tensor the kernel stores, after a clean run "
                   "only (bf16 and fp8 as float32).")
@jobs_option
@trace_option
@findings_option
def sim(file, defines, shape, seeds, search, budget, quiet, inputs, save, jobs, trace,
        diagnostics):
    """Run FILE on a CPU model under many schedules: deadlocks, races, missing
    fences, barrier misuse and wrong results, with a trace of each."""
    _distinct_paths(file, inputs, save, trace)
    arrays, seeds, search = _inputs(file, inputs, save, seeds, search, diagnostics)
    _simulate(file, defines, diagnostics, shape, seeds, search, verbose=not quiet, jobs=jobs,
              steps=budget, inputs=arrays, save=save, quiet=quiet, trace=trace)


@click.command(name="check", cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@jobs_option
@trace_option
@findings_option
def check_command(file, defines, jobs, trace, diagnostics):
    """Simulate FILE with the default small shapes; exit 1 on any finding, 3 if
    the work budget stopped it first."""
    _distinct_paths(file, None, None, trace)
    _simulate(file, defines, diagnostics, {}, target.DEFAULT_SEEDS, target.DEFAULT_SEARCH,
              verbose=False, jobs=jobs, trace=trace)
