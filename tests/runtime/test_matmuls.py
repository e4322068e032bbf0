"""The matrix products behind `hopperc bench`'s cuBLAS baseline and TFLOP/s."""
import pytest

from hopperc import driver
from hopperc.harness.matmuls import Matmul, matmuls
from tests.conftest import ROOT


def products(name):
    return matmuls(driver.check(driver.read_source(ROOT / "samples" / f"{name}.hk")))


def test_gemm_is_a_times_b_transposed():
    (product,) = products("gemm_bf16")
    assert product == Matmul("A", "B", False, True)
    assert product.describe() == "A @ B^T"
    # A[M=1000, K=520], B[N=312, K=520]: 2 * 1000 * 312 * 520 flops.
    assert product.flops({"A": (1000, 520), "B": (312, 520)}) == 324_480_000


def test_fused_mlp_is_two_products_of_one_input():
    assert products("mlp_two_mma") == (Matmul("X", "Wg", False, True),
                                       Matmul("X", "Wu", False, True))


def test_chained_gemms_are_two_products():
    assert [p.describe() for p in products("gemm_chain")] == ["A1 @ B1^T", "A2 @ B2^T"]


@pytest.mark.parametrize("name", ["tma_copy", "scale_rows", "two_producers"])
def test_kernels_without_products_have_no_baseline(name):
    assert products(name) is None


def test_transposed_a_operand_shape():
    # A stored [K, M] = [64, 128]: m = 128, k = 64; B[K, N] = [64, 32] not transposed.
    assert Matmul("A", "B", True, False).shape({"A": (64, 128), "B": (64, 32)}) == (128, 32, 64)
