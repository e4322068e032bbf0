"""Global memory between blocks: the tensors a kernel stores into, plainly or
with TMA reduce-adds.

Nothing orders one block's accesses of global memory against another block's
(short of flags with release/acquire), so two blocks may touch one element
only in ways that commute. Adds do: each element's add of
cp.reduce.async.bulk.tensor (and of red.global.add) is atomic, and the sum does
not depend on the order (up to rounding), so many blocks may add into one
element. Anything else
does not: two blocks' plain stores of one element (a TMA store, a bulk store,
st.global of a row vector: the element keeps whichever lands last), a plain
store or read of an element another block adds into, a plain read of an
element another block stores. The simulator runs blocks one after another, and
its reference in the same order, so order alone hides such a race; this model
keeps, per element of each tensor the kernel stores into, which block added
into it, which stored it and which read it, and reports the access that meets
another block's of a kind it does not commute with (whichever comes second:
the race is symmetric), at that access. Where the kernel's blocks order each
other with flags, its run interleaves them and judges plain accesses by
happens-before (semaphores.GridWrites): here only adds meet the others then.
A TMA box writes only the elements inside the tensor (and before a ragged copy's END): the parts of two boxes
past the edge are no overlap.

It also keeps each element's number of adds and the sum of their magnitudes
(the tensor's first value counts as one term): the adds land in whatever order
the blocks' stores complete, each rounded to the tensor's type. A sum of n terms
added one at a time, in any order, with each add rounded (relative error at
most u, the unit roundoff: 2^-24 for f32), is within gamma(n - 1) sum |x_i| of
the exact sum, gamma(k) = k u / (1 - k u) (Higham, Accuracy and Stability of
Numerical Algorithms, 4.2); two orders are within twice that of each other,
about 2 (n - 1) u sum |x_i|, which the comparison with the reference allows
(`slack`).

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
from hopperc.sim.values import box_index

_SEVERAL = -1  # an element two blocks touched the same way
# The unit roundoff of each type a reduce-add adds in: 2^-p for p significand bits
# (the leading one included); integer adds are exact.
UNIT_ROUNDOFF = {DType.F32: 2.0 ** -24, DType.F16: 2.0 ** -11, DType.BF16: 2.0 ** -8,
                 DType.I32: 0.0}


ADD, STORE, READ = "adds into", "stores", "reads"  # what an access does to an element
_CLASHES = {ADD: (STORE, READ), STORE: (ADD, STORE, READ), READ: (ADD, STORE)}
# Where blocks order each other with flags, the interleaved run's happens-before
# (semaphores.GridWrites) judges plain accesses: only adds against the others here.
_CLASHES_WITH_FLAGS = {ADD: (STORE, READ), STORE: (ADD,), READ: (ADD,)}


def block_accesses(kernel: ir.Kernel, tensors: dict[str, np.ndarray] | None
                   ) -> "BlockAccesses | None":
    """The record for one run of the grid over `tensors` (None: a run without
    data, which runs one cluster and needs none), if the kernel stores."""
    stmts = list(walk(kernel.body))
    stores = [s for s in stmts if isinstance(s, (ir.AsyncStore, ir.GlobalRowStore))]
    reduced = {s.tensor: kernel.tensor(s.tensor).dtype for s in stores
               if isinstance(s, ir.AsyncStore) and s.reduce_add}
    flags = any(isinstance(s, (ir.Signal, ir.Wait, ir.Count)) for s in stmts)
    stored = {s.tensor for s in stores}
    return BlockAccesses(tensors, reduced, stored, flags) \
        if stored and tensors is not None else None


class BlockAccesses:
    """One run of the grid's record (the module's docstring)."""

    def __init__(self, tensors: dict[str, np.ndarray], reduced: dict[str, DType],
                 stored: set[str] = frozenset(), flags: bool = False):
        """`tensors`: the problem's tensors, before the kernel runs; `reduced`:
        the tensors the kernel reduces into, each with its DType; `stored`: the
        tensors it stores into (the reduced ones are recorded either way);
        `flags`: its blocks order each other with flags."""
        self.reduced = reduced
        self.clashes = _CLASHES_WITH_FLAGS if flags else _CLASHES
        self.ids: dict[object, int] = {}
        self.sites: list[Site] = []
        shapes = {name: tensors[name].shape for name in {*reduced, *stored}}
        # Per tensor and kind of access, who made it on each element (0 none,
        # block id + 1, _SEVERAL) and the site of the latest one.
        self.who = {(name, kind): np.zeros(shape, dtype=np.int32)
                    for name, shape in shapes.items() for kind in _CLASHES}
        self.site = {key: np.zeros(a.shape, dtype=np.int32) for key, a in self.who.items()}
        self.adds = {name: np.zeros(tensors[name].shape, dtype=np.int32) for name in reduced}
        self.magnitude = {name: np.abs(tensors[name].astype(np.float64)) for name in reduced}

    def box(self, block: object, tensor: str, origin: tuple[int, ...], box: tuple[int, ...],
            clip, reduce_add: bool, site: Site, what: str) -> None:
        """`block` reduces into a copy's box, or plainly `what`s it (STORE, READ)."""
        shape = self.who.get((tensor, READ))
        if shape is None:
            return  # a tensor the kernel never stores: every block reads it freely
        index = box_index(shape.shape, origin, box, clip)
        if index is not None:
            self._touch(block, tensor, index, ADD if reduce_add else what, site)

    def elements(self, block: object, tensor: str, index: tuple[np.ndarray, ...],
                 site: Site, adds: bool = False) -> None:
        """`block` stores (or, `adds`, adds into: red.global.add) the elements at
        `index` (one array per axis)."""
        if (tensor, STORE) in self.who and index[0].size:
            self._touch(block, tensor, index, ADD if adds else STORE, site)

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
        steps = self.adds[tensor] * UNIT_ROUNDOFF[self.reduced[tensor]]  # (n - 1) u
        gamma = np.divide(steps, 1 - steps, out=np.full(steps.shape, np.inf), where=steps < 1)
        return 2 * gamma * self.magnitude[tensor]  # (n - 1) u >= 1 bounds nothing

    def _touch(self, block: object, tensor: str, index: tuple, kind: str, site: Site) -> None:
        """`index`: slices (a box) or one array per axis (elements)."""
        me = self.ids.setdefault(block, len(self.ids)) + 1
        for other in self.clashes[kind]:
            who = self.who[(tensor, other)][index]
            clash = (who != 0) & (who != me)
            if clash.any():
                at = tuple(int(i) for i in np.argwhere(clash)[0])
                earlier = self.sites[self.site[(tensor, other)][index][at]]
                raise _race(site, kind, earlier, other, tensor, _element(index, at))
        mine = self.who[(tensor, kind)]
        seen = mine[index]
        mine[index] = np.where((seen == 0) | (seen == me), me, _SEVERAL)
        self.sites.append(site)
        self.site[(tensor, kind)][index] = len(self.sites) - 1


def _element(index: tuple, at: tuple[int, ...]) -> list[int]:
    if isinstance(index[0], slice):
        return [s.start + i for s, i in zip(index, at)]
    return [int(axis[at[0]]) for axis in index]


def _race(site: Site, kind: str, earlier: Site, other: str, tensor: str, element: list[int]):
    if ADD in (kind, other):
        plain = other if kind == ADD else kind
        why = (f"{'what the element keeps' if plain == STORE else 'what is read'} depends on "
               "which block comes first; only reduce-adds may meet another block's reduce-adds")
    elif STORE == kind == other:
        why = ("the element keeps whichever store lands last; each element needs one storing "
               "block (partial results of several blocks: add them with `tma T[...] += buf`)")
    else:
        why = "what is read depends on which block comes first"
    return fail(Category.RACE,
                f"{site} {kind} element {element} of '{tensor}', which another block "
                f"{'also stores' if STORE == kind == other else other} ({earlier}): nothing "
                f"orders one block's accesses of global memory before another's, so {why}",
                site.span, earlier.span)
