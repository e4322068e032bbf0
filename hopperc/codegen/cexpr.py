"""IR expressions -> C++ expression text.

Element-wise math runs in f32: 16-bit, fp8 and i32 values are converted when
read and rounded when written to a tile or buffer.
"""
from __future__ import annotations

import math

from typing import Mapping

from hopperc.codegen import names
from hopperc.codegen.argmax import argmax_keep, column_value, row_argmax
from hopperc.codegen.launch import LaunchInfo
from hopperc.codegen.scalars import RoleContext, scalar
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.layout import (block_bytes, column_blocks, packs_pairs, part_bytes, row_pitch,
                               tile_registers)

_SHARED_ACCESS = {1: "u8", 2: "u16"}


def tile_element(tile: ir.TileDef, first_slot: int = 0) -> str:
    """Slot hk_k of a register tile (half of a register when pairs are packed),
    counted from `first_slot` (a column slice's first slot)."""
    storage = names.user(tile.name)
    slot = f"(hk_k + {first_slot})" if first_slot else "hk_k"
    if packs_pairs(tile):
        return f"hk_half({storage}[{slot} / 2], {slot} % 2)"
    return f"{storage}[{slot}]"


def tile_store(tile: ir.TileDef, value: str) -> str:
    """Statement writing `value` to slot hk_k of a register tile."""
    storage = names.user(tile.name)
    if packs_pairs(tile):
        return f"hk_set_half({storage}[hk_k / 2], hk_k % 2, {value});"
    return f"{storage}[hk_k] = {value};"


def to_float(dtype: DType, value: str) -> str:
    return value if dtype is DType.F32 else f"hk_{dtype}_to_f32({value})"


def from_float(dtype: DType, value: str) -> str:
    return value if dtype is DType.F32 else f"hk_f32_to_{dtype}({value})"


def shared_load(dtype: DType, address: str) -> str:
    kind = _SHARED_ACCESS.get(dtype.nbytes, "f32" if dtype is DType.F32 else "i32")
    return f"hk_ld_shared_{kind}({address})"


def shared_store(dtype: DType, address: str, value: str) -> str:
    kind = _SHARED_ACCESS.get(dtype.nbytes, "f32" if dtype is DType.F32 else "i32")
    return f"hk_st_shared_{kind}({address}, {value})"


