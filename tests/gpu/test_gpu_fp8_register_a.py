"""fp8 A from registers and A^T per warpgroup on the GPU (the fragment exchange
and the column blocks' descriptors are what the hardware reads): the kernels of
tests/test_fp8_register_a.py and tests/test_mn_major_parts.py against the
reference of their statements and against PyTorch."""
from pathlib import Path

import pytest

from hopperc.diagnostics import SourceFile
from hopperc.harness.check import run_check
from tests.test_fp8_register_a import ATTENTION, chain
from tests.test_mn_major_parts import FORMS, P_T_V, gemm

pytestmark = pytest.mark.gpu


def _statements_agree(result) -> None:
    assert result.reference is not None, result.unchecked
    for out in result.outputs:
        assert out.mismatches == 0, out


@pytest.mark.parametrize("dtype, bn, inline", [("e4m3", 64, False), ("e5m2", 32, True),
                                               ("e4m3", 128, True)])
def test_fp8_chain(dtype, bn, inline, torch):
    """O = fp8(X W^T / 8) V, P rounded as the kernel rounds it (satfinite: the
    inputs keep |P| far below the largest finite value, where torch's rounding agrees)."""
    result = run_check(SourceFile("c.hk", chain(dtype, bn, inline)),
                       shapes={"M": 192, "N": 3 * bn})
    _statements_agree(result)
    t = result.tensors
    fp8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]
    p = (t["X"].float() @ t["W"].float().T * 0.125).to(fp8).float()
    torch.testing.assert_close(t["Y"], p @ t["Vt"].float().T, rtol=1e-4, atol=1e-3)


def test_fp8_attention(torch):
    result = run_check(SourceFile(str(ATTENTION), Path(ATTENTION).read_text()),
                       shapes={"H": 2, "L": 512})
    _statements_agree(result)
    t = result.tensors
    v = t["Vt"].float().transpose(1, 2)
    want = torch.nn.functional.scaled_dot_product_attention(
        t["Q"].float()[None], t["K"].float()[None], v[None])[0]
    torch.testing.assert_close(t["O"].float(), want, rtol=0, atol=2 ** -6 * v.abs().max().item())


@pytest.mark.parametrize("form", FORMS)
def test_a_transposed_per_warpgroup(form, torch):
    result = run_check(SourceFile("g.hk", gemm(form)), shapes={"M": 256, "N": 128, "K": 256})
    _statements_agree(result)
    t = result.tensors
    torch.testing.assert_close(t["C"], t["A"].float().T @ t["B"].float().T, rtol=1e-4,
                               atol=1e-3)


def test_p_transposed_times_v(torch):
    result = run_check(SourceFile("p.hk", P_T_V), shapes={"M": 256})
    _statements_agree(result)
    t = result.tensors
    for block in range(2):
        rows = slice(128 * block, 128 * (block + 1))
        p = (t["X"][rows].float() @ t["W"].float().T).bfloat16().float()
        torch.testing.assert_close(t["Y"][rows], p.T @ t["V"][rows].float(), rtol=1e-4,
                                   atol=1e-3)
