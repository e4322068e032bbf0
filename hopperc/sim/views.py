"""Where things live in the simulated block: shared buffers as numpy data plus
the 16-byte chunks of shared memory they occupy (the unit the race detector
tracks), and which lane of which warp holds each element of a register tile.

Chunks are physical: a view's elements go through the same row-major offset
and swizzle as the generated code, so buffers that reuse memory overlap in
exactly the chunks they share on the GPU. Swizzling permutes 16-byte chunks,
and every access of a warp covers whole chunks, so 16 bytes lose nothing.

Data is per buffer, except that buffers of one dtype over the same memory (a
buffer and those that `reuse` it) share one's data: the elements of each are
that buffer's elements at the same (swizzled) addresses, so what one name writes
another reads, as on the GPU (`shared kc: bf16[2, 128, 64] swizzle 128B reuses k`
reads the column blocks of a `bf16[128, 128]` k; two bf16 buffers reusing an f32
one share their values). Memory seen through another dtype reinterprets bytes,
which the model does not: each dtype keeps data of its own, and a read through
one dtype of bytes last written through another is a finding (sim/memory.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.dtypes import DType
from hopperc.ir.layout import (element_grid, element_offset, part_bytes, register_layout,
                               shared_layout, view_shape)
from hopperc.sim.values import holding

CHUNK = 16


@dataclass(frozen=True)
class Place:
    """A view with its stage and part evaluated: one concrete region."""

    buffer: str
    stage: int
    part: int | None
    parts: int
    transposed: bool
    columns: bool = False  # the parts are blocks of a rank-2 buffer's columns

    def label(self, stages: int) -> str:
        text = self.buffer
        if stages > 1:
            text += f" stage {self.stage}"
        if self.part is not None:
            text += f" part {self.part}"
        return text


def place_shape(buf: ir.SharedBuffer, place: Place) -> tuple[int, ...]:
    shape = view_shape(buf, place.parts if place.part is not None else None, place.columns)
    return tuple(reversed(shape)) if place.transposed else shape


class SharedSpace:
    """Shared buffers of one block: data per buffer, and element -> chunk maps."""

    def __init__(self, kernel: ir.Kernel, cache: dict | None = None, data: bool = True):
        """`cache`: what depends only on the kernel's layout (the offsets and every
        `region`), to share between the blocks of one kernel; `data` False: chunks
        only, for runs that check synchronization without computing values."""
        self.buffers = {b.name: b for b in kernel.buffers}
        self._cache: dict = {} if cache is None else cache
        if "offsets" not in self._cache:
            self._cache["offsets"] = shared_layout(kernel.buffers, 0)
        self.offsets, total = self._cache["offsets"]
        self.chunks = -(-total // CHUNK)
        self.aliases = {b.name: alias_root(kernel, b.name) for b in kernel.buffers
                        if alias_root(kernel, b.name) is not None}
        self.data = {b.name: np.zeros((b.stages,) + b.shape, dtype=holding(b.dtype))
                     for b in kernel.buffers if b.name not in self.aliases} if data else {}

    def shape(self, place: Place) -> tuple[int, ...]:
        return place_shape(self.buffers[place.buffer], place)

    def dtype(self, place: Place) -> DType:
        """The dtype the view sees its bytes through."""
        return self.buffers[place.buffer].dtype

    def read(self, place: Place) -> np.ndarray:
        """A copy of the view's elements."""
        return self.view(place).copy()

    def view(self, place: Place) -> np.ndarray:
        """The view's elements without a copy, read-only. A view is a contiguous run
        of its buffer (swizzle moves chunks, not data indices), so a slice
        replaces a gather; a part of the columns, or a view through an alias, is
        gathered."""
        if place.buffer in self.aliases:
            root, flat = self._root_index(place)
            view = self.data[root.name].reshape(-1)[flat]
            view.flags.writeable = False
            return view
        flat, _ = self.index(place)
        if place.columns and place.part is not None:
            view = self.data[place.buffer].reshape(-1)[flat]
            view.flags.writeable = False
            return view
        start = int(flat.flat[0])
        run = self.data[place.buffer].reshape(-1)[start:start + flat.size]
        view = run.reshape(flat.T.shape).T if place.transposed else run.reshape(flat.shape)
        view.flags.writeable = False
        return view

    def write(self, place: Place, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        if place.buffer in self.aliases:
            root, flat = self._root_index(place)
            target = self.data[root.name].reshape(-1)
        else:
            flat, _ = self.index(place)
            target = self.data[place.buffer].reshape(-1)
        if mask is None:
            target[flat] = values
        else:
            target[flat[mask]] = np.broadcast_to(values, flat.shape)[mask]

    def index(self, place: Place) -> tuple[np.ndarray, np.ndarray]:
        """Flat data index and chunk of each element of the view (view-shaped)."""
        return _index(self.buffers[place.buffer], self.offsets[place.buffer], place)

    def _root_index(self, place: Place) -> tuple[ir.SharedBuffer, np.ndarray]:
        root = self.aliases[place.buffer]
        return root, alias_index(self.buffers[place.buffer], root, self.offsets[root.name],
                                 place)

    def region(self, place: Place, owned: np.ndarray | None = None, key=None) -> np.ndarray:
        """The distinct chunks of the view, or of its elements where `owned`
        (`key` names that selection, for the cache)."""
        cache_key = (place, key)
        if cache_key not in self._cache:
            chunks = self.index(place)[1]
            region = np.unique(chunks if owned is None else chunks[owned])
            region.setflags(write=False)
            self._cache[cache_key] = region
        return self._cache[cache_key]

    def written(self, place: Place, selection: tuple) -> tuple[np.ndarray, np.ndarray]:
        """The distinct chunks the running lanes of `selection` (shape, threads,
        warp, lanes) write in the view, and per chunk the mask of the lanes
        writing it (a proxy fence covers only its own thread's writes)."""
        cache_key = (place, selection, "lanes")
        if cache_key not in self._cache:
            shape, threads, warp, lanes = selection
            owned = owned_elements(shape, threads, warp, lanes)
            chunks = self.index(place)[1][owned]
            bits = np.left_shift(np.uint32(1), element_lanes(shape, threads, warp)[owned]
                                 .astype(np.uint32))
            distinct, where = np.unique(chunks, return_inverse=True)
            masks = np.zeros(distinct.shape, dtype=np.uint32)
            np.bitwise_or.at(masks, where.reshape(-1), bits.reshape(-1))
            distinct.setflags(write=False)
            masks.setflags(write=False)
            self._cache[cache_key] = distinct, masks
        return self._cache[cache_key]


def alias_root(kernel: ir.Kernel, name: str) -> ir.SharedBuffer | None:
    """The buffer whose data `name` shares (module docstring), or None where it
    holds its own: of the buffers over the same memory (a buffer and those that
    reuse it) with `name`'s dtype, the one with the most bytes (every other lies
    within it), the first declared among equals, whatever the dtype of the
    buffer they reuse."""
    buffers = {b.name: b for b in kernel.buffers}
    buf = buffers[name]
    base = buf.reuses or buf.name
    same = [b for b in kernel.buffers if (b.reuses or b.name) == base and b.dtype == buf.dtype]
    owner = max(same, key=lambda b: b.stages * b.stage_bytes)  # the first of the largest
    return owner if owner is not buf else None


def alias_index(buf: ir.SharedBuffer, root: ir.SharedBuffer, offset: int,
                place: Place) -> np.ndarray:
    """The flat data index in `root` (stages first) of each element of a view of
    `buf`, which shares root's memory from `offset` (view-shaped)."""
    addresses = _addresses(buf, offset, place)
    return _slots(root, offset)[(addresses - offset) // root.dtype.nbytes]


@lru_cache(maxsize=4096)
def _index(buf: ir.SharedBuffer, offset: int, place: Place) -> tuple[np.ndarray, np.ndarray]:
    stage_elems = int(np.prod(buf.shape))
    base = place.stage * stage_elems
    if place.part is not None and not place.columns:
        base += place.part * (stage_elems // place.parts)
    flat = base + _elements(buf, place)[0]
    # Data is indexed logically; chunks by address.
    chunk = _addresses(buf, offset, place) // CHUNK
    if place.transposed:
        flat = flat.T
    flat.setflags(write=False)
    chunk.setflags(write=False)
    return flat, chunk


def _elements(buf: ir.SharedBuffer, place: Place) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each element of the view (view-shaped, untransposed): its index in the
    view's part of the data, and its row and column in the buffer's element grid."""
    shape = view_shape(buf, place.parts if place.part is not None else None, place.columns)
    local = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    _, cols = element_grid(shape)
    row, col = local // cols, local % cols
    if place.part is not None and place.columns:
        # a block of the buffer's columns: its elements are the buffer's own
        # (row, part * cols + col), laid out as the buffer lays those out
        col = col + place.part * cols
        local = row * buf.shape[-1] + col
    return local, row, col


@lru_cache(maxsize=4096)
def _addresses(buf: ir.SharedBuffer, offset: int, place: Place) -> np.ndarray:
    """The shared address of each element of the view (view-shaped), laid out as
    the generated code lays the view out. Swizzle is a function of the address:
    of the offset in the window, which the kernel aligns to every swizzle repeat
    in use."""
    start = offset + place.stage * buf.stage_bytes
    if place.part is not None and not place.columns:
        start += place.part * part_bytes(buf, place.parts)
    _, row, col = _elements(buf, place)
    address = buf.swizzle.of_address(start + element_offset(buf, row, col))
    if place.transposed:
        address = address.T
    address.setflags(write=False)
    return address


@lru_cache(maxsize=256)
def _slots(root: ir.SharedBuffer, offset: int) -> np.ndarray:
    """For each element-sized slot of `root`'s memory (all stages), the flat data
    index of the element of `root` stored there."""
    slots = np.full(root.stages * root.stage_bytes // root.dtype.nbytes, -1, dtype=np.int64)
    stage_elems = int(np.prod(root.shape))
    for stage in range(root.stages):
        address = _addresses(root, offset, Place(root.name, stage, None, 1, False))
        slots[(address.reshape(-1) - offset) // root.dtype.nbytes] = (
            stage * stage_elems + np.arange(stage_elems))
    slots.setflags(write=False)
    return slots


@lru_cache(maxsize=4096)
def owned_elements(shape: tuple[int, ...], threads: int, warp: int,
                   lanes: tuple[int, ...]) -> np.ndarray:
    """Which elements of the tile the running `lanes` of role warp `warp` hold."""
    owned = np.isin(element_lanes(shape, threads, warp), lanes)
    owned.setflags(write=False)
    return owned


@lru_cache(maxsize=4096)
def owned_rows(length: int, threads: int, warp: int, lanes: tuple[int, ...]) -> np.ndarray:
    """Which values of a register row vector (ir.Layout.ROWS) the running `lanes`
    of role warp `warp` hold: rows 16w .. 16w + 15, row r in the lanes of quad r % 8."""
    rows = np.arange(length)
    owned = (rows // 16 == warp % (threads // 32)) & np.isin(4 * (rows % 8), lanes)
    owned.setflags(write=False)
    return owned


@lru_cache(maxsize=4096)
def owned_parts(length: int, threads: int, warp: int, lanes: tuple[int, ...]) -> np.ndarray:
    """Which parts of a Layout.ROW_PARTS vector ([length, 4]: row r's part in
    lane q of its quad) the running `lanes` of role warp `warp` hold."""
    rows = np.arange(length)[:, None]
    lane = 4 * (rows % 8) + np.arange(4)[None, :]
    owned = (rows // 16 == warp % (threads // 32)) & np.isin(lane, lanes)
    owned.setflags(write=False)
    return owned


@lru_cache(maxsize=4096)
def element_lanes(shape: tuple[int, ...], threads: int, warp: int) -> np.ndarray:
    """For each element of a tile or view spread over `threads` threads, the lane
    of role warp `warp` holding it, or -1 (as `per_element` in code generation,
    over the same 2-D element grid)."""
    grid = element_grid(shape)
    rows, cols = grid
    lanes = np.full(grid, -1, dtype=np.int8)
    group_warp = warp % (threads // 32)
    if register_layout(grid, threads) is ir.Layout.WGMMA:
        r = np.arange(16)[:, None]
        c = np.arange(cols)[None, :]
        lanes[16 * group_warp:16 * group_warp + 16, :] = 4 * (r % 8) + (c % 8) // 2
    else:
        e = np.arange(rows * cols).reshape(grid)
        mine = (e % threads) // 32 == group_warp
        lanes[mine] = (e % 32)[mine]
    lanes = lanes.reshape(shape)
    lanes.setflags(write=False)
    return lanes
