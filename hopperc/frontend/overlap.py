"""A shared-memory write that reads the memory it writes.

The threads of one element-wise statement read and write their own elements
with no order among them. Reading an element another thread of the same
statement writes is a race the compiler cannot fix inside the statement (the
barrier would have to sit between each thread's reads and every thread's
writes), so it is refused; reading the very element a thread writes is fine.
"""
from __future__ import annotations

from typing import Callable

from hopperc.diagnostics import CompileError
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import tile_reads


def check_store_reads(store: ir.SharedStore, buffer: Callable[[str], ir.SharedBuffer]) -> None:
    """Refuse `store` if it reads bytes of its destination that another of its
    threads writes: a transposed read, another part of unknown index, or another
    buffer placed in the same memory with a different layout."""
    dst = store.dst
    for read in tile_reads(store.value):
        if (read.storage or read.buffer) != (dst.storage or dst.buffer):
            continue
        if store.row_layout is not None:
            # every lane computes every row its quad (or warp) holds, but only one
            # stores each: the others' reads would meet the stores unordered
            raise CompileError(store.span, f"this row vector's store to '{dst.buffer}' reads "
                                           "the same memory: each row is computed by threads "
                                           "other than the one that stores it. Read it into a "
                                           f"register row vector first (v: f32[...] = "
                                           f"{read.buffer}), then store from that")
        if _aligned(read, dst, buffer):
            continue
        how = ("transposed" if read.transposed and read.buffer == dst.buffer else
               f"through '{read.buffer}'" if read.buffer != dst.buffer else "at another index")
        raise CompileError(store.span, f"this statement writes '{dst.buffer}' while reading the "
                                       f"same memory {how}: a thread would read elements that "
                                       "other threads of the statement overwrite. Read into a "
                                       "register tile first (t: f32[...] = ...), then write "
                                       f"'{dst.buffer}' from it")


def _aligned(read: ir.BufferView, dst: ir.BufferView,
             buffer: Callable[[str], ir.SharedBuffer]) -> bool:
    """Each thread reads only bytes it writes itself, or bytes nobody writes:
    the same view of one layout, or another equal-sized part of the buffer
    (the same part when the indices are equal, a disjoint one otherwise)."""
    if read.transposed or read.stage != dst.stage:
        return False
    if read.buffer == dst.buffer:
        return read.part == dst.part or (read.part is not None and dst.part is not None
                                         and read.part.count == dst.part.count
                                         and read.part.columns == dst.part.columns)
    a, b = buffer(read.buffer), buffer(dst.buffer)
    return read.part == dst.part and (
        (a.dtype, a.shape, a.stages, a.swizzle) == (b.dtype, b.shape, b.stages, b.swizzle))
