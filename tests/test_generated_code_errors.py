"""NVRTC and ptxas errors in generated code are located where they belong: a CUDA
front-end error at its .hk line (through `#line`, the kernel signature included)
and its generated .cu line; a ptxas error at its PTX line, said to be one."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.backend.nvrtc import compile_cuda
from hopperc.codegen.names import kernel_symbol
from hopperc.diagnostics import SourceFile

from tests.conftest import ROOT

SAMPLE = (ROOT / "samples" / "tma_copy.hk").read_text()
KERNEL_LINE = next(i for i, x in enumerate(SAMPLE.split("\n"), 1) if x.startswith("kernel "))


def broken_build(monkeypatch, edit) -> str:
    real = driver.render

    def render(kernel, name):
        cuda, launch = real(kernel, name)
        return edit(cuda), launch

    monkeypatch.setattr(driver, "render", render)
    with pytest.raises(driver.GeneratedCodeError) as info:
        driver.build(SourceFile("bad.hk", SAMPLE))
    return str(info.value)


def test_signature_maps_to_the_kernel_line(monkeypatch) -> None:
    def edit(cuda: str) -> str:
        symbol = re.escape(kernel_symbol("tma_copy"))
        return re.sub(rf"(?m)^({symbol}\()", r"\1undefined_type u, ", cuda, count=1)

    message = broken_build(monkeypatch, edit)
    assert message.startswith(f"bad.hk:{KERNEL_LINE}: error: NVRTC rejected"), message
    assert "undefined_type" in message


def test_signature_is_preceded_by_its_line_directive() -> None:
    cuda = driver.generate(SourceFile("k.hk", SAMPLE)).cuda.split("\n")
    symbol = kernel_symbol("tma_copy")
    signature = next(i for i, x in enumerate(cuda) if x.startswith(symbol + "("))
    assert cuda[signature - 1] == f'#line {KERNEL_LINE} "k.hk"'
    assert cuda[signature - 3] == f'#line {KERNEL_LINE} "k.hk"'  # and the __global__ line


def test_ptxas_error_is_reported_at_its_ptx_line(monkeypatch) -> None:
    bogus = 'asm volatile("bogus.instruction.hk;" ::: "memory");'

    def edit(cuda: str) -> str:
        return cuda.replace("(void)hk_smem_base; (void)hk_warp;",
                            "(void)hk_smem_base; (void)hk_warp; " + bogus, 1)

    message = broken_build(monkeypatch, edit)
    found = re.search(r"at line (\d+) of the PTX \(not a \.cu or \.hk line\)", message)
    assert found, message
    assert ".cu:" not in message and "bad.hk:" not in message
    # The same source compiled to PTX only (no ptxas) has the instruction at that line.
    real = driver.render
    kernel = driver.lower(driver.check(SourceFile("bad.hk", SAMPLE)))
    cuda = edit(real(kernel, "bad.hk")[0])
    ptx = compile_cuda(cuda, "bad.cu", arch="compute_90a").ptx.split("\n")
    assert "bogus.instruction.hk" in ptx[int(found[1]) - 1]


def test_error_in_any_line_of_a_statement_maps_to_its_line(monkeypatch) -> None:
    """An element-wise statement renders as a loop of several lines: an error on
    its last line still points at the statement, not lines further down."""
    text = (ROOT / "samples" / "scale_rows.hk").read_text()
    line = next(i for i, x in enumerate(text.split("\n"), 1) if x.strip().startswith("sy ="))
    real = driver.render

    def render(kernel, name):
        cuda, launch = real(kernel, name)
        body = cuda.split("\n")
        # the last line of the store: an st.shared, or the last operand of a stmatrix
        store = max(i for i, x in enumerate(body)
                    if x.lstrip().startswith(("hk_st_shared", "hk_pack_")))
        body[store] += " undefined_thing;"
        return "\n".join(body), launch

    monkeypatch.setattr(driver, "render", render)
    with pytest.raises(driver.GeneratedCodeError) as info:
        driver.build(SourceFile("bad.hk", text))
    assert str(info.value).startswith(f"bad.hk:{line}: error: NVRTC rejected"), str(info.value)


def test_too_few_registers_at_launch_is_the_kernels_limit_at_its_header():
    """Five producer warps pad to a second warpgroup: 512 threads leave 128 registers
    each at launch, fewer than the pingpong wgmma's 128-register accumulator and its
    operands need. ptxas's refusal is a resource limit at the kernel, not a bug."""
    text = (ROOT / "samples" / "gemm_pingpong.hk").read_text().replace(
        "role load: warp regs 40", "role load: warps 5 regs 24")
    with pytest.raises(driver.ResourceLimitError) as info:
        driver.build(SourceFile("k.hk", text))
    error = info.value
    assert error.span.line == text.splitlines().index(
        next(line for line in text.splitlines() if line.startswith("kernel"))) + 1
    assert re.search(r"ptxas needs \d+ registers per thread", str(error))
    assert "512 threads has 128 at launch" in str(error)
