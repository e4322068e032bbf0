"""Session fixtures: each oracle program is generated, compiled and run once
per test session, in pytest's temporary directory, and its output parsed for
the tests. Without the compiler a program needs, its tests skip and say why.

The compiles take tens of seconds of CPU: the programs the selected oracle
tests use start compiling in the background as soon as the tests are
collected, and the oracle tests run last, so the compiles overlap the rest of
the suite on another core. The test workers of one run (pytest-xdist) share
each compile: the first to claim the program's directory in the run's
temporary directory builds it, the others wait for it and run its binary."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import os
import signal

import pytest

from tests.oracle import gmma_cases, layout_cases, tma_cases
from tests.oracle.hopperc_side import Generated, generate
from tests.oracle.toolchain import HERE, Build, SharedBuild, toolchain

BUILDS = pytest.StashKey[dict]()


@dataclass(frozen=True)
class GmmaOracle:
    output: gmma_cases.GmmaOutput
    generated: dict[str, Generated]  # hopperc's code for each product
    tiled: list[layout_cases.TiledCase]  # swizzled buffers wider than their span


def _start_gmma(out, owner: bool) -> tuple[Build | SharedBuild | str,
                                           tuple[dict[str, Generated], list]]:
    tools = toolchain("g++")
    if tools.missing:
        return f"CuTe oracle (g++ host program): {tools.missing}", ({}, [])
    products = dict.fromkeys(gmma_cases.PRODUCTS + gmma_cases.FRAGMENT_PRODUCTS)
    generated = {p.name: generate(p) for p in products}
    tiled = layout_cases.generate()
    if not owner:
        return SharedBuild(HERE / "gmma_oracle.cpp", out), (generated, tiled)
    (out / "hopperc_prelude.h").write_text(gmma_cases.prelude_header())
    (out / "hopperc_cases.h").write_text(gmma_cases.cases_header(generated)
                                         + layout_cases.cases_header(tiled))
    return Build(tools, HERE / "gmma_oracle.cpp", out, ("-std=c++17", "-w")), (generated, tiled)


def _start_tma(out, owner: bool) -> tuple[Build | SharedBuild | str, None]:
    tools = toolchain("nvcc")
    if tools.missing:
        return f"CuTe oracle (nvcc host program with make_tma_copy): {tools.missing}", None
    if not owner:
        return SharedBuild(HERE / "tma_oracle.cu", out), None
    (out / "hopperc_tma_cases.h").write_text(tma_cases.cases_header())
    # Only host code runs: no optimization, one device target (the program
    # hides itself from the device pass, which nvcc runs once per target).
    flags = ("-std=c++17", "-w", "-O0", "-gencode", "arch=compute_90a,code=sm_90a")
    return Build(tools, HERE / "tma_oracle.cu", out, flags), None


PROGRAMS = {"gmma": _start_gmma, "tma": _start_tma}


def _is_oracle(item: pytest.Item) -> bool:
    return HERE in Path(item.path).parents


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    oracle = [item for item in items if _is_oracle(item)]
    if not oracle or config.option.collectonly:
        return
    items[:] = [item for item in items if not _is_oracle(item)] + oracle
    needed = sorted({name for item in oracle for name in item.fixturenames if name in PROGRAMS})
    # The factory behind the tmp_path_factory fixture, which is not available yet.
    base = config._tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    config.stash[BUILDS] = {name: PROGRAMS[name](*_claim(run / f"{name}_oracle"))
                            for name in needed}


def _claim(directory: Path) -> tuple[Path, bool]:
    """The program's directory, and whether this worker builds it there."""
    try:
        directory.mkdir()
        return directory, True
    except FileExistsError:
        return directory, False


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A build is left to end before its worker ends (another worker may be
    waiting for it), unless the run was stopped: then it is killed."""
    stopped = session.shouldstop or session.shouldfail
    for build, _ in session.config.stash.get(BUILDS, {}).values():
        if isinstance(build, Build) and build.process.poll() is None:
            if stopped:
                os.killpg(build.process.pid, signal.SIGKILL)
            build.process.wait()


@pytest.fixture(scope="session")
def oracle_builds(pytestconfig) -> dict:
    return pytestconfig.stash[BUILDS]


def _output(builds: dict, name: str) -> tuple[str, object]:
    build, extra = builds[name]
    if isinstance(build, str):
        pytest.skip(build)
    return build.run(), extra


@pytest.fixture(scope="session")
def gmma(oracle_builds) -> GmmaOracle:
    stdout, (generated, tiled) = _output(oracle_builds, "gmma")
    return GmmaOracle(gmma_cases.parse(stdout), generated, tiled)


@pytest.fixture(scope="session")
def tma(oracle_builds) -> dict[str, dict[str, tuple[int, ...]]]:
    stdout, _ = _output(oracle_builds, "tma")
    return tma_cases.parse(stdout)
