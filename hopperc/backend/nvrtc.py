"""NVRTC compilation of generated CUDA C++ into PTX and Hopper cubins.

NVRTC is reached through ``cuda.bindings`` so that hopperc needs no CUDA
toolkit install: the ``nvidia-cuda-nvrtc`` wheel ships ``libnvrtc`` and
``cuda-pathfinder`` locates it.  The bindings are imported lazily so that the
front end stays usable on machines where NVRTC is absent.

NVRTC being unusable (library missing, an unexpected API status) raises the
project-wide ``hopperc.diagnostics.ToolchainError``, re-exported here, so the
CLI reports it like every other toolchain failure.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from hopperc.diagnostics import ToolchainError

_ARCH_RE = re.compile(r"(sm|compute)_\d{2,3}a?")
_BASE_OPTIONS = ("--ptxas-options=-v", "-lineinfo")

_ENTRY_RE = re.compile(r"^ptxas info\s*: Compiling entry function '(?P<name>[^']+)'")
_PROPERTIES_RE = re.compile(r"^ptxas info\s*: Function properties for (?P<name>\S+)")
_FRAME_RE = re.compile(
    r"^ptxas\s+\.\s+(?P<stack>\d+) bytes stack frame, "
    r"(?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_USED_RE = re.compile(r"^ptxas info\s*: Used (?P<registers>\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CUMULATIVE_STACK_RE = re.compile(r"(\d+) bytes cumulative stack size")

_FRONTEND_DIAGNOSTIC_RE = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?:catastrophic )?(?P<severity>error|warning)"
    r"(?: #[\w-]+)?: (?P<message>.*)$"
)
_PTXAS_DIAGNOSTIC_RE = re.compile(
    r"^ptxas .*?, line (?P<line>\d+); (?P<severity>error|warning)\s*: (?P<message>.*)$"
)
PTX_DIAGNOSTIC_FILE = "<ptx>"
# ptxas reports a lost overlap as info, with no line: "(C7514) Potential
# Performance Loss: wgmma.mma_async instructions are serialized due to ...".
_PTXAS_PERFORMANCE_RE = re.compile(
    r"^ptxas info\s*: \((?P<code>C\d+)\) Potential Performance Loss: (?P<message>.*?)"
    r"(?: in the function '[^']*')?\s*$"
)
PTXAS_PERFORMANCE_FILE = "<ptxas performance>"
_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:,.*\binlined_at\s+(\d+)\s+(\d+))?")
_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)


@dataclass(frozen=True)
class Resources:
    """Per-thread and per-block resources reported by ``ptxas -v``."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int


@dataclass(frozen=True)
class CompileResult:
    """Everything one NVRTC compilation produced."""

    ptx: str
    cubin: bytes
    log: str
    resources: Resources | None
    seconds: float


@dataclass(frozen=True)
class GeneratedDiagnostic:
    """One NVRTC message, located in the ``.hk`` source when ``#line`` mapped it there."""

    file: str
    line: int
    severity: str
    message: str


class NvrtcError(Exception):
    """The generated source was rejected; ``diagnostics`` locate the causes."""

    def __init__(self, message: str, log: str, diagnostics: list[GeneratedDiagnostic]):
        super().__init__(message)
        self.log = log
        self.diagnostics = diagnostics


def validate_arch(arch: str) -> None:
    """Reject malformed targets early, before NVRTC gives a vaguer message."""
    if not _ARCH_RE.fullmatch(arch):
        raise ValueError(
            f"invalid GPU architecture {arch!r}: expected sm_XX[a] or compute_XX[a] "
            "(e.g. sm_90a); note that wgmma and setmaxnreg need sm_90a"
        )


def nvrtc_version() -> tuple[int, int]:
    """Return NVRTC's (major, minor) version."""
    major, minor = _call(_bindings().nvrtcVersion)
    return major, minor


# The oldest driver that loads what each NVRTC major version builds (CUDA minor
# version compatibility: any driver of the same major release, from its first).
MINIMUM_DRIVER = {12: "525", 13: "580"}


