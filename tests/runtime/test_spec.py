"""Reading launch metadata back: what a launch needs, and clear errors for
stale or broken files."""
import json

import pytest

import hopperc
from hopperc.runtime import MetadataError, read_spec
from hopperc.runtime.spec import parse_spec
from tests.conftest import ROOT
from tests.runtime.helpers import sample_spec


def test_gemm_spec_carries_the_launch():
    spec = sample_spec("gemm_bf16")
    assert spec.kernel == "gemm_bf16" and spec.arch == "sm_90a"
    # 2 math warpgroups + 1 load warp padded to a warpgroup: 3 x 128 threads.
    assert spec.block == (384, 1, 1) and spec.cluster == (1, 1, 1)
    assert [(p.name, p.kind) for p in spec.params] == [
        ("tmap_A", "tensor_map"), ("tmap_B", "tensor_map"), ("tmap_C", "tensor_map"),
        ("M", "dim"), ("K", "dim"), ("N", "dim")]
    # ceil(M / 128) x ceil(N / 256): M = 1000 -> 8 blocks, N = 312 -> 2.
    assert spec.grid_dims({"M": 1000, "N": 312, "K": 64}) == (8, 2, 1)
    assert spec.grid_dims({"M": 1024, "N": 256, "K": 64}) == (8, 1, 1)


def test_persistent_spec_launches_one_block_per_sm_at_most_one_per_tile():
    """gemm_persistent's tiles: ceil(M / 128) x ceil(N / 256); the grid is the SMs
    (132 on an H100 SXM), fewer when there are fewer tiles, one per tile when
    the SM count is unknown; always along x."""
    spec = sample_spec("gemm_persistent")
    assert spec.persistent and not sample_spec("gemm_bf16").persistent
    assert spec.grid_dims({"M": 8192, "N": 8192, "K": 64}, sms=132) == (132, 1, 1)  # 64 x 32
    assert spec.grid_dims({"M": 1000, "N": 312, "K": 64}, sms=132) == (16, 1, 1)  # 8 x 2
    assert spec.grid_dims({"M": 1000, "N": 312, "K": 64}) == (16, 1, 1)


def test_persistent_cluster_spec_launches_whole_clusters():
    """gemm_multicast walks runs of 2 tiles along m: ceil(ceil(M / 128) / 2) x
    ceil(N / 256) runs, at most one cluster per 2 SMs, in whole clusters along x."""
    spec = sample_spec("gemm_multicast")
    assert spec.persistent and spec.cluster == (2, 1, 1)
    assert spec.grid_dims({"M": 8192, "N": 8192, "K": 64}, sms=132) == (132, 1, 1)  # 32 x 32
    assert spec.grid_dims({"M": 1000, "N": 312, "K": 64}, sms=132) == (16, 1, 1)  # 4 x 2 runs
    assert spec.grid_dims({"M": 1000, "N": 312, "K": 64}, sms=5) == (4, 1, 1)  # 2 clusters
    assert spec.grid_dims({"M": 640, "N": 256, "K": 64}, sms=1) == (2, 1, 1)  # one cluster


def test_read_spec_from_a_built_file(tmp_path, hopperc_cli):
    cubin = tmp_path / "scale_rows.cubin"
    assert hopperc_cli("build", "samples/scale_rows.hk", "-o", str(cubin), "-q").returncode == 0
    spec = read_spec(cubin.with_suffix(".json"))
    assert [p.kind for p in spec.params] == ["tensor_map", "pointer", "tensor_map", "dim", "dim"]
    assert spec.tensor_map("tmap_X").swizzle == "CU_TENSOR_MAP_SWIZZLE_128B"
    assert spec.dynamic_shared_bytes == json.loads(cubin.with_suffix(".json").read_text())[
        "dynamic_shared_memory_bytes"]


def _record():
    """A fresh copy of tma_copy's metadata, to break."""
    return json.loads(json.dumps(hopperc.build(ROOT / "samples" / "tma_copy.hk")
                                 .metadata))


def test_missing_file(tmp_path):
    with pytest.raises(MetadataError, match="no launch metadata"):
        read_spec(tmp_path / "k.json")


def test_not_json(tmp_path):
    path = tmp_path / "k.json"
    path.write_text("{ not json")
    with pytest.raises(MetadataError, match="unreadable launch metadata"):
        read_spec(path)


def test_other_schema_asks_for_a_rebuild():
    record = _record()
    record["schema"] = "hopperc.launch/0"
    with pytest.raises(MetadataError, match="rebuild the kernel"):
        parse_spec(record)


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("params"), "KeyError: 'params'"),
    (lambda r: r["params"][0].update(kind="texture"), "unknown kind 'texture'"),
    (lambda r: r["tensor_maps"][0].update(swizzle_enum="CU_TENSOR_MAP_SWIZZLE_7B"),
     "'CU_TENSOR_MAP_SWIZZLE_7B' is not a CUtensorMapSwizzle"),
    (lambda r: r["tensor_maps"].clear(), "no tensor_maps entry"),
    (lambda r: r.update(block=[128, 0, 1]), "three positive integers"),
    (lambda r: r["tensors"][0].update(dtype="f64"), "unknown element type 'f64'"),
    (lambda r: r["grid"][0].update(tiles={"dim": "Q"}), "its extent reads an unknown name"),
])
def test_malformed_fields_are_named(edit, message):
    record = _record()
    edit(record)
    with pytest.raises(MetadataError, match="malformed launch metadata") as info:
        parse_spec(record)
    assert message in str(info.value)
