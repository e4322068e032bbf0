"""The cases of tma_oracle.cu: a kernel loading one box of a 2-D tensor, the
tensor it is given, and hopperc's cuTensorMapEncodeTiled arguments for it
(metadata of the built kernel, then runtime/tensor_maps.py)."""
from __future__ import annotations

from dataclasses import dataclass

from hopperc import api
from hopperc.dtypes import DType
from hopperc.runtime.arrays import DeviceTensor
from hopperc.runtime.spec import parse_spec
from hopperc.runtime.tensor_maps import TensorMapArgs, tensor_map_args
from tests.conftest import source
from tests.oracle.hopperc_side import CUTE_TYPES, SWIZZLE_BITS

CUTE_TMA_TYPES = {**CUTE_TYPES, "f32": "float", "i32": "int32_t"}
ADDRESS = 0x7F12_3456_0000


@dataclass(frozen=True)
class TmaCase:
    name: str
    dtype: str
    rows: int
    cols: int
    row_stride: int  # elements between rows (cols, or more for a padded tensor)
    box: tuple[int, int]  # rows, cols
    swizzle: str
    planes: int = 0  # a rank-3 [planes, rows, cols] tensor, read one plane per box
    plane_stride: int = 0
    subtile_store: bool = False  # hopperc's side stores the box from one plane of a
    # rank-3 staging buffer (an epilogue subtile), the map CuTe builds for the box

    @property
    def shape(self) -> tuple[int, ...]:
        return ((self.planes,) if self.planes else ()) + (self.rows, self.cols)

    @property
    def strides(self) -> tuple[int, ...]:
        return ((self.plane_stride,) if self.planes else ()) + (self.row_stride, 1)

    def kernel(self) -> str:
        swizzle = "" if self.swizzle == "none" else f" swizzle {self.swizzle}"
        dims = ", ".join(("P", "R", "C")[-len(self.shape):])
        origin = ", ".join("0" for _ in self.shape)
        if self.subtile_store:
            return (f"kernel {self.name}(X: {self.dtype}[{dims}]) grid(m: 1) threads 128 {{\n"
                    f"    shared s: {self.dtype}[2, {self.box[0]}, {self.box[1]}]{swizzle}\n"
                    f"    s[1] = 1.0\n    tma X[0, 1] <- s[1]\n}}\n")
        return (f"kernel {self.name}(X: {self.dtype}[{dims}]) grid(m: 1) threads 128 {{\n"
                f"    shared s: {self.dtype}[{self.box[0]}, {self.box[1]}]{swizzle}\n"
                f"    tma s <- X[{origin}]\n}}\n")

    def hopperc_args(self) -> TensorMapArgs:
        spec = parse_spec(api.build(source(self.kernel())).metadata).tensor_map("tmap_X")
        dtype = DType.parse(self.dtype)
        tensor = DeviceTensor(ADDRESS, self.shape, self.strides, dtype.nbytes, dtype, 0,
                              self.name)
        return tensor_map_args(spec, tensor)

    def cute_call(self) -> str:
        bits = 0 if self.swizzle == "none" else SWIZZLE_BITS[self.swizzle]
        template = f"{CUTE_TMA_TYPES[self.dtype]}, {bits}, {self.box[0]}, {self.box[1]}"
        if self.planes:
            return (f'  tma_case_planes<{template}>("{self.name}", {ADDRESS}ull, {self.planes}, '
                    f"{self.rows}, {self.cols}, {self.row_stride}, {self.plane_stride});")
        return (f'  tma_case<{template}>("{self.name}", {ADDRESS}ull, {self.rows}, {self.cols}, '
                f"{self.row_stride});")


@dataclass(frozen=True)
class VectorCase:
    """A 1-D tensor loaded into a 1-D shared buffer (a vector broadcast from
    shared memory): a rank-1 tensor map, no swizzle."""

    name: str
    dtype: str
    length: int
    box: int

    def hopperc_args(self) -> TensorMapArgs:
        text = (f"kernel {self.name}(V: {self.dtype}[L]) grid(m: 1) threads 128 {{\n"
                f"    shared s: {self.dtype}[{self.box}]\n    tma s <- V[0]\n}}\n")
        spec = parse_spec(api.build(source(text)).metadata).tensor_map("tmap_V")
        dtype = DType.parse(self.dtype)
        tensor = DeviceTensor(ADDRESS, (self.length,), (1,), dtype.nbytes, dtype, 0, self.name)
        return tensor_map_args(spec, tensor)

    def cute_call(self) -> str:
        return (f'  tma_case_vector<{CUTE_TMA_TYPES[self.dtype]}, {self.box}>("{self.name}", '
                f"{ADDRESS}ull, {self.length});")


# Every swizzle and element width; padded row strides; a box narrower than
# its swizzle span; tensors smaller and larger than the box; rank 3; rank 1.
CASES = (
    TmaCase("bf16_128B", "bf16", 1000, 520, 520, (128, 64), "128B"),
    TmaCase("f16_64B_padded", "f16", 256, 96, 104, (64, 32), "64B"),
    TmaCase("e4m3_128B", "e4m3", 512, 4096, 4096, (64, 128), "128B"),
    TmaCase("e5m2_32B", "e5m2", 100, 80, 96, (32, 32), "32B"),
    TmaCase("f32_32B_padded", "f32", 300, 40, 48, (16, 8), "32B"),
    TmaCase("f32_128B", "f32", 70, 33, 36, (64, 32), "128B"),
    TmaCase("bf16_none", "bf16", 77, 200, 200, (64, 64), "none"),
    TmaCase("i32_none_padded", "i32", 64, 100, 128, (8, 32), "none"),
    TmaCase("bf16_narrow_128B", "bf16", 64, 256, 256, (64, 32), "128B"),
    TmaCase("bf16_planes_128B", "bf16", 100, 96, 104, (64, 64), "128B", 3, 100 * 104 + 8),
    TmaCase("f32_planes_none", "f32", 100, 64, 64, (16, 32), "none", 4, 6400),
    TmaCase("bf16_subtile_128B", "bf16", 256, 512, 512, (64, 64), "128B", subtile_store=True),
    VectorCase("f32_vector_256", "f32", 1000, 256),
    VectorCase("bf16_vector_64", "bf16", 40, 64),
)


def cases_header() -> str:
    return "\n".join(["static void hk_tma_cases() {", *(c.cute_call() for c in CASES),
                      "}", ""])


def parse(stdout: str) -> dict[str, dict[str, tuple[int, ...]]]:
    """Case name -> argument -> values."""
    found: dict[str, dict[str, tuple[int, ...]]] = {}
    current = None
    for line in stdout.splitlines():
        tag, *rest = line.split()
        if tag == "tma":
            current = found.setdefault(rest[0], {})
        elif tag == "arg":
            assert rest[0] not in current, f"{rest[0]} passed twice"
            current[rest[0]] = tuple(int(v) for v in rest[1:])
    return found
