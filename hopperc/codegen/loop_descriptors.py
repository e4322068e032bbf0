"""How many wgmma descriptors a loop's products keep the same in every
iteration. ptxas hoists each such descriptor out of the loop and keeps it in a
register; past INVARIANT_DESCRIPTORS of them the uniform registers (63) run out,
the rest go to ordinary registers and spill, so the renderer forms them in the
loop instead (render.py, `_Context._loop_body`)."""
from __future__ import annotations

from collections.abc import Iterator

from hopperc.ir import nodes as ir
from hopperc.ir.index_algebra import names

# Loop-invariant wgmma descriptors a loop may keep in registers (_loop_body):
# attention_fwd at D = 256 keeps 16 without a spill, attention_bwd spilled with 32 and with 36.
INVARIANT_DESCRIPTORS = 24


def invariant_descriptors(kernel: ir.Kernel, body: ir.Block) -> int:
    """The descriptors of `body`'s own products (not those of loops inside it,
    which count for those loops) that are the same in every iteration: one per
    32-byte k-step of each shared operand that neither a stage nor a loop
    variable moves."""
    count = 0
    for mma in _own_products(body):
        for view in (mma.a, mma.b):
            if not isinstance(view, ir.BufferView) or view.stage is not None:
                continue
            if view.part is not None and names(view.part.index, ir.ScalarKind.LOOP):
                continue
            count += mma.shape[2] * kernel.buffer(view.buffer).dtype.nbytes // 32
    return count


def _own_products(block: ir.Block) -> Iterator[ir.Mma]:
    for stmt in block.stmts:
        if isinstance(stmt, ir.Mma):
            yield stmt
        elif isinstance(stmt, ir.IfThen):
            yield from _own_products(stmt.then)
            yield from _own_products(stmt.orelse)
        elif not isinstance(stmt, ir.ForLoop) and isinstance(getattr(stmt, "body", None),
                                                             ir.Block):
            yield from _own_products(stmt.body)
