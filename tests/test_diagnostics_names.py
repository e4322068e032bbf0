"""Misspelt names of every kind: each "unknown X" / "'x' is not a Y" error offers the
closest known spelling through scope.closest (casts are their dtype names; the
built-ins `wg`, `lane`, `row()`, `tile.AXIS` are candidates too), with the caret on
the misspelt name. Same method as test_diagnostics.py.
"""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.frontend.scope import closest
from test_diagnostics import COPY, EW, case, expect_error

NAMES = [
    # a cast is spelt as its dtype
    case("cast_f23", EW, [("f32(sx) *", "f23(sx) *")], "f23(",
         "unknown function 'f23'; did you mean 'f32'?"),
    case("cast_bf61", EW, [("bf16(t + 1.0)", "bf61(t + 1.0)")], "bf61(",
         "unknown function 'bf61'; did you mean 'bf16'?"),
    case("cast_fp8e4m3", EW, [("f32(sx) *", "f32(fp8e4m3(sx)) *")], "fp8e4m3(",
         "unknown function 'fp8e4m3'; did you mean 'e4m3'?"),
    case("index_function", EW, [("t + 1.0", "t + f32(rwo())")], "rwo(",
         "unknown function 'rwo'; did you mean 'row'?"),
    # built-in names, a swapped pair of letters included
    case("builtin_swapped", EW, [("t + 1.0", "t + f32(gw)")], "gw)",
         "unknown name 'gw'; did you mean 'wg'?"),
    case("builtin_lane", EW, [("t + 1.0", "t + f32(lnae)")], "lnae",
         "unknown name 'lnae'; did you mean 'lane'?"),
    # a built-in of integer expressions named where a value is wanted: never "did you
    # mean" itself
    case("builtin_as_value", EW, [("t + 1.0", "t + f32(lane)")], "lane)",
         "'lane' is a built-in of integer expressions (indices, scalars), not a value here: "
         "declare a scalar from it first, e.g. `v: i32 = lane`"),
    # tile.AXIS: the axis, and the built-in `tile` itself
    case("grid_axis", COPY, [("X[tile.m, tile.n]", "X[tile.mm, tile.n]")], "tile.mm",
         "unknown grid axis 'tile.mm'; did you mean 'tile.m'?", "(declared: tile.m, tile.n)"),
    case("tile_in_index", COPY, [("X[tile.m, tile.n]", "X[tlie.m, tile.n]")], "tlie.m",
         "unknown name 'tlie'; did you mean 'tile'?", "only the built-in 'tile' has attributes"),
    case("tile_in_tile_expression", EW, [("t + 1.0", "t + tlie.m")], "tlie.m",
         "unknown name 'tlie'; did you mean 'tile'?"),
    # a declared name of the wrong kind: the closest name of the kind wanted
    case("not_a_shared_buffer", COPY, [("BN = 64)", "BN = 64, bu = 1)"),
                                       ("    tma buf <-", "    shared sc: bf16[BM, BN] reuses bu\n"
                                                         "    tma buf <-")],
         "bu\n", "'bu' is not a shared buffer; did you mean 'buf'?"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", NAMES)
def test_misspelt_names_get_the_closest_spelling(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


def test_not_a_global_tensor_names_the_closest_tensor() -> None:
    text = COPY.replace("BN = 64)", "BN = 64, Xs = 1)").replace("<- X[", "<- Xs[")
    expect_error(text, "Xs[", ["'Xs' is not a global tensor; did you mean 'X'?"])


@pytest.mark.parametrize("name, candidates, meant", [
    ("gw", {"wg", "warp"}, "wg"),          # a swap, which difflib's ratio (0.5) misses
    ("f23", {"f32", "f16"}, "f32"),
    ("xyz", {"wg", "lane"}, None),
    ("wg", {"wg"}, "wg"),
])
def test_closest(name, candidates, meant) -> None:
    assert closest(name, candidates) == meant


def test_a_misspelt_define_names_the_closest_tile_constant() -> None:
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile("t.hk", COPY), {"BNN": 32})
    assert info.value.span is None  # a command-line problem has no source location
    assert "-D BNN: the kernel has no tile constant 'BNN'; did you mean 'BN'?" in info.value.message
