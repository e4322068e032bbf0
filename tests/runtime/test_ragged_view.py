"""A ragged copy's tensor map, checked without a GPU: a CPU model of TMA's
tiled addressing (address = base + sum(coordinate_i * stride_i) modulo 2^64,
element in bounds when 0 <= coordinate_i < extent_i along every dimension)
applied to the exact arguments the runtime encodes (runtime/tensor_maps.py,
from the metadata a real build writes) and the coordinates the kernel computes
(runtime/ragged_view.view_coordinates, which the code generator also renders as
C++: tests/test_ragged_copies.py). For any tensor, START >= 0 and END, the box
touches exactly the rows [START, min(END, rows)) of the tensor, each element
at its own address, and nothing else; and the arguments keep
cuTensorMapEncodeTiled's documented limits."""
from __future__ import annotations

import copy
import itertools
import re
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hopperc
from hopperc.runtime import ArgumentError, MetadataError
from hopperc.runtime.arrays import DeviceTensor
from hopperc.runtime.ragged_view import ROWS, clipped_end, view_coordinates
from hopperc.runtime.spec import TensorMapSpec, parse_spec
from hopperc.runtime.tensor_maps import TensorMapArgs, tensor_map_args
from tests.runtime.helpers import text_spec

MOD = 1 << 64
INT32 = range(-(1 << 31), 1 << 31)
F32 = 4

# (header, load index, box in tensor order): f32 boxes of 128-byte rows
KERNELS = {
    "rows_2d": ("X: f32[M, N]", "X[s : e, tile.n]", "f32[8, 32]"),
    "planes_3d_dim0": ("X: f32[B, M, N]", "X[s : e, tile.m, tile.n]", "f32[2, 4, 32]"),
    "rows_3d_dim1": ("X: f32[B, M, N]", "X[tile.m, s : e, tile.n]", "f32[4, 32]"),
}
TEMPLATE = """\
kernel ragged(HEADER, s: i32, e: i32)
    tile(BM = 4) grid(m: M / BM, n: N / 32) threads 128
{
    shared buf: BUFFER swizzle 128B
    tma buf <- INDEX
}
"""


@lru_cache(maxsize=None)
def spec(kernel: str) -> TensorMapSpec:
    header, index, buffer = KERNELS[kernel]
    text = TEMPLATE.replace("HEADER", header).replace("INDEX", index).replace("BUFFER", buffer)
    (tmap,) = text_spec(text).tensor_maps
    assert tmap.ragged is not None
    return tmap


def tma_touches(args: TensorMapArgs, coords: tuple[int, ...], itemsize: int
                ) -> dict[tuple[int, ...], int]:
    """Box position (outermost first) -> address, for the in-bounds elements of a
    box at `coords` (outermost first), as TMA's tiled mode computes them."""
    dims = args.global_dim[::-1]
    strides = (args.global_strides[::-1] + (itemsize,))
    box = args.box_dim[::-1]
    out = {}
    for offset in itertools.product(*(range(b) for b in box)):
        c = [x + o for x, o in zip(coords, offset)]
        if all(0 <= x < d for x, d in zip(c, dims)):
            out[offset[2:]] = (args.global_address + sum(x * s for x, s in zip(c, strides))) % MOD
    return out


def expected_touches(tensor: DeviceTensor, origin: tuple[int, ...], box: tuple[int, ...],
                     dim: int, end: int) -> dict[tuple[int, ...], int]:
    """The elements a box clipped at `end` along `dim` should touch."""
    out = {}
    for offset in itertools.product(*(range(b) for b in box)):
        c = [x + o for x, o in zip(origin, offset)]
        if all(0 <= x < n for x, n in zip(c, tensor.shape)) and c[dim] < end:
            out[offset] = tensor.address + sum(x * s * tensor.itemsize
                                               for x, s in zip(c, tensor.strides))
    return out


def check_driver_limits(args: TensorMapArgs, coords: tuple[int, ...]) -> None:
    """cuTensorMapEncodeTiled's documented requirements, and PTX's signed 32-bit
    tensor coordinates."""
    assert 1 <= args.rank <= 5
    assert len(args.global_dim) == len(args.box_dim) == len(args.element_strides) == args.rank
    assert len(args.global_strides) == args.rank - 1
    assert args.global_address % 16 == 0
    assert all(1 <= d <= 1 << 32 for d in args.global_dim)
    assert all(s % 16 == 0 and 0 < s < 1 << 40 for s in args.global_strides)
    assert all(1 <= b <= 256 for b in args.box_dim)
    assert all(1 <= e <= 8 for e in args.element_strides)
    assert all(c in INT32 for c in coords)


