"""Launch specs of real kernels, and stand-ins for device arrays that speak
the interchange protocols (a dict for __cuda_array_interface__ needs no GPU)."""
from __future__ import annotations

import hopperc
from hopperc.runtime.spec import LaunchSpec, parse_spec
from tests.conftest import ROOT

SCALED_COPY = """
kernel scaled_copy(X: bf16[M, N], Y: bf16[M, N], alpha: f32, shift: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    shared out: bf16[BM, BN] swizzle 128B
    tma buf <- X[tile.m, tile.n]
    out = bf16(f32(buf) * alpha)
    tma Y[tile.m, tile.n] <- out
}
"""


def sample_spec(name: str) -> LaunchSpec:
    return parse_spec(hopperc.build(ROOT / "samples" / f"{name}.hk").metadata)


def text_spec(text: str) -> LaunchSpec:
    return parse_spec(hopperc.build(text, name="t.hk").metadata)


class CudaArray:
    """A device array as Numba or CuPy describe one (the address is never used here)."""

    def __init__(self, shape, typestr="<f4", address=0x7F00_0000_0000, strides=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (address, False),
            "strides": strides, "version": 3}


def bf16(shape, address=0x7F00_0000_0000, strides=None) -> CudaArray:
    # __cuda_array_interface__ has no bf16 type string: bf16 travels as 2 raw bytes.
    return CudaArray(shape, "<V2", address, strides)
