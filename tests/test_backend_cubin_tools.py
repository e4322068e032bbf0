"""nvdisasm / cuobjdump wrappers on a real sm_90a cubin."""

from __future__ import annotations

import re

import pytest

from hopperc.backend import cubin_tools
from hopperc.backend.cubin_tools import (
    ToolFailed,
    ToolMissing,
    disassemble,
    elf_attributes,
    find_tool,
    opcode,
    resource_usage,
    sass_instructions,
)
from hopperc.backend.nvrtc import compile_cuda
from hopperc.diagnostics import ToolchainError

KERNELS = """
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void barrier_init(int* out) {
  __shared__ unsigned long long bar;
  if (threadIdx.x == 0)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar)));
  __syncthreads();
  out[threadIdx.x] = threadIdx.x;
}
"""


def _require(tool: str) -> None:
    try:
        find_tool(tool)
    except ToolMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def cubin() -> bytes:
    return compile_cuda(KERNELS, "kernels.cu").cubin


def test_disassemble_names_kernels(cubin: bytes) -> None:
    _require("nvdisasm")
    listing = disassemble(cubin)
    assert "axpy:" in listing
    assert "barrier_init:" in listing


def test_sass_instructions_show_mbarrier_init(cubin: bytes) -> None:
    _require("nvdisasm")
    instructions = sass_instructions(cubin)
    assert set(instructions) == {"axpy", "barrier_init"}
    assert any(opcode(i).startswith("SYNCS.EXCH.64") for i in instructions["barrier_init"])
    assert not any(opcode(i).startswith("SYNCS") for i in instructions["axpy"])
    assert any(re.match(r"@!?U?P\w+ \S", i) for i in instructions["axpy"])


def test_opcode_strips_predicate() -> None:
    assert opcode("@!UP0 SYNCS.EXCH.64 URZ,[UR6],UR4") == "SYNCS.EXCH.64"
    assert opcode("HGMMA.64x256x16.F32.BF16 R24,gdesc[UR4],R24") == "HGMMA.64x256x16.F32.BF16"
    assert opcode("") == ""


def test_resource_usage_of_simple_kernel(cubin: bytes) -> None:
    _require("cuobjdump")
    usage = resource_usage(cubin)
    assert usage["axpy"]["STACK"] == 0
    assert usage["axpy"]["LOCAL"] == 0
    assert usage["axpy"]["REG"] > 0
    assert usage["barrier_init"]["SHARED"] >= 8


def test_elf_attributes_count_mbarriers(cubin: bytes) -> None:
    _require("cuobjdump")
    attributes = elf_attributes(cubin)
    assert attributes["barrier_init"]["EIATTR_NUM_MBARRIERS"] == 1
    assert "EIATTR_NUM_MBARRIERS" not in attributes["axpy"]
    assert attributes["axpy"]["EIATTR_REGCOUNT"] == resource_usage(cubin)["axpy"]["REG"]


def test_garbage_input_raises_tool_failed() -> None:
    _require("nvdisasm")
    with pytest.raises(ToolFailed, match="nvdisasm"):
        disassemble(b"not a cubin")


def test_find_tool_names_the_package_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    pathfinder = pytest.importorskip("cuda.pathfinder")
    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", lambda name: None)
    with pytest.raises(ToolMissing, match="nvidia-cuda-nvdisasm") as missing:
        find_tool("nvdisasm")
    assert "pip install 'hopperc[sass]'" in str(missing.value)


def test_find_tool_wraps_lookup_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    pathfinder = pytest.importorskip("cuda.pathfinder")

    def broken(name: str) -> str:
        raise RuntimeError("lookup failed")

    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", broken)
    with pytest.raises(ToolMissing, match="nvidia-cuda-cuobjdump"):
        find_tool("cuobjdump")


def test_wrappers_propagate_tool_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise ToolMissing(f"{name} was not found")

    monkeypatch.setattr(cubin_tools, "find_tool", missing)
    with pytest.raises(ToolMissing, match="cuobjdump"):
        resource_usage(b"")


def test_tool_errors_are_toolchain_errors() -> None:
    assert issubclass(ToolMissing, ToolchainError)
    assert issubclass(ToolFailed, ToolchainError)


def test_a_branch_with_a_condition_operand_is_a_loop_to_its_last_operand():
    """`@!P3 BRA !P0, 0x20` (nvdisasm's form with a branch condition) jumps to
    0x20: instruction 2, a loop back from instruction 5."""
    from hopperc.backend.sass_metrics import Instruction, loops
    code = [Instruction("NOP", "", "")] * 5 + [Instruction("BRA", "@!P3", "!P0, 0x20")]
    assert [(lp.start, lp.end) for lp in loops(code)] == [(2, 5)]
