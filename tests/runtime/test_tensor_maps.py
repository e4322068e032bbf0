"""cuTensorMapEncodeTiled's arguments from metadata and a tensor, against
values worked out by hand from the TMA rules: dims innermost first, byte
strides for dims 1.., 16-byte alignment of the address and of every stride."""
import pytest

from hopperc.runtime import ArgumentError, GpuUnavailable, gpu_available
from hopperc.runtime.arrays import DeviceTensor, contiguous_strides
from hopperc.runtime.spec import TensorMapSpec
from hopperc.runtime.tensor_maps import TensorMapArgs, encode, tensor_map_args
from tests.runtime.helpers import sample_spec

BASE = 0x7F00_0000_0000


def tensor(shape, itemsize=2, strides=None, address=BASE):
    return DeviceTensor(address, tuple(shape), tuple(strides or contiguous_strides(shape)),
                        itemsize, None, 0, "test")


def test_gemm_operand_a():
    # A: bf16[M=1000, K=520], row-major. Rows are 520 * 2 = 1040 bytes (65 x 16).
    # The kernel's box is BM x BK = 128 x 64, i.e. (64, 128) innermost first.
    spec = sample_spec("gemm_bf16").tensor_map("tmap_A")
    args = tensor_map_args(spec, tensor((1000, 520)))
    assert args == TensorMapArgs(
        data_type="CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", rank=2, global_address=BASE,
        global_dim=(520, 1000), global_strides=(1040,), box_dim=(64, 128),
        element_strides=(1, 1), interleave="CU_TENSOR_MAP_INTERLEAVE_NONE",
        swizzle="CU_TENSOR_MAP_SWIZZLE_128B", l2_promotion="CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        oob_fill="CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")


def test_gemm_output_c_box_is_one_column_block_of_a_warpgroups_rows():
    # C: bf16[M, N] stored by each warpgroup from its 64 rows of a 128B-swizzled
    # BM x BN = 128 x 256 tile (sc[wg]), whose 512-byte rows lie in four 128-byte
    # column blocks: each store moves one block through a 64 x 64 box (innermost
    # first) with the same swizzle.
    spec = sample_spec("gemm_bf16").tensor_map("tmap_C")
    args = tensor_map_args(spec, tensor((1000, 312)))
    assert (args.global_dim, args.global_strides, args.box_dim, args.swizzle) == (
        (312, 1000), (624,), (64, 64), "CU_TENSOR_MAP_SWIZZLE_128B")


def test_a_view_of_a_wider_matrix_keeps_its_row_stride():
    # Columns 0..63 of a bf16[100, 128] matrix: 64 wide, rows still 256 bytes apart.
    spec = sample_spec("tma_copy").tensor_map("tmap_X")
    args = tensor_map_args(spec, tensor((100, 64), strides=(128, 1), address=BASE + 64))
    assert (args.global_address, args.global_dim, args.global_strides) == (
        BASE + 64, (64, 100), (256,))


def test_rank_three_strides():
    # f32[4, 100, 64] row-major: 64 * 4 = 256 bytes per row, 100 * 256 = 25600 per plane.
    spec = TensorMapSpec("tmap_T", "T", "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", (32, 16, 1),
                         (1, 1, 1), "CU_TENSOR_MAP_SWIZZLE_128B",
                         "CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
                         "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")
    args = tensor_map_args(spec, tensor((4, 100, 64), itemsize=4))
    assert (args.rank, args.global_dim, args.global_strides) == (3, (64, 100, 4), (256, 25600))


def test_row_stride_not_a_multiple_of_16_bytes_says_how_to_pad():
    spec = sample_spec("gemm_bf16").tensor_map("tmap_A")
    with pytest.raises(ArgumentError) as info:
        tensor_map_args(spec, tensor((1000, 500)))  # 1000-byte rows
    message = str(info.value)
    assert "A: the stride of dimension 0 is 1000 bytes" in message
    assert "pad dimension 1 (now 500) to a multiple of 8" in message


def test_misaligned_base_address():
    spec = sample_spec("gemm_bf16").tensor_map("tmap_A")
    with pytest.raises(ArgumentError, match="address 0x7f0000000008 is not 16-byte aligned"):
        tensor_map_args(spec, tensor((1000, 512), address=BASE + 8))


def test_transposed_tensor_is_not_contiguous_innermost():
    spec = sample_spec("gemm_bf16").tensor_map("tmap_B")
    with pytest.raises(ArgumentError, match="innermost dimension must be contiguous"):
        tensor_map_args(spec, tensor((256, 512), strides=(1, 256)))


def test_rank_must_match_the_box():
    spec = sample_spec("gemm_bf16").tensor_map("tmap_B")
    with pytest.raises(ArgumentError, match="2-d tensor, got 3-d"):
        tensor_map_args(spec, tensor((2, 256, 512)))


@pytest.mark.skipif(gpu_available(), reason="checks the no-driver path")
def test_encode_reaches_the_driver_with_well_typed_arguments():
    # The bindings convert every argument before loading the driver: a wrong
    # type would be a TypeError here, not the missing driver.
    args = tensor_map_args(sample_spec("gemm_bf16").tensor_map("tmap_A"), tensor((256, 512)))
    with pytest.raises(GpuUnavailable, match="no CUDA driver"):
        encode(args)
