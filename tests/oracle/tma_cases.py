"""The cases of tma_oracle.cu: a kernel loading one box of a 2-D tensor, the
tensor it is given, and hopperc's cuTensorMapEncodeTiled arguments for it
(metadata of the built kernel, then runtime/tensor_maps.py)."""
from __future__ import annotations

from dataclasses import dataclass

import hopperc
from hopperc.ir.dtypes import DType
from hopperc.runtime.arrays import DeviceTensor
from hopperc.runtime.spec import parse_spec
from hopperc.runtime.tensor_maps import TensorMapArgs, tensor_map_args
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
    multicast: int = 0  # the box is a ring stage multicast to that many blocks

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
        if self.multicast:
            return multicast_kernel(self.name, self.dtype, self.box, swizzle,
                                    (self.multicast, 1))
        if self.subtile_store:
            return (f"kernel {self.name}(X: {self.dtype}[{dims}]) grid(m: 1) threads 128 {{\n"
                    f"    shared s: {self.dtype}[2, {self.box[0]}, {self.box[1]}]{swizzle}\n"
                    f"    s[1] = 1.0\n    tma X[0, 1] <- s[1]\n}}\n")
        return (f"kernel {self.name}(X: {self.dtype}[{dims}]) grid(m: 1) threads 128 {{\n"
                f"    shared s: {self.dtype}[{self.box[0]}, {self.box[1]}]{swizzle}\n"
                f"    tma s <- X[{origin}]\n}}\n")

    def hopperc_args(self) -> TensorMapArgs:
        spec = parse_spec(hopperc.build(self.kernel(), name="t.hk").metadata).tensor_map("tmap_X")
        dtype = DType.parse(self.dtype)
        tensor = DeviceTensor(ADDRESS, self.shape, self.strides, dtype.nbytes, dtype, 0,
                              self.name)
        return tensor_map_args(spec, tensor)

    def cute_call(self) -> str:
        bits = 0 if self.swizzle == "none" else SWIZZLE_BITS[self.swizzle]
        template = f"{CUTE_TMA_TYPES[self.dtype]}, {bits}, {self.box[0]}, {self.box[1]}"
        if self.multicast:
            return (f'  tma_case_multicast<{template}, {self.multicast}>("{self.name}", '
                    f"{ADDRESS}ull, {self.rows}, {self.cols}, {self.row_stride});")
        if self.planes:
            return (f'  tma_case_planes<{template}>("{self.name}", {ADDRESS}ull, {self.planes}, '
                    f"{self.rows}, {self.cols}, {self.row_stride}, {self.plane_stride});")
        return (f'  tma_case<{template}>("{self.name}", {ADDRESS}ull, {self.rows}, {self.cols}, '
                f"{self.row_stride});")


def multicast_kernel(name: str, dtype: str, box: tuple[int, int], swizzle: str,
                     cluster: tuple[int, int]) -> str:
    """A pipeline whose ring `s` (loaded from X at a box no block coordinate
    moves) is multicast across a cluster; `a` too where the cluster spans n."""
    return (f"kernel {name}(X: {dtype}[R, C], Y: {dtype}[M, {box[1]}], Z: {dtype}[N, 64])\n"
            f"    grid(m: M / 64, n: N / 64) cluster({cluster[0]}, {cluster[1]})\n{{\n"
            f"    shared s: {dtype}[{box[0]}, {box[1]}] stages 2{swizzle}\n"
            f"    shared a: {dtype}[64, {box[1]}] stages 2{swizzle}\n"
            f"    role math: warpgroup {{\n        acc: f32[64, {box[0]}] = 0\n"
            f"        for k in 0 .. 2 {{\n            acc += a @ s^T\n        }}\n    }}\n"
            f"    role load: warp {{\n        for k in 0 .. 2 {{\n"
            f"            tma a <- Y[tile.m, 0]\n            tma s <- X[0, 0]\n        }}\n"
            f"    }}\n}}\n")


@dataclass(frozen=True)
class ClusterCase:
    """A cluster shape: each block's rank, and the mask of a load shared along
    the cluster's one axis of more than one block (`mode`)."""

    name: str
    shape: tuple[int, int, int]
    mode: int

    def cute_call(self) -> str:
        x, y, z = self.shape
        return f'  cluster_case<{x}, {y}, {z}, {self.mode}>("{self.name}");'


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
        spec = parse_spec(hopperc.build(text, name="t.hk").metadata).tensor_map("tmap_V")
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
    # multicast: B's ring of gemm_multicast, 4 blocks, a narrow 64B-swizzled box
    TmaCase("bf16_multicast_2", "bf16", 1024, 512, 512, (256, 64), "128B", multicast=2),
    TmaCase("bf16_multicast_4", "bf16", 1000, 520, 520, (128, 64), "128B", multicast=4),
    TmaCase("f16_multicast_64B", "f16", 512, 96, 96, (64, 32), "64B", multicast=2),
)
CLUSTERS = (
    ClusterCase("x2", (2, 1, 1), 0),
    ClusterCase("x4", (4, 1, 1), 0),
    ClusterCase("y2", (1, 2, 1), 1),
    ClusterCase("y4", (1, 4, 1), 1),
    ClusterCase("x8", (8, 1, 1), 0),
)


def cases_header() -> str:
    return "\n".join(["static void hk_tma_cases() {",
                      *(c.cute_call() for c in CASES + CLUSTERS), "}", ""])


def parse(stdout: str) -> dict[str, dict[str, tuple[int, ...]]]:
    """Case name -> argument -> values."""
    found: dict[str, dict[str, tuple[int, ...]]] = {}
    current = None
    for line in stdout.splitlines():
        tag, *rest = line.split()
        if tag in ("tma", "cluster"):
            current = found.setdefault(rest[0] if tag == "tma" else f"cluster {rest[0]}", {})
        elif tag == "arg":
            assert rest[0] not in current, f"{rest[0]} passed twice"
            current[rest[0]] = tuple(int(v) for v in rest[1:])
        elif tag == "slice":  # rank -> (first row, byte offset)
            current[f"slice {rest[0]}"] = (int(rest[1]), int(rest[2]))
        elif tag == "rank":  # (x, y, z) -> (rank, mask)
            current[tuple(int(v) for v in rest[:3])] = (int(rest[3]), int(rest[4]))
    return found
