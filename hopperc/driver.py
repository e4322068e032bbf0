"""The compiler driver: text -> AST -> IR -> passes -> CUDA -> cubin.

Each stage is a function so the CLI, the Python API and the tests drive the
same code; the pass list comes from `hopperc.passes` only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from hopperc.backend.nvrtc import PTX_DIAGNOSTIC_FILE, CompileResult, NvrtcError, compile_cuda
from hopperc.codegen.launch import LaunchInfo
from hopperc.codegen.render import render
from hopperc.codegen.semaphores import COUNT_SLOT_BYTES
# read_source and the target's names are re-exported: the API and the tests use them here.
from hopperc.diagnostics import CompileError, SourceFile, ToolchainError, read_source  # noqa: F401
from hopperc.frontend import ast
from hopperc.frontend.limits import ResourceLimitError, check_shared_memory
from hopperc.frontend.parser import load_parser, parse
from hopperc.frontend.semantic import analyze
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.verify import verify
from hopperc.passes import PASS_NAMES, pipeline
from hopperc.target import (DEFAULT_ARCH, DEFAULT_SEARCH, DEFAULT_SEEDS,  # noqa: F401
                            DEFAULT_STEPS, SUPPORTED_ARCHS, UnsupportedArchError, check_arch)

if TYPE_CHECKING:
    from hopperc.sim.explore import Report


@dataclass(frozen=True)
class Generated:
    kernel: ir.Kernel  # after the whole pipeline
    cuda: str
    launch: LaunchInfo


@dataclass(frozen=True)
class Built:
    generated: Generated
    result: CompileResult
    arch: str


class GeneratedCodeError(ToolchainError):
    """NVRTC rejected the CUDA hopperc generated: a compiler bug, located both ways."""


def prepare() -> None:
    """Build the parser now: worker processes forked afterwards share it."""
    load_parser()


def parse_source(source: SourceFile) -> ast.Kernel:
    return parse(source)


def check(source: SourceFile, defines: dict[str, int] | None = None) -> ir.Kernel:
    """Parse and check; returns the kernel IR as the front end builds it."""
    kernel = analyze(parse(source), defines)
    verify(kernel, "front end")
    return kernel


def lower(kernel: ir.Kernel, after: str | None = None) -> ir.Kernel:
    """Run the pipeline (up to and including `after`), verifying after each pass."""
    if after is not None and after not in PASS_NAMES:
        raise ValueError(f"unknown pass {after!r}; passes: {', '.join(PASS_NAMES)}")
    bound = PASS_NAMES.index("allocate_load_barriers")
    for index, (name, run) in enumerate(pipeline()):
        try:
            kernel = run(kernel)
        except CompileError as error:
            error.rule = "lowering"
            raise
        verify(kernel, name, loads_bound=index >= bound, elected=name == PASS_NAMES[-1])
        if name == after:
            break
    return kernel


def generate(source: SourceFile, defines: dict[str, int] | None = None,
             recorded_name: str | None = None) -> Generated:
    """The CUDA for `source`; `recorded_name` is the file name its `#line`s give
    the cubin's line table (default: the name the source was read by)."""
    kernel = lower(check(source, defines))
    cuda, launch = render(kernel, recorded_name or source.name)
    # The passes add mbarriers and the base-alignment slack: check the final figure,
    # with a counter's broadcast slot (static shared memory, the same 227 KB).
    slot = COUNT_SLOT_BYTES if any(isinstance(s, ir.Count) for s in walk(kernel.body)) else 0
    check_shared_memory(launch.dynamic_shared_bytes + slot, kernel.span, kernel.buffers)
    return Generated(kernel, cuda, launch)


def simulate(source: SourceFile, defines: dict[str, int] | None = None,
             shapes: dict[str, int] | None = None, seeds: int = DEFAULT_SEEDS,
             search: int = DEFAULT_SEARCH, steps: int = DEFAULT_STEPS,
             jobs: int = 1, inputs: Mapping[str, object] | None = None,
             progress=None) -> Report:
    """Lower the kernel and run it on the CPU model (`hopperc sim` / `check`),
    in `jobs` worker processes (1: in this one); `progress(done, total)` as each
    schedule ends. `inputs`: the user's arrays and
    scalar arguments by name (`sim/user_inputs.py`), run on every block, in place
    of drawn ones on the default shapes; their shapes fix the dimensions, and
    `shapes` gives only those no array has."""
    front_end = check(source, defines)
    lowered = lower(front_end)
    # The simulator (and numpy) load only here: `build` and `emit` never simulate.
    from concurrent.futures.process import BrokenProcessPool

    from hopperc.sim.explore import simulate as explore
    from hopperc.sim.problem import MAX_BLOCKS, check_size, make_problem
    from hopperc.sim.user_inputs import problem_from_arrays
    if inputs is None:
        dims = problem_dims(lowered, shapes, source.name)
        check_size(lowered, dims)
    try:
        problem = problem_from_arrays(lowered, inputs, shapes, source.name) \
            if inputs is not None else make_problem(lowered, dims, max_blocks=MAX_BLOCKS)
        return explore(lowered, front_end, problem, seeds, search, steps=steps, jobs=jobs,
                       progress=progress)
    except MemoryError:
        raise CompileError(lowered.span, "the simulation ran out of host memory; give smaller "
                                         "sizes with `hopperc sim --shape NAME=VALUE,...`") \
            from None
    except BrokenProcessPool:
        raise CompileError(lowered.span, "a worker process of the simulation was killed (out "
                                         "of host memory?); give smaller sizes with `hopperc "
                                         "sim --shape NAME=VALUE,...`, or -j 1") from None


