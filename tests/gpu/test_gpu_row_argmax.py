"""rowmin, argmax and rowmax on the GPU against numpy on rows full of ties, with a
NaN row and infinities: argmax is numpy.argmax exactly (ties and NaNs to the
lowest column, whatever order the shuffles meet in), in a warpgroup's quads and
across warps."""
import numpy as np
import pytest

import hopperc
from hopperc.harness.torch_bridge import to_host
from tests.test_row_min_argmax import QUAD, WIDE, _with_ties

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("text, cols", [(QUAD, 64), (WIDE, 256)], ids=["quad", "warps"])
def test_argmax_and_rowmin_match_numpy_with_ties(torch, text, cols):
    kernel = hopperc.compile(text)
    x = _with_ties((256, cols), 3)
    out = {"LO": torch.full((256,), float("nan"), device="cuda"),
           "ARG": torch.full((256,), -1, dtype=torch.int32, device="cuda")}
    if "HI" in text:
        out["HI"] = torch.full((256,), float("nan"), device="cuda")
    kernel(X=torch.from_numpy(x).cuda(), **out)
    torch.cuda.synchronize()
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(to_host(out["ARG"]), np.argmax(x64, axis=1))
    clean = ~np.isnan(x64).any(axis=1)  # fmaxf / fminf skip a NaN
    np.testing.assert_array_equal(to_host(out["LO"])[clean], x64.min(axis=1)[clean])
    if "HI" in out:
        np.testing.assert_array_equal(to_host(out["HI"])[clean], x64.max(axis=1)[clean])
