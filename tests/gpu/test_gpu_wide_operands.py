"""Wide wgmma operands on the GPU (the descriptors' column blocks are what the
hardware reads): the kernels of tests/test_wide_operands.py against the
reference of their statements and against PyTorch."""
import pytest

from hopperc.diagnostics import SourceFile
from hopperc.ir.dtypes import DType
from hopperc.harness.check import compare, run_check
from hopperc.harness.torch_bridge import to_host
from tests.test_wide_operands import ATTENTION, WIDE_PRODUCTS, gemm

pytestmark = pytest.mark.gpu


def _agree(result, name: str, want) -> None:
    assert result.reference is not None, result.unchecked
    for out in result.outputs:
        assert out.mismatches == 0, out
    check = compare(name, to_host(result.tensors[name]), to_host(want), DType.BF16)
    assert check.mismatches == 0, check


def test_wide_attention(torch):
    result = run_check(SourceFile("a.hk", ATTENTION), shapes={"L": 512})
    t = result.tensors
    want = torch.nn.functional.scaled_dot_product_attention(
        *(t[n].float()[None, None] for n in "QKV"))[0, 0].bfloat16()
    _agree(result, "O", want)


@pytest.mark.parametrize("name", WIDE_PRODUCTS)
def test_wide_product(name, torch):
    bn, bk, k_major, dtype, swizzle, c_swizzle, a_k_major = WIDE_PRODUCTS[name]
    source = SourceFile("g.hk", gemm(bn, bk, k_major, dtype, swizzle, c_swizzle, a_k_major))
    result = run_check(source, shapes={"M": 128, "N": 2 * bn, "K": 4 * bk})
    a, b = result.tensors["A"].float(), result.tensors["B"].float()
    want = ((a if a_k_major else a.T) @ (b.T if k_major else b)).bfloat16()
    _agree(result, "C", want)
