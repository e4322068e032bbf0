"""Default inputs of i32 tensors that element-wise math uses as lengths or
indices: each element drawn from 0 .. range - 1, where the range is the
dimension what it is compared with counts (a column, a loop or tile
coordinate), else the tensor's largest dimension, so that comparisons go
both ways on the default shapes (sim/shapes.py)."""
from __future__ import annotations

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import scalars_in, walk
from hopperc.sim.shapes import divided_dims, kernel_loops, loop_dims

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=", "min", "max")


def index_ranges(kernel: ir.Kernel, dims: dict[str, int]) -> dict[str, int]:
    """For each i32 tensor, the values its elements take as default inputs,
    0 .. range - 1: what they are compared with (a length or an index against a
    column, a loop or tile coordinate: the dimension behind it), else the
    largest of its own dimensions."""
    tensors = {t.name for t in kernel.tensors if t.dtype is ir.DType.I32}
    if not tensors:
        return {}
    values = [(s, v) for s in walk(kernel.body) for v in _values(s)]
    loads = {(s.dst.buffer, s.tensor) for s in walk(kernel.body)
             if isinstance(s, ir.AsyncLoad)}
    grid = {axis.name: list(dict.fromkeys(d for d, _ in divided_dims(axis.extent)))
            for axis in kernel.grid}
    by_loop = {loop.var: loop_dims(loop) for loop, _ in kernel_loops(kernel)}
    ranges = {}
    for tensor in tensors:
        held = {buffer for buffer, source in loads if source == tensor}
        for _ in range(len(values) + 1):  # tiles computed from it, to a fixed point
            grown = held | {name for stmt, value in values if _reads(value, tensor, held)
                            for name in _written(stmt)}
            if grown == held:
                break
            held = grown
        against: list[str] = []
        for _, value in values:
            for op in _elementwise(value):
                if op.op in COMPARISONS and any(_reads(a, tensor, held) for a in op.args):
                    for arg in op.args:
                        if not _reads(arg, tensor, held):
                            against += _dims_behind(arg, grid, by_loop)
        own = [dims[d] if isinstance(d, str) else d for d in kernel.tensor(tensor).dims]
        ranges[tensor] = max([dims[d] for d in against if d in dims] or own)
    return ranges


def _values(stmt: ir.Stmt):
    match stmt:
        case ir.TileDef(init=init) if init is not None:
            yield init
        case ir.TileAssign(value=value) | ir.SharedStore(value=value) | \
                ir.GlobalRowStore(value=value):
            yield value


def _written(stmt: ir.Stmt) -> list[str]:
    match stmt:
        case ir.TileDef(name=name) | ir.TileAssign(name=name):
            return [name]
        case ir.SharedStore(dst=dst):
            return [dst.buffer]
    return []


def _tile_nodes(expr):
    yield expr
    match expr:
        case ir.Elementwise(args=args):
            for arg in args:
                yield from _tile_nodes(arg)
        case ir.Convert(operand=operand):
            yield from _tile_nodes(operand)


def _elementwise(expr):
    return [node for node in _tile_nodes(expr) if isinstance(node, ir.Elementwise)]


def _reads(expr, tensor: str, held: set[str]) -> bool:
    for node in _tile_nodes(expr):
        match node:
            case ir.GlobalVector(tensor=name) if name == tensor:
                return True
            case ir.SharedRead(view=view) if view.buffer in held:
                return True
            case ir.TileRef(name=name) | ir.RowValues(name=name) | ir.RowReduce(name=name) \
                    | ir.ThreadRowSum(name=name) | ir.RowPartsSum(name=name) if name in held:
                return True
    return False


def _dims_behind(expr, grid: dict[str, list[str]], by_loop: dict[str, list[str]]):
    for node in _tile_nodes(expr):
        if isinstance(node, ir.ScalarValue):
            for s in scalars_in(node.expr):
                if s.kind is ir.ScalarKind.DIM:
                    yield s.name
                elif s.kind is ir.ScalarKind.TILE:
                    yield from grid.get(s.name, ())
                elif s.kind is ir.ScalarKind.LOOP:
                    yield from by_loop.get(s.name, ())
