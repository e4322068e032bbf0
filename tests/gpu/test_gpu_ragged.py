"""Issue 31's mechanisms on the GPU, each against numpy: a ragged TMA load and
store (`START : END`), a persistent walk over a ragged grid whose extents
read an offsets tensor, and a register row vector stored to global memory.
Every output starts filled with SENTINEL (no input or result equals it), so
the rows a kernel must leave alone are checked as well."""
import numpy as np
import pytest

import hopperc
from hopperc.harness.torch_bridge import to_host

pytestmark = pytest.mark.gpu
SENTINEL = -3.0

# Rows [s, e) of X go to Y (clipped at e and at M); Z gets each tile's loaded
# box as it arrived, zeros at and past e (and past M) included.
RAGGED_ROWS = """\
kernel ragged_rows(X: bf16[M, N], Y: bf16[M, N], Z: bf16[M, N], s: i32, e: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared buf: bf16[BM, BN] swizzle 128B
    tma buf <- X[s + tile.m * BM : e, tile.n]
    tma Z[tile.m, tile.n] <- buf
    tma Y[s + tile.m * BM : e, tile.n] <- buf
}
"""

# Group g's row tiles are OFFS[g] .. OFFS[g + 1] - 1; each tile is stored plus
# its group's index, so a tile taken with the wrong group shows.
GROUPED = """\
kernel grouped_rows(X: f32[M, N], Y: f32[M, N], OFFS: i32[G1])
    tile(BM = 64, BN = 32)
    grid(m: OFFS[tile.g + 1] - OFFS[tile.g], n: N / BN, g: G1 - 1) threads 128 persistent
{
    shared buf: f32[BM, BN] swizzle 128B
    tma buf <- X[OFFS[tile.g] + tile.m, tile.n]
    buf = buf + f32(tile.g)
    tma Y[OFFS[tile.g] + tile.m, tile.n] <- buf
}
"""

# Each row's maximum over X's first 64 columns, row r of tile m to element
# first + 64 m + r of R's row 1, clipped at `last` and at L.
ROW_MAX = """\
kernel row_max(X: f32[M, N], R: f32[H, L], first: i32, last: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, BN]
    tma sx <- X[tile.m, 0]
    x: f32[BM, BN] = sx
    R[1, first + BM * tile.m : last] = rowmax(x)
}
"""


def expected_ragged_rows(x: np.ndarray, s: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    """Y and Z after ragged_rows on outputs holding SENTINEL."""
    rows = x.shape[0]
    end = min(max(e, 0), rows)
    y = np.full_like(x, SENTINEL)
    y[s:end] = x[s:end]  # the tiles reach row s + 64 * ceil(M / 64) - 1 >= M
    source = s + np.arange(rows)  # the row of X that Z's row r loads
    inside = source < end
    z = np.zeros_like(x)
    z[inside] = x[source[inside]]
    return y, z


@pytest.mark.parametrize("s, e", [(0, 100), (5, 150), (24, 1 << 30), (50, 40)],
                         ids=["end-inside-a-box", "start-past-0", "end-past-the-tensor",
                              "empty"])
def test_ragged_load_and_store_match_numpy(torch, s, e):
    kernel = hopperc.compile(RAGGED_ROWS)
    x = torch.randn(200, 128, device="cuda").bfloat16()
    y = torch.full_like(x, SENTINEL)
    z = torch.full_like(x, SENTINEL)
    kernel(X=x, Y=y, Z=z, s=s, e=e)
    torch.cuda.synchronize()
    want_y, want_z = expected_ragged_rows(to_host(x), s, e)
    np.testing.assert_array_equal(to_host(y), want_y)
    np.testing.assert_array_equal(to_host(z), want_z)


def expected_grouped(x: np.ndarray, offsets: list[int]) -> np.ndarray:
    y = np.full_like(x, SENTINEL)
    for g in range(len(offsets) - 1):
        rows = slice(64 * offsets[g], 64 * offsets[g + 1])
        y[rows] = x[rows] + np.float32(g)
    return y


def _group_sizes(seed: int) -> list[int]:
    """60 groups of 0 to 4 row tiles, the first, one in the middle and the last
    empty: about 360 tiles over 3 column tiles, more than a GPU's SMs, so the
    blocks take several tiles each."""
    sizes = np.random.default_rng(seed).integers(0, 5, 60)
    sizes[[0, 30, -1]] = 0
    return [int(v) for v in sizes]


def test_persistent_ragged_grid_writes_every_tile_of_every_group(torch):
    """Every tile of every group holds its X rows plus its group, and the rows
    past the last group keep the sentinel. (A second store of the same tile
    writes the same values, so the walk's taking each tile once is checked on
    the host: tests/test_raster.py runs the generated walk.)"""
    kernel = hopperc.compile(GROUPED)
    sizes = _group_sizes(31)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    rows = 64 * (offsets[-1] + 2)  # two row tiles no group covers
    rng = np.random.default_rng(0)
    x_host = rng.integers(-100, 100, (rows, 96)).astype(np.float32)  # sums exact in f32
    x = torch.from_numpy(x_host).cuda()
    y = torch.full_like(x, SENTINEL)
    offs = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    kernel(X=x, Y=y, OFFS=offs)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(to_host(y), expected_grouped(x_host, offsets))


def expected_row_max(x: np.ndarray, r: np.ndarray, first: int, last: int) -> np.ndarray:
    """R after row_max: the tiles' rows past M arrive as zeros, whose maximum (0)
    is stored like any other row's."""
    tiles = -(-x.shape[0] // 64)
    padded = np.zeros((64 * tiles, 64), dtype=np.float32)
    padded[:x.shape[0]] = x[:, :64]
    want = r.copy()
    end = min(last, r.shape[1])
    for row, value in enumerate(padded.max(axis=1)):
        if 0 <= first + row < end:
            want[1, first + row] = value
    return want


@pytest.mark.parametrize("first, last", [(5, 150), (0, 1 << 30), (40, 100)],
                         ids=["end-inside-a-tile", "end-past-the-tensor", "start-past-0"])
def test_row_vector_store_matches_numpy(torch, first, last):
    kernel = hopperc.compile(ROW_MAX)
    x = torch.randn(200, 64, device="cuda")
    r = torch.full((3, 300), SENTINEL, device="cuda")
    kernel(X=x, R=r, first=first, last=last)
    torch.cuda.synchronize()
    want = expected_row_max(to_host(x), np.full((3, 300), SENTINEL, np.float32), first, last)
    np.testing.assert_array_equal(to_host(r), want)
