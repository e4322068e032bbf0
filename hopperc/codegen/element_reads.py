"""Where the generated code reads the tensor elements a kernel uses as scalars
(`ir.TensorElement`): each tensor's reader, defined at the kernel's start, and
each element read once into a register before the loop whose iterations keep
its indices or the statement that uses it."""
from __future__ import annotations

from dataclasses import replace

from hopperc.codegen import names
from hopperc.codegen.scalars import RoleContext, scalar
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies
from hopperc.ir.elements import loop_invariant_elements, statement_elements

# A ragged walk's statements read their extents' elements at each value of the
# slowest axis they pass, in the walk's own code: nothing is read before them.
_WALKS = (ir.TakeTile, ir.StartTileWalk)


def element_reader(tensor: ir.TensorParam) -> str:
    """The definition of the kernel's reader of `tensor`'s elements (a lambda at the
    kernel's start): `ld.global.nc` of the element, 0 where an index is outside
    [0, dim) (the predicate, as vectors read past a tensor's end)."""
    dims = [str(d) if isinstance(d, int) else names.user(d) for d in tensor.dims]
    params = ", ".join(f"int hk_i{a}" for a in range(len(dims)))
    inside = " && ".join(f"hk_i{a} >= 0 && hk_i{a} < {d}" for a, d in enumerate(dims))
    offset = "static_cast<long long>(hk_i0)"
    for a, d in enumerate(dims[1:], 1):
        offset = f"({offset}) * {d} + hk_i{a}"
    return (f"auto {names.element_reader(tensor.name)} = [&]({params}) -> {tensor.dtype.storage} "
            f"{{ return {inside} ? __ldg({names.user(tensor.name)} + {offset}) : "
            f"{tensor.dtype.storage}(0); }};")


def elements_to_read(stmt: ir.Stmt) -> list[ir.TensorElement]:
    """The elements read into registers before `stmt`: a loop's invariant ones,
    a statement without a body its own, none for the others."""
    if isinstance(stmt, ir.ForLoop):
        return loop_invariant_elements(stmt)
    if bodies(stmt) or isinstance(stmt, _WALKS):
        return []
    return statement_elements(stmt)


def read_elements(read: list[ir.TensorElement], role: RoleContext, registers: list[str]
                  ) -> tuple[RoleContext, list[str]]:
    """C++ declarations reading each element of `read` the role does not hold
    into a new register (named by how many `registers` there are; each is
    appended), and the role holding them. Read before the code that uses them:
    the async copies, barriers and shared stores are `asm volatile` with a
    memory clobber, after which NVVM may not reuse a value it loaded before
    them, and an element-wise statement would read it for each of its elements."""
    elements = dict(role.elements)
    lines = []
    for element in read:
        if element not in elements:
            name = f"hk_element{len(registers)}"
            registers.append(name)
            value = scalar(element, replace(role, elements=elements))
            lines.append(f"[[maybe_unused]] const auto {name} = {value};")
            elements[element] = name
    return replace(role, elements=elements), lines
