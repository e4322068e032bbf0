"""PyTorch, imported only where a GPU check or benchmark needs it."""
from __future__ import annotations

import numpy as np

from hopperc.diagnostics import ToolchainError
from hopperc.ir.dtypes import DType

_TORCH_NAMES = {DType.BF16: "bfloat16", DType.F16: "float16", DType.F32: "float32",
                DType.I32: "int32", DType.E4M3: "float8_e4m3fn", DType.E5M2: "float8_e5m2"}


class TorchUnavailable(ToolchainError):
    """PyTorch (with CUDA) is needed for inputs, references and the cuBLAS baseline."""


def require_torch():
    try:
        import torch
    except ImportError:
        raise TorchUnavailable("this command needs PyTorch with CUDA: "
                               "pip install 'hopperc[gpu]'") from None
    if not torch.cuda.is_available():
        raise TorchUnavailable(f"PyTorch {torch.__version__} sees no CUDA GPU")
    return torch


def torch_dtype(torch, dtype: DType):
    return getattr(torch, _TORCH_NAMES[dtype])


def to_device(torch, values: np.ndarray, dtype: DType, device: int):
    """f32 values already rounded to `dtype` (exact in it), as a GPU tensor of `dtype`."""
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(
        f"cuda:{device}").to(torch_dtype(torch, dtype))


def to_host(tensor) -> np.ndarray:
    return tensor.float().cpu().numpy()
