"""Matching a call's arguments to the kernel before anything is launched."""
import pytest

from hopperc.runtime import ArgumentError
from hopperc.runtime.binding import bind, check_pointer_tensor
from hopperc.runtime.arrays import DeviceTensor
from tests.runtime.helpers import SCALED_COPY, CudaArray, bf16, sample_spec, text_spec


def gemm(m=1000, n=312, k=520):
    return bf16((m, k)), bf16((n, k)), bf16((m, n))


def test_dims_and_grid_come_from_the_tensors():
    call = bind(sample_spec("gemm_bf16"), gemm(), {})
    assert call.dims == {"M": 1000, "K": 520, "N": 312}
    assert call.grid == (8, 2, 1)  # ceil(1000 / 128), ceil(312 / 256)
    assert not call.empty


def test_keywords_and_positions_mix():
    a, b, c = gemm()
    call = bind(sample_spec("gemm_bf16"), (a,), {"C": c, "B": b})
    assert call.tensors["B"].shape == (312, 520)


def test_inconsistent_dimension_is_named():
    a, _, c = gemm()
    with pytest.raises(ArgumentError, match=r"B: dimension 1 is K = 520 elsewhere, got 512"):
        bind(sample_spec("gemm_bf16"), (a, bf16((312, 512)), c), {})


def test_wrong_element_type():
    a, b, _ = gemm()
    with pytest.raises(ArgumentError, match="C: expected bf16 elements, got f32"):
        bind(sample_spec("gemm_bf16"), (a, b, CudaArray((1000, 312), "<f4")), {})


def test_wrong_rank():
    a, b, _ = gemm()
    with pytest.raises(ArgumentError, match=r"C: expected 2 dimensions \[M, N\], got shape \[5\]"):
        bind(sample_spec("gemm_bf16"), (a, b, bf16((5,))), {})


def test_missing_extra_and_duplicate_arguments():
    spec = sample_spec("gemm_bf16")
    a, b, c = gemm()
    with pytest.raises(ArgumentError, match="missing C"):
        bind(spec, (a, b), {})
    with pytest.raises(ArgumentError, match="has no argument 'D'"):
        bind(spec, (a, b, c), {"D": c})
    with pytest.raises(ArgumentError, match="A given twice"):
        bind(spec, (a, b, c), {"A": a})
    with pytest.raises(ArgumentError, match="takes 3 positional arguments"):
        bind(spec, (a, b, c, c), {})


def test_raw_pointers_take_dimensions_by_keyword():
    spec = sample_spec("gemm_bf16")
    call = bind(spec, (0x1000, 0x2000, 0x3000), {"M": 256, "N": 512, "K": 64})
    assert call.tensors["B"].shape == (512, 64) and call.grid == (2, 2, 1)
    with pytest.raises(ArgumentError, match="A: a raw pointer needs M, K"):
        bind(spec, (0x1000, 0x2000, 0x3000), {"N": 512})


def test_a_tensor_and_a_keyword_must_agree():
    a, b, c = gemm()
    with pytest.raises(ArgumentError, match="dimension 0 is M = 999 elsewhere, got 1000"):
        bind(sample_spec("gemm_bf16"), (a, b, c), {"M": 999})


def test_empty_problem_has_an_empty_grid():
    call = bind(sample_spec("gemm_bf16"), gemm(m=0), {})
    assert call.grid == (0, 2, 1) and call.empty


def test_scalars_are_converted_and_checked():
    spec = text_spec(SCALED_COPY)
    x, y = bf16((64, 64)), bf16((64, 64))
    call = bind(spec, (x, y, 2, 3), {})
    assert call.scalars == {"alpha": 2.0, "shift": 3}
    assert isinstance(call.scalars["alpha"], float)
    with pytest.raises(ArgumentError, match="shift: expected a 32-bit integer, got 1.5"):
        bind(spec, (x, y, 2.0, 1.5), {})
    with pytest.raises(ArgumentError, match="alpha: expected a number"):
        bind(spec, (x, y, "2", 1), {})


def test_tensor_on_another_gpu():
    spec = sample_spec("tma_copy")
    x = DeviceTensor(0x1000, (64, 64), (64, 1), 2, None, 1, "test")
    with pytest.raises(ArgumentError, match="X: the tensor is on GPU 1, the kernel on GPU 0"):
        bind(spec, (x, bf16((64, 64))), {}, device=0)


def test_pointer_tensors_must_be_dense_and_aligned():
    check_pointer_tensor(DeviceTensor(0x1000, (8,), (1,), 4, None, 0, "t"), "S")
    with pytest.raises(ArgumentError, match="S: the kernel indexes it as a dense"):
        check_pointer_tensor(DeviceTensor(0x1000, (8,), (2,), 4, None, 0, "t"), "S")
    with pytest.raises(ArgumentError, match="not aligned to its 4-byte elements"):
        check_pointer_tensor(DeviceTensor(0x1002, (8,), (1,), 4, None, 0, "t"), "S")


def test_dense_tensor_with_rows_tma_refuses_is_refused_before_any_encoding():
    a, b, c = bf16((200, 500), 0x10000), bf16((304, 500), 0x20000), bf16((200, 304), 0x30000)
    with pytest.raises(ArgumentError, match="A: the stride of dimension 0 is 1000 bytes.*"
                                            "multiple of 8, as K = 504"):
        bind(sample_spec("gemm_bf16"), (a, b, c), {})


def test_negative_padded_rows_of_a_view_are_left_to_their_actual_strides():
    # K = 500 columns of rows 504 elements apart: TMA takes the 1008-byte stride.
    a = bf16((200, 500), 0x10000, strides=(1008, 2))
    b = bf16((304, 500), 0x20000, strides=(1008, 2))
    call = bind(sample_spec("gemm_bf16"), (a, b, bf16((200, 304), 0x30000)), {})
    assert call.dims == {"M": 200, "K": 500, "N": 304}
