"""rowmin, argmax and rowmax on the GPU against numpy on rows full of ties, with a
NaN row and infinities: argmax is numpy.argmax exactly (ties and NaNs to the
lowest column, whatever order the quad's shuffles meet in)."""
import numpy as np
import pytest

import hopperc
from hopperc.harness.torch_bridge import to_host
from tests.test_row_min_argmax import QUAD, _with_ties

pytestmark = pytest.mark.gpu


def test_argmax_and_rowmin_match_numpy_with_ties(torch):
    kernel = hopperc.compile(QUAD)
    x = _with_ties((256, 64), 3)
    lo = torch.full((256,), float("nan"), device="cuda")
    hi = torch.full_like(lo, float("nan"))
    arg = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    kernel(X=torch.from_numpy(x).cuda(), LO=lo, ARG=arg, HI=hi)
    torch.cuda.synchronize()
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(to_host(arg), np.argmax(x64, axis=1))
    clean = ~np.isnan(x64).any(axis=1)  # fmaxf / fminf skip a NaN
    np.testing.assert_array_equal(to_host(lo)[clean], x64.min(axis=1)[clean])
    np.testing.assert_array_equal(to_host(hi)[clean], x64.max(axis=1)[clean])
