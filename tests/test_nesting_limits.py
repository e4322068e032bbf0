"""Nesting limits: a kernel at the statement and expression limits goes through
every stage (parser, semantic checks, passes, printers, renderer, NVRTC and the
simulator) without running out of Python stack; one level more is a located
error that names the limit, never an internal error.
"""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile, format_diagnostic
from hopperc.frontend.ast import dump
from hopperc.frontend.nesting import MAX_EXPRESSION_DEPTH, MAX_STATEMENT_DEPTH
from hopperc.ir.printer import print_kernel

EW_HEAD = """\
kernel ew(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN] swizzle 128B
    shared sy: bf16[BM, BN] swizzle 128B
    tma sx <- X[tile.m, tile.n]
"""


def element_wise(loops: int, tile_depth: int, condition_depth: int) -> str:
    """`loops` nested loops around an `if` (statement depth loops + 2, with the kernel)
    whose condition and tile expression are nested `condition_depth` and `tile_depth` deep."""
    condition = "1" + " + 1" * (condition_depth - 2) + " > 0"
    tile = "f32(sx)" + " + 1.0" * (tile_depth - 1)
    return (EW_HEAD + "".join(f"for i{i} in 0 .. 1 {{\n" for i in range(loops))
            + f"if {condition} {{\nt: f32[BM, BN] = {tile}\nsy = bf16(t)\n}}\n"
            + "}\n" * loops + "tma Y[tile.m, tile.n] <- sy\n}\n")


MANUAL_HEAD = """\
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
"""


def manual_copy(loops: int, condition_depth: int) -> str:
    """A hand-synchronized copy inside `loops` nested loops (statement depth loops + 2)."""
    condition = "thread" + " + 0" * (condition_depth - 2) + " == 0"
    return (MANUAL_HEAD + "".join(f"for i{i} in 0 .. 1 {{\n" for i in range(loops))
            + f"if {condition} {{\n    mbarrier.expect_tx bar[0], 8192\n"
            "    tma buf <- X[tile.m, tile.n] via bar[0]\n}\nmbarrier.wait bar[0], 0\n"
            "if thread == 0 {\n    tma Y[tile.m, tile.n] <- buf\n    bulk.commit\n"
            "    bulk.wait_read 0\n}\n" + "}\n" * loops + "}\n")


STATEMENT_LOOPS = MAX_STATEMENT_DEPTH - 2


def located(text: str, line: int, col: int, *words: str) -> None:
    source = SourceFile("deep.hk", text)
    with pytest.raises(CompileError) as info:
        driver.check(source)
    err = info.value
    for word in words:
        assert word in err.message, err.message
    assert (err.span.line, err.span.col) == (line, col), err.message
    out = format_diagnostic(err, source).split("\n")
    assert out[0] == f"deep.hk:{line}:{col}: error: {err.message}"
    assert out[1] == text.split("\n")[line - 1] and out[2].index("^") == col - 1


def test_statement_one_past_the_limit_is_located_at_the_construct() -> None:
    text = element_wise(STATEMENT_LOOPS + 1, 2, 2)
    line = text.split("\n").index("if 1 > 0 {") + 1
    located(text, line, 1, f"nested more than {MAX_STATEMENT_DEPTH} deep")


def test_else_if_chains_count_as_nesting() -> None:
    chain = "if 1 > 0 {\n}" + " else if 1 > 0 {\n}" * (MAX_STATEMENT_DEPTH - 1) + "\n"
    text = EW_HEAD + chain + "}\n"
    located(text, MAX_STATEMENT_DEPTH + 6, len("} else ") + 1, f"nested more than {MAX_STATEMENT_DEPTH} deep")


def test_tile_expression_one_past_the_limit() -> None:
    text = element_wise(1, MAX_EXPRESSION_DEPTH + 1, 2)
    line = next(i for i, x in enumerate(text.split("\n"), 1) if x.startswith("t: f32"))
    located(text, line, len("t: f32[BM, BN] = ") + 1,
            f"expression is nested more than {MAX_EXPRESSION_DEPTH} deep")


@pytest.mark.parametrize("prefix, levels_above", [("-", 1), ("not ", 0), ("(", 0)])
def test_unary_and_parenthesized_nesting(prefix: str, levels_above: int) -> None:
    """Parentheses add no level (the AST has none); `-` and `not` each add one. `-`
    binds tighter than `==` (one level above the first `-`), `not` looser."""
    count = MAX_EXPRESSION_DEPTH + 1
    inner = prefix * count + "thread" + (")" * count if prefix == "(" else "") + " == 0"
    text = MANUAL_HEAD + f"if {inner} {{\n}}\n}}\n"
    line = text.split("\n").index(f"if {inner} {{") + 1
    if prefix == "(":
        driver.check(SourceFile("deep.hk", text))
    else:
        too_deep = MAX_EXPRESSION_DEPTH - levels_above  # 0-based index of that prefix
        located(text, line, len("if ") + 1 + too_deep * len(prefix),
                "nested more than")


def test_front_end_and_printers_at_both_limits() -> None:
    text = element_wise(STATEMENT_LOOPS, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_DEPTH)
    source = SourceFile("deep.hk", text)
    assert dump(driver.parse_source(source)).startswith("Kernel @1:1")
    assert "for i97" in print_kernel(driver.check(source))


def test_sixty_four_nested_loops_in_a_role_are_admitted() -> None:
    loops = "".join(f"for i{i} in 0 .. 1 {{\n" for i in range(64))
    text = mutate_roles(loops, "}\n" * 64)
    driver.check(SourceFile("roles.hk", text))


def mutate_roles(open_loops: str, close_loops: str) -> str:
    return ("kernel ws(X: bf16[M, N], Y: bf16[M, N])\n"
            "    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN)\n{\n"
            "    shared sx: bf16[BM, BN] swizzle 128B\n"
            "    role producer: warp {\n" + open_loops + "tma sx <- X[tile.m, tile.n]\n"
            + close_loops + "    }\n}\n")


@pytest.mark.parametrize("kernel", [manual_copy, element_wise], ids=["manual", "automatic"])
def test_build_and_check_at_both_limits(hopperc_cli, tmp_path, kernel) -> None:
    """The whole pipeline at the statement and expression limits at once, through
    the sync passes too (automatic) or around them (hand-synchronized)."""
    path = tmp_path / "deep.hk"
    if kernel is manual_copy:
        path.write_text(manual_copy(STATEMENT_LOOPS, MAX_EXPRESSION_DEPTH))
    else:
        path.write_text(element_wise(STATEMENT_LOOPS, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_DEPTH))
    built = hopperc_cli("build", str(path), "-o", str(tmp_path / "deep.cubin"))
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "deep.cubin").stat().st_size > 0
    checked = hopperc_cli("sim", "-q", "--seeds", "2", "--search", "20", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok: no deadlock" in checked.stdout


@pytest.mark.parametrize("command", ["build", "check"])
def test_one_past_the_limit_on_the_command_line(hopperc_cli, tmp_path, command: str) -> None:
    path = tmp_path / "deeper.hk"
    path.write_text(manual_copy(STATEMENT_LOOPS + 1, 2))
    proc = hopperc_cli(command, str(path))
    assert proc.returncode == 1
    assert f"nested more than {MAX_STATEMENT_DEPTH} deep" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
