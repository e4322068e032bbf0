"""`hopperc build`: .hk files and kernel libraries (TOML) to cubins with launch
metadata, in parallel (`-j`), through the build cache, with depfiles and a
manifest.

Everything that can be refused (clashing outputs, a bad library, a bad
option) is refused before anything is written. Then each kernel is built or
taken from the cache, and its outputs written atomically; one kernel failing
neither stops the others nor removes an earlier build's outputs. A cache hit
loads neither the parser, the passes, the templates nor NVRTC.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from hopperc.buildsys.cache import BuildCache, CachedBuild, build_key
from hopperc.buildsys.plan import (BuildJob, PlanError, parse_prefix_maps, plan,
                                   recorded_name, refuse_clobbering)
from hopperc.cli.cache import open_cache
from hopperc.cli.common import (Command, Diagnostics, arch_option, default_jobs, define_option,
                                diag_option, parse_defines)
from hopperc.diagnostics import CompileError, SourceFile, read_source
from hopperc.diagnostics.problems import EXIT_USER, Problem, as_error, describe, in_context

WERROR_NOTE = "--Werror: warnings are errors; no outputs written"


class JobResult:
    """What became of a job: its build (from the cache or not), its problems and
    the hashes of the outputs written."""

    def __init__(self, job: BuildJob, recorded_name: str):
        self.job = job
        self.recorded_name = recorded_name
        self.entry: CachedBuild | None = None
        self.cached = False
        self.remote = False  # the cache's hit came from the remote tier
        self.problems: tuple[Problem, ...] = ()
        self.exit_code = 0
        self.hashes: dict[str, str] = {}
        self.kernel: str | None = None  # as the source declares it (the manifest's)
        self.failed_by_warnings = False  # --Werror


class Interrupted(BaseException):
    """SIGTERM (or SIGINT): temporaries are removed on the way out."""

    def __init__(self, signum: int):
        self.signum = signum


@click.command(cls=Command)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output cubin (one .hk file); the JSON goes beside it.")
@click.option("--out-dir", type=click.Path(file_okay=False),
              help="Directory for NAME.cubin and NAME.json of each kernel.")
@define_option
@arch_option
@diag_option
@click.option("-j", "--jobs", type=click.IntRange(1), default=default_jobs,
              show_default="the cores", help="Kernels compiled at once.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the build cache.")
@click.option("--manifest", type=click.Path(dir_okay=False),
              help="Write a JSON manifest of every kernel built (or failed) here.")
@click.option("--file-prefix-map", "prefix_maps", multiple=True, metavar="OLD=NEW",
              help="Record source paths starting with OLD as starting with NEW in the "
                   "cubin and metadata (repeatable; the last match wins).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.option("--Werror", "werror", is_flag=True,
              help="Warnings are errors: a kernel with a warning fails (exit 1) and writes "
                   "no outputs.")
@click.option("-MD", "depfile", is_flag=True,
              help="Also write NAME.d beside each cubin: a make/ninja dependency file.")
@click.option("-MF", "depfile_path", type=click.Path(dir_okay=False),
              help="Write the dependency file here (one kernel; implies -MD).")
@click.option("--shard", callback=lambda _c, _p, value: _parse_shard(value), metavar="I/N",
              help="Build only the kernels of shard I of N (1 <= I <= N), for CI job I of "
                   "N: every machine splits the same kernels the same way (docs/ci.md).")
def build(files, output, out_dir, defines, arch, diagnostics, jobs, no_cache, manifest,
          prefix_maps, quiet, werror, depfile, depfile_path, shard):
    """Compile FILES (.hk kernels, or .toml kernel libraries) to cubins with launch
    metadata JSON beside each."""
    try:
        maps = parse_prefix_maps(prefix_maps)
        planned = plan(files, output, out_dir, parse_defines(defines), depfile, depfile_path)
        if manifest:
            refuse_clobbering([str(job.source) for job in planned] + list(files),
                              {Path(manifest): "--manifest"}, planned)
    except PlanError as exc:
        raise _usage_error(exc) from None
    except CompileError as exc:  # a library file that cannot be read
        diagnostics.emit(describe(exc, None))
        sys.exit(EXIT_USER)
    if shard is not None:
        from hopperc.buildsys.shard import select
        planned = select(planned, shard, lambda job: job.cubin.name)
    cache = None if no_cache else open_cache()
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    worst = 0
    try:
        results = run(planned, arch, maps, cache, jobs, diagnostics, quiet, werror)
        _warn_remote_failure(cache, diagnostics)
        if manifest:
            worst = _write_manifest(Path(manifest), results, arch, diagnostics, shard)
    except Interrupted as stop:
        click.echo("hopperc: interrupted; no partial outputs left", err=True)
        sys.exit(128 + stop.signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = [r for r in results if r.exit_code]
    if (len(results) > 1 or shard) and not quiet:
        _say(_count_line(results, failed, shard), diagnostics)
    sys.exit(max([worst, *(r.exit_code for r in results)]))


def _usage_error(exc: PlanError) -> click.UsageError:
    if exc.param_hint:
        return click.BadParameter(exc.message, param_hint=exc.param_hint)
    return click.UsageError(exc.message)


def _count_line(results: list[JobResult], failed: list[JobResult], shard) -> str:
    cached = sum(r.cached and not r.exit_code for r in results)
    by_warnings = sum(r.failed_by_warnings for r in failed)
    return (f"{f'shard {shard}: ' if shard else ''}{len(results)} kernels: {len(results) - len(failed)} built"
            f"{f' ({cached} from the cache)' if cached else ''}"
            f"{f', {len(failed)} failed' if failed else ''}"
            f"{f' ({by_warnings} for warnings: --Werror)' if by_warnings else ''}")


def _parse_shard(value: str | None):
    from hopperc.buildsys.shard import parse_shard
    try:
        return None if value is None else parse_shard(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--shard") from None


def _warn_remote_failure(cache: BuildCache | None, diagnostics: Diagnostics) -> None:
    """The remote tier's first failure, once: the build went on without it."""
    for failure in cache.remote_warnings() if cache is not None else ():
        diagnostics.emit(failure)