@st.composite
def problems(draw):
    kernel = draw(st.sampled_from(sorted(KERNELS)))
    tmap = spec(kernel)
    box = tmap.box[::-1][2:]  # tensor order, without the view's two dimensions
    dim = tmap.ragged
    rank = len(box)
    rows = draw(st.one_of(st.integers(1, 40), st.integers(ROWS - 40, ROWS)))
    shape = [draw(st.integers(1, 5)) for _ in range(rank)]
    shape[dim] = rows
    shape[-1] = draw(st.integers(1, 70))
    # rows padded to a multiple of 16 bytes, sometimes wider (a view of a bigger matrix)
    pitch = -(-shape[-1] // 4) * 4 + 4 * draw(st.integers(0, 3))
    strides = [1] * rank
    strides[-2] = pitch
    for axis in range(rank - 3, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    if dim == 0 and rank == 3:  # planes as far apart as the limit on R allows
        strides[0] *= draw(st.sampled_from([1, 3]))
    address = draw(st.integers(1, (1 << 52) - 1)) * 16
    start = draw(st.integers(0, rows + 20))
    end = draw(st.one_of(st.integers(-5, rows + 40), st.integers(start, start + box[dim] + 2),
                         st.just(start)))
    origin = [draw(st.integers(-2, n + 2)) * b for n, b in zip(shape, box)]
    origin[dim] = start
    return tmap, DeviceTensor(address, tuple(shape), tuple(strides), F32, None, 0, "test"), \
        tuple(origin), end


@settings(max_examples=300, deadline=None, derandomize=True)
@given(problems())
def test_ragged_view_touches_exactly_the_rows_before_end(problem):
    tmap, tensor, origin, end = problem
    dim = tmap.ragged
    args = tensor_map_args(tmap, tensor)
    coords = view_coordinates(origin, dim, clipped_end(end, tensor.shape[dim]))
    check_driver_limits(args, coords)
    box = tmap.box[::-1][2:]
    want = expected_touches(tensor, origin, box, dim, min(end, tensor.shape[dim]))
    assert tma_touches(args, coords, F32) == want


def test_a_box_at_end_touches_nothing_and_one_row_short_touches_one():
    tmap = spec("rows_2d")
    tensor = DeviceTensor(1 << 20, (100, 32), (32, 1), F32, None, 0, "test")
    args = tensor_map_args(tmap, tensor)
    assert tma_touches(args, view_coordinates((50, 0), 0, 50), F32) == {}
    touched = tma_touches(args, view_coordinates((50, 0), 0, 51), F32)
    assert {row for row, _ in touched} == {0}
    assert touched[(0, 0)] == (1 << 20) + 50 * 32 * F32


def test_negative_start_reaches_before_the_tensor():
    """Why `check` reports START < 0: the view clips only at END, so the rows
    before the tensor are in bounds and addressed below its base."""
    tmap = spec("rows_2d")
    base = 1 << 20
    tensor = DeviceTensor(base, (100, 32), (32, 1), F32, None, 0, "test")
    touched = tma_touches(tensor_map_args(tmap, tensor), view_coordinates((-2, 0), 0, 100),
                          F32)
    assert touched[(0, 0)] == base - 2 * 32 * F32


def test_encoded_view_arguments():
    """bf16[1000, 520] clipped along its rows (1040 bytes apart), box 64 x 64:
    innermost first, the columns, rows of extent 2^30, then E (stride 1040) and
    W (stride 2^34 - 1040), both of extent 0x7fff0000."""
    text = """\
kernel rows(X: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[s : e, tile.n]
}
"""
    (tmap,) = text_spec(text).tensor_maps
    tensor = DeviceTensor(1 << 30, (1000, 520), (520, 1), 2, None, 0, "test")
    args = tensor_map_args(tmap, tensor)
    assert (args.rank, args.global_dim, args.global_strides, args.box_dim) == (
        4, (520, 1 << 30, 0x7FFF0000, 0x7FFF0000), (1040, 1040, (1 << 34) - 1040),
        (64, 64, 1, 1))


@pytest.mark.parametrize("shape, strides, words", [
    ((ROWS + 1, 32), (32, 1), "above 2^30"),
    ((4, 1 << 20, 8192), (1 << 33, 8192, 1), "below 2^34"),
])
def test_tensor_the_view_cannot_take(shape, strides, words):
    tmap = spec("rows_2d" if len(shape) == 2 else "planes_3d_dim0")
    tensor = DeviceTensor(1 << 20, shape, strides, F32, None, 0, "test")
    with pytest.raises(ArgumentError, match=re.escape(words)):
        tensor_map_args(tmap, tensor)


RAGGED_METADATA = TEMPLATE.replace("HEADER", "X: f32[M, N]").replace(
    "INDEX", "X[s : e, tile.n]").replace("BUFFER", "f32[8, 32]")


def test_metadata_describes_the_view_and_the_runtime_reads_it_back():
    (entry,) = hopperc.build(RAGGED_METADATA, name="t.hk").metadata["tensor_maps"]
    assert (entry["rank"], entry["box"], entry["box_shape"], entry["ragged"]) == (
        4, [32, 8, 1, 1], [1, 1, 8, 32],
        {"dim": 0, "rows": 1 << 30, "lead": 0x7FFF0000, "wrap": 1 << 34})
    spec = parse_spec(hopperc.build(RAGGED_METADATA, name="t.hk").metadata)
    assert spec.tensor_maps[0].ragged == 0


@pytest.mark.parametrize("field, value, words", [
    ("wrap", 1 << 33, "ragged view constants"), ("dim", 1, "bad ragged dimension")])
def test_metadata_with_other_view_constants_is_refused(field, value, words):
    """A map built for another view would clip elsewhere: refused at load."""
    record = copy.deepcopy(hopperc.build(RAGGED_METADATA, name="t.hk").metadata)
    record["tensor_maps"][0]["ragged"][field] = value
    with pytest.raises(MetadataError, match=words):
        parse_spec(record)
