"""The address of a flag (ir.Signal, ir.Wait, ir.Count): element `index` of a row-major
i32 tensor, in 64-bit arithmetic."""
from __future__ import annotations

from hopperc.codegen import names
from hopperc.codegen.scalars import RoleContext, scalar
from hopperc.ir import nodes as ir

# A counter's broadcast slot (`__shared__ int hk_count_slot`) is static shared memory,
# beside the dynamic: ptxas reserves 16 bytes for it (sum_slices' resources).
COUNT_SLOT_BYTES = 16


def flag_address(stmt: ir.Signal | ir.Wait | ir.Count, kernel: ir.Kernel, role: RoleContext) -> str:
    dims = [str(d) if isinstance(d, int) else names.user(d)
            for d in kernel.tensor(stmt.tensor).dims]
    offset = f"static_cast<long long>({scalar(stmt.index[0], role)})"
    for index, dim in zip(stmt.index[1:], dims[1:]):
        offset = f"({offset} * {dim} + ({scalar(index, role)}))"
    return f"{names.user(stmt.tensor)} + {offset}"