def _write_manifest(path: Path, results: list[JobResult], arch: str,
                    diagnostics: Diagnostics, shard=None) -> int:
    from hopperc.buildsys.manifest import manifest_text
    from hopperc.buildsys.outputs import write_atomically
    try:
        write_atomically({path: manifest_text(results, arch, shard).encode()})
    except CompileError as exc:
        diagnostics.emit(describe(exc, None))
        return EXIT_USER
    return 0


def _interrupt(signum, _frame):
    raise Interrupted(signum)


def _say(line: str, diagnostics: Diagnostics) -> None:
    click.echo(line, err=diagnostics.machine_readable_stdout)


def run(jobs: list[BuildJob], arch: str, maps, cache: BuildCache | None, workers: int,
        diagnostics: Diagnostics, quiet: bool, werror: bool = False) -> list[JobResult]:
    """Build every job (hits from the cache, misses compiled in up to `workers`
    processes), writing and reporting each in the order given."""
    from hopperc.buildsys.manifest import declared_kernel
    results, sources, keys = [], {}, {}
    for index, job in enumerate(jobs):
        result = JobResult(job, recorded_name=recorded_name(str(job.source), maps))
        results.append(result)
        try:
            sources[index] = read_source(job.source)
        except CompileError as exc:
            result.problems, result.exit_code = (describe(exc, None),), EXIT_USER
            continue
        result.kernel = declared_kernel(sources[index].text)
        if cache is not None:
            keys[index] = build_key(sources[index].text, result.recorded_name, job.defines, arch)
            result.entry = cache.get(keys[index])
            result.cached, result.remote = result.entry is not None, cache.origin == "remote"
    misses = [i for i in sources if results[i].entry is None]
    compiled = _compile([(sources[i], jobs[i].defines, arch, results[i].recorded_name)
                         for i in misses], workers)
    from hopperc.cli.progress import Progress
    progress = Progress.on_stderr(len(results), diagnostics.form, quiet)
    try:
        _finish(results, compiled, misses, sources, keys, cache, diagnostics, quiet, werror,
                progress)
    finally:
        progress.clear()
        compiled.close()  # stops the workers when interrupted
    return results


