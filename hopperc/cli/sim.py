"""`hopperc sim` and `hopperc check`: the CPU model's findings and summary."""
from __future__ import annotations

import json
import os
import sys

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
              trace: str | None = None) -> None:
    # The simulator's products are small (at most 64 x 256 per warpgroup) and
    # run in `jobs` processes: BLAS threads would only contend with them, and on
    # a busy machine their spin-waits made a product up to 100 times slower.
    # Set before numpy loads (it loads with the simulator), in this process only.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from hopperc import driver
    defs = parse_defines(defines)
    try:
        traces = guarded(lambda _: _trace_target(trace), None, diagnostics) if trace else None
        report = guarded(lambda src: driver.simulate(src, defs, shapes, seeds, search, steps,
                                                     jobs), file, diagnostics)
        written = guarded(lambda _: traces.write(report), None, diagnostics) if traces else []
    except Failure as failure:
        sys.exit(failure.code)
    if diagnostics.form == "sarif":
        for finding in report.findings:
            diagnostics.emit(_problem(finding))
        click.echo("\n".join(written + _summary(report, verbose)), err=True)
    elif diagnostics.form == "json":
        for finding in report.findings:
            click.echo(json.dumps(finding.record()))
        click.echo(json.dumps({"kind": "summary", "ok": report.ok and not report.incomplete,
                               "complete": not report.incomplete,
                               "findings": len(report.findings),
                               "lines": written + _summary(report, verbose)}))
    else:
        for finding in report.findings:
            lines = finding.lines()
            click.echo("\n".join(lines if verbose else lines[:1] + [
                line for line in lines[1:] if not line.startswith("    ")
                and line != "  last events:"]))
        click.echo("\n".join(written + _summary(report, verbose)))
    sys.exit(EXIT_USER if report.findings else EXIT_INCOMPLETE if report.incomplete else 0)


def _trace_target(path: str):
    """`--trace PATH`, refused before the simulation if it cannot be written."""
    from hopperc.sim.trace import TraceTarget
    return TraceTarget(path)


def _problem(finding) -> Problem:
    """A finding as a reported problem; its rule is its category."""
    return Problem("error", finding.rule, finding.message,
                   "\n".join(finding.lines()), EXIT_USER, finding.span,
                   related=(finding.related,) if finding.related else (),
                   notes=finding.state + ((f"trace: {finding.trace_file}",)
                                          if finding.trace_file else ()))


def _summary(report, verbose: bool) -> list[str]:
    problem = report.problem
    runs = f"{report.schedules} seeded schedules and {report.exhaustive} search runs"
    search = (f"all {report.exhaustive} runs of the exhaustive search of block 0"
              if report.exhaustive_complete else
              f"{report.exhaustive} runs of the exhaustive search of block 0 (budget reached: "
              "not exhaustive)" if report.exhaustive else "no exhaustive search")
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
@jobs_option
@trace_option
@findings_option
def sim(file, defines, shape, seeds, search, budget, quiet, jobs, trace, diagnostics):
    """Run FILE on a CPU model under many schedules: deadlocks, races, missing
    fences, barrier misuse and wrong results, with a trace of each."""
    _simulate(file, defines, diagnostics, shape, seeds, search, verbose=not quiet, jobs=jobs,
              steps=budget, trace=trace)


@click.command(name="check", cls=Command)
@click.argument("file", type=click.Path(dir_okay=False))
@define_option
@jobs_option
@trace_option
@findings_option
def check_command(file, defines, jobs, trace, diagnostics):
    """Simulate FILE with the default small shapes; exit 1 on any finding, 3 if
    the work budget stopped it first."""
    _simulate(file, defines, diagnostics, {}, target.DEFAULT_SEEDS, target.DEFAULT_SEARCH,
              verbose=False, jobs=jobs, trace=trace)