def library_path() -> Path | None:
    """The NVRTC shared library this process compiles with, if it can be located."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return Path(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # noqa: BLE001 - not locatable: the caller lists no library
        return None


def ptx_isa_version(arch: str = "sm_90a") -> str:
    """The PTX ISA version NVRTC writes, read from the `.version` of an empty program."""
    ptx = compile_cuda('extern "C" __global__ void hk_probe() {}', "probe.cu", arch).ptx
    match = re.search(r"^\.version\s+(\S+)", ptx, re.M)
    return match.group(1) if match else "unknown"


def compile_cuda(
    source: str,
    name: str,
    arch: str = "sm_90a",
    extra_options: tuple[str, ...] = (),
    reproducible: bool = False,
) -> CompileResult:
    """Compile ``source`` (called ``name`` in diagnostics) to PTX and, for sm_* targets, a cubin.

    ``reproducible`` compiles from "/" (see ``_from_root_directory``): the command
    line asks for it; a library call does not, as it would move the working
    directory of every thread of the caller for the length of the compile."""
    validate_arch(arch)
    nvrtc = _bindings()
    options = [f"--gpu-architecture={arch}", *_BASE_OPTIONS, *extra_options]
    program = _call(nvrtc.nvrtcCreateProgram, source.encode(), name.encode(), 0, [], [])
    try:
        start = time.perf_counter()
        with _from_root_directory() if reproducible else nullcontext():
            status = _invoke(nvrtc.nvrtcCompileProgram, program, len(options),
                             [o.encode() for o in options])[0]
        seconds = time.perf_counter() - start
        log = _read_text(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, program)
        _raise_for_compile_status(nvrtc, status, name, log)
        ptx = _read_text(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, program)
        cubin = _read_bytes(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, program)
    finally:
        _call(nvrtc.nvrtcDestroyProgram, program)
    return CompileResult(ptx, cubin, log, summarise_resources(parse_ptxas_log(log)), seconds)


_DIRECTORY_LOCK = threading.Lock()


@contextmanager
def _from_root_directory():
    """Run NVRTC with "/" as the working directory, then return.

    With `-lineinfo` NVRTC records its working directory in the cubin's line
    table, and the mtime and size of each `#line` file it finds from there.
    From "/" the directory is always "/" and a relative name is not found, so
    the cubin depends neither on where the build ran nor on file times.
    """
    with _DIRECTORY_LOCK:
        here = os.open(".", getattr(os, "O_PATH", os.O_RDONLY))
        try:
            os.chdir("/")
            yield
        finally:
            os.fchdir(here)
            os.close(here)


def parse_diagnostics(log: str) -> list[GeneratedDiagnostic]:
    """Extract front-end (``FILE(LINE): error: ...``) and ptxas (PTX line) messages,
    and ptxas's reports of lost wgmma overlap (no line: file PTXAS_PERFORMANCE_FILE)."""
    diagnostics = []
    for line in log.splitlines():
        if match := _FRONTEND_DIAGNOSTIC_RE.match(line):
            file = match["file"]
        elif match := _PTXAS_DIAGNOSTIC_RE.match(line):
            file = PTX_DIAGNOSTIC_FILE
        elif match := _PTXAS_PERFORMANCE_RE.match(line):
            message = " ".join(match["message"].split())
            diagnostics.append(GeneratedDiagnostic(PTXAS_PERFORMANCE_FILE, 0, "warning",
                                                   f"ptxas {match['code']}: {message}"))
            continue
        else:
            continue
        diagnostics.append(GeneratedDiagnostic(file, int(match["line"]), match["severity"], match["message"]))
    return diagnostics


