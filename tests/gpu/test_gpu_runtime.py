"""The runtime on a GPU: each way of passing memory, streams, prepared
launches, and argument errors with real tensors."""
import pytest

import hopperc
from hopperc.runtime import ArgumentError, DeviceTensor
from hopperc.runtime.timing import Timer
from hopperc.runtime.kernel import stream_handle
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
COPY = ROOT / "samples" / "tma_copy.hk"


@pytest.fixture
def copy_kernel():
    return hopperc.compile(COPY)


def _pair(torch, m=200, n=136):
    x = torch.randn(m, n, device="cuda").bfloat16()
    return x, torch.zeros_like(x)


def test_torch_tensors(copy_kernel, torch):
    x, y = _pair(torch)
    copy_kernel(x, y)
    torch.cuda.synchronize()
    assert torch.equal(x, y)


def test_raw_pointers_with_dimensions(copy_kernel, torch):
    x, y = _pair(torch)
    copy_kernel(X=x.data_ptr(), Y=y.data_ptr(), M=200, N=136)
    torch.cuda.synchronize()
    assert torch.equal(x, y)


def test_device_tensor_over_a_wider_matrix(copy_kernel, torch):
    # Copy columns 8..71 of a 200 x 136 matrix: a strided view at a raw pointer.
    x, y = _pair(torch)
    view = DeviceTensor(x.data_ptr() + 8 * 2, (200, 64), (136, 1), 2, None, 0, "test")
    out = torch.zeros(200, 64, device="cuda").bfloat16()
    copy_kernel(view, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x[:, 8:72])


class Dlpack:
    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)


class CudaArray:
    def __init__(self, tensor):
        self.tensor = tensor  # keeps the memory alive
        self.__cuda_array_interface__ = {"shape": tuple(tensor.shape), "typestr": "<V2",
                                         "data": (tensor.data_ptr(), False), "strides": None,
                                         "version": 3}


@pytest.mark.parametrize("wrap", [Dlpack, CudaArray])
def test_interchange_protocols(copy_kernel, torch, wrap):
    x, y = _pair(torch)
    copy_kernel(wrap(x), wrap(y))
    torch.cuda.synchronize()
    assert torch.equal(x, y)


def test_side_stream_and_prepared_launch(copy_kernel, torch):
    x, y = _pair(torch)
    stream = torch.cuda.Stream()
    launch = copy_kernel.prepare(x, y, stream=stream)
    for _ in range(3):
        launch()
    stream.synchronize()
    assert torch.equal(x, y)


def test_unaligned_row_stride_is_refused(copy_kernel, torch):
    x, y = _pair(torch, n=100)  # 200-byte rows
    with pytest.raises(ArgumentError, match="pad dimension 1 \\(now 100\\) to a multiple of 8"):
        copy_kernel(x, y)


def test_transposed_and_cpu_tensors_are_refused(copy_kernel, torch):
    x, y = _pair(torch, 128, 128)
    with pytest.raises(ArgumentError, match="innermost dimension must be contiguous"):
        copy_kernel(x.T, y)
    with pytest.raises(ArgumentError, match="not a CUDA device"):
        copy_kernel(x.cpu(), y)


def test_empty_problem_launches_nothing(copy_kernel, torch):
    x = torch.zeros(0, 64, device="cuda").bfloat16()
    copy_kernel(x, x.clone())


def test_timer_measures_a_launch(copy_kernel, torch):
    x, y = _pair(torch, 4096, 4096)
    stream = torch.cuda.current_stream()
    launch = copy_kernel.prepare(x, y, stream=stream)
    with Timer(stream_handle(stream)) as timer:
        timing = timer.time(launch, warmup=2, runs=5)
    # 2 x 32 MB moved: well over a microsecond, well under a second.
    assert 0.001 < timing.min_ms <= timing.median_ms < 1000
