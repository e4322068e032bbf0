"""Messages that must name the construct at fault, at its line, in the user's
words: a kernel header clause given twice, the buffer of a ring whose `stages`
differ, a comparison's dtypes, NVRTC's warnings. Same method as
test_diagnostics.py: break one thing in a valid kernel."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from test_diagnostics import COPY, GEMM, case, expect_error, mutate

HEADER = "threads 128\n{"

# Every clause of the grammar's header_clause, given a second time: the last one
# would silently win (cluster(2) cluster(16)), so the second is the error.
REPEATED_CLAUSES = [
    case(f"repeated_{keyword}", COPY, [(HEADER, f"{first} {second}\n{{")], second,
         f"second '{keyword}' clause", "(the first is at bad.hk:2:", "give each clause once",
         nth=-1)
    for keyword, first, second in [
        ("tile", "threads 128", "tile(BK = 64)"),
        ("grid", "threads 128", "grid(k: M / BM)"),
        ("cluster", "threads 128 cluster(2)", "cluster(16)"),
        ("threads", "threads 128", "threads 256"),
        ("persistent", "threads 128 persistent", "persistent"),
        ("specialize", "threads 128 specialize", "specialize"),
        ("pingpong", "threads 128 pingpong", "pingpong"),
    ]
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", REPEATED_CLAUSES)
def test_repeated_header_clause(text, marker, keywords, nth, defines) -> None:
    err = expect_error(text, marker, keywords, nth, defines,
                       stage=lambda source, _: driver.parse_source(source))
    assert err.rule == "syntax"


def test_repeated_clause_names_where_the_first_is() -> None:
    text = mutate(COPY, (HEADER, "threads 128 cluster(2) cluster(16)\n{"))
    err = expect_error(text, "cluster(16)", ["second 'cluster' clause"],
                       stage=lambda source, _: driver.parse_source(source))
    assert f"(the first is at bad.hk:2:{text.split(chr(10))[1].index('cluster(2)') + 1})" \
        in err.message


def test_each_clause_once_is_accepted() -> None:
    text = mutate(GEMM, ("threads 128", "threads 128 cluster(1)"))
    driver.check(SourceFile("ok.hk", text))


# ---------------------------------------------------------------- ring depths
# Three rings of one loop, two with `stages 4`: the one that departs is named, at
# its declaration, with both counts; with `specialize` they are handed over to
# another role, without it the one role pipelines them itself.
RINGS = """\
kernel rings(A: bf16[M, K], B: bf16[N, K], S: f32[M, K])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 256 specialize
{
    shared sa: bf16[BM, BK] stages 4 swizzle 128B
    shared sb: bf16[BN, BK] stages 4 swizzle 128B
    shared ss: f32[BM, BK] stages 4
    acc: f32[64, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        tma ss <- S[tile.m, k]
        acc += sa[wg] @ sb^T
        x: f32[64, BK] = ss[wg]
    }
}
"""

STAGES = [
    case(f"{odd}_{how}", RINGS, [(f"{odd}: {decl} stages 4", f"{odd}: {decl} stages 2"),
                                 *([("threads 256 specialize", "threads 256")]
                                   if how == "loaded" else [])],
         f"shared {odd}", f"'{odd}' has stages 2 but '{usual}' (line {line}) has stages 4",
         f"both are {how} in the same loop", "give them the same 'stages'")
    for odd, decl, usual, line in [("ss", "f32[BM, BK]", "sa", 4),
                                   ("sa", "bf16[BM, BK]", "sb", 5)]
    for how in ("handed over", "loaded")
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", STAGES)
def test_rings_of_one_loop_with_different_stages(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines, stage=driver.generate)


@pytest.mark.parametrize("specialize", [" specialize", ""])
def test_rings_of_equal_stages_are_accepted(specialize: str) -> None:
    text = mutate(RINGS, ("threads 256 specialize", f"threads 256{specialize}"))
    driver.generate(SourceFile("ok.hk", text), None)


# ---------------------------------------------------------------- comparisons
MASKED = """\
kernel masked(X: bf16[M, N], K: i32[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sk: i32[BM, BN]
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    tma sk <- K[tile.m, tile.n]
    t: f32[BM, BN] = f32(sx)
    mask: i32[BM, BN] = sk
    sy = bf16(where(mask == 0, t, 0.0))
    tma Y[tile.m, tile.n] <- sy
}
"""

COMPARISONS = [
    case(f"compare_{name}", MASKED, [("where(mask == 0,", f"where(t {op} mask,")],
         f"t {op} mask", f"dtype mismatch: f32 and i32 in '{op}'")
    for name, op in [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                     ("ge", ">=")]
] + [
    case("compare_nested_in_sum", MASKED,
         [("where(mask == 0, t,", "where(mask == 0, t + (mask > t),")],
         "mask > t", "dtype mismatch: f32 and i32 in '>'"),
    case("where_values", MASKED, [("t, 0.0)", "mask, t)")],
         "where(", "dtype mismatch: f32 and i32 in 'where'"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", COMPARISONS)
def test_dtype_mismatch_is_reported_at_the_operator(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)


@pytest.mark.parametrize("condition", ["mask == 0", "mask == 0.0", "mask", "t > 0.5"])
def test_where_condition_of_another_dtype_is_accepted(condition: str) -> None:
    driver.check(SourceFile("ok.hk", mutate(MASKED, ("mask == 0", condition))))


def test_an_i32_mask_selects_f32_values_in_the_simulator() -> None:
    report = driver.simulate(SourceFile("masked.hk", MASKED), seeds=1, search=4)
    assert report.ok, [line for f in report.findings for line in f.lines()]


# ---------------------------------------------------------------- 1-D rings
# A staged 1-D buffer is broadcast like an unstaged one (language.md §8): per k-step
# column scales handed from a producer warp to two warpgroups.
VECTOR_RING = """\
kernel vector_ring_ws(A: bf16[M, K], B: bf16[N, K], SB: f32[KB, N], C: bf16[M, N])
    tile(BM = 128, BN = 64, BK = 64) grid(m: M / BM, n: N / BN) threads 256 specialize
{
    shared sa: bf16[BM, BK] stages 2 swizzle 128B
    shared sb: bf16[BN, BK] stages 2 swizzle 128B
    shared ss: f32[BN] stages 2
    shared sc: bf16[BM, BN] swizzle 128B
    acc: f32[64, BN] = 0
    for k in 0 .. K / BK {
        tma sa <- A[tile.m, k]
        tma sb <- B[tile.n, k]
        tma ss <- SB[k, tile.n]
        part: f32[64, BN] = sa[wg] @ sb^T
        acc = acc + part * ss[None, :]
    }
    sc[wg] = bf16(acc)
    tma C[tile.m, tile.n] <- sc
}
"""


def test_a_vector_ring_handed_to_two_warpgroups_passes_the_simulator() -> None:
    report = driver.simulate(SourceFile("ring.hk", VECTOR_RING),
                             shapes={"M": 256, "N": 128, "K": 384, "KB": 6}, seeds=2, search=30)
    assert report.ok, [line for f in report.findings for line in f.lines()]



# ---------------------------------------------------------------- NVRTC's warnings
# NVRTC sees the generated names (`u_acc`, `hk_...`) and puts "declared but never
# referenced" at the end of the variable's scope; the user sees the source's name at
# its declaration, and nothing about what only the compiler wrote.
UNUSED = """\
kernel unused_tile(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    t: f32[BM, BN] = f32(sx)
    twice: f32[BM, BN] = t * 2.0
    sy = bf16(t)
    tma Y[tile.m, tile.n] <- sy
}
"""

# The first iteration of a loop whose products overwrite is rendered apart, with its
# own copy of the loop variable: unused when the body never names it.
UNUSED_LOOP_VARIABLE = mutate(GEMM, ("        tma sa <- A[tile.m, k]\n        tma sb <- B[tile.n, k]\n",
                                     ""),
                              ("    acc: f32", "    tma sa <- A[tile.m, 0]\n    tma sb <- B[tile.n, 0]\n"
                                             "    acc: f32"))


def _warnings(text: str):
    from hopperc.buildsys.jobs import compile_source

    entry, problems = compile_source(SourceFile("w.hk", text), {}, driver.DEFAULT_ARCH, "w.hk")
    assert entry is not None, [p.text for p in problems]
    return problems


def test_a_warning_names_the_variable_as_the_source_does_at_its_line() -> None:
    (warning,) = _warnings(UNUSED)
    assert warning.rule == "nvrtc-warning"
    assert warning.message == 'variable "twice" was set but never used'
    assert warning.span.line == UNUSED.split("\n").index(
        "    twice: f32[BM, BN] = t * 2.0") + 1
    assert "u_" not in warning.text and "hk_" not in warning.text


# One tile name declared in two sibling loops, one of the two never read: the warning
# is at the declaration in that loop, not at the other's.
TWO_LOOPS = """\
kernel unused_in_one_loop(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
    acc: f32[BM, BN] = 0.0
    for i in 0 .. 2 {
        t: f32[BM, BN] = f32(sx)
        acc = acc + t
    }
    for j in 0 .. 2 {
        t: f32[BM, BN] = f32(sx) * 2.0
    }
    sy = bf16(acc)
    tma Y[tile.m, tile.n] <- sy
}
"""


@pytest.mark.parametrize("unused", ["first", "second"])
def test_a_warning_about_a_name_of_two_loops_is_at_its_own_declaration(unused: str) -> None:
    used, idle = "        acc = acc + t\n    }\n", "    }\n"
    text = TWO_LOOPS if unused == "second" else TWO_LOOPS.replace(
        "        t: f32[BM, BN] = f32(sx)\n" + used, "        t: f32[BM, BN] = f32(sx)\n" + idle
    ).replace("f32(sx) * 2.0\n" + idle, "f32(sx) * 2.0\n" + used)
    declaration = "f32(sx)\n" if unused == "first" else "f32(sx) * 2.0\n"
    lines = text.split("\n")
    (warning,) = _warnings(text)
    assert warning.message == 'variable "t" was set but never used'
    assert lines[warning.span.line - 1] == "        t: f32[BM, BN] = " + declaration[:-1]


def test_an_unused_loop_variable_gets_no_warning_about_the_first_iteration_copy() -> None:
    assert "for k in 0 .. K / BK" in UNUSED_LOOP_VARIABLE
    assert _warnings(UNUSED_LOOP_VARIABLE) == ()


@pytest.mark.parametrize("message, line, expected", [
    ('variable "u_k" was declared but never referenced', 11,
     ('variable "k" was declared but never referenced', 9)),
    ('variable "u_u_x" was set but never used', 12, ('variable "u_x" was set but never used', 4)),
    ('variable "u_gone" was set but never used', 12, ('variable "gone" was set but never used', 12)),
    ("conversion from u_acc to u_b may lose precision", 6,
     ("conversion from acc to b may lose precision", 6)),
    ('variable "hk_value" was declared but never referenced', 7, None),
])
def test_nvrtc_warnings_in_source_words(message, line, expected) -> None:
    from hopperc.codegen.names import source_warning

    assert source_warning(message, line, {"k": 9, "u_x": 4}) == expected


def test_shared_memory_over_the_limit_names_the_largest_buffers() -> None:
    """At the buffer whose end crosses the limit ('ss', after 'sa' and 'sb')."""
    text = mutate(RINGS, ("BN = 64", "BN = 256"), ("f32[BM, BK] stages 4", "f32[BM, BK] stages 2"))
    err = expect_error(text, "shared ss", ["shared memory needs 262144 bytes",
                                           "'ss' ends at byte 262144"])
    assert err.notes == ("the largest buffers, in bytes: 'sb' 131072 (line 5, 4 stages of "
                         "32768), 'sa' 65536 (line 4, 4 stages of 16384), 'ss' 65536 (line 6, "
                         "2 stages of 32768)",)


# ---------------------------------------------------------------- header clauses
# What is wrong with a clause is reported at the clause, not at the kernel's name.
CLAUSE_ERRORS = [
    case("specialize_without_rings", COPY, [(HEADER, "threads 128 specialize\n{")],
         "specialize", "'specialize' moves loads into rings", "this kernel has none"),
    case("specialize_part_of_a_warpgroup", GEMM, [("threads 128", "threads 192 specialize")],
         "specialize", "'specialize' gives the consumer whole warpgroups",
         "192 threads are not a multiple of 128"),
    case("pingpong_without_persistent", COPY, [(HEADER, "threads 128 pingpong\n{")], "pingpong",
         "'pingpong' alternates the tiles a persistent block takes"),
]


@pytest.mark.parametrize("text, marker, keywords, nth, defines", CLAUSE_ERRORS)
def test_clause_errors_are_at_the_clause(text, marker, keywords, nth, defines) -> None:
    expect_error(text, marker, keywords, nth, defines)
