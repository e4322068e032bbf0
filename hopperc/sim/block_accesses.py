"""Global memory between blocks: the tensors a kernel adds into with TMA
reduce-adds.

Nothing orders one block's accesses of global memory against another block's
(short of flags with release/acquire), so whatever touches an element that
another block adds into must commute with those adds. Adds do: each element's
add of cp.reduce.async.bulk.tensor is atomic, and the sum does not depend on
the order (up to rounding), so many blocks may add into one element. A plain
store of it (its value then depends on whether it lands before or after the
other block's add) or a plain read (TMA load, ld.global: it sees some of the
adds) races with them. The simulator runs blocks one after another, so order
alone hides such a race; this model keeps, per element of each tensor the
kernel reduces into, which block added into it and which block stored or read
it plainly, and reports the access that meets another block's of the other
kind (whichever comes second: the race is symmetric).

It also keeps each element's number of adds and the sum of their magnitudes
(the tensor's first value counts as one term): the adds land in whatever order
the blocks' stores complete, and two orders of an f32 sum of n terms differ by
at most 2 (n - 1) u sum |x_i| (u the unit roundoff), which the comparison with
the reference allows (`slack`).

Blocks are named by the caller (any hashable key); the checks need only
whether two accesses come from the same block, not the order of the blocks, so
a scheduler that interleaves blocks keeps this model as it is.
"""
from __future__ import annotations

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.dtypes import DType
from hopperc.sim.findings import Category, fail
from hopperc.sim.memory import Site
from hopperc.sim.values import ULP, box_index

_SEVERAL = -1  # an element two blocks touched the same way


def block_accesses(kernel: ir.Kernel, tensors: dict[str, np.ndarray] | None
                   ) -> "BlockAccesses | None":
    """The record for one run of the grid over `tensors` (None: a run without
    data, which runs one cluster and needs none), if the kernel reduces."""
    reduced = {s.tensor: kernel.tensor(s.tensor).dtype for s in walk(kernel.body)
               if isinstance(s, ir.AsyncStore) and s.reduce_add}
    return BlockAccesses(tensors, reduced) if reduced and tensors is not None else None


class BlockAccesses:
    """One run of the grid's record (the module's docstring)."""

    def __init__(self, tensors: dict[str, np.ndarray], reduced: dict[str, DType]):
        """`tensors`: the problem's tensors, before the kernel runs; `reduced`:
        the tensors the kernel reduces into, each with its DType."""
        self.reduced = reduced
        self.ids: dict[object, int] = {}
        self.sites: list[tuple[Site, str]] = []  # an access and what it does
        shapes = {name: tensors[name].shape for name in reduced}
        # Per tensor and kind (True: reduce-add, False: plain), who touched each element
        # (0 none, id + 1, _SEVERAL) and the site of the latest such access.
        self.who = {(name, kind): np.zeros(shape, dtype=np.int32)
                    for name, shape in shapes.items() for kind in (True, False)}
        self.site = {key: np.zeros(a.shape, dtype=np.int32) for key, a in self.who.items()}
        self.adds = {name: np.zeros(shape, dtype=np.int32) for name, shape in shapes.items()}
        self.magnitude = {name: np.abs(tensors[name].astype(np.float64)) for name in reduced}

    def box(self, block: object, tensor: str, origin: tuple[int, ...], box: tuple[int, ...],
            clip, reduce_add: bool, site: Site, what: str) -> None:
        """`block` reduces into a copy's box, or plainly `what`s it ("stores", "reads")."""
        if tensor not in self.reduced:
            return
        index = box_index(self.adds[tensor].shape, origin, box, clip)
        if index is not None:
            self._touch(block, tensor, index, reduce_add, site, what)

    def added(self, tensor: str, origin: tuple[int, ...], values: np.ndarray, clip) -> None:
        """A reduce-add of `values` at `origin` completed: count its terms."""
        index = box_index(self.adds[tensor].shape, origin, values.shape, clip)
        if index is None:
            return
        inside = tuple(slice(i.start - o, i.stop - o) for i, o in zip(index, origin))
        self.adds[tensor][index] += 1
        self.magnitude[tensor][index] += np.abs(values[inside].astype(np.float64))

    def slack(self, tensor: str) -> np.ndarray | float:
        """How far any order of the element's adds may be from another order."""
        if tensor not in self.reduced:
            return 0.0
        return ULP[self.reduced[tensor]] * self.adds[tensor] * self.magnitude[tensor]

    def _touch(self, block: object, tensor: str, index: tuple[slice, ...], reduce_add: bool,
               site: Site, what: str) -> None:
        me = self.ids.setdefault(block, len(self.ids)) + 1
        other = self.who[(tensor, not reduce_add)][index]
        clash = (other != 0) & (other != me)
        if clash.any():
            at = tuple(int(i) for i in np.argwhere(clash)[0])
            earlier, earlier_what = self.sites[self.site[(tensor, not reduce_add)][index][at]]
            element = [s.start + i for s, i in zip(index, at)]
            plain = earlier_what if reduce_add else what
            raise fail(Category.RACE,
                       f"{site} {'adds into' if reduce_add else what} element {element} of "
                       f"'{tensor}', which another block "
                       f"{earlier_what if reduce_add else 'adds into'} ({earlier}): nothing "
                       "orders one block's accesses of global memory before another's, so "
                       f"{'what the element keeps' if plain == 'stores' else 'what is read'} "
                       "depends on which block comes first; only reduce-adds may meet "
                       "another block's reduce-adds", site.span, earlier.span)
        mine = self.who[(tensor, reduce_add)]
        seen = mine[index]
        mine[index] = np.where((seen == 0) | (seen == me), me, _SEVERAL)
        self.sites.append((site, what))
        self.site[(tensor, reduce_add)][index] = len(self.sites) - 1
