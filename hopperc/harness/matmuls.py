"""The matrix products a kernel computes, as whole-tensor matmuls: the cuBLAS
baseline of `hopperc bench` and the flop count of its TFLOP/s.

Each wgmma statement accumulates over the loop that feeds it, so over the grid
it computes one product of the two tensors its shared operands are loaded
from: `acc += sa @ sb^T`, with sa filled from A[M, K] and sb from B[N, K], is
A @ B^T (2 * M * N * K flops)."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk


@dataclass(frozen=True)
class Matmul:
    a: str  # tensor names
    b: str
    a_transposed: bool  # the tensor is stored [K, M]
    b_transposed: bool  # the tensor is stored [N, K] (the usual `sb^T`)

    def describe(self) -> str:
        return f"{self.a}{'^T' * self.a_transposed} @ {self.b}{'^T' * self.b_transposed}"

    def shape(self, shapes: dict[str, tuple[int, ...]]) -> tuple[int, int, int]:
        """(m, n, k) from the tensors' actual shapes."""
        a, b = shapes[self.a], shapes[self.b]
        m, k = (a[1], a[0]) if self.a_transposed else a
        n = b[0] if self.b_transposed else b[1]
        return m, n, k

    def flops(self, shapes: dict[str, tuple[int, ...]]) -> int:
        m, n, k = self.shape(shapes)
        return 2 * m * n * k


def matmuls(kernel: ir.Kernel) -> tuple[Matmul, ...] | None:
    """The distinct products of `kernel`, or None when one is not a product of
    two tensors (an operand from registers, or a buffer fed from several)."""
    sources: dict[str, set[str]] = {}
    for stmt in walk(kernel.body):
        if isinstance(stmt, ir.AsyncLoad):
            sources.setdefault(stmt.dst.buffer, set()).add(stmt.tensor)
    found: list[Matmul] = []
    for stmt in walk(kernel.body):
        if not isinstance(stmt, ir.Mma):
            continue
        if not isinstance(stmt.a, ir.BufferView):
            return None
        a, b = sources.get(stmt.a.buffer, set()), sources.get(stmt.b.buffer, set())
        if len(a) != 1 or len(b) != 1:
            return None
        product = Matmul(min(a), min(b), stmt.a.transposed, stmt.b.transposed)
        if product not in found:
            found.append(product)
    return tuple(found) or None
