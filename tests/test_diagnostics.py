"""User-facing diagnostics: one test per error, located to the line and column.

Each case starts from a small valid kernel (the BASES, checked to compile
below), breaks one thing with text edits, and expects a `CompileError` whose
message has the key words and whose span starts at a marker in the broken
source. Hardware-limit diagnostics live in test_diagnostics_limits.py.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile, format_diagnostic

COPY = """\
kernel copy(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- buf
}
"""

EW = """\
kernel ew(X: bf16[M, N], S: f32[M], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    s: f32[BM] = S[tile.m]
    t: f32[BM, BN] = f32(sx) * s[:, None]
    sy = bf16(t + 1.0)
    tma Y[tile.m, tile.n] <- sy
}
"""

GEMM = """\
kernel gemm(A: bf16[M, K], B: bf16[N, K])
    tile(BM = 64, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    acc: f32[BM, BN] = 0.0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        acc += sa @ sb^T
    }
}
"""

ROLES = """\
kernel ws(A: bf16[M, K], B: bf16[N, K])
    tile(BM = 64, BN = 64, BK = 64) grid(m: M / BM, n: N / BN)
{
    shared sa: bf16[BM, BK] swizzle 128B
    shared sb: bf16[BN, BK] swizzle 128B
    shared sp: bf16[BM, BK] swizzle 128B
    role producer: warp regs 40 {
        tma sp <- A[tile.m, 0]
    }
    role consumer: warpgroup regs 232 {
        tma sa <- A[tile.m, 0]
        tma sb <- B[tile.n, 0]
        acc: f32[BM, BN] = sa @ sb^T
    }
}
"""

MANUAL = """\
kernel mcopy(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128 manual
{
    shared buf: bf16[BM, BN] swizzle 128B
    mbarrier bar[1]
    if thread == 0 {
        mbarrier.init bar[0], 1
        fence.mbarrier_init
    }
    bar.sync 0, 128
    if thread == 0 {
        mbarrier.expect_tx bar[0], 8192
        tma buf <- X[tile.m, tile.n] via bar[0]
    }
    mbarrier.wait bar[0], 0
    if thread == 0 {
        tma Y[tile.m, tile.n] <- buf
        bulk.commit
        bulk.wait_read 0
    }
}
"""

BASES = {"COPY": COPY, "EW": EW, "GEMM": GEMM, "ROLES": ROLES, "MANUAL": MANUAL}
NAME = "bad.hk"


# ---------------------------------------------------------------- helpers
def mutate(base: str, *edits: tuple[str, str]) -> str:
    """Apply (old, new) edits; each `old` must occur exactly once."""
    text = base
    for old, new in edits:
        assert text.count(old) == 1, f"edit target {old!r} is not unique"
        text = text.replace(old, new)
    return text


def locate(text: str, marker: str, nth: int = 1) -> tuple[int, int]:
    """1-based line and column of the nth (or, for -1, last) occurrence of marker."""
    starts = [m.start() for m in re.finditer(re.escape(marker), text)]
    assert starts, f"marker {marker!r} not in source"
    index = starts[nth - 1] if nth > 0 else starts[nth]
    return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)


def assert_rendered(err: CompileError, source: SourceFile, line: int, col: int) -> None:
    """`file:line:col: error: msg`, then the source line, then a caret under col."""
    out = format_diagnostic(err, source).splitlines()
    assert out[0] == f"{source.name}:{line}:{col}: error: {err.message}"
    quoted = source.text.splitlines()[line - 1]
    assert out[1] == quoted
    assert re.fullmatch(r" *\^~*", out[2]), out[2]
    assert out[2].index("^") == col - 1
    assert len(out[2]) <= len(quoted), "the underline runs past the quoted line"


def expect_error(text: str, marker: str, keywords, nth: int = 1, defines=None,
                 stage=driver.check) -> CompileError:
    source = SourceFile(NAME, text)
    with pytest.raises(CompileError) as info:
        stage(source, defines)
    err = info.value
    for word in keywords:
        assert word in err.message, f"{word!r} not in {err.message!r}"
    line, col = locate(text, marker, nth)
    assert err.span is not None, err.message
    assert (err.span.file, err.span.line, err.span.col) == (NAME, line, col), err.message
    assert_rendered(err, source, line, col)
    return err


def _EPILOGUE(value: str) -> tuple[str, str]:
    """An edit of GEMM: a 32-column tile from `value` after the main loop."""
    return "    }\n}\n", f"    }}\n    lo: f32[BM, 32] = {value}\n}}\n"


def case(id: str, base: str, edits, marker: str, *keywords: str, nth: int = 1, defines=None):
    return pytest.param(mutate(base, *edits), marker, keywords, nth, defines, id=id)


@pytest.mark.parametrize("base", BASES.values(), ids=BASES.keys())
def test_base_kernels_are_valid(base: str) -> None:
    driver.check(SourceFile("base.hk", base))


# ---------------------------------------------------------------- syntax
SYNTAX = [
    case("syntax_unexpected_token", COPY, [("shared buf: bf16", "shared buf bf16")],
         "bf16[BM", "unexpected 'bf16'", "expected ':'"),
    case("syntax_unexpected_token_in_index", COPY, [("X[tile.m, tile.n]", "X[tile.m, ]")],
         "]\n", "unexpected ']'"),
    case("syntax_unexpected_character", COPY, [("<- buf\n", "<- buf $\n")],
         "$", "unexpected character '$'"),
    case("syntax_unknown_swizzle", COPY, [("swizzle 128B", "swizzle 256B")],
         "256B", "unexpected"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", SYNTAX)
def test_syntax_error(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines, stage=lambda s, d: driver.parse_source(s))


def test_syntax_unexpected_end_of_file() -> None:
    text = COPY[: COPY.rindex("}")]  # the closing brace is missing
    source = SourceFile(NAME, text)
    with pytest.raises(CompileError) as info:
        driver.parse_source(source)
    err = info.value
    assert err.message.startswith("unexpected end of file")
    last = len(text.rstrip().splitlines())
    assert (err.span.file, err.span.line) == (NAME, last)
    assert format_diagnostic(err, source).startswith(f"{NAME}:{last}:")


# ---------------------------------------------------------------- semantic errors
SEMANTIC = [
    # names
    case("unknown_name", EW, [("t + 1.0", "u + 1.0")], "u + 1.0", "unknown name 'u'"),
    case("unknown_tensor", COPY, [("<- X[", "<- Z[")], "Z[", "unknown name 'Z'"),
    case("unknown_grid_axis", COPY, [("X[tile.m, tile.n]", "X[tile.m, tile.q]")], "tile.q",
         "unknown grid axis 'tile.q'", "tile.m, tile.n"),
    case("duplicate_grid_axis", COPY, [("n: N / BN", "m: N / BN")], "m: N / BN",
         "grid axis 'm' is already declared"),
    case("builtin_redeclared", COPY, [("shared buf:", "shared lane:")], "shared lane",
         "'lane' is a built-in name"),
    case("unknown_function", EW, [("f32(sx) *", "softplus(sx) *")], "softplus(",
         "unknown function 'softplus'"),
    # a misspelt name or function: the closest one the kernel has
    case("unknown_name_did_you_mean", EW, [("t + 1.0", "tt + 1.0")], "tt + 1.0",
         "unknown name 'tt'; did you mean 't'?"),
    case("unknown_function_did_you_mean", EW, [("f32(sx) *", "rsqr(f32(sx)) *")], "rsqr(",
         "unknown function 'rsqr'; did you mean 'rsqrt'?"),
    case("scalar_param_dtype", COPY, [("Y: bf16[M, N])", "Y: bf16[M, N], s: bf16)")], "s: bf16",
         "scalar parameter 's' is bf16", "f32 or i32"),
    case("index_not_i32", COPY, [("Y: bf16[M, N])", "Y: bf16[M, N], s: f32)"),
                                 ("X[tile.m, tile.n]", "X[tile.m, s]")],
         "s]", "'s' is f32; an index needs i32"),
    case("not_compile_time_constant", COPY, [("buf: bf16[BM, BN]", "buf: bf16[M, BN]")],
         "M, BN]", "a buffer dimension must be a compile-time constant"),
    case("tile_constant_negative", COPY, [("BM = 64", "BM = 0 - 64")], "BM = 0 - 64",
         "tile constant 'BM' must not be negative, not -64"),
    case("define_negative", COPY, [], "BM = 64", "tile constant 'BM' must not be negative",
         defines={"BM": -1}),
    # 0 is a flag's value (CAUSAL = 0): a size of 0 is refused where it is used
    case("tile_constant_zero_size", COPY, [("BM = 64", "BM = 0")], "M / BM",
         "division by zero"),
    case("dimension_tile_constant_zero", COPY, [("tile(BM = 64, BN = 64)", "tile(BM = 64, BN = 64, W = 0)"),
                                                 ("X: bf16[M, N]", "X: bf16[M, W]")],
         "W]", "dimension 'W' of 'X' is the tile constant W = 0; a dimension must be at least 1"),
    # the IR keeps one register tile per name, blocks apart or not
    case("tile_redeclared_with_another_shape", EW,
         [("    t: f32[BM, BN] =", "    if 1 { u: f32[BM, BN] = f32(sx) }\n"
           "    u: f32[BM, 32] = 0.0\n    t: f32[BM, BN] =")],
         "u: f32[BM, 32]", "'u' was declared at", "as f32[64, 64]; a tile of another dtype"),
    case("division_by_zero", COPY, [("BN = 64", "BN = 64 / 0")], "64 / 0", "division by zero"),
    case("grid_extent_form", COPY, [("m: M / BM", "m: M / BM < N")], "M / BM < N",
         "a grid extent is integer arithmetic (+ - * / %), not '<'"),
    case("grid_extent_builtin", COPY, [("m: M / BM", "m: lane")], "lane",
         "'lane' is not available here"),
    case("grid_extent_not_positive", COPY, [("m: M / BM", "m: 2 - 2")], "2 - 2",
         "a grid extent must be positive, not 0"),
    case("grid_extent_f32_scalar", COPY, [("Y: bf16[M, N])", "Y: bf16[M, N], s: f32)"),
                                          ("m: M / BM", "m: M / BM * s")], "s,",
         "'s' is f32; an index needs i32"),
    case("ragged_grid_not_persistent", COPY, [("m: M / BM", "m: tile.n + 1")], "tile.n + 1",
         "this extent varies with tile.n (a ragged grid): only a persistent kernel walks such "
         "a grid; add 'persistent', or use a static bound"),
    case("ragged_grid_reads_a_faster_axis", COPY, [
        ("grid(m: M / BM, n: N / BN)", "grid(m: M / BM, n: tile.m + 1, b: 2) persistent")],
         "tile.m + 1", "a grid extent may read only tile.b, the last (slowest) axis"),
    case("ragged_grid_slowest_reads_tiles", COPY, [
        ("grid(m: M / BM, n: N / BN)", "grid(m: M / BM, n: tile.n + 1) persistent")],
         "tile.n + 1", "the last grid axis's extent cannot read tile coordinates"),
    case("ragged_grid_with_cluster", COPY, [
        ("grid(m: M / BM, n: N / BN)", "grid(m: tile.n + 1, n: N / BN) cluster(2) persistent")],
         "persistent", "the blocks of a ragged grid's walk take tiles one by one"),
    case("declaration_not_top_level", COPY, [("    tma Y", "    for i in 0 .. 2 {\n"
                                              "        mbarrier b[1]\n    }\n    tma Y")],
         "mbarrier b", "declare shared buffers, mbarriers and roles at the top level"),
    # dtypes
    case("elementwise_dtype_mismatch", EW, [("t + 1.0", "t + sx")], "t + sx",
         "dtype mismatch", "bf16 and f32 in '+'"),
    case("assign_dtype_mismatch", EW, [("sy = bf16(t + 1.0)", "sy = t + 1.0")], "sy = t",
         "dtype mismatch", "the value is f32 but the target is bf16"),
    case("vector_dtype_mismatch", EW, [("s: f32[BM]", "s: bf16[BM]")], "s: bf16",
         "dtype mismatch", "'s' is bf16 but 'S' is f32"),
    case("wgmma_operand_dtype_mismatch", GEMM, [("B: bf16", "B: f16"), ("sb: bf16", "sb: f16")],
         "sa @ sb^T", "dtype mismatch", "bf16 and f16"),
    case("wgmma_input_dtype", GEMM, [("A: bf16", "A: i32"),
                                     ("sa: bf16[BM, BK] swizzle 128B", "sa: i32[BM, BK]")],
         "sa @", "wgmma takes bf16, f16, fp8 or f32 (as tf32) inputs, not i32"),
    case("accumulator_not_f32", GEMM, [("acc: f32", "acc: bf16")], "acc: bf16",
         "accumulator 'acc' is bf16", "f32"),
    case("copy_dtype_mismatch", COPY, [("buf: bf16", "buf: f16")], "tma buf <-",
         "dtype mismatch", "buffer 'buf' is f16", "tensor 'X' is bf16"),
    # shapes
    case("wgmma_k_mismatch", GEMM, [("sb: bf16[BN, BK]", "sb: bf16[BN, BK / 2]")], "sa @ sb^T",
         "shape mismatch", "A is 64x64 but B is 32x64", "K dimensions differ"),
    case("wgmma_acc_shape", GEMM, [("acc: f32[BM, BN]", "acc: f32[BM, 2 * BN]")], "sa @ sb^T",
         "shape mismatch", "gives 64x64", "'acc' is 64x128"),
    case("tma_box_larger_than_tensor", COPY, [("X: bf16[M, N]", "X: bf16[M, 32]")],
         "tma buf <-", "shape mismatch", "box [64, 64] is larger than 'X'"),
    case("buffer_rank_exceeds_tensor", COPY, [("X: bf16[M, N]", "X: bf16[M]"),
                                              ("X[tile.m, tile.n]", "X[tile.m]")],
         "tma buf <-", "shape mismatch", "2-D buffer view does not fit the 1-D tensor 'X'"),
    case("tensor_index_count", COPY, [("X[tile.m, tile.n]", "X[tile.m]")], "X[tile.m]",
         "'X' has 2 dimensions but 1 ind"),
    case("tile_decl_shape", EW, [("t: f32[BM, BN]", "t: f32[BM, 2 * BN]")], "t: f32",
         "shape mismatch", "the value is [64, 64] but the target is [64, 128]"),
    case("tile_assign_shape", EW, [("    sy = bf16", "    u: f32[BM, 2 * BN] = 0.0\n"
                                    "    u = t\n    sy = bf16")], "u = t",
         "shape mismatch", "the value is [64, 64] but the target is [64, 128]"),
    case("elementwise_shape_mismatch", EW, [("sy = bf16(t + 1.0)", "u: f32[BM, 2 * BN] = 0.0\n"
                                             "    sy = bf16(t + u)")],
         "t + u", "shape mismatch in '+'", "[64, 64] and [64, 128]"),
    case("broadcast_length_mismatch", EW, [("s: f32[BM]", "s: f32[2 * BM]")], "f32(sx) * s",
         "shape mismatch", "a vector of 128 broadcast over 64 rows"),
    case("matmul_in_elementwise", EW, [("t + 1.0", "t @ t")], "t @ t",
         "a matrix product must be the whole right side"),
    case("copy_between_buffers", COPY, [("tma buf <- X[tile.m, tile.n]", "tma buf <- buf")],
         "tma buf <- buf", "a tma copy moves a tile between a shared buffer and a global"),
    # synchronization belongs to manual code
    case("sync_outside_manual", COPY, [("    tma Y", "    bar.sync 0, 128\n    tma Y")],
         "bar.sync", "'bar.sync' is synchronization the compiler writes", "manual"),
    case("elect_outside_manual", COPY, [("    tma Y", "    elect {\n    }\n    tma Y")],
         "elect", "'elect' is synchronization the compiler writes"),
    case("via_outside_manual", COPY, [("128B\n", "128B\n    mbarrier bar[1]\n"),
                                      ("tile.n]\n", "tile.n] via bar[0]\n")],
         "bar[0]", "'via' names an mbarrier in manual code"),
    case("manual_load_without_via", MANUAL, [(" via bar[0]", "")], "tma buf <-",
         "a load names the mbarrier it completes on"),
    case("via_on_store", MANUAL, [("<- buf\n", "<- buf via bar[0]\n")], "bar[0]",
         "a store completes through bulk.commit", nth=-1),
    case("divergent_condition", COPY, [("    tma Y[tile.m, tile.n] <- buf\n",
                                        "    if lane == 0 {\n        tma Y[tile.m, tile.n] <- buf\n"
                                        "    }\n")],
         "lane == 0", "differs between the threads of a role", "'manual' block"),
    case("already_manual", MANUAL, [("    bar.sync", "    manual {\n    }\n    bar.sync")],
         "manual {", "already manual"),
    case("bar_sync_bad_id", MANUAL, [("bar.sync 0, 128", "bar.sync 16, 128")], "16, 128",
         "barrier id 16 is out of range (0 to 15)"),
    case("bar_sync_bad_thread_count", MANUAL, [("bar.sync 0, 128", "bar.sync 0, 100")], "100",
         "bar.sync needs a multiple of 32 threads", "not 100"),
    case("bar_sync_more_threads_than_block", MANUAL, [("bar.sync 0, 128", "bar.sync 0, 256")],
         "256", "up to the block's 128", "not 256"),
    case("sync_arity", MANUAL, [("mbarrier.init bar[0], 1", "mbarrier.init bar[0]")],
         "mbarrier.init", "'mbarrier.init' takes 2 operands, not 1"),
    case("mbarrier_index_out_of_range", MANUAL, [("wait bar[0]", "wait bar[1]")], "bar[1], 0",
         "mbarrier index 1 is out of range for 'bar'"),
    case("not_an_mbarrier", MANUAL, [("via bar[0]", "via buf")], "buf\n",
         "'buf' is not an mbarrier"),
    case("pending_groups_out_of_range", MANUAL, [("wait_read 0", "wait_read 8")], "8\n",
         "pending group count 8 is out of range (0 to 7)", nth=-1),
    case("arrival_count_out_of_range", MANUAL, [("bar[0], 1\n", "bar[0], 0\n")], "0\n",
         "arrival count 0 is out of range"),
    case("wg_without_whole_warpgroups", COPY, [
        ("threads 128", "threads 192"), ("Y[tile.m, tile.n] <- buf", "Y[wg, tile.n] <- buf")],
         "wg, tile.n", "'wg' needs whole warpgroups, but 192 threads run this code"),
    case("copy_index_per_lane", COPY, [("X[tile.m, tile.n]", "X[tile.m + lane, tile.n]")],
         "tma buf", "issued by one thread of its role", "cannot use 'lane'"),
    case("copy_index_per_thread", COPY, [("Y[tile.m, tile.n]", "Y[tile.m, thread]")],
         "tma Y", "cannot use 'thread'"),
    case("load_per_warpgroup", COPY, [("threads 128", "threads 256"),
                                      ("X[tile.m, tile.n]", "X[2 * tile.m + wg, tile.n]")],
         "tma buf", "load the whole tile and read buf[wg]"),
    case("stores_per_warpgroup_and_whole", COPY, [
        ("threads 128", "threads 256"), ("tile(BM = 64", "tile(BM = 128"),
        ("    tma Y[tile.m, tile.n] <- buf\n",
         "    tma Y[2 * tile.m + wg, tile.n] <- buf[wg]\n    tma Y[tile.m, tile.n] <- buf\n")],
         "tma Y[tile.m", "stores per warpgroup (line 6 names 'wg') and as a whole (line 7)"),
    case("column_slice_off_the_groups", GEMM, [_EPILOGUE("acc[:, 4 : 36]")], "4 : 36",
         "a column slice starts and ends on a multiple of 8", "not 4 : 36"),
    case("column_slice_outside", GEMM, [_EPILOGUE("acc[:, 32 : 96]")], "32 : 96",
         "columns 32 : 96 are not inside the 64 columns of 'acc'"),
    case("column_slice_not_constant", GEMM, [_EPILOGUE("acc[:, tile.n : 32]")], "tile.n :",
         "a column slice's start must be a compile-time constant"),
    case("column_slice_of_rows", GEMM, [_EPILOGUE("acc[0 : 32, :]")], "acc[0",
         "a register tile is sliced by columns: acc[:, start : stop]"),
    case("column_slice_of_a_row_major_tile", GEMM, [(
        "    }\n}\n", "    }\n    t: f32[32, 64] = 1.0\n    lo: f32[32, 32] = t[:, 0 : 32]\n}\n")],
         "t[:, 0", "only a tile in the wgmma layout", "'t' is [32, 64]"),
    case("vector_slice_outside", EW, [("s[:, None]", "s[0 : 128, None]")], "0 : 128",
         "elements 0 : 128 are not inside the vector's 64"),
    case("vector_slice_length", EW, [("s[:, None]", "s[0 : 32, None]")], "f32(sx) * s",
         "shape mismatch: a vector of 32 broadcast over 64 rows"),
    case("persistent_cluster", COPY, [
        ("grid(m: M / BM, n: N / BN)", "grid(m: M / BM, n: N / BN) cluster(1, 2) persistent")],
         "persistent", "a persistent kernel's cluster spans the first grid axis: cluster(2), "
                        "not cluster(1, 2, 1)"),
    case("persistent_manual", MANUAL, [("threads 128 manual", "threads 128 persistent manual")],
         "persistent", "a persistent kernel's tile loop is written by the compiler"),
    case("warpgroup_plane_offset", COPY, [
        ("threads 128", "threads 256"),
        ("    tma Y[tile.m, tile.n] <- buf\n", "    shared sc: bf16[4, BM, BN]\n    sc[1 + wg] = 1.0\n")],
         "1 + wg", "a plane of 'sc' per warpgroup is 'sc[c + wg]'",
         "a constant multiple of the 2 warpgroups"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", SEMANTIC)
def test_semantic_error(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


# (id, base, edits, what is declared twice, marker of the first, marker of the second)
DUPLICATES = [
    ("duplicate_buffer", COPY, [("    tma buf <-", "    shared buf: f32[BM, BN]\n    tma buf <-")],
     "'buf'", "shared buf", "shared buf"),
    ("duplicate_tile_constant", COPY, [("BN = 64)", "BN = 64, BM = 32)")], "'BM'", "BM = 64",
     "BM = 32"),
    ("duplicate_role", ROLES, [("role consumer", "role producer")], "role 'producer'",
     "role producer", "role producer"),
    ("duplicate_parameter", COPY, [("Y: bf16[M, N])", "X: bf16[M, N])")], "'X'", "X: bf16",
     "X: bf16"),
    ("duplicate_tile", EW, [("    sy = bf16", "    t: f32[BM, BN] = 0.0\n    sy = bf16")], "'t'",
     "t: f32", "t: f32"),
]


@pytest.mark.parametrize("base, edits, what, first, second",
                         [pytest.param(*d[1:], id=d[0]) for d in DUPLICATES])
def test_duplicate_name(base, edits, what, first, second) -> None:
    text = mutate(base, *edits)
    line, col = locate(text, first)
    nth = 2 if first == second else 1
    expect_error(text, second, [f"{what} is already declared (first declared at "
                                f"{NAME}:{line}:{col})"], nth)


def test_define_unknown_constant() -> None:
    source = SourceFile(NAME, COPY)
    with pytest.raises(CompileError) as info:
        driver.check(source, {"BK": 32})
    err = info.value
    assert err.span is None  # a command-line problem has no source location
    assert "-D BK" in err.message and "no tile constant 'BK'" in err.message
    assert "BM, BN" in err.message  # lists the constants the kernel has
    assert format_diagnostic(err, source) == f"{NAME}: error: {err.message}"


def test_a_dimension_may_name_a_tile_constant() -> None:
    """`X: bf16[M, W]` with `tile(W = 64)` is the integer dimension 64, and `-D W=32`
    makes it 32: the box must then fit the 32-column tensor."""
    text = mutate(COPY, ("tile(BM = 64, BN = 64)", "tile(BM = 64, BN = 64, W = 64)"),
                  ("X: bf16[M, N]", "X: bf16[M, W]"))
    kernel = driver.check(SourceFile(NAME, text))
    assert kernel.tensor("X").dims == ("M", 64)
    kernel = driver.check(SourceFile(NAME, text), {"W": 128})
    assert kernel.tensor("X").dims == ("M", 128)
    expect_error(text, "tma buf <-", ["box", "larger than 'X'"], defines={"W": 32})


def test_pipelined_buffer_is_rejected_during_lowering() -> None:
    text = mutate(COPY, ("swizzle 128B", "stages 2 swizzle 128B"))
    driver.check(SourceFile(NAME, text))  # the front end accepts it
    expect_error(text, "tma buf <-", ["'buf' has 2 stages", "use stages 1"],
                 stage=driver.generate)


# ---------------------------------------------------------------- the command line
def _cli_case(kind: str, tmp_path):
    """Writes the input; returns (path argument, (line, col) or None, words of the message)."""
    if kind == "missing_file":
        return "missing.hk", None, ["missing.hk: error: no such file"]
    if kind == "malformed":
        text, marker, word = mutate(COPY, ("buf: bf16", "buf bf16")), "bf16[BM", "unexpected"
    else:
        text, marker, word = mutate(COPY, ("<- X[", "<- Z[")), "Z[", "unknown name 'Z'"
    (tmp_path / NAME).write_text(text)
    return NAME, locate(text, marker), [word]


@pytest.mark.parametrize("stale", [False, True], ids=["fresh", "earlier_outputs"])
@pytest.mark.parametrize("kind", ["malformed", "missing_file", "semantic"])
def test_cli_build_failure(kind: str, stale: bool, tmp_path) -> None:
    """A failed build writes nothing: no new output, and an earlier build's
    outputs stay exactly as they were (never deleted, never half-replaced)."""
    path, where, words = _cli_case(kind, tmp_path)
    cubin, meta = tmp_path / "out.cubin", tmp_path / "out.json"
    if stale:
        cubin.write_bytes(b"old cubin")
        meta.write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "hopperc", "build", path, "-o", "out.cubin"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    if where is not None:
        line, col = where
        assert lines[0].startswith(f"{NAME}:{line}:{col}: error: "), lines[0]
        assert lines[1] == (tmp_path / NAME).read_text().splitlines()[line - 1]
        assert lines[2].index("^") == col - 1
    else:
        assert ": error: " in lines[0], lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    if stale:
        assert cubin.read_bytes() == b"old cubin" and meta.read_text() == "{}"
    else:
        assert not cubin.exists() and not meta.exists()


# ---------------------------------------------------------------- found by these tests
def test_non_2d_wgmma_operand_is_a_located_error() -> None:
    text = mutate(GEMM, ("    shared sb:", "    shared v: bf16[64]\n    shared sb:"),
                  ("acc += sa @ sb^T", "acc += v @ sb^T"))
    expect_error(text, "v @", ["wgmma operands are 2-D", "[64]"])


def test_zero_sized_tile_is_a_located_error() -> None:
    text = mutate(EW, ("t: f32[BM, BN]", "t: f32[0, BN]"))
    expect_error(text, "0, BN]", ["tile dimension must be positive"])


def test_role_without_warps_is_a_located_error() -> None:
    text = mutate(ROLES, ("warp regs 40", "warps 0 regs 40"))
    expect_error(text, "role producer", ["has no warps"])


def test_end_of_file_points_past_the_last_character() -> None:
    text = COPY.rstrip().removesuffix("}")
    last = text.rstrip().splitlines()
    with pytest.raises(CompileError) as info:
        driver.check(SourceFile(NAME, text))
    err = info.value
    assert (err.span.line, err.span.col) == (len(last), len(last[-1]) + 1)
    assert "expected" in err.message and "'}'" in err.message


def test_buffer_loaded_by_two_roles_is_refused_not_raced() -> None:
    text = mutate(ROLES, ("        tma sp <- A[tile.m, 0]", "        tma sa <- A[tile.m, 0]"))
    expect_error(text, "tma sa <- A[tile.m, 0]", ["used by roles 'producer', 'consumer'",
                                                  "filled by one role"],
                 stage=lambda source, defines: driver.lower(driver.check(source, defines)))


def test_condition_on_warp_is_refused_in_automatic_code() -> None:
    text = mutate(COPY, ("    tma Y[tile.m, tile.n] <- buf\n",
                         "    if warp == 1 {\n        tma Y[tile.m, tile.n] <- buf\n    }\n"))
    expect_error(text, "warp == 1", ["differs between the threads of a role"])


def test_several_warpgroups_need_their_own_rows() -> None:
    text = mutate(EW, ("threads 128", "threads 256"))
    expect_error(text, "sx) * s", ["2 warpgroups", "sx[wg]"])