def ptx_source_line(ptx: str, ptx_line: int, file: str) -> int | None:
    """The line of `file` that PTX line `ptx_line` was generated for, from the last
    `.loc` before it (`-lineinfo` writes them): its line if it is in `file`, the
    line it was inlined at if that is in `file`, else None (code of another file)."""
    # NVRTC writes a relative name as seen from its working directory, "/".
    ours = {index for index, name in _FILE_RE.findall(ptx)
            if name in (file, posixpath.join("/", file))}
    for text in reversed(ptx.split("\n")[:ptx_line]):
        if match := _LOC_RE.match(text):
            if match[1] in ours:
                return int(match[2])
            return int(match[4]) if match[3] in ours else None
    return None


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Per-function resources from ``ptxas -v``; non-inlined device functions report no registers.

    ptxas prints, per function::

        ptxas info    : Compiling entry function 'big' for 'sm_90a'
        ptxas info    : Function properties for big
        ptxas         .     1168 bytes stack frame, 1152 bytes spill stores, 1344 bytes spill loads
        ptxas info    : Used 32 registers, used 1 barriers, 1032 bytes smem, 1168 bytes cumulative stack size

    The ``smem`` and ``cumulative stack`` clauses only appear when non-zero.
    """
    fields: dict[str, dict[str, int]] = {}
    entry = properties_of = None
    for line in log.splitlines():
        if match := _ENTRY_RE.match(line):
            entry = match["name"]
        elif match := _PROPERTIES_RE.match(line):
            properties_of = match["name"]
        elif (match := _FRAME_RE.match(line)) and properties_of is not None:
            fields.setdefault(properties_of, {}).update(
                stack_bytes=int(match["stack"]),
                spill_stores=int(match["stores"]),
                spill_loads=int(match["loads"]),
            )
        elif (match := _USED_RE.match(line)) and entry is not None:
            fields.setdefault(entry, {}).update(_used_line_fields(line, int(match["registers"])))
    return {function: _resources_from(values) for function, values in fields.items()}


def summarise_resources(per_function: dict[str, Resources]) -> Resources | None:
    """Worst case over a program's functions (hopperc emits one kernel per program).

    Registers, stack and shared memory take the maximum; spills are summed so
    that spills in non-inlined device functions are not hidden.
    """
    if not per_function:
        return None
    values = per_function.values()
    return Resources(
        registers=max(r.registers for r in values),
        spill_stores=sum(r.spill_stores for r in values),
        spill_loads=sum(r.spill_loads for r in values),
        stack_bytes=max(r.stack_bytes for r in values),
        shared_bytes=max(r.shared_bytes for r in values),
    )


def _used_line_fields(line: str, registers: int) -> dict[str, int]:
    """Fields of a ``Used N registers`` line; cumulative stack includes callees."""
    fields = {"registers": registers}
    if match := _SMEM_RE.search(line):
        fields["shared_bytes"] = int(match[1])
    if match := _CUMULATIVE_STACK_RE.search(line):
        fields["stack_bytes"] = int(match[1])
    return fields


def _resources_from(values: dict[str, int]) -> Resources:
    return Resources(
        registers=values.get("registers", 0),
        spill_stores=values.get("spill_stores", 0),
        spill_loads=values.get("spill_loads", 0),
        stack_bytes=values.get("stack_bytes", 0),
        shared_bytes=values.get("shared_bytes", 0),
    )


def _raise_for_compile_status(nvrtc: ModuleType, status: Any, name: str, log: str) -> None:
    """Bad source and bad options are the user's problem (NvrtcError); anything else is ours."""
    result = nvrtc.nvrtcResult
    if status == result.NVRTC_SUCCESS:
        return
    if status in (result.NVRTC_ERROR_COMPILATION, result.NVRTC_ERROR_INVALID_OPTION):
        diagnostics = parse_diagnostics(log)
        raise NvrtcError(f"NVRTC failed to compile {name}: {_summary(diagnostics, log)}", log, diagnostics)
    raise ToolchainError(f"nvrtcCompileProgram failed with {status.name}:\n{log}")


def _summary(diagnostics: list[GeneratedDiagnostic], log: str) -> str:
    """The first error, so that the exception message alone is actionable."""
    for d in diagnostics:
        if d.severity == "error":
            return f"{d.file}:{d.line}: {d.message}"
    lines = log.strip().splitlines()
    return lines[0] if lines else "no log"


def _read_bytes(size_fn: Callable[..., Any], read_fn: Callable[..., Any], program: Any) -> bytes:
    """NVRTC's two-step size-then-copy protocol."""
    size = _call(size_fn, program)
    if not size:
        return b""
    buffer = bytearray(size)
    _call(read_fn, program, buffer)
    return bytes(buffer)


def _read_text(size_fn: Callable[..., Any], read_fn: Callable[..., Any], program: Any) -> str:
    """Like ``_read_bytes`` but decoded, without the C string's trailing NULs."""
    return _read_bytes(size_fn, read_fn, program).rstrip(b"\0").decode(errors="replace")


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a binding that returns ``(nvrtcResult, *values)``; any failure is a ToolchainError."""
    status, *values = _invoke(fn, *args)
    if status != _bindings().nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(f"{fn.__name__} failed with {status.name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _invoke(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """The bindings load libnvrtc on first use and raise RuntimeError if it is missing."""
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise ToolchainError(f"NVRTC is unusable ({exc}); install the nvidia-cuda-nvrtc package") from exc


def _bindings() -> ModuleType:
    """Import lazily so that hopperc imports without cuda-bindings installed."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise ToolchainError(f"cuda.bindings is not importable ({exc}); install cuda-bindings") from exc
    return nvrtc