def problem_dims(kernel: ir.Kernel, shapes: dict[str, int] | None, file: str) -> dict[str, int]:
    """The default small dimensions of `kernel`, with `--shape` overrides checked."""
    from hopperc.sim.problem import default_dims
    dims = default_dims(kernel)
    for name, value in (shapes or {}).items():
        if name not in dims:
            known = ", ".join(dims) or "none"
            raise CompileError(None, f"--shape: the kernel has no dimension '{name}' "
                                     f"(it has: {known})", file=file)
        if value < 1:
            raise CompileError(None, f"--shape: {name} must be positive, not {value}", file=file)
        dims[name] = value
    return dims


def build(source: SourceFile, defines: dict[str, int] | None = None,
          arch: str = DEFAULT_ARCH, recorded_name: str | None = None,
          reproducible: bool = False) -> Built:
    """Source to cubin. `reproducible`: the cubin records neither the working
    directory nor file times (NVRTC runs from "/"; for `hopperc build`)."""
    check_arch(arch)
    generated = generate(source, defines, recorded_name)
    # The program name becomes a PTX `.file` string, which ptxas reads unescaped.
    cu_name = re.sub(r"[^\w.+-]", "_", Path(source.name).with_suffix(".cu").name, flags=re.ASCII)
    try:
        result = compile_cuda(generated.cuda, cu_name, arch, reproducible=reproducible)
    except NvrtcError as exc:
        raise _too_few_registers(exc, generated.kernel) or \
            _locate(exc, generated.cuda, cu_name, arch) from None
    return Built(generated, result, arch)


_INSUFFICIENT_REGISTERS = re.compile(r"Insufficient registers \((\d+)\).*register target of (\d+)")


def _too_few_registers(exc: NvrtcError, kernel: ir.Kernel) -> ResourceLimitError | None:
    """ptxas allocates every instruction within the launch's share of the register
    file (`__launch_bounds__(threads, 1)`): setmaxnreg moves registers between
    warpgroups only while the kernel runs. An instruction needing more (a wgmma
    with a wide accumulator, in a block of many warps) is the kernel's resource
    limit, reported at its header, not a compiler bug."""
    match = _INSUFFICIENT_REGISTERS.search(exc.log)
    if match is None:
        return None
    have, need = int(match.group(1)), int(match.group(2))
    return ResourceLimitError(kernel.span, (
        f"ptxas needs {need} registers per thread for one of this kernel's instructions, but "
        f"each of the block's {kernel.threads} threads has {have} at launch (the register "
        "file shared by the block; a role's 'regs' applies only once it runs): run fewer "
        "warps in the block or use smaller tiles"))


def _locate(exc: NvrtcError, cuda: str, cu_name: str, arch: str) -> GeneratedCodeError:
    """Report an NVRTC error at its .hk line (from #line) and its generated line.

    NVRTC reports only the #line-mapped location, so the source is compiled
    once more with the directives blanked out to learn the generated line.
    """
    first = next((d for d in exc.diagnostics if d.severity == "error"), None)
    if first is None:
        return GeneratedCodeError(f"NVRTC failed on generated code:\n{exc.log.strip()}")
    if first.file == PTX_DIAGNOSTIC_FILE:
        # ptxas numbers the lines of the PTX NVRTC wrote, not of the .cu or the .hk file.
        return GeneratedCodeError(
            f"ptxas rejected the PTX generated for {cu_name} at line {first.line} of "
            f"the PTX (not a .cu or .hk line): {first.message}\nnote: this is a bug in "
            "hopperc; please report it with the .hk file")
    unmapped = re.sub(r'(?m)^#line \d+ "[^"]*"$', "", cuda)
    generated_line = ""
    try:
        compile_cuda(unmapped, cu_name, arch)
    except NvrtcError as again:
        raw = next((d for d in again.diagnostics if d.severity == "error"), None)
        cuda_lines = cuda.split("\n")
        if raw is not None and 0 < raw.line <= len(cuda_lines):
            text = cuda_lines[raw.line - 1].strip()
            generated_line = f"\n{cu_name}:{raw.line}: generated code: {text}"
    return GeneratedCodeError(
        f"{first.file}:{first.line}: error: NVRTC rejected the code generated for this line: "
        f"{first.message}{generated_line}\nnote: this is a bug in hopperc; please report it "
        "with the .hk file")
