"""The operands of TMA and bulk copies as C++ text: shared address, tensor map,
coordinates (innermost first), barrier; a ragged copy's through the view of
runtime/ragged_view.py."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.codegen import names
from hopperc.codegen.cexpr import ExprRenderer
from hopperc.codegen.launch import LaunchInfo
from hopperc.codegen.scalars import RoleContext, scalar
from hopperc.ir import nodes as ir
from hopperc.ir.layout import block_bytes, column_blocks, copy_box, multicast_slice
from hopperc.runtime import ragged_view

RAGGED_END = "hk_ragged_end"  # a ragged copy's END, clamped to the tensor
# The view's arithmetic (runtime/ragged_view.py) as C++ text on int operands.
_CXX: ragged_view.Arithmetic[str] = ragged_view.Arithmetic(
    add=lambda a, b: f"{a} + {b}", sub=lambda a, b: f"({a} - {b})",
    min=lambda a, b: f"min({a}, {b})", max=lambda a, b: f"max({a}, {b})")


@dataclass(frozen=True)
class CopyOperands:
    rank: int
    smem: str
    tensor_map: str | None
    coords: tuple[str, ...]
    coord_slots: str
    barrier: str
    global_address: str
    nbytes: int
    multicast_mask: int = 0  # a multicast load: the blocks of the cluster it writes


def copy_operands(stmt: ir.AsyncLoad | ir.AsyncStore, kernel: ir.Kernel, launch: LaunchInfo,
                  exprs: ExprRenderer, role: RoleContext, barrier: str) -> list[CopyOperands]:
    """The instructions of one copy: one per column block of the view (one
    bulk group or one mbarrier transaction count covers them all)."""
    view = stmt.dst if isinstance(stmt, ir.AsyncLoad) else stmt.src
    buf = kernel.buffer(view.buffer)
    outer = tuple(scalar(c, role) for c in stmt.coords)
    if stmt.ragged is not None:
        outer = tuple(str(c) for c in ragged_view.view_coordinates(
            outer, stmt.ragged.dim, RAGGED_END, _CXX))
    coords = outer[::-1]  # innermost first
    base = exprs.view_base(view, role)
    if stmt.engine is ir.Engine.BULK:
        address = f"{names.user(stmt.tensor)} + ({coords[0]})"
        return [CopyOperands(1, base, None, (), "", barrier, address,
                             stmt.box[0] * buf.dtype.nbytes)]
    box = copy_box(buf, stmt.issued_box if isinstance(stmt, ir.AsyncLoad) else stmt.box)
    ragged = None if stmt.ragged is None else stmt.ragged.dim
    tmap = names.tensor_map(launch.tensor_map(stmt.tensor, box, buf.swizzle, ragged).param)
    offset = 2 if isinstance(stmt, ir.AsyncStore) else 3
    slots = ", ".join(f"%{i + offset}" for i in range(len(coords)))
    if isinstance(stmt, ir.AsyncLoad) and stmt.multicast > 1:
        # This block's slice of rows, into that slice of every block's stage.
        rows, nbytes = multicast_slice(buf, stmt, 1)  # per rank
        rank = "hk_cluster_rank()"
        return [CopyOperands(len(coords), f"{base} + {rank} * {nbytes}u", tmap,
                             coords[:-1] + (f"({coords[-1]}) + {rank} * {rows}",), slots,
                             barrier, "", 0, stmt.multicast_mask)]
    return [CopyOperands(len(coords), f"{base} + {j * block_bytes(buf)}u" if j else base, tmap,
                         (f"({coords[0]}) + {j * box[-1]}" if j else coords[0],) + coords[1:],
                         slots, barrier, "", 0)
            for j in range(column_blocks(buf))]


def ragged_end(stmt: ir.AsyncLoad | ir.AsyncStore, kernel: ir.Kernel, role: RoleContext) -> str:
    """The declaration of a ragged copy's END clamped to [0, the tensor's extent]
    (RAGGED_END), or "" for another copy."""
    if stmt.ragged is None:
        return ""
    extent = kernel.tensor(stmt.tensor).dims[stmt.ragged.dim]
    bound = names.user(extent) if isinstance(extent, str) else str(extent)
    end = ragged_view.clipped_end(scalar(stmt.ragged.end, role), bound, _CXX)
    return f"const int {RAGGED_END} = {end};"
