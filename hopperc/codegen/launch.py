"""The kernel's launch interface, shared by the renderer and the metadata JSON:
parameters in order, tensor maps, shared-memory layout and launch dims."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.elements import element_tensors
from hopperc.ir.global_accesses import written_tensors
from hopperc.ir.layout import MBARRIER_BYTES, copy_box, shared_layout

# The dynamic shared memory window is only 16-byte aligned; the kernel rounds
# its base up to the strictest buffer alignment, so that much slack is asked for.
BASE_ALIGNMENT = 16


@dataclass(frozen=True)
class TensorMap:
    """One CUtensorMap to encode on the host (box and coordinates innermost first)."""

    param: str  # its label in the metadata; names.tensor_map gives the C++ name
    tensor: str
    dtype: ir.DType
    box: tuple[int, ...]  # of one instruction (`layout.copy_box`), outermost first
    swizzle: ir.Swizzle
    # A ragged copy's map: the tensor dimension (outermost first) its START : END
    # clips; the map describes the overlapping view of docs/architecture.md.
    ragged: int | None = None

    @property
    def key(self) -> tuple:
        return self.tensor, self.box, self.swizzle, self.ragged


@dataclass(frozen=True)
class Param:
    name: str  # the source name (a tensor-map label for kind "tensor_map")
    kind: str  # "tensor_map" | "pointer" | "dim" | "scalar"
    ctype: str
    tensor: str | None = None
    written: bool = False  # a pointer to a tensor the kernel writes (`written_tensors`)


@dataclass(frozen=True)
class LaunchInfo:
    params: tuple[Param, ...]
    tensor_maps: tuple[TensorMap, ...]
    buffer_offsets: dict[str, int]
    barrier_offsets: dict[str, int]
    shared_bytes: int  # layout size, before base-alignment slack
    alignment: int
    written: frozenset[str] = frozenset()  # `written_tensors`

    @property
    def dynamic_shared_bytes(self) -> int:
        slack = self.alignment - BASE_ALIGNMENT if self.alignment > BASE_ALIGNMENT else 0
        return self.shared_bytes + slack if self.shared_bytes else 0

    def tensor_map(self, tensor: str, box: tuple[int, ...], swizzle: ir.Swizzle,
                   ragged: int | None = None) -> TensorMap:
        return next(m for m in self.tensor_maps if m.key == (tensor, box, swizzle, ragged))


def launch_info(kernel: ir.Kernel) -> LaunchInfo:
    maps: list[TensorMap] = []
    pointers: set[str] = set()
    for stmt in walk(kernel.body):
        if isinstance(stmt, (ir.AsyncLoad, ir.AsyncStore)):
            view = stmt.dst if isinstance(stmt, ir.AsyncLoad) else stmt.src
            if stmt.engine is ir.Engine.BULK:
                pointers.add(stmt.tensor)
                continue
            buf = kernel.buffer(view.buffer)
            box = copy_box(buf, stmt.issued_box if isinstance(stmt, ir.AsyncLoad) else stmt.box)
            ragged = None if stmt.ragged is None else stmt.ragged.dim
            if all(m.key != (stmt.tensor, box, buf.swizzle, ragged) for m in maps):
                ordinal = sum(m.tensor == stmt.tensor for m in maps) + 1
                maps.append(TensorMap(tensor_map_label(stmt.tensor, ordinal), stmt.tensor,
                                      kernel.tensor(stmt.tensor).dtype, box, buf.swizzle,
                                      ragged))
        if isinstance(stmt, (ir.GlobalRowStore, ir.Signal, ir.Wait, ir.Count)):
            pointers.add(stmt.tensor)
        pointers |= vector_tensors(stmt)
    pointers.update(element_tensors(kernel))
    params: list[Param] = []
    written = written_tensors(kernel.body)
    for t in kernel.tensors:
        params.extend(Param(m.param, "tensor_map", "hk_tensor_map", t.name)
                      for m in maps if m.tensor == t.name)
        if t.name in pointers:
            params.append(Param(t.name, "pointer", f"{t.dtype.storage}*", t.name,
                                t.name in written))
    dims = []
    for t in kernel.tensors:
        dims.extend(d for d in t.dims if isinstance(d, str) and d not in dims)
    params.extend(Param(d, "dim", "int") for d in dims)
    params.extend(Param(s.name, "scalar", s.dtype.storage) for s in kernel.scalars)
    offsets, total = shared_layout(kernel.buffers, sum(b.count for b in kernel.barriers))
    cursor = total - sum(b.count for b in kernel.barriers) * MBARRIER_BYTES
    barrier_offsets = {}
    for bar in kernel.barriers:
        barrier_offsets[bar.name] = cursor
        cursor += bar.count * MBARRIER_BYTES
    alignment = max([b.alignment for b in kernel.buffers] + [BASE_ALIGNMENT])
    return LaunchInfo(tuple(params), tuple(maps), offsets, barrier_offsets, total, alignment,
                      frozenset(written))


def tensor_map_label(tensor: str, ordinal: int) -> str:
    """`tmap_X` for the first map of tensor X, then `tmap2_X`, `tmap3_X`: the
    tensor name comes last, so no two (tensor, ordinal) pairs share a label."""
    return f"tmap{ordinal if ordinal > 1 else ''}_{tensor}"


def vector_tensors(stmt: ir.Stmt) -> set[str]:
    """The 1-D global tensors a statement's value reads (bias and scale vectors)."""
    values = []
    if isinstance(stmt, (ir.TileDef,)):
        values.append(stmt.init)
    elif isinstance(stmt, (ir.TileAssign, ir.SharedStore, ir.GlobalRowStore)):
        values.append(stmt.value)
    found: set[str] = set()
    while values:
        value = values.pop()
        if isinstance(value, ir.GlobalVector):
            found.add(value.tensor)
        elif isinstance(value, ir.Elementwise):
            values.extend(value.args)
        elif isinstance(value, ir.Convert):
            values.append(value.operand)
    return found
