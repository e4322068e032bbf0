"""GPU tests: skipped where there is no Hopper GPU, driver and PyTorch, unless
HOPPERC_REQUIRE_GPU is set (`make gpu-test`), where a skip would hide a failure."""
import os

import pytest

from hopperc.runtime import gpu_available


def _missing() -> str | None:
    if not gpu_available():
        return "no Hopper GPU with a CUDA driver"
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install 'hopperc[gpu]')"
    return None if torch.cuda.is_available() else "PyTorch sees no GPU"


MISSING = _missing()


@pytest.fixture(autouse=True)
def _needs_gpu():
    if MISSING:
        if os.environ.get("HOPPERC_REQUIRE_GPU"):
            pytest.fail(f"GPU tests are required here: {MISSING}")
        pytest.skip(MISSING)


@pytest.fixture
def torch():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # references in true f32
    return torch
