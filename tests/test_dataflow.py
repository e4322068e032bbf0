"""The forward rewriter shared by the sync passes (ir/dataflow.py)."""
from __future__ import annotations

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.dataflow import ForwardRewrite


def nested_loops(depth: int) -> str:
    text = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: bf16[BM, BN]
"""
    for level in range(depth):
        text += "    " * (level + 1) + f"for i{level} in 0 .. 1 {{\n"
    text += "    " * (depth + 1) + "tma sx <- X[tile.m, tile.n]\n"
    text += "    " * (depth + 1) + "tma Y[tile.m, tile.n] <- sx\n"
    for level in reversed(range(depth)):
        text += "    " * (level + 1) + "}\n"
    return text + "}\n"


class _CountingStores(ForwardRewrite[frozenset]):
    """Collects the stores seen so far (grows once, so each loop iterates twice)."""

    def __init__(self):
        self.steps = 0

    def initial(self):
        return frozenset()

    def join(self, a, b):
        return a | b

    def transfer(self, stmt, state):
        self.steps += 1
        return state | {stmt.span.line} if isinstance(stmt, ir.AsyncStore) else state


def steps(depth: int) -> int:
    kernel = driver.check(SourceFile("t.hk", nested_loops(depth)))
    counter = _CountingStores()
    counter.run(kernel)
    return counter.steps


def test_nested_loops_are_analysed_in_linear_work():
    """Each loop's fixpoint re-enters the loop inside it with a state it has
    seen: the work grows with the depth, not 2 ** depth."""
    assert steps(10) <= 10 * steps(1)  # without reuse: about 3 ** 10 * steps(1)


def test_sixty_four_nested_loops_compile():
    built = driver.build(SourceFile("t.hk", nested_loops(64)))
    assert built.result.cubin