def _finish(results, compiled, misses, sources, keys, cache, diagnostics, quiet,
            werror, progress) -> None:
    """Take each result in order: write its outputs, store it, report it."""
    stored = unwritable = False
    misses = set(misses)
    for index, result in enumerate(results):
        progress.show(index, result.job.cubin.stem)
        if index in misses:
            result.entry, result.problems = next(compiled)
            progress.clear()
            result.exit_code = max((p.exit_code for p in result.problems), default=0)
            if result.entry is not None and cache is not None:
                if cache.put(keys[index], result.entry):
                    stored = True
                elif not unwritable:
                    unwritable = True
                    diagnostics.emit(cache.unwritable_warning())
        elif result.cached:
            from hopperc.buildsys.jobs import replayed_warnings
            result.problems = replayed_warnings(result.entry, sources[index])
        progress.clear()
        _as_reported(result, werror)
        if result.entry is not None and not result.exit_code:
            _write(result, sources[index])
        for problem in result.problems:
            diagnostics.emit(problem)
        if result.entry is not None and not result.exit_code and not quiet:
            _say(_summary_line(result), diagnostics)
    if stored:
        cache.prune()


def _as_reported(result: JobResult, werror: bool) -> None:
    """With --Werror a kernel's warnings are errors: it fails and writes nothing
    (its build stays in the cache: a hit fails the same way). A library's kernel
    names its variant in each of its problems: the same source builds several."""
    problems = result.problems
    if werror and any(p.severity == "warning" for p in problems):
        problems = tuple(as_error(p, WERROR_NOTE) if p.severity == "warning" else p
                         for p in problems)
        result.failed_by_warnings = not result.exit_code
        result.exit_code = max(result.exit_code, EXIT_USER)
    job = result.job
    if job.library is not None:
        defines = ", ".join(f"{k}={v}" for k, v in job.defines.items())
        context = f"{job.library}: variant {job.cubin.stem}" + (f" ({defines})" if defines
                                                                  else "")
        problems = tuple(in_context(p, context) for p in problems)
    result.problems = problems


def _compile(arguments: list[tuple], workers: int):
    """Yield compile_source's result for each miss, in order."""
    from hopperc.buildsys import jobs as job_module

    if workers <= 1 or len(arguments) <= 1:
        return (job_module.compile_source(*args) for args in arguments)
    from hopperc import driver
    import multiprocessing

    driver.prepare()  # workers fork with the compiler loaded and the parser built
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(arguments)))

    def ordered():
        try:
            yield from pool.imap(_compile_one, arguments)
        finally:
            pool.terminate()
            pool.join()
    return ordered()


def _compile_one(arguments: tuple):
    from hopperc.buildsys.jobs import compile_source
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return compile_source(*arguments)


def _write(result: JobResult, source: SourceFile) -> None:
    from hopperc.buildsys.outputs import write_atomically

    job, entry = result.job, result.entry
    files = {job.cubin: entry.cubin, job.cubin.with_suffix(".json"): entry.metadata}
    if job.depfile is not None:
        from hopperc.buildsys.depfile import depfile_text
        files[job.depfile] = depfile_text(list(files), job.source, job.library).encode()
    try:
        # The cubin last: a build killed between two renames leaves the old cubin,
        # which make sees as out of date and the runtime refuses beside the new
        # metadata (whose cubin_sha256 names the new cubin).
        write_atomically(files, last=job.cubin)
    except CompileError as exc:
        result.problems += (describe(exc, source),)
        result.exit_code = EXIT_USER
        result.entry = None
        return
    import hashlib
    result.hashes = {str(path): hashlib.sha256(data).hexdigest() for path, data in files.items()}


def _summary_line(result: JobResult) -> str:
    summary = result.entry.summary
    regs = summary["registers"] if summary["registers"] is not None else "-"
    spills = "/".join(map(str, summary["spills"])) if summary["spills"] else "-"
    nvrtc = ("  remote" if result.remote else "  cached" if result.cached
             else f"{summary['nvrtc_ms']:5d} ms")
    return (f"{summary['kernel']:<18} regs {regs:>3}  spills {spills:<5} "
            f"smem {summary['shared_bytes']:>6} B  nvrtc {nvrtc}  -> {result.job.cubin}")
