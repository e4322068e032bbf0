"""Element-wise statements over views of any rank: a view of rank 3 or more is its 2-D
planes stacked along the rows (as they lie in memory), a 1-D view is one row. The
renderer and the simulator spread that grid over the threads the same way."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hopperc import driver
from hopperc.codegen.launch import launch_info
from hopperc.codegen.render import _Context
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.ir.dtypes import DType
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.layout import element_grid, element_threads, view_shape
from hopperc.sim.tile_values import elementwise
from hopperc.sim.views import element_lanes

# (threads, buffer shape, the view written): rank 1 to 4, grids that do not split
# evenly over the threads, one in the wgmma layout, and warpgroup planes.
VIEWS = [
    (128, "[2, 64, 64]", "r"), (128, "[1, 64, 64]", "r"), (128, "[2, 3, 5]", "r"),
    (128, "[96]", "r"), (128, "[3, 5]", "r"), (128, "[4, 2, 8, 32]", "r[1]"),
    (256, "[2, 2, 16, 32]", "r[wg]"), (256, "[2, 64, 64]", "r[wg]"), (64, "[2, 4, 8]", "r"),
]


def _kernel(threads: int, shape: str, view: str, value: str = "{v} * 2.0 + 1.0") -> str:
    return (f"kernel k(V: f32[N]) threads {threads} {{\n    shared r: f32{shape}\n"
            f"    {view} = {value.format(v=view)}\n}}\n")


def _store(text: str):
    kernel = driver.lower(driver.check(SourceFile("v.hk", text)))
    store = next(s for s in walk(kernel.body) if isinstance(s, ir.SharedStore))
    return kernel, store


def _c_int(expr: str, **values: int) -> int:
    """A rendered non-negative integer expression (C division truncates = floors)."""
    return eval(expr.replace("/", "//"), {}, dict(values))


@pytest.mark.parametrize("threads,shape,view", VIEWS)
def test_rendered_elements_match_the_simulators_threads_and_cover_the_view_once(
        threads, shape, view):
    kernel, store = _store(_kernel(threads, shape, view))
    cx = _Context(kernel, launch_info(kernel), "t.hk")
    e = cx.per_element(store)
    dims = view_shape(kernel.buffer("r"), store.dst.part.count if store.dst.part else None)
    rows, cols = element_grid(dims)
    group = element_threads(threads)
    guard = re.match(r"if \((.*) < (\d+)\) \{", e.assign)
    seen = np.zeros((rows, cols), dtype=int)
    for t in range(group):
        lanes = element_lanes(tuple(dims), group, t // 32).reshape(rows, cols)
        for k in range(e.slots):
            if guard and _c_int(guard[1], hk_k=k, hk_t=t) >= int(guard[2]):
                continue
            r, c = _c_int(e.row, hk_k=k, hk_t=t), _c_int(e.col, hk_k=k, hk_t=t)
            seen[r, c] += 1
            assert lanes[r, c] == t % 32
    assert (seen == 1).all()


@pytest.mark.parametrize("threads,shape,view", VIEWS)
def test_element_wise_views_of_every_rank_build(threads, shape, view):
    built = driver.build(SourceFile("v.hk", _kernel(threads, shape, view)))
    assert "st.shared.f32" in built.result.ptx


def test_round_trip_of_a_whole_rank_3_buffer_builds():
    text = ("kernel k(X: bf16[M, N]) threads 128 {\n    shared r: bf16[2, 64, 64]\n"
            "    r = bf16(f32(r))\n}\n")
    cuda = driver.build(SourceFile("r.hk", text)).generated.cuda
    assert "for (int hk_k = 0; hk_k < 64; ++hk_k)" in cuda  # 2 x 64 x 64 over 128 threads


def test_a_row_vector_indexes_the_row_of_each_plane():
    kernel, store = _store(_kernel(128, "[2, 64, 64]", "r", "{v} + v[:, None]").replace(
        "    r =", "    v: f32[64] = V[0]\n    r ="))
    e = _Context(kernel, launch_info(kernel), "t.hk").per_element(store)
    assert "+ (hk_r % 64); return hk_i < u_N" in e.assign
    vector = np.arange(64, dtype=np.float32)
    value = ir.Elementwise("+", (ir.Literal(0.0), ir.GlobalVector("V", ir.const(0), "rows")))
    out = elementwise(value, (2, 64, 64), DType.F32, None, None, {"V": vector}, lambda e: 0)
    assert (out == vector[None, :, None]).all()


def test_a_shared_vector_indexes_the_column_or_the_row_of_each_plane():
    """A 1-D shared buffer broadcast: element (hk_r, hk_c) reads value hk_c per
    column, and the row within its plane per row; the simulator agrees."""
    text = _kernel(128, "[2, 64, 64]", "r", "{v} + sv[None, :] + sv[:, None]").replace(
        "    r =", "    shared sv: f32[64]\n    r =")
    kernel, store = _store(text)
    e = _Context(kernel, launch_info(kernel), "t.hk").per_element(store)
    assert "+ (hk_c) * 4u" in e.assign and "+ ((hk_r % 64)) * 4u" in e.assign
    vector = np.arange(64, dtype=np.float32)
    value = ir.Elementwise("+", (ir.SharedRead(store.dst, "cols"),
                                 ir.SharedRead(store.dst, "rows")))
    out = elementwise(value, (2, 64, 64), DType.F32, None, lambda read: vector, {},
                      lambda e: 0)
    assert (out == vector[None, None, :] + vector[None, :, None]).all()


def test_rank_3_pipeline_of_vectors_passes_check():
    """Reads, writes and vectors over a whole rank-3 view, checked on the CPU model
    against the numpy reference."""
    text = """kernel planes(X: bf16[B, M, N], Y: bf16[B, M, N], V: f32[N], S: f32[M])
    tile(BM = 64, BN = 64) grid(b: B / 2, m: M / BM) threads 128
{
    shared r: bf16[2, BM, BN]
    shared q: f32[2, BM, BN]
    tma r <- X[tile.b, tile.m, 0]
    shared sv: f32[BN]
    tma sv <- V[0]
    v: f32[BN] = V[0]
    s: f32[BM] = S[tile.m]
    r = bf16(f32(r))
    q = f32(r) * v[None, :] + s[:, None] - sv[None, :]
    r = bf16(q)
    tma Y[tile.b, tile.m, 0] <- r
}
"""
    source = SourceFile("planes.hk", text)
    driver.build(source)
    report = driver.simulate(source, seeds=2, search=20)
    assert report.ok and report.max_error == {"Y": 0.0}


@pytest.mark.parametrize("threads,body,message", [
    (128, "shared r: f32[2, 64, 64]\n    r[2] = 1.0",
     "index 2 is out of range: 'r' has 2 parts along its first axis, indexed 0 to 1"),
    (128, "shared r: f32[2, 64, 64]\n    r[0 - 1] = 1.0",
     "index -1 is out of range: 'r' has 2 parts along its first axis, indexed 0 to 1"),
    (256, "shared r: f32[1, 64, 64]\n    r[wg] = 1.0",
     "this index can be 1 (it ranges over 0 to 1), out of range: 'r' has 1 parts along its "
     "first axis, indexed 0 to 0"),
    (256, "shared r: f32[2, 2, 64, 64]\n    shared q: f32[2, 64, 64]\n    q[wg] = r[wg]^T",
     "only a 2-D view can be transposed"),
    (128, "shared r: f32[2, 64, 64]\n    x: f32[64, 64] = r[0] + r",
     "shape mismatch in '+': [64, 64] and [2, 64, 64]"),
    (128, "shared r: f32[2, 64, 64]\n    x: f32[64, 64] = r",
     "shape mismatch: the value is [2, 64, 64] but the target is [64, 64]"),
    (128, "shared r: f32[2, 64, 64]\n    x: f32[128, 64] = 0.0\n    r = x",
     "shape mismatch: the value is [128, 64] but the target is [2, 64, 64]"),
    (128, "shared r: f32[2, 64, 64]\n    v: f32[2] = V[0]\n    r = r + v[:, None]",
     "shape mismatch: a vector of 2 broadcast over 64 rows"),
    (128, "shared r: f32[64, 64]\n    shared sv: f32[32]\n    r = r + sv[None, :]",
     "shape mismatch: a vector of 32 broadcast over 64 columns"),
    (128, "shared r: f32[64, 64]\n    shared sv: f32[64]\n    r = r + sv[0, :]",
     "broadcast a vector with v[:, None] or v[None, :]"),
])
def test_views_that_do_not_name_elements_are_refused_at_the_line(threads, body, message):
    text = f"kernel k(V: f32[N]) threads {threads} {{\n    {body}\n}}\n"
    with pytest.raises(CompileError) as info:
        driver.build(SourceFile("bad.hk", text))
    assert info.value.message == message
    assert info.value.span is not None and info.value.span.line >= 2
