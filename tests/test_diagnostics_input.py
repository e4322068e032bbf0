"""Input the lexer and the number ranges must refuse at its location: words
that run together, literals and folded constants outside int32 / f32, `-D`
values, and the characters that end a line for Python but not for the lexer.
Same method as test_diagnostics.py: break one thing in a valid kernel.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from hopperc import diagnostics, driver
from hopperc.diagnostics import CompileError, SourceFile, format_diagnostic
from test_diagnostics import COPY, EW, GEMM, MANUAL, ROLES, case, expect_error, mutate

INT32_MAX = 2 ** 31 - 1

# Every keyword of the grammar glued to what follows it, where the parser accepts
# only that keyword, so the lexer would have split the word.
GLUED = [
    case("kernel_name", COPY, [("kernel copy(", "kernelcopy(")], "kernelcopy",
         "'kernelcopy' reads as 'kernel' followed by 'copy'", "space"),
    case("threads_count", COPY, [("threads 128", "threads128")], "threads128",
         "'threads128'", "'threads' followed by '128'"),
    case("for_in", GEMM, [("for k in 0", "for k in0")], "in0", "'in' followed by '0'"),
    case("warps_count", ROLES, [("role producer: warp regs 40", "role producer: warps1 regs 40")],
         "warps1", "'warps' followed by '1'"),
    case("regs_count", ROLES, [("regs 40", "regs40")], "regs40", "'regs' followed by '40'"),
    case("warpgroup_count", ROLES, [("warpgroup regs", "warpgroupx1 regs")], "warpgroupx1",
         "'warpgroup' followed by 'x1'"),
    case("number_then_keyword", COPY, [("swizzle 128B", "stages 2swizzle 128B")], "2swizzle",
         "'2' followed by 'swizzle'"),
    case("swizzle_mode", COPY, [("swizzle 128B", "swizzle 128Bx")], "128Bx",
         "'128B' followed by 'x'"),
    case("and_operand", MANUAL, [("if thread == 0 {\n        mbarrier.init",
                                  "if thread == 0 andlane == 0 {\n        mbarrier.init")],
         "andlane", "unexpected 'andlane'"),
    case("transpose_suffix", GEMM, [("sb^T", "sb^Tx")], "Tx", "'T' followed by 'x'"),
    case("float_suffix", EW, [("t + 1.0)", "t + 1.0f)")], "1.0f", "'1.0' followed by 'f'"),
    case("int_suffix", COPY, [("BN = 64)", "BN = 64u)")], "64u", "'64' followed by 'u'"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", GLUED)
def test_words_must_not_run_together(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


def test_keyword_followed_by_punctuation_still_parses() -> None:
    text = mutate(COPY, ("threads 128\n{", "threads 128{"))
    driver.check(SourceFile("ok.hk", text))


BIG = "9" * 5000
NUMBERS = [
    case("int_literal_past_int32", COPY, [("BM = 64", f"BM = {INT32_MAX + 1}")],
         str(INT32_MAX + 1), f"integer literal {INT32_MAX + 1} is out of range", "32-bit"),
    case("int_literal_309_digits", EW, [("t + 1.0", "t + 1" + "0" * 308)], "1000",
         "integer literal", "(309 digits) is out of range"),
    case("int_literal_too_long_for_python", COPY, [("threads 128", f"threads {BIG}")], "9999",
         "(5000 digits) is out of range"),
    case("loop_bound_past_int32", GEMM, [("0 .. K / BK", "0 .. 3000000000")], "3000000000",
         "integer literal 3000000000 is out of range"),
    case("tensor_dim_past_int32", COPY, [("X: bf16[M, N]", "X: bf16[M, 4294967296]")],
         "4294967296", "out of range"),
    case("warpgroup_count_past_int32", ROLES, [("warpgroup regs", "warpgroup x99999999999 regs")],
         "99999999999", "out of range"),
    case("float_literal_past_f64", EW, [("t + 1.0", "t + 1.0e400")], "1.0e400",
         "float literal 1.0e400 is out of range", "f32"),
    case("float_literal_past_f32", EW, [("t + 1.0", "t + 3.5e38")], "3.5e38",
         "float literal 3.5e38 is out of range"),
    case("folded_product_past_int32", COPY, [("BM = 64,", "BM = 64, BIG = 65536 * 65536,")],
         "65536 *", "4294967296, out of the range of a 32-bit int"),
    case("folded_constants_past_int32", GEMM,
         [("BK = 64)", "BK = 64, BIG = BM * BM * BM * BM * BM * BM)")],
         "BM * BM * BM * BM * BM * BM", "68719476736, out of the range"),
    case("folded_negation_past_int32", COPY, [("BN = 64)", "BN = 64, L = -2147483647 - 2)")],
         "-2147483647 - 2", "-2147483649, out of the range"),
    case("folded_loop_bound_past_int32", GEMM, [("0 .. K / BK", "0 .. 65536 * 32768")],
         "65536 * 32768", "2147483648, out of the range"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", NUMBERS)
def test_number_out_of_range(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


@pytest.mark.parametrize("literal", [str(INT32_MAX), "3.4028234e38", "1.0e-50"])
def test_numbers_at_the_edge_of_the_range_are_accepted(literal: str) -> None:
    text = mutate(EW, ("t + 1.0", f"t + {literal}"))
    driver.check(SourceFile("ok.hk", text))


def test_define_past_int32_is_an_input_error() -> None:
    with pytest.raises(CompileError, match=r"-D BM is 2147483648, out of the range of a 32-bit"):
        driver.check(SourceFile("d.hk", COPY), {"BM": INT32_MAX + 1})


def test_define_past_int32_on_the_command_line(hopperc_cli, tmp_path) -> None:
    path = tmp_path / "copy.hk"
    path.write_text(COPY)
    proc = hopperc_cli("build", str(path), "-D", "BN=4294967296", "-o", str(tmp_path / "c.cubin"))
    assert proc.returncode == 1
    assert "-D BN is 4294967296, out of the range of a 32-bit int" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "c.cubin").exists()


# ---------------------------------------------------------------- line counting
# Python's str.splitlines ends a line at each of these; the lexer only at "\n".
NOT_NEWLINES = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"]


@pytest.mark.parametrize("char", NOT_NEWLINES, ids=[f"U+{ord(c):04X}" for c in NOT_NEWLINES])
def test_quoted_line_counts_lines_like_the_lexer(char: str) -> None:
    text = mutate(COPY, ("{\n    shared", "{\n    // a" + char + "comment\n    shared"),
                  ("tma buf <- X[tile.m, tile.n]", "tma buf <- X[tile.m, tile.q]"))
    source = SourceFile("lines.hk", text)
    with pytest.raises(CompileError) as info:
        driver.check(source)
    err = info.value
    line = text.split("\n").index("    tma buf <- X[tile.m, tile.q]") + 1
    col = text.split("\n")[line - 1].index("tile.q") + 1
    assert (err.span.line, err.span.col) == (line, col), err.message
    out = format_diagnostic(err, source).split("\n")
    assert out[0] == f"lines.hk:{line}:{col}: error: {err.message}"
    assert out[1] == "    tma buf <- X[tile.m, tile.q]"
    assert out[2].index("^") == col - 1


def test_syntax_error_at_end_of_file_after_a_form_feed() -> None:
    text = COPY.rstrip().removesuffix("}") + "\n    // end\f of file\n"
    source = SourceFile("eof.hk", text)
    with pytest.raises(CompileError) as info:
        driver.parse_source(source)
    lines = text.split("\n")
    assert (info.value.span.line, info.value.span.col) == (len(lines) - 1, len(lines[-2]) + 1)
    assert format_diagnostic(info.value, source).split("\n")[1] == "    // end\f of file"


# ---------------------------------------------------------------- --arch
BAD_ARCHS = ["sm_80", "sm_90", "sm_100a", "compute_90a", "garbage", ""]


@pytest.mark.parametrize("arch", BAD_ARCHS)
def test_build_refuses_every_target_but_sm_90a(arch: str) -> None:
    with pytest.raises(driver.UnsupportedArchError, match="only sm_90a"):
        driver.build(SourceFile("copy.hk", COPY), None, arch)
    with pytest.raises(ValueError):
        driver.build(SourceFile("copy.hk", COPY), None, arch)


def test_compile_api_refuses_other_targets() -> None:
    import hopperc

    with pytest.raises(CompileError, match="unsupported target architecture 'sm_90'"):
        hopperc.compile(COPY, arch="sm_90")


@pytest.mark.parametrize("arch", ["sm_90", "compute_90a", "sm_100a", "x"])
def test_cli_arch_is_a_usage_error(hopperc_cli, tmp_path, arch: str) -> None:
    out = tmp_path / "copy.cubin"
    proc = hopperc_cli("build", str(tmp_path / "missing.hk"), "--arch", arch, "-o", str(out))
    assert proc.returncode == 1
    assert "Invalid value for --arch" in proc.stderr and "only sm_90a" in proc.stderr
    assert "NVRTC" not in proc.stderr and not out.exists()


# Where a name may stand, the lexer reads `forj` as one name; the syntax error that
# follows says so.
NAME_LIKE = [
    case("for_var", GEMM, [("for k in 0", "fork in 0")], "in 0", "unexpected 'in'"),
    case("if_cond", MANUAL, [("    if thread == 0 {\n        tma Y", "    ifthread > 0 {\n        tma Y")],
         "> 0 {", "unexpected '>'"),
    case("tma_dst", COPY, [("tma buf <-", "tmabuf <-")], "<- X", "unexpected '<-'"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", NAME_LIKE)
def test_keyword_glued_to_a_name_gets_a_note(text, marker, keywords, nth, defines) -> None:
    err = expect_error(text, marker, keywords, nth, defines)
    (note,) = err.notes
    assert "is read as one name; if you meant the keyword, write '" in note


def test_name_that_starts_like_a_keyword_is_a_name() -> None:
    text = mutate(GEMM, ("acc: f32", "format: f32"), ("acc +=", "format +="))
    driver.check(SourceFile("ok.hk", text))


# ---------------------------------------------------------------- input files
# Every command and the API read a file through diagnostics.read_input: what is not
# source text is an input error (exit 1, no traceback, nothing written).
def _input(tmp_path, kind: str) -> str:
    path = tmp_path / f"{kind}.hk"
    if kind == "nul":
        path.write_bytes(COPY.replace("shared", "sha\0red", 1).encode())
    elif kind == "not_utf8":
        path.write_bytes(COPY.replace("shared", "sha\xe9red", 1).encode("latin-1"))
    elif kind == "too_large":
        path.write_bytes(COPY.encode() + b" " * diagnostics.MAX_INPUT_BYTES)
    elif kind == "fifo":
        os.mkfifo(path)  # no writer: reads as empty rather than blocking
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        return "/dev/zero"
    return str(path)


BAD_INPUTS = {
    "nul": ("a NUL byte: an input file is text", (4, 8)),
    "not_utf8": ("not UTF-8 text (invalid continuation byte, byte 0xe9)", (4, 8)),
    "too_large": ("is larger than 4 MiB; an input file is source text", None),
    "device": ("is larger than 4 MiB", None),
    "directory": ("is a directory, not a file", None),
    "fifo": ("unexpected end of file", (1, 1)),
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_input_that_is_not_source_text(tmp_path, kind: str) -> None:
    path = _input(tmp_path, kind)
    message, where = BAD_INPUTS[kind]
    with pytest.raises(CompileError) as info:
        driver.check(driver.read_source(path))
    err = info.value
    assert message in err.message and err.file == path
    assert (err.span.line, err.span.col) == where if where else err.span is None


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_line_ends_read_as_a_text_mode_read_makes_them(tmp_path, newline: str) -> None:
    """A comment ends at a CR as at a LF: the next line is code."""
    path = tmp_path / "lines.hk"
    path.write_bytes(("# a comment\n" + COPY).replace("\n", newline).encode())
    assert driver.read_source(path).text == "# a comment\n" + COPY
    bad = tmp_path / "bad.hk"
    bad.write_bytes(("# a comment\n" + COPY).replace("\n", newline).replace(
        "shared", "sha\xe9red", 1).encode("latin-1"))
    with pytest.raises(CompileError, match="not UTF-8") as info:
        driver.read_source(bad)
    assert (info.value.span.line, info.value.span.col) == (5, 8)


def test_a_device_is_read_up_to_the_limit_and_no_further(monkeypatch) -> None:
    read = []

    def counted(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        read.append(len(data))
        return data

    real_read = os.read
    monkeypatch.setattr(diagnostics, "MAX_INPUT_BYTES", 1000)
    monkeypatch.setattr(diagnostics.os, "read", counted)
    with pytest.raises(CompileError, match="is larger than"):
        diagnostics.read_input("/dev/zero")
    assert sum(read) == 1001


def test_the_api_refuses_what_a_file_may_not_hold() -> None:
    import hopperc

    with pytest.raises(CompileError, match="a NUL byte") as info:
        hopperc.compile(COPY.replace("shared", "sha\0red", 1))
    assert (info.value.span.line, info.value.span.col) == (4, 8)
    with pytest.raises(CompileError, match="is larger than 4 MiB"):
        hopperc.compile(COPY + " " * diagnostics.MAX_INPUT_BYTES)


def _memory_limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2_000_000_000, 2_000_000_000))


@pytest.mark.parametrize("command", ["build", "emit", "explain", "check", "sim"])
def test_every_command_refuses_dev_zero_under_a_memory_limit(tmp_path, command: str) -> None:
    out = tmp_path / "zero.cubin"
    options = {"build": ["-o", str(out)], "emit": ["--ast"]}.get(command, [])
    proc = subprocess.run([sys.executable, "-m", "hopperc", command, "/dev/zero", *options], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, preexec_fn=_memory_limit)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("/dev/zero: error: is larger than 4 MiB"), proc.stderr
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_a_library_file_is_read_like_a_kernel(hopperc_cli, tmp_path) -> None:
    (tmp_path / "kernels.toml").write_bytes(b"[[kernel]]\nsource = 'a\0.hk'\n")
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kernels.toml:2:12: error: a NUL byte"), proc.stderr
    assert not (tmp_path / "out").exists()
