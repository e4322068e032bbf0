"""NVRTC back end: real compiles of tiny self-contained sm_90a kernels."""

from __future__ import annotations

import pytest

from hopperc.backend import nvrtc as backend
from hopperc.backend.nvrtc import (
    CompileResult,
    GeneratedDiagnostic,
    NvrtcError,
    Resources,
    ToolchainError,
    compile_cuda,
    nvrtc_version,
    parse_ptxas_log,
    validate_arch,
)

AXPY = """
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

MAPPED_ERROR = """extern "C" __global__ void broken(float* out) {
#line 7 "demo.hk"
  out[0] = undefined_name;
}
"""

SPILL_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'big' for 'sm_90a'
ptxas info    : Function properties for big
ptxas         .     1168 bytes stack frame, 1152 bytes spill stores, 1344 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1032 bytes smem, 1168 bytes cumulative stack size
ptxas info    : Compile time = 47.765 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     0 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads
"""


@pytest.fixture(scope="module")
def axpy() -> CompileResult:
    return compile_cuda(AXPY, "axpy.cu")


def test_compile_gives_ptx_and_elf_cubin(axpy: CompileResult) -> None:
    assert ".version" in axpy.ptx
    assert ".entry axpy" in axpy.ptx
    assert not axpy.ptx.endswith("\0")
    assert axpy.cubin[:4] == b"\x7fELF"
    assert axpy.seconds > 0


def test_compile_parses_ptxas_resources(axpy: CompileResult) -> None:
    assert "ptxas info" in axpy.log
    assert axpy.resources is not None
    assert axpy.resources.registers > 0
    assert (axpy.resources.spill_stores, axpy.resources.spill_loads) == (0, 0)
    assert axpy.resources.stack_bytes == 0


def test_parse_ptxas_log_reads_spills_stack_and_smem() -> None:
    per_function = parse_ptxas_log(SPILL_LOG)
    assert per_function["big"] == Resources(
        registers=32, spill_stores=1152, spill_loads=1344, stack_bytes=1168, shared_bytes=1032
    )
    assert per_function["_Z6helperPfi"].spill_stores == 16
    summary = backend.summarise_resources(per_function)
    assert summary == Resources(
        registers=32, spill_stores=1168, spill_loads=1360, stack_bytes=1168, shared_bytes=1032
    )


def test_line_directive_maps_diagnostics_to_hk_source() -> None:
    with pytest.raises(NvrtcError) as caught:
        compile_cuda(MAPPED_ERROR, "demo.cu")
    error = caught.value
    expected = GeneratedDiagnostic("demo.hk", 7, "error", 'identifier "undefined_name" is undefined')
    assert expected in error.diagnostics
    assert "demo.hk(7)" in error.log
    assert "demo.hk:7" in str(error)


def test_ptxas_errors_become_ptx_diagnostics() -> None:
    source = 'extern "C" __global__ void k() { asm volatile("wgmma.fence.sync.aligned;"); }'
    with pytest.raises(NvrtcError) as caught:
        compile_cuda(source, "k.cu", arch="sm_90")
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.file == backend.PTX_DIAGNOSTIC_FILE
    assert diagnostic.severity == "error"
    assert "wgmma.fence" in diagnostic.message


def test_warnings_are_parsed_with_their_location() -> None:
    log = 'demo.hk(8): warning #177-D: variable "unused" was declared but never referenced\n'
    assert backend.parse_diagnostics(log) == [
        GeneratedDiagnostic("demo.hk", 8, "warning", 'variable "unused" was declared but never referenced')
    ]


def test_bad_option_raises_nvrtc_error() -> None:
    with pytest.raises(NvrtcError, match="unrecognized option"):
        compile_cuda(AXPY, "axpy.cu", extra_options=("--no-such-option",))


def test_compute_target_gives_ptx_only() -> None:
    result = compile_cuda(AXPY, "axpy.cu", arch="compute_90a")
    assert ".entry axpy" in result.ptx
    assert result.cubin == b""
    assert result.resources is None


@pytest.mark.parametrize("arch", ["sm_90a", "sm_90", "compute_90a", "sm_100a"])
def test_validate_arch_accepts(arch: str) -> None:
    validate_arch(arch)


@pytest.mark.parametrize("arch", ["sm90", "sm_90x", "90a", "compute_9", ""])
def test_validate_arch_rejects(arch: str) -> None:
    with pytest.raises(ValueError, match="sm_90a"):
        validate_arch(arch)


def test_compile_rejects_bad_arch_before_nvrtc() -> None:
    with pytest.raises(ValueError):
        compile_cuda(AXPY, "axpy.cu", arch="sm90")


def test_nvrtc_version() -> None:
    major, minor = nvrtc_version()
    assert major >= 12 and minor >= 0


def test_missing_library_is_a_toolchain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    bindings = backend._bindings()

    def unavailable() -> None:
        raise RuntimeError("Failure finding libnvrtc.so")

    monkeypatch.setattr(bindings, "nvrtcVersion", unavailable)
    with pytest.raises(ToolchainError, match="nvidia-cuda-nvrtc"):
        nvrtc_version()


def test_only_a_reproducible_build_moves_the_working_directory(monkeypatch):
    """`hopperc.compile` and the driver run in the caller's process, maybe beside
    other threads: they must not chdir. `hopperc build` asks for it."""
    import os

    from hopperc import driver
    from tests.conftest import ROOT
    moves = []
    real_chdir = os.chdir
    monkeypatch.setattr(os, "chdir", lambda path: (moves.append(path), real_chdir(path)))
    source = driver.read_source(ROOT / "samples" / "tma_copy.hk")
    driver.build(source)
    assert moves == []
    driver.build(source, reproducible=True)
    assert moves == ["/"] and os.getcwd() != "/"
