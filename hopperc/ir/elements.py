"""Where a kernel reads elements of global tensors as scalars (TensorElement)."""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Iterator

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import scalars_in, walk


def tensor_elements_in(node) -> Iterator[ir.TensorElement]:
    """Every TensorElement in an IR node or tuple of nodes, at any depth (statements,
    nested blocks, tile and scalar expressions), outer ones first."""
    if isinstance(node, ir.TensorElement):
        yield node
    if isinstance(node, (tuple, list)):
        for item in node:
            yield from tensor_elements_in(item)
    elif is_dataclass(node) and not isinstance(node, type):
        for f in fields(node):
            if f.name != "span":
                yield from tensor_elements_in(getattr(node, f.name))


def element_tensors(kernel: ir.Kernel) -> list[str]:
    """The tensors whose elements the kernel reads, in parameter order."""
    read = {e.tensor for e in tensor_elements_in((kernel.body, kernel.grid))}
    return [t.name for t in kernel.tensors if t.name in read]


def statement_elements(stmt: ir.Stmt) -> list[ir.TensorElement]:
    """The distinct elements a statement reads, each after the elements its
    indices read."""
    return list(dict.fromkeys(reversed(list(tensor_elements_in(stmt)))))


def loop_invariant_elements(loop: ir.ForLoop) -> list[ir.TensorElement]:
    """The distinct elements a loop reads (bounds included) whose indices keep their
    value through it, each after the elements its indices read: their value may be
    read once before the loop. Not invariant: an element naming the loop's own
    variable or one bound inside it, a carried register, or a tile coordinate
    where the loop takes tiles (a persistent block's tile loop)."""
    inner = list(walk(loop.body))
    inner_vars = {loop.var} | {s.var for s in inner if isinstance(s, ir.ForLoop)}
    takes_tiles = any(isinstance(s, ir.TakeTile) for s in inner)
    found: dict[ir.TensorElement, None] = {}
    for element in reversed(list(tensor_elements_in(loop))):
        if all(_keeps_value(leaf, inner_vars, takes_tiles) for leaf in scalars_in(element)):
            found.setdefault(element)
    return list(found)


def _keeps_value(leaf: ir.Scalar, inner_vars: set[str], takes_tiles: bool) -> bool:
    match leaf.kind:
        case ir.ScalarKind.LOOP:
            return leaf.name not in inner_vars
        case ir.ScalarKind.CARRIED:
            return False
        case ir.ScalarKind.TILE:
            return not takes_tiles
    return True

