"""Launch metadata, checked against figures derived by hand from the samples."""
from __future__ import annotations

from hopperc import driver
from hopperc.buildsys.metadata import launch_metadata
from tests.conftest import ROOT, source


def _meta(path_or_text, defines=None):
    src = driver.read_source(path_or_text) if not isinstance(path_or_text, str) else source(path_or_text)
    g = driver.generate(src, defines)
    return launch_metadata(g.kernel, g.launch, src.name, "sm_90a", defines or {}, None)


def test_scale_rows_metadata():
    meta = _meta(ROOT / "samples" / "scale_rows.hk")
    # sx at 0 and sy at 8192 (64*64*2 bytes each, 1024-aligned for 128B swizzle), the one
    # mbarrier at 16384 (+8), plus 1024 - 16 bytes to round the 16-byte-aligned base up.
    assert meta["dynamic_shared_memory_bytes"] == 16384 + 8 + 1008
    assert [p["name"] for p in meta["params"]] == ["tmap_X", "S", "tmap_Y", "M", "N"]
    assert [p["kind"] for p in meta["params"]] == ["tensor_map", "pointer", "tensor_map",
                                                   "dim", "dim"]
    x = meta["tensor_maps"][0]
    assert (x["data_type"], x["rank"], x["box"], x["swizzle_enum"]) == (
        "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2, [64, 64], "CU_TENSOR_MAP_SWIZZLE_128B")
    assert meta["grid"][0] == {"axis": "x", "name": "m",
                               "tiles": {"op": "/", "args": [{"dim": "M"}, 64]},
                               "extent": "ceil(M / 64)"}


def test_box_is_innermost_first_and_maps_deduplicate():
    text = """kernel k(X: f32[B, M, N], Y: f32[B, M, N])
    tile(BM = 8, BN = 32) grid(m: M / BM, n: N / BN, b: B)
{
    shared s: f32[BM, BN]
    tma s <- X[tile.b, tile.m, tile.n]
    tma Y[tile.b, tile.m, tile.n] <- s
    tma s <- X[tile.b, tile.m, tile.n]
}
"""
    meta = _meta(text)
    assert [m["param"] for m in meta["tensor_maps"]] == ["tmap_X", "tmap_Y"]
    assert meta["tensor_maps"][0]["box"] == [32, 8, 1]  # N, M, B: innermost first
    assert meta["tensor_maps"][0]["box_shape"] == [1, 8, 32]
    assert meta["grid"][2] == {"axis": "z", "name": "b", "tiles": {"dim": "B"}, "extent": "B"}
    # 8*32*4 bytes + one mbarrier; without swizzle a TMA destination still needs
    # 128-byte alignment, so the base is rounded up by at most 128 - 16 bytes
    assert meta["dynamic_shared_memory_bytes"] == 1024 + 8 + 112
