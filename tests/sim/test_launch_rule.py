"""One rule for a legal launch shape (`runtime/launch_rules.py`): the simulator
refuses what the runtime refuses, with the runtime's message, and the shape
docs/sim.md shows is legal and simulates."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import hopperc
from hopperc import driver
from hopperc.diagnostics import CompileError
from hopperc.runtime import ArgumentError
from hopperc.runtime.binding import bind
from hopperc.runtime.spec import parse_spec
from tests.runtime.helpers import bf16, sample_spec

ROOT = Path(__file__).parents[2]
GEMM = ROOT / "samples" / "gemm_bf16.hk"


def runtime_message(m: int, n: int, k: int) -> str:
    a, b, c = bf16((m, k), 0x10000), bf16((n, k), 0x20000), bf16((m, n), 0x30000)
    with pytest.raises(ArgumentError) as info:
        bind(sample_spec("gemm_bf16"), (a, b, c), {})
    return str(info.value)


def test_sim_refuses_a_row_stride_tma_refuses_with_the_runtimes_message():
    expected = runtime_message(200, 304, 500)
    assert "A: the stride of dimension 0 is 1000 bytes" in expected and "K = 504" in expected
    with pytest.raises(CompileError) as info:
        driver.simulate(driver.read_source(GEMM), shapes={"M": 200, "N": 304, "K": 500},
                        seeds=1, search=0)
    assert expected in info.value.message
    assert info.value.span.line == 14  # the tensor A in the kernel's signature


def test_sim_refuses_a_grid_of_partial_clusters_as_the_runtime_does():
    path = ROOT / "tests" / "sim" / "hazards" / "cluster_rows.hk"  # cluster(2), tiles of 32
    with pytest.raises(CompileError, match="grid x extent 3 is not a multiple of the cluster's "
                                           "2 \\(ceil\\(M / 32\\) with M = 96\\)"):
        driver.simulate(driver.read_source(path), shapes={"M": 96}, seeds=1, search=0)


def test_the_shape_in_docs_sim_md_is_legal_and_simulates():
    docs = (ROOT / "docs" / "sim.md").read_text()
    found = re.search(r"hopperc sim (samples/\S+\.hk) --shape (\S+) .*-D (\w+)=(\d+)", docs)
    sample, shape, define = ROOT / found.group(1), found.group(2), {found.group(3): int(found.group(4))}
    dims = {k: int(v) for k, v in (item.split("=") for item in shape.split(","))}
    report = driver.simulate(driver.read_source(sample), define, shapes=dims, seeds=1, search=0)
    assert report.ok, [f.headline() for f in report.findings]
    spec = parse_spec(hopperc.build(sample, define).metadata)
    bind(spec, (bf16((dims["M"], dims["K"]), 0x10000), bf16((dims["N"], dims["K"]), 0x20000),
                bf16((dims["M"], dims["N"]), 0x30000)), {})
