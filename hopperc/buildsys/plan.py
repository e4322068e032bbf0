"""What `hopperc build` is asked to do, checked before anything is written: the
jobs (a cubin each, from a .hk file or a library's kernel), their outputs, and
the names the outputs record (`--file-prefix-map`). A request that cannot be
planned raises PlanError (the command line's usage error); a library file that
cannot be read raises its CompileError."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class PlanError(Exception):
    """The options ask for something that cannot be built; `param_hint` names the
    option at fault where one is."""

    def __init__(self, message: str, param_hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.param_hint = param_hint


class BuildJob(NamedTuple):
    """One cubin to build: its source, defines and outputs."""

    source: Path
    defines: dict[str, int]
    cubin: Path
    depfile: Path | None = None
    library: Path | None = None  # the library file that asked for it

    @property
    def outputs(self) -> list[Path]:
        return [self.cubin, self.cubin.with_suffix(".json"), *([self.depfile]
                                                               if self.depfile else [])]


def parse_prefix_maps(values: tuple[str, ...]) -> list[tuple[str, str]]:
    maps = []
    for value in values:
        old, sep, new = value.partition("=")
        if not sep or not old:
            raise PlanError(f"expected OLD=NEW, got {value!r}", param_hint="--file-prefix-map")
        maps.append((old, new))
    return maps


def recorded_name(path: str, maps: list[tuple[str, str]]) -> str:
    """The source path as the outputs record it: the last map whose OLD prefixes it
    (as the C compilers' `-ffile-prefix-map` do), else the path as given."""
    for old, new in reversed(maps):
        if path == old or path.startswith(old.rstrip("/") + "/"):
            return new + path[len(old):]
    return path


def plan(files, output, out_dir, defines: dict[str, int], depfile: bool,
         depfile_path) -> list[BuildJob]:
    """Every build the command line asks for, checked before anything is written.
    Raises PlanError, or a library file's CompileError."""
    if output and len(files) > 1:
        raise PlanError("-o takes one input file; use --out-dir for several")
    if output and out_dir:
        raise PlanError("give either -o or --out-dir, not both")
    directory = Path(out_dir or ".")
    jobs: list[BuildJob] = []
    for file in files:
        if file.endswith(".toml"):
            if output:
                raise PlanError("-o names one cubin; a library builds several: use --out-dir")
            from hopperc.buildsys.library import read_library
            kernels = read_library(Path(file))
            jobs += [BuildJob(k.source, {**k.defines, **defines}, directory / f"{k.name}.cubin",
                              library=Path(file)) for k in kernels]
        else:
            jobs.append(BuildJob(Path(file), defines,
                                 Path(output) if output else directory / (Path(file).stem
                                                                          + ".cubin")))
    if depfile_path and len(jobs) > 1:
        raise PlanError("-MF takes one input file (one kernel); use -MD for several")
    jobs = [j._replace(depfile=Path(depfile_path) if depfile_path else
                       j.cubin.with_suffix(".d") if depfile else None) for j in jobs]
    refuse_clobbering([str(j.source) for j in jobs] + list(files), {}, jobs)
    return jobs


def refuse_clobbering(inputs: list[str], extra: dict[Path, str], jobs: list[BuildJob]) -> None:
    """No output may be an input, a cubin and its metadata must be two files, and
    no two kernels (or a kernel and the manifest) may share an output."""
    sources = {_same_file_key(Path(f)): f for f in inputs}
    owner = {_same_file_key(path): what for path, what in extra.items()}
    for path, what in extra.items():
        if _same_file_key(path) in sources:
            raise PlanError(f"{what} {path} would overwrite the input "
                            f"{sources[_same_file_key(path)]}")
    for job in jobs:
        if job.cubin.suffix == ".json":
            raise PlanError(f"-o {job.cubin}: name the cubin (e.g. "
                            f"{job.cubin.with_suffix('.cubin')}); its metadata goes "
                            "beside it as .json")
        who = f"{job.source}" + (f" {_describe_defines(job.defines)}"
                                 if job.library and job.defines else "")
        for out in job.outputs:
            key = _same_file_key(out)
            if key in sources:
                raise PlanError(f"{out} would overwrite the input {sources[key]}")
            if key in owner:
                raise PlanError(f"{owner[key]} and {who} would both write {out}; give "
                                "them different names or directories")
            owner[key] = who


def _describe_defines(defines: dict[str, int]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in defines.items()) + ")" if defines else ""


def _same_file_key(path: Path) -> str:
    """Two paths that name one file get one key (through links and `..`)."""
    return str(path.resolve())
