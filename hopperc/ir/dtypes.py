"""Element types of the language and their machine facts."""
from __future__ import annotations

from enum import Enum


class DType(Enum):
    """An element type: its size, its CUDA storage type and its tensor-map code.

    Storage types are raw bit types because NVRTC ships no `cuda_bf16.h`;
    conversions go through inline PTX (see TOOLCHAIN.md).
    """

    BF16 = ("bf16", 2, "unsigned short", 9)
    F16 = ("f16", 2, "unsigned short", 6)
    F32 = ("f32", 4, "float", 7)
    E4M3 = ("e4m3", 1, "unsigned char", 0)
    E5M2 = ("e5m2", 1, "unsigned char", 0)
    I32 = ("i32", 4, "int", 3)

    def __init__(self, text: str, nbytes: int, storage: str, tensor_map_code: int):
        self.text = text
        self.nbytes = nbytes
        self.storage = storage
        # CUtensorMapDataType value; fp8 has no own code, it travels as UINT8 (0).
        self.tensor_map_code = tensor_map_code

    @classmethod
    def parse(cls, text: str) -> "DType":
        return next(d for d in cls if d.text == text)

    @property
    def is_float(self) -> bool:
        return self is not DType.I32

    @property
    def is_fp8(self) -> bool:
        return self in (DType.E4M3, DType.E5M2)

    def __str__(self) -> str:
        return self.text


class Swizzle(Enum):
    """TMA/wgmma shared-memory swizzle: span in bytes and the alignment it needs."""

    NONE = ("none", 0, 128, 0)
    B32 = ("32B", 32, 256, 1)
    B64 = ("64B", 64, 512, 2)
    B128 = ("128B", 128, 1024, 3)

    def __init__(self, text: str, span: int, alignment: int, tensor_map_code: int):
        self.text = text
        self.span = span
        self.alignment = alignment
        self.tensor_map_code = tensor_map_code

    @property
    def row_mask(self) -> int:
        """Bits of the 128-byte row index XORed into the 16-byte chunk index
        (CUTLASS Swizzle<B, 4, 3>): 0, 1, 3 or 7."""
        return max(self.span // 16 - 1, 0)

    def of_address(self, address):
        """Where TMA and wgmma put the byte at `address` (an int or an integer
        array): the address itself, swizzled, not an offset in a buffer."""
        return address ^ (((address >> 7) & self.row_mask) << 4)

    @classmethod
    def parse(cls, text: str | None) -> "Swizzle":
        return cls.NONE if text is None else next(s for s in cls if s.text == text)

    def __str__(self) -> str:
        return self.text
