"""The reference's shared memory: one array per buffer, versioned where the
buffer is handed between roles (by the iterations of the loops around the
access: iteration i of the filling loop feeds iteration i of the reading one)
or read at several sites (by fill: the k-th read takes the k-th fill), and a
buffer that reuses another's memory (`reuses`) read and written through its
root's array where that is one array. A mixin of `reference._Block`, whose
state it uses: the kernel, the loop indices, the role and statement running,
the versioned buffers and read sites, and the arrays."""
from __future__ import annotations

import numpy as np

from hopperc.ir.layout import shared_layout
from hopperc.sim.values import holding
from hopperc.sim.views import Place, alias_index, place_shape


class ReferenceSharedMemory:
    def shape(self, place: Place) -> tuple[int, ...]:
        return place_shape(self.kernel.buffer(place.buffer), place)

    def _storage(self, buffer: str) -> np.ndarray:
        version = tuple(self.env[v] for v in self.loops) if buffer in self.versioned else ()
        if buffer in self.by_fill:
            version = ("fill", self._fill(buffer, version))
        key = (buffer, version)
        if key not in self.smem:
            buf = self.kernel.buffer(buffer)
            self.smem[key] = np.zeros(buf.shape, dtype=holding(buf.dtype))
        return self.smem[key]

    def _fill(self, buffer: str, indices: tuple) -> int:
        """Which fill of `buffer` this access takes: the next one where the role
        reaches another site, or the same site in another iteration."""
        context = (self.site_of.get(id(self.leaf)), indices)
        last, count = self.fills.get((self.role, buffer), (None, -1))
        if context != last:
            count += 1
        self.fills[(self.role, buffer)] = (context, count)
        return count

    def _alias(self, place: Place) -> tuple[np.ndarray, np.ndarray] | None:
        """A buffer sharing the data of one of its dtype (sim/views.py): its root's
        storage and the index in it of each element of the view. Only where the
        root is one array here (not versioned per iteration or fill) and the view
        lies in its first stage's memory; elsewhere the buffer keeps its own."""
        root = self.aliases.get(place.buffer)
        if root is None or root.name in self.versioned or root.name in self.by_fill:
            return None
        offset = shared_layout(self.kernel.buffers, 0)[0][root.name]
        flat = alias_index(self.kernel.buffer(place.buffer), root, offset,
                           Place(place.buffer, 0, place.part, place.parts, False, place.columns))
        if flat.min() < 0 or flat.max() >= int(np.prod(root.shape)):
            return None
        return self._storage(root.name).reshape(-1), flat

    def _region(self, place: Place):
        alias = self._alias(place)
        if alias is not None:
            return alias
        buf = self.kernel.buffer(place.buffer)
        data = self._storage(place.buffer)
        if place.part is None:
            return data, (slice(None),)
        if len(buf.shape) >= 3:
            return data, (place.part,)
        if place.columns:
            cols = buf.shape[1] // place.parts
            return data, (slice(None), slice(place.part * cols, (place.part + 1) * cols))
        rows = buf.shape[0] // place.parts
        return data, (slice(place.part * rows, (place.part + 1) * rows),)

    def read(self, place: Place) -> np.ndarray:
        data, index = self._region(place)
        region = data[index]
        return region.T if place.transposed else region

    def write(self, place: Place, values: np.ndarray) -> None:
        data, index = self._region(place)
        data[index] = values