class ExprRenderer:
    """Renders tile expressions at element (hk_r, hk_c) of slot hk_k of the running
    thread (hk_ names cannot clash with the kernel's own)."""

    def __init__(self, kernel: ir.Kernel, launch: LaunchInfo):
        self.kernel = kernel
        self.launch = launch
        self.tiles = {s.name: s for s in walk(kernel.body) if isinstance(s, ir.TileDef)}

    def global_load(self, tensor: str, index: str) -> str:
        """Element `index` of a tensor: `ld.global.nc` (__ldg) where the kernel
        never writes the tensor, else a plain, coherent load
        (`ir/global_accesses.written_tensors`)."""
        pointer = names.user(tensor)
        if tensor in self.launch.written:
            return f"{pointer}[{index}]"
        return f"__ldg({pointer} + {index})"

    def view_base(self, view: ir.BufferView, role: RoleContext) -> str:
        """Shared address of the view's first byte."""
        return f"hk_smem_base + {self.view_offset(view, role)}"

    def view_offset(self, view: ir.BufferView, role: RoleContext, unit: int = 1) -> str:
        """Offset of the view's first byte in the shared window, in bytes or in
        units of `unit` bytes (every stage and part of the view is a whole number
        of units)."""
        buf = self.kernel.buffer(view.buffer)
        parts = [f"{self.launch.buffer_offsets[buf.name] // unit}u"]
        if view.stage is not None:
            parts.append(f"({scalar(view.stage, role)}) * {buf.stage_bytes // unit}u")
        if view.part is not None:
            parts.append(f"({scalar(view.part.index, role)}) * "
                         f"{part_bytes(buf, view.part.count, view.part.columns) // unit}u")
        return " + ".join(parts)

    def view_base_16(self, view: ir.BufferView, role: RoleContext,
                     window: str = "(hk_smem_base >> 4)") -> str:
        """Shared address of the view's first byte in 16-byte units (the window is
        aligned to 16 bytes and more, and so are the stages and parts wgmma reads);
        `window`: the window's address in those units."""
        return f"{window} + {self.view_offset(view, role, 16)}"

    def element_address(self, view: ir.BufferView, role: RoleContext) -> str:
        """Address of element (hk_r, hk_c) of a 2-D view (row-major, then swizzled)."""
        buf = self.kernel.buffer(view.buffer)
        r, c = ("hk_c", "hk_r") if view.transposed else ("hk_r", "hk_c")
        offset = f"static_cast<unsigned>({_element_offset(buf, r, c)})"
        mask = buf.swizzle.row_mask
        if not mask:
            return f"{self.view_base(view, role)} + {offset}"
        # TMA and wgmma swizzle the address itself. The window is aligned to every
        # repeat in use, so a view that starts on its buffer's repeat swizzles its
        # own offsets (ptxas folds the base); any other swizzles the window offset.
        steps = ([buf.stage_bytes] if view.stage is not None else []) + (
            [part_bytes(buf, view.part.count, view.part.columns)] if view.part is not None
            else [])
        if all(step % buf.swizzle.alignment == 0 for step in steps):
            return f"{self.view_base(view, role)} + hk_swizzle({offset}, {mask}u)"
        return f"hk_smem_base + hk_swizzle({self.view_offset(view, role)} + {offset}, {mask}u)"

    def value(self, expr: ir.TileExpr, role: RoleContext, plane_row: str = "hk_r",
              hoisted: Mapping[ir.TileExpr, str] | None = None) -> str:
        """The expression's value as a float; `plane_row` is the element's row in its
        2-D plane, which a row vector indexes (hk_r itself unless the view has planes).
        `hoisted` names the row vectors already read ahead of the loop over slots, as
        C++ expressions of the slot."""
        if hoisted and expr in hoisted:
            return hoisted[expr]
        match expr:
            case ir.TileRef(name=name, columns=columns):
                # In the wgmma layout column c + 8j is slot k + 4j of the same thread.
                tile = self.tiles[name]
                first_slot = columns[0] // 2 if columns else 0
                return to_float(tile.dtype, tile_element(tile, first_slot))
            case ir.SharedRead(broadcast=str() as axis):
                return self.vector_element(expr, role, plane_row if axis == "rows" else "hk_c")
            case ir.SharedRead(view=view):
                dtype = self.kernel.buffer(view.buffer).dtype
                return to_float(dtype, shared_load(dtype, self.element_address(view, role)))
            case ir.GlobalVector(tensor=tensor, start=start, axis=axis):
                t = self.kernel.tensor(tensor)
                index = f"({scalar(start, role)}) + {plane_row if axis == 'rows' else 'hk_c'}"
                bound = t.dims[0] if isinstance(t.dims[0], int) else names.user(t.dims[0])
                load = to_float(t.dtype, self.global_load(tensor, "hk_i"))
                return f"[&] {{ const int hk_i = {index}; return hk_i < {bound} ? {load} : 0.0f; }}()"
            case ir.RowValues(name=name, per_row=None):
                # the wgmma slot k's row is the vector's slot (k/2)%2 (ir.Layout.ROWS)
                return f"{names.user(name)}[(hk_k / 2) % 2]"
            case ir.RowValues(name=name, per_row=per_row):
                # a thread holds `per_row` consecutive slots of each row (Layout.EVERY_ROW)
                return f"{names.user(name)}[hk_k / {per_row}]"
            case ir.RowReduce(op=op, name=name, partials=None):
                return row_reduce(op, name, self.tiles[name])
            case ir.RowReduce(op=op, name=name, partials=partials):
                return self.row_combine(op, self.tiles[name], partials, role)
            case ir.ThreadRowSum(name=name):
                return thread_row_sum(name, self.tiles[name])
            case ir.RowPartsSum(name=name):
                return parts_sum(name)
            case ir.ElementIndex(axis=axis):
                return f"static_cast<float>({plane_row if axis == 'row' else 'hk_c'})"
            case ir.Literal(value=v) if math.isinf(v):
                return f"{'-' if v < 0 else ''}__int_as_float(0x7f800000)"
            case ir.Literal(value=v):
                return f"{float(v)!r}f"
            case ir.ScalarValue(expr=e):
                return scalar(e, role)
            case ir.Convert(dtype=dtype, operand=operand):
                inner = self.value(operand, role, plane_row, hoisted)
                return inner if dtype is DType.F32 else to_float(dtype, from_float(dtype, inner))
            case ir.Elementwise(op=op, args=args):
                vals = [self.value(a, role, plane_row, hoisted) for a in args]
                return _elementwise(op, vals)
        raise TypeError(expr)

    def vector_element(self, read: ir.SharedRead, role: RoleContext, index: str) -> str:
        """Element `index` of a broadcast 1-D shared view (from its first element read)."""
        dtype = self.kernel.buffer(read.view.buffer).dtype
        if read.elements is not None and read.elements[0]:
            index = f"{index} + {read.elements[0]}"
        address = f"{self.view_base(read.view, role)} + ({index}) * {dtype.nbytes}u"
        return to_float(dtype, shared_load(dtype, address))


    def row_combine(self, op: str, tile: ir.TileDef, partials: ir.BufferView,
                    role: RoleContext, integer: bool = False) -> str:
        """Row hk_k (Layout.EVERY_ROW) of rowmax / rowsum of a row-major tile: its
        warps' partials (RowPartials), partials[w, hk_k] for each warp w."""
        warps, width = tile.threads // 32, self.kernel.buffer(partials.buffer).shape[1]
        base = (f"{self.view_base(partials, role)} + "
                f"static_cast<unsigned>(hk_k * 4)")
        if op == "argmax":  # the warps' values, then their columns
            def at(row: int) -> str:
                return shared_load(DType.F32, f"hk_p + {row * width * 4}u")
            steps = " ".join(f"{{ const float hk_ov = {at(w)}; const int hk_oi = "
                             f"static_cast<int>({at(warps + w)}); "
                             f"{argmax_keep('hk_ov', 'hk_oi')} }}" for w in range(1, warps))
            return (f"[&] {{ const unsigned hk_p = {base}; float hk_v = {at(0)}; "
                    f"int hk_i = static_cast<int>({at(warps)}); {steps} "
                    f"return {column_value(integer)}; }}()")
        combine = reduction(op)[0]
        steps = " ".join(
            f"hk_v = {combine.format(shared_load(DType.F32, f'hk_p + {w * width * 4}u'))};"
            for w in range(1, warps))
        return (f"[&] {{ const unsigned hk_p = {base}; float hk_v = "
                f"{shared_load(DType.F32, 'hk_p')}; {steps} return hk_v; }}()")


