"""Warnings in every form and `--Werror`: ptxas's spills are a located warning
(text, JSON, SARIF), replayed on a cache hit; `--Werror` fails the kernel that
warns, writes none of its outputs and says why. One library, built once with
NVRTC (two kernels); every other run is a cache hit."""
from __future__ import annotations

import json

import pytest

from tests.builds.helpers import TMA_COPY, hopperc, write_library

# Two 64 x 256 f32 accumulators in one warpgroup: 256 registers of accumulator per
# thread, more than the 255 ptxas may give one.
TWO_ACCUMULATORS = """# two accumulators
kernel two_acc(A: bf16[M, K], B: bf16[N, K], C: bf16[M, N])
    tile(BM = 64, BN = 256, BK = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    shared sc: bf16[BM, 64] swizzle 128B

    acc: f32[BM, BN] = 0
    acc2: f32[BM, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
        acc2 += sa @ sb^T
    }
    sc = bf16(acc[:, 0 : 64] + acc2[:, 0 : 64])
    tma C[tile.m, 4 * tile.n] <- sc
}
"""
LIBRARY = '''[[kernel]]
source = "copy.hk"

[[kernel]]
source = "spill.hk"
[[kernel.variant]]
name = "spill_bk64"
defines = { BK = 64 }
'''


@pytest.fixture(scope="module")
def first_build(tmp_path_factory):
    """The library built once into a cache, with JSON diagnostics."""
    root = tmp_path_factory.mktemp("warnings")
    write_library(root, LIBRARY, {"copy.hk": TMA_COPY, "spill.hk": TWO_ACCUMULATORS})
    proc = hopperc("build", "kernels.toml", "--out-dir", "out", "-j", "1", "--diagnostics",
                   "json", cwd=root, cache=root / "cache")
    return root, proc


def _records(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_spills_are_a_warning_at_the_kernel_line(first_build):
    root, proc = first_build
    assert proc.returncode == 0, proc.stderr
    (spill,) = [r for r in _records(proc.stderr) if r["rule"] == "ptxas-spill"]
    assert spill["severity"] == "warning" and spill["exit_code"] == 0
    assert (spill["file"], spill["line"], spill["column"]) == ("spill.hk", 2, 1)
    message = spill["message"]
    assert message.startswith("kernels.toml: variant spill_bk64 (BK=64): ptxas spills "
                              "registers to local memory: ")
    assert " bytes stored, " in message and "at 255 registers per thread (at most 255 for " \
        "128 threads)" in message and "`regs`" in message
    assert spill["notes"] == ["the largest register tiles: 'acc' (line 9) 128 per thread, "
                              "'acc2' (line 10) 128 per thread"]
    summary = json.loads((root / "out" / "spill_bk64.json").read_text())["resources"]
    assert f"{summary['spill_stores']} bytes stored" in message


def test_a_hit_replays_the_spill_warning_in_text_and_sarif(first_build):
    root, _ = first_build
    again = ("build", "spill.hk", "-D", "BK=64", "-o", "out/s.cubin")  # the variant's key
    text = hopperc(*again, cwd=root, cache=root / "cache")
    assert text.returncode == 0 and "cached" in text.stdout
    head = [line for line in text.stderr.splitlines() if "ptxas spills" in line]
    assert head and head[0].startswith("spill.hk:2:1: warning: ptxas spills registers")
    assert "note: the largest register tiles: 'acc' (line 9)" in text.stderr
    sarif = hopperc(*again, "--diagnostics", "sarif", cwd=root, cache=root / "cache")
    run = json.loads(sarif.stdout)["runs"][0]
    (result,) = [r for r in run["results"] if r["ruleId"] == "ptxas-spill"]
    assert result["level"] == "warning" and "'acc2'" in result["message"]["text"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 1)


def test_werror_fails_the_kernel_that_warns_and_writes_none_of_its_outputs(first_build):
    root, _ = first_build
    proc = hopperc("build", "kernels.toml", "--out-dir", "strict", "--Werror", "--manifest",
                   "strict.json", cwd=root, cache=root / "cache")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == ("2 kernels: 1 built (1 from the cache), 1 failed "
                                            "(1 for warnings: --Werror)")
    assert "kernels.toml: variant spill_bk64 (BK=64):\nspill.hk:2:1: error: ptxas spills" \
        in proc.stderr
    assert "note: --Werror: warnings are errors; no outputs written" in proc.stderr
    assert "warning:" not in proc.stderr
    assert sorted(p.name for p in (root / "strict").iterdir()) == ["copy.cubin", "copy.json"]
    records = json.loads((root / "strict.json").read_text())["kernels"]
    spill = records[1]
    assert (spill["name"], spill["kernel"], spill["status"]) == ("spill_bk64", "two_acc",
                                                                 "failed")
    assert spill["outputs"] == [] and any("ptxas spills" in e for e in spill["errors"])


def test_a_kernel_with_roles_names_their_register_budgets():
    """With setmaxnreg the limit is each role's `regs` (ptxas's figure is the
    launch's); the note names the accumulator. ptxas's report is made up here:
    gemm_bf16 does not spill."""
    from types import SimpleNamespace

    from hopperc import driver
    from hopperc.backend.nvrtc import Resources
    from hopperc.buildsys.jobs import _spills
    from tests.conftest import ROOT

    source = driver.read_source(ROOT / "samples" / "gemm_bf16.hk")
    resources = Resources(registers=168, spill_stores=16, spill_loads=8, stack_bytes=16,
                          shared_bytes=0)
    built = SimpleNamespace(generated=driver.generate(source),
                            result=SimpleNamespace(resources=resources))
    (spill,) = _spills(built, source)
    lines = source.text.split("\n")
    assert lines[spill.span.line - 1].startswith("kernel gemm_bf16(")
    assert "16 bytes stored, 8 bytes loaded, at 168 registers per thread (role 'math' regs " \
        "232, role 'load' regs 40)" in spill.message
    acc = next(n for n, line in enumerate(lines, 1) if line.strip().startswith("acc:"))
    assert spill.notes[0].startswith(f"the largest register tiles: 'acc' (line {acc}) 128 "
                                     "per thread")
    no_spill = SimpleNamespace(generated=built.generated, result=SimpleNamespace(
        resources=Resources(registers=168, spill_stores=0, spill_loads=0, stack_bytes=0,
                            shared_bytes=0)))
    assert _spills(no_spill, source) == ()
