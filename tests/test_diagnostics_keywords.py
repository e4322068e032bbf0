"""Misspelt keywords: the caret on the misspelt word and `did you mean` the keyword
the grammar accepts there (frontend/keyword_typos.py). Same method as
test_diagnostics.py: break one word of a valid kernel, expect the located error.
"""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from tests.conftest import ROOT
from test_diagnostics import COPY, GEMM, ROLES, case, expect_error


def _parse(source, defines=None):
    return driver.parse_source(source)


NAME_NOTE = "reads as a name here, which"
TYPOS = [
    # the word the parser read as a name, failing one token later
    case("role", ROLES, [("role consumer", "rol consumer")], "rol consumer",
         "unexpected 'rol'; did you mean 'role'?"),
    case("shared", COPY, [("shared buf", "shraed buf")], "shraed",
         "unexpected 'shraed'; did you mean 'shared'?"),
    case("for", GEMM, [("    for k", "    fro k")], "fro k", "unexpected 'fro'; did you mean 'for'?"),
    case("tma_glued_letter", GEMM, [("tma sa", "tmaa sa")], "tmaa",
         "unexpected 'tmaa'; did you mean 'tma'?"),
    case("stages", GEMM, [("BK] swizzle 128B\n    shared sb", "BK] stags 4 swizzle 128B\n    shared sb")],
         "stags", "unexpected 'stags'; did you mean 'stages'?"),
    case("swizzle", COPY, [("swizzle 128B", "swizle 128B")], "swizle",
         "unexpected 'swizle'; did you mean 'swizzle'?"),
    # the unexpected word itself
    case("kernel", COPY, [("kernel copy", "kernal copy")], "kernal",
         "unexpected 'kernal'; did you mean 'kernel'?"),
    case("in", GEMM, [("for k in", "for k on")], "on 0", "unexpected 'on'; did you mean 'in'?"),
    case("threads", COPY, [("threads 128", "thread 128")], "thread",
         "unexpected 'thread'; did you mean 'threads'?"),
    case("persistent", COPY, [("threads 128", "threads 128 persistant")], "persistant",
         "unexpected 'persistant'; did you mean 'persistent'?"),
    case("warp", ROLES, [("warp regs 40", "wrap regs 40")], "wrap",
         "unexpected 'wrap'; did you mean 'warp'?"),
    case("regs", ROLES, [("warp regs 40", "warp reg 40")], "reg 40",
         "unexpected 'reg'; did you mean 'regs'?"),
    case("arrow", GEMM, [("tma sa <-", "tma sa <=")], "<= A", "unexpected '<='; did you mean '<-'?"),
    # a keyword the lexer matched at the start of the misspelt word
    case("warpgroup", ROLES, [("warpgroup regs", "warpgroop x2 regs")], "warpgroop",
         "unexpected 'warpgroop'; did you mean 'warpgroup'?"),
    case("tile", COPY, [("tile(BM", "tiles(BM")], "tiles", "unexpected 'tiles'; did you mean 'tile'?"),
    # a dtype, one word of the DTYPE terminal's list
    case("dtype_of_a_buffer", COPY, [("buf: bf16", "buf: bf61")], "bf61",
         "unexpected 'bf61'; did you mean 'bf16'?"),
    case("dtype_of_a_parameter", COPY, [("X: bf16", "X: f23")], "f23",
         "unexpected 'f23'; did you mean 'f32'?"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", TYPOS)
def test_misspelt_keyword(text, marker, keywords, nth, defines) -> None:
    err = expect_error(text, marker, keywords, nth, defines, stage=_parse)
    assert err.message == keywords[0] and err.rule == "syntax"
    word = keywords[0].split("'")[1]
    assert err.span.end_col - err.span.col == len(word)
    read_as_name = word in ("rol", "shraed", "fro", "tmaa", "stags", "swizle")
    assert any(NAME_NOTE in n for n in err.notes) == read_as_name, err.notes


# Where no keyword accepted there is close, or the keyword does not make the text
# parse further, the error is today's: at the unexpected token, with what was expected.
UNCHANGED = [
    case("name_then_name", COPY, [("shared buf", "xyzzy buf")], "buf:",
         "unexpected 'buf'; expected '(', '.', ':'"),
    case("far_from_any_keyword", COPY, [("threads 128", "blocks 128")], "blocks",
         "unexpected 'blocks'; expected 'cluster'"),
    case("glued_for_var", GEMM, [("for k in 0", "fork in 0")], "in 0", "unexpected 'in'"),
    case("and_glued_to_name", GEMM, [("K / BK {", "K / BK andk {")], "andk", "unexpected 'andk'"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", UNCHANGED)
def test_no_close_keyword_keeps_the_message(text, marker, keywords, nth, defines) -> None:
    err = expect_error(text, marker, keywords, nth, defines, stage=_parse)
    assert "did you mean" not in err.message


def test_samples_still_parse() -> None:
    for path in sorted((ROOT / "samples").glob("*.hk")):
        driver.parse_source(SourceFile(path.name, path.read_text()))