def _element_offset(buf: ir.SharedBuffer, r: str, c: str) -> str:
    """C++ byte offset of element (r, c) of a view of `buf` from its first byte (rows
    of a rank-3+ buffer's planes stacked), as `layout.element_offset`."""
    nbytes = buf.dtype.nbytes
    blocks = column_blocks(buf)
    if blocks == 1:
        return f"(({r}) * {buf.shape[-1]} + ({c})) * {nbytes}"
    pitch, width, rows = row_pitch(buf), row_pitch(buf) // nbytes, buf.shape[-2]
    text = (f"(({c}) / {width}) * {block_bytes(buf)} + (({r}) % {rows}) * {pitch} + "
            f"(({c}) % {width}) * {nbytes}")
    if len(buf.shape) >= 3:
        text = f"(({r}) / {rows}) * {blocks * block_bytes(buf)} + {text}"
    return text


_REDUCTIONS = {"max": ("fmaxf(hk_v, {})", "-__int_as_float(0x7f800000)"),
               "min": ("fminf(hk_v, {})", "__int_as_float(0x7f800000)"),
               "sum": ("hk_v + {}", "0.0f")}


def reduction(op: str) -> tuple[str, str]:
    """(hk_v combined with {}, the identity) of rowmax ("max"), rowmin ("min")
    or rowsum ("sum")."""
    return _REDUCTIONS[op]


