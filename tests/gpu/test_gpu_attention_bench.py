"""bench/attention.py's measurement on the GPU: both kernels run on the same
inputs and agree (the benchmark reports their largest difference)."""
import importlib.util

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


def _bench():
    spec = importlib.util.spec_from_file_location("attention_bench",
                                                  ROOT / "bench" / "attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("causal", [False, True])
def test_bench_times_both_and_they_agree(causal):
    ours, theirs, error = _bench().run(1024, causal, runs=3)
    assert ours > 0 and theirs > 0
    assert error < 3e-2  # bf16 outputs of softmax-weighted averages of N(0, 1) values
