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


def test_argmax_as_i32_and_running_argmax_are_exact_past_2_24(torch):
    """The integer statements (ir/integer_exprs.py) on the GPU: argmax's column
    plus an offset past 2^24, in both layouts, and a running argmax over column
    tiles (tests/test_integer_statements.py's kernels)."""
    from tests.test_integer_statements import ARGMAX, BIG, RUNNING

    kernel = hopperc.compile(ARGMAX)
    x, w = _with_ties((256, 64), 5), _with_ties((256, 256), 6)
    a = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    b = torch.full((256,), -1, dtype=torch.int32, device="cuda")
    kernel(X=torch.from_numpy(x).cuda(), W=torch.from_numpy(w).cuda(), A=a, B=b, base=BIG)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(to_host(a), np.argmax(x, axis=1).astype(np.int64) + BIG)
    rows = 16 * 4  # four blocks of 16-row tiles
    np.testing.assert_array_equal(to_host(b)[:rows], np.maximum(
        np.argmax(w[:rows], axis=1).astype(np.int64) * 3 + BIG, BIG - 5))
    running = hopperc.compile(RUNNING)
    y = np.random.default_rng(7).integers(-4, 5, size=(128, 200)).astype(np.float32)
    arg = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    top = torch.full((128,), float("nan"), device="cuda")
    running(X=torch.from_numpy(y).cuda(), A=arg, V=top)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(to_host(arg), np.argmax(y, axis=1))
    np.testing.assert_array_equal(to_host(top), y.max(axis=1))


def test_row_vectors_staged_through_shared_memory(torch):
    """sl = v then a 1-D TMA store (tests/test_shared_row_stores.py's kernels)."""
    from tests.test_shared_row_stores import GROUPS, ROWS

    x = np.random.default_rng(8).normal(0, 3, (256, 64)).astype(np.float32)
    t = np.random.default_rng(9).integers(0, 3, 256).astype(np.int32)
    out = torch.full((256,), float("nan"), device="cuda")
    hopperc.compile(ROWS)(X=torch.from_numpy(x).cuda(), T=torch.from_numpy(t).cuda(), L=out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(to_host(out), np.where(t == 1, 0.0, x.max(axis=1)))
    out = torch.full((256,), float("nan"), device="cuda")
    hopperc.compile(GROUPS)(X=torch.from_numpy(x).cuda(), L=out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(to_host(out), x.max(axis=1) * 2)