def row_reduce(op: str, name: str, tile: ir.TileDef) -> str:
    """Slot hk_k (a row, ir.Layout.ROWS) of rowmax / rowmin / rowsum / argmax of a
    wgmma-layout f32 tile: the thread's slots of that row, then the quad's 4
    lanes (xor 1, 2)."""
    if op == "argmax":
        return row_argmax(name, tile)
    combine = reduction(op)[0]
    step = " ".join(f"hk_v = {combine.format(f'__shfl_xor_sync(0xffffffffu, hk_v, {lane})')};"
                    for lane in (1, 2))
    return f"[&] {{ {_own_slots(combine, name, tile)} {step} return hk_v; }}()"


def thread_row_sum(name: str, tile: ir.TileDef) -> str:
    """Slot hk_k (a row, ir.Layout.ROW_PARTS) of this thread's part of rowsum of a
    wgmma-layout f32 tile: its slots of that row, no shuffles."""
    return f"[&] {{ {_own_slots(reduction('sum')[0], name, tile)} return hk_v; }}()"


def _own_slots(combine: str, name: str, tile: ir.TileDef) -> str:
    """hk_v = the thread's slots of row slot hk_k (those k with (k / 2) % 2 ==
    hk_k) combined, starting from the first, 2 * hk_k, not from the identity:
    ptxas keeps max(-inf, x) and 0 + x as instructions (fmaxf ignores a NaN
    operand, 0 + -0 is +0)."""
    tile_name = names.user(name)
    return (f"float hk_v = {tile_name}[2 * hk_k]; "
            f"for (int hk_s = 2 * hk_k + 1; hk_s < {tile_registers(tile)}; ++hk_s) "
            f"if ((hk_s / 2) % 2 == hk_k) hk_v = {combine.format(f'{tile_name}[hk_s]')};")


def parts_sum(name: str) -> str:
    """Slot hk_k (a row, ir.Layout.ROWS) of a Layout.ROW_PARTS vector's rows: the
    parts of the quad's 4 lanes, summed with shuffles (xor 1, 2)."""
    step = " ".join(f"hk_v = hk_v + __shfl_xor_sync(0xffffffffu, hk_v, {lane});"
                    for lane in (1, 2))
    return f"[&] {{ float hk_v = {names.user(name)}[hk_k]; {step} return hk_v; }}()"


def _elementwise(op: str, vals: list[str]) -> str:
    match op:
        case "+" | "-" | "*" | "/":
            return f"({vals[0]} {op} {vals[1]})"
        case "neg":
            return f"(-{vals[0]})"
        case "relu":
            return f"fmaxf({vals[0]}, 0.0f)"
        case "abs":
            return f"fabsf({vals[0]})"
        case "exp":
            return f"__expf({vals[0]})"
        case "exp2":
            return f"hk_ex2({vals[0]})"
        case "log2":
            return f"hk_lg2({vals[0]})"
        case "log":
            return f"(hk_lg2({vals[0]}) * {math.log(2.0)!r}f)"
        case "rsqrt":
            return f"rsqrtf({vals[0]})"
        case "sqrt":
            return f"sqrtf({vals[0]})"  # sqrt.rn.f32: correctly rounded (NVRTC's -prec-sqrt)
        case "tanh" | "sigmoid" | "sin" | "cos":
            return f"hk_{op}({vals[0]})"
        case "erf":
            return f"erff({vals[0]})"  # the math library's: users need it exact (GELU)
        case "==" | "!=" | "<" | "<=" | ">" | ">=":
            return f"(({vals[0]}) {op} ({vals[1]}) ? 1.0f : 0.0f)"
        case "where":
            return f"(({vals[0]}) != 0.0f ? ({vals[1]}) : ({vals[2]}))"
        case "max":
            return f"fmaxf({vals[0]}, {vals[1]})"
        case "min":
            return f"fminf({vals[0]}, {vals[1]})"
    raise ValueError(op)
