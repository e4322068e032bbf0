"""`specialize`: the compiler splits a role-free kernel into a producer warp
that issues the loads into rings and consumer warpgroups that run the rest,
and the pipeline passes connect them as they connect hand-written roles."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT, filecheck, ir_after


def _sample(name: str) -> str:
    return driver.read_source(ROOT / "samples" / f"{name}.hk").text


def test_loads_into_rings_go_to_a_producer_warp(tmp_path):
    filecheck(ir_after(_sample("gemm_pipelined"), "front-end"), """
CHECK: kernel gemm_pipelined threads 384
CHECK: role consumer warps 0..7 regs 232:
CHECK-NOT: tma.load
CHECK: for k in 0 .. K / 64:
CHECK-NEXT: wgmma acc += sa[wg of 2] @ sb^T
CHECK: role producer warps 8..11 regs 40:
CHECK-NEXT: for k in 0 .. K / 64:
CHECK-NEXT: tma.load sa <- A
CHECK-NEXT: tma.load sb <- B
""", tmp_path)


def test_same_code_as_the_hand_written_roles():
    """gemm_pipelined is gemm_bf16 without its roles: the lowered IR matches
    statement for statement once the role and pipeline names are aligned."""
    def body(name: str) -> list[str]:
        lines = [re.sub(r"\s+#.*", "", line) for line in ir_after(_sample(name)).splitlines()
                 if not line.startswith(("kernel", "  tensor", "  grid", "  shared"))]
        # role names, also inside the pipeline's and its registers' names
        text = re.sub(r"(?<![A-Za-z])(producer|load)(?![A-Za-z])", "P", "\n".join(lines))
        return re.sub(r"(?<![A-Za-z])(consumer|math)(?![A-Za-z])", "C", text).splitlines()
    assert body("gemm_pipelined") == body("gemm_bf16")


def _refused(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("s.hk", text))
    return info.value


def test_consumer_threads_are_whole_warpgroups():
    text = _sample("gemm_pipelined").replace("threads 256 specialize", "threads 192 specialize")
    assert "192 threads are not a multiple of 128" in _refused(text).message


def test_a_kernel_without_rings_has_nothing_to_specialize():
    text = _sample("gemm_pipelined").replace(" stages 4", "")
    assert "this kernel has none" in _refused(text).message


def test_hand_written_roles_and_specialize_do_not_mix():
    text = """kernel k(A: bf16[M, K]) tile(BM = 64, BK = 64) grid(m: M / BM) specialize {
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    role math: warpgroup { }
}
"""
    error = _refused(text)
    assert "'specialize' writes the kernel's roles" in error.message and error.span.line == 3


def test_specialize_and_persistent_compose():
    """The compiler's roles each get the tile loop: the ring carries across tiles
    and the simulator finds every tile right."""
    text = _sample("gemm_pipelined").replace("threads 256 specialize",
                                             "threads 256 specialize persistent").replace(
        "swizzle 128B reuses sa", "swizzle 128B")
    front_end = driver.check(SourceFile("sp.hk", text))
    lowered = driver.lower(front_end)
    assert lowered.persistent and [r.name for r in lowered.roles] == ["consumer", "producer"]
    report = simulate(lowered, front_end, make_problem(lowered, default_dims(lowered)), 4, 100)
    assert report.ok, [f.headline() for f in report.findings]


def test_explain_says_which_roles_the_compiler_wrote(hopperc_cli):
    proc = hopperc_cli("explain", str(ROOT / "samples" / "gemm_pipelined.hk"))
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.endswith("gemm_pipelined.hk:7: specialize: role 'producer' (one warp) issues "
                          "the loads into sa, sb; role 'consumer' (2 warpgroups) runs the rest, "
                          "through a 4-stage ring")
