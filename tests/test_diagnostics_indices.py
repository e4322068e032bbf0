"""Indices into a shared buffer's parts (`pair[i]` of a rank-3 buffer, `buf[wg]`)
and into mbarrier arrays: out of range is a located error when the compiler can
bound the index (constants, tile constants, loop variables with constant bounds,
`wg`, and arithmetic of them); otherwise `hopperc check` reports the access at
its line as a finding, never a crash or a silently wrapped address.
"""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.sim.findings import Category
from test_diagnostics import MANUAL, case, expect_error

PAIR = """\
kernel pair(X: bf16[M, N], Y: bf16[M, N], s: i32)
    tile(BM = 64, BN = 64, TWO = 2) grid(m: M / BM, n: N / BN) threads 128
{
    shared pair: bf16[2, BM, BN] swizzle 128B
    for j in 0 .. 2 {
        tma pair[INDEX] <- X[tile.m, tile.n]
        tma Y[tile.m, tile.n] <- pair[INDEX]
    }
}
"""

WG = """\
kernel wgs(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN)
{
    shared rows: bf16[PARTS, BM, BN] swizzle 128B
    role producer: warpgroup x2 {
        rows[wg] = bf16(1.0)
        tma Y[2 * tile.m + wg, tile.n] <- rows[wg]
    }
}
"""


def pair(index: str) -> str:
    return PAIR.replace("INDEX", index)


OUT_OF_RANGE = [
    pytest.param(pair("5"), "5]", "index 5 is out of range", id="constant_past_the_end"),
    pytest.param(pair("-1"), "-1]", "index -1 is out of range", id="negative_constant"),
    pytest.param(pair("TWO"), "TWO]", "index 2 is out of range", id="tile_constant"),
    pytest.param(pair("j + 1"), "j + 1]", "can be 2 (it ranges over 1 to 2)", id="loop_plus_one"),
    pytest.param(pair("j - 1"), "j - 1]", "can be -1 (it ranges over -1 to 0)", id="loop_minus_one"),
    pytest.param(pair("2 * j"), "2 * j]", "can be 2", id="loop_times_two"),
    pytest.param(pair("j + 2 * TWO"), "j + 2 * TWO]", "can be 5", id="loop_plus_constant"),
    pytest.param(pair("tile.m - 1"), "tile.m - 1]", "can be -1", id="grid_coordinate_minus_one"),
    pytest.param(pair("j").replace("0 .. 2", "0 .. 3"), "j]", "can be 2", id="loop_bound_too_far"),
    pytest.param(WG.replace("PARTS", "1"), "wg]", "can be 1 (it ranges over 0 to 1)",
                 id="wg_of_two_warpgroups"),
]


@pytest.mark.parametrize("text, marker, words", OUT_OF_RANGE)
def test_index_out_of_range_is_located(text: str, marker: str, words: str) -> None:
    err = expect_error(text, marker, [words], nth=1)
    assert "'pair' has 2 parts" in err.message or "'rows' has 1 parts" in err.message


@pytest.mark.parametrize("index", ["0", "1", "j", "1 - j", "(j + 1) % 2", "TWO - 1", "j % TWO",
                                   "tile.m", "s", "M"])
def test_index_in_range_or_unknown_is_accepted(index: str) -> None:
    driver.check(SourceFile("ok.hk", pair(index)))


def test_loop_that_never_runs_is_not_checked() -> None:
    driver.check(SourceFile("ok.hk", pair("j + 7").replace("0 .. 2", "3 .. 3")))


def test_wg_in_range_is_accepted() -> None:
    driver.check(SourceFile("ok.hk", WG.replace("PARTS", "2")))


BARRIERS = [
    case("mbarrier_loop_index", MANUAL, [("    mbarrier.wait bar[0], 0\n",
                                          "    for i in 0 .. 2 {\n        mbarrier.wait bar[i], 0\n"
                                          "    }\n")],
         "bar[i]", "can be 1 (it ranges over 0 to 1)", "'bar' has 1 mbarriers"),
    case("mbarrier_constant_index", MANUAL, [("mbarrier.wait bar[0]", "mbarrier.wait bar[1]")],
         "bar[1], 0", "mbarrier index 1 is out of range"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", BARRIERS)
def test_mbarrier_index_out_of_range(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


@pytest.mark.parametrize("index, shape, bad", [("tile.m", 320, 2), ("M", 128, 128),
                                               ("1 - tile.m", 320, -1)])
def test_simulator_reports_an_index_it_could_not_bound(index: str, shape: int, bad: int) -> None:
    text = pair(index).replace("for j in 0 .. 2", "for j in 0 .. 1")
    report = driver.simulate(SourceFile("p.hk", text), None, {"M": shape}, seeds=2, search=5)
    found = [f for f in report.findings if f.category is Category.OUT_OF_RANGE]
    assert found, [f.headline() for f in report.findings]
    assert found[0].span.line == 6
    assert f"index {bad} of 'pair' is out of range" in found[0].message


def test_check_command_reports_the_access_at_its_line(hopperc_cli, tmp_path) -> None:
    path = tmp_path / "p.hk"
    path.write_text(pair("M"))
    # `check` indexes with M's default: the shape the simulator picks for it.
    source = SourceFile("p.hk", pair("M"))
    default_m = driver.problem_dims(driver.lower(driver.check(source)), None, "p.hk")["M"]
    proc = hopperc_cli("check", str(path))
    assert proc.returncode == 1
    assert f"{path}:6:9: out-of-range access: index {default_m} of 'pair'" in (proc.stdout
                                                                               + proc.stderr)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr

