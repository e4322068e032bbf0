"""Session fixtures: each oracle program is generated, compiled and run once
per test session, in pytest's temporary directory; its output is parsed for
the tests. Without the compiler a program needs, its tests skip and say why."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.oracle import gmma_cases
from tests.oracle.hopperc_side import Generated, generate
from tests.oracle.toolchain import HERE, build, toolchain


@dataclass(frozen=True)
class GmmaOracle:
    output: gmma_cases.GmmaOutput
    generated: dict[str, Generated]  # hopperc's code for each product


@pytest.fixture(scope="session")
def gmma(tmp_path_factory) -> GmmaOracle:
    tools = toolchain("g++")
    if tools.missing:
        pytest.skip(f"CuTe oracle (g++ host program): {tools.missing}")
    out = tmp_path_factory.mktemp("gmma_oracle")
    generated = {p.name: generate(p) for p in gmma_cases.FRAGMENT_PRODUCTS}
    (out / "hopperc_prelude.h").write_text(gmma_cases.prelude_header())
    (out / "hopperc_cases.h").write_text(gmma_cases.cases_header(generated))
    stdout = build(tools, HERE / "gmma_oracle.cpp", out, ("-std=c++17", "-w"))
    return GmmaOracle(gmma_cases.parse(stdout), generated)
