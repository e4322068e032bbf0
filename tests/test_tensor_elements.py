"""Scalars from tensors: `T[i, j]` reads an element of a global i32 (or f32)
tensor wherever an integer expression goes (i32) and in element-wise math;
`name: i32 = EXPR` / `name: f32 = EXPR` declare immutable scalars, substituted
where they are used. Each read is `ld.global.nc` with a bounds predicate."""
from __future__ import annotations

import numpy as np
import pytest

from hopperc import driver
from hopperc.backend.cubin_tools import sass_instructions
from hopperc.codegen.names import kernel_symbol
from hopperc.frontend import semantic
from hopperc.sim.explore import program, simulate
from hopperc.sim.findings import Category
from hopperc.sim.problem import default_dims, make_problem
from hopperc.sim.schedule import Chooser, run_cluster
from tests.conftest import ROOT, ir_after, source
from tests.test_diagnostics import expect_error


GROUPED = ROOT / "tests" / "sim" / "hazards" / "grouped_k_ranges.hk"


# BODY is replaced by each test's statements.
KERNEL = """\
kernel e(X: f32[M, N], OFFS: i32[G], S: f32[G], W: i32[G, H], Z: bf16[G], Y: f32[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sx: f32[BM, BN]
    shared sy: f32[BM, BN]
BODY
    tma Y[tile.m, tile.n] <- sy
}
"""


SCALE = KERNEL.replace("BODY", """\
    s: f32 = S[tile.m] * 2.0 + W[tile.m, 1]
    tma sx <- X[tile.m, tile.n]
    sy = sx * s + OFFS[tile.n]""")


def body(text: str) -> str:
    return KERNEL.replace("BODY", text)


def test_declared_scalars_are_their_expressions_in_the_ir():
    text = ir_after(GROUPED.read_text(), "front-end")
    assert "for k in 0 .. KOFF[tile.m + 1] - KOFF[tile.m]:" in text
    assert "A[tile.m * 64, (KOFF[tile.m] + k) * 64]" in text
    assert "first" not in text.split("kernel", 1)[1].split("\n", 1)[1]


def test_element_reads_in_element_wise_math_take_f32_and_i32():
    text = ir_after(SCALE, "front-end")
    assert "st.shared sy = ((ld.shared(sx) * ((S[tile.m] * 2) + W[tile.m, 1])) + OFFS[tile.n])" \
        in text


def test_an_element_indexes_a_tile_and_bounds_a_loop():
    text = ir_after(body("""\
    for k in 0 .. OFFS[tile.m] {
        tma sx <- X[W[tile.m, k], tile.n]
        sy = sx
    }"""), "front-end")
    assert "for k in 0 .. OFFS[tile.m]:" in text
    assert "X[W[tile.m, k] * 64, tile.n * 64]" in text


@pytest.mark.parametrize("statements, marker, words", [
    ("    tma sx <- X[OFFS[tile.m, 1], tile.n]\n    sy = sx", "OFFS[tile.m, 1]",
     ["'OFFS' has 1 dimension", "not 2"]),
    ("    tma sx <- X[OFFS[S[0]], tile.n]\n    sy = sx", "S[0]",
     ["'S' is f32", "integer expression"]),
    ("    tma sx <- X[OFFS[:], tile.n]\n    sy = sx", ":], tile.n", ["not a slice"]),
    ("    tma sx <- X[S[tile.m], tile.n]\n    sy = sx", "S[tile.m], tile.n",
     ["'S' is f32", "i32 element"]),
    ("    n: f32 = S[tile.m]\n    tma sx <- X[n, tile.n]\n    sy = sx", "n, tile.n",
     ["'n' is f32", "needs i32"]),
    ("    n: i32 = OFFS[tile.m]\n    n = 3\n    sy = sx", "n = 3",
     ["'n' is a scalar (line 6)", "cannot change"]),
    ("    n: bf16 = S[0]\n    sy = sx", "n: bf16", ["i32 or f32, not bf16"]),
    ("    sy = sx * Z[tile.m]", "Z[tile.m]", ["'Z' is bf16", "i32 and f32"]),
    ("    for k in 0 .. 2 {\n        n: i32 = OFFS[k]\n    }\n    tma sx <- X[n, tile.n]\n"
     "    sy = sx", "n, tile.n", ["unknown name 'n'"]),
    ("    tma sx <- X[OFFS[lane], tile.n]\n    sy = sx", "tma sx", ["cannot use 'lane'"]),
    ("    if OFFS[thread] > 0 {\n        sy = sx\n    }", "OFFS[thread] > 0",
     ["condition differs between the threads"]),
    ("    n: f32 = sx\n    sy = sx", "sx\n    sy", ["computed from scalars"]),
])
def test_element_and_scalar_errors_are_at_the_construct(statements, marker, words):
    expect_error(body(statements), marker, words)


def test_reading_elements_of_a_stored_tensor_is_refused_at_the_read():
    """The read is where the element is written, not where a scalar declared
    from it is used, and before the store as well as after it."""
    text = body("""\
    scale: f32 = Y[tile.m, 0]
    tma sx <- X[tile.m, tile.n]
    sy = sx * scale""")
    err = expect_error(text, "Y[tile.m, 0]", ["element of 'Y'", "stores (line 9)"])
    assert "nothing orders" in err.message
    expect_error(body("    tma sx <- X[tile.m, tile.n]\n    sy = sx * Y[tile.m, 0]"),
                 "Y[tile.m, 0]", ["element of 'Y'"])


def test_negative_reading_elements_of_a_tensor_only_loaded_is_accepted():
    driver.check(source(body("    tma sx <- X[OFFS[tile.m], tile.n]\n"
                             "    sy = sx * X[tile.m, OFFS[1]]")))


def test_each_read_is_one_predicated_ldg_outside_the_k_loop():
    """The element reader is `__ldg` with the bounds predicate; each statement and
    each loop reads its elements once before it, so the SASS has one
    LDG.E.CONSTANT per read in the code and none in the k-loop."""
    built = driver.build(driver.read_source(GROUPED))
    cuda = built.generated.cuda
    assert ("[&](int hk_i0) -> int { return hk_i0 >= 0 && hk_i0 < u_G ? "
            "__ldg(u_KOFF + static_cast<long long>(hk_i0)) : int(0); }") in cuda
    main_loop = cuda[cuda.index("for (int u_k = 0 + 1;"):]
    main_loop = main_loop[:main_loop.index("\n  }\n")]
    assert "hk_elem_" not in main_loop and "hk_element" in main_loop
    reads = cuda.count("hk_elem_KOFF(")
    sass = sass_instructions(built.result.cubin)[kernel_symbol("grouped_k_ranges")]
    assert sum("LDG.E.CONSTANT" in i for i in sass) == reads


def test_an_element_wise_statement_reads_each_element_once():
    built = driver.build(source(SCALE))
    sass = sass_instructions(built.result.cubin)[kernel_symbol("e")]
    assert sum("LDG.E.CONSTANT" in i for i in sass) == 3  # S, W and OFFS, not per element


def _grouped():
    front_end = driver.check(driver.read_source(GROUPED))
    kernel = driver.lower(front_end)
    return front_end, kernel, make_problem(kernel, default_dims(kernel))


def test_check_draws_offsets_with_empty_short_and_long_groups():
    _, kernel, problem = _grouped()
    sets = [problem.data_set(i).inputs["KOFF"] for i in range(problem.data_sets)]
    assert len(sets) >= 3
    blocks = -(-problem.dims["K"] // 64)
    groups = set()
    for offsets in sets:
        assert offsets[0] == 0 and (np.diff(offsets) >= 0).all() and offsets[-1] <= blocks
        groups |= set(np.diff(offsets).astype(int))
    # empty, one k-block, and long enough to wrap the ring (2 stages) twice
    assert {0, 1} <= groups and max(groups) >= 2 * 2 + 1


def _numpy(problem, offsets) -> np.ndarray:
    a, b = (problem.inputs[t].astype(np.float64) for t in ("A", "B"))
    c = np.zeros(problem.inputs["C"].shape)
    for m in range(-(-c.shape[0] // 64)):
        k0, k1 = int(offsets[m]) * 64, int(offsets[m + 1]) * 64
        c[m * 64:(m + 1) * 64] = a[m * 64:(m + 1) * 64, k0:k1] @ b[:, k0:k1].T
    return c


def test_grouped_k_ranges_compute_numpys_result_for_every_data_set():
    _, kernel, problem = _grouped()
    prog = program(kernel)
    for index in range(problem.data_sets):
        data = problem.data_set(index)
        tensors = data.fresh_tensors()
        for n, cluster in enumerate(data.clusters()):
            run_cluster(prog, [data.env(block) for block in cluster], tensors,
                        Chooser("random", index), n)
        want = _numpy(data, data.inputs["KOFF"])
        assert np.allclose(tensors["C"], want, rtol=1e-5, atol=1e-5), index


def test_grouped_k_ranges_check_clean():
    report = driver.simulate(driver.read_source(GROUPED), seeds=6, search=100)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
    assert report.reference == "numpy reference" and report.max_error["C"] == 0.0


def test_an_element_read_before_its_store_completes_is_a_race(monkeypatch):
    """The simulator's model of the refusal: without it, a block that reads an
    element its own bulk store wrote, before a plain wait_group, races."""
    original = semantic.check_global_reads
    monkeypatch.setattr(semantic, "check_global_reads",
                        lambda body, grid, threads, reads: original(body, grid, threads, {}))
    front_end = driver.check(source(body("""\
    tma sx <- X[tile.m, tile.n]
    sy = sx
    tma Y[tile.m, tile.n] <- sy
    sx = sx * Y[tile.m * BM, tile.n * BN]""").replace("    tma Y[tile.m, tile.n] <- sy\n}", "}")))
    kernel = driver.lower(front_end)
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 4, 50)
    races = [f for f in report.findings if f.category is Category.RACE]
    assert races and "element of 'Y'" in races[0].lines()[0], report.findings


SPECIALIZED = """\
kernel grouped(A: bf16[M, K], B: bf16[N, K], KOFF: i32[G], C: f32[M, N])
    tile(BM = 128, BN = 128, BK = 64) grid(m: M / BM, n: N / BN) threads 256 specialize HEADER
{
    shared sa: bf16[BM, BK] stages 3 swizzle 128B
    shared sb: bf16[BN, BK] stages 3 swizzle 128B
    shared sc: f32[2, 64, 128]
    first: i32 = KOFF[tile.AXIS]
    acc: f32[64, BN] = 0
    for k in 0 .. KOFF[tile.AXIS + 1] - first {
        tma sa <- A[tile.m, first + k]
        tma sb <- B[tile.n, first + k]
        acc += sa[wg] @ sb^T
    }
    sc[wg] = acc
    tma C[2 * tile.m + wg, tile.n] <- sc[wg]
}
"""


def _specialized(header: str, axis: str) -> str:
    return SPECIALIZED.replace("HEADER", header).replace("AXIS", axis)


@pytest.mark.parametrize("axis, multicast", [("n", True), ("m", False)])
def test_an_element_is_the_same_across_a_cluster_exactly_when_its_indices_are(axis, multicast):
    """Blocks of a cluster along m share B's tiles: they are multicast when the
    loop's bound and B's coordinate read elements indexed by tile.n, and stay
    each block's own when indexed by tile.m."""
    text = ir_after(_specialized("cluster(2, 1)", axis))
    load = next(line for line in text.splitlines() if "tma.load sb" in line)
    assert ("multicast to 2 blocks" in load) is multicast, load


def test_a_persistent_block_reads_its_tiles_elements_after_taking_the_tile():
    """The tile loop changes tile.m: the elements are read inside it, after the
    tile is taken, once per tile and before the k-loop."""
    cuda = driver.generate(source(_specialized("persistent", "m"))).cuda
    consumer = cuda[cuda.index("for (int u_tile"):]
    taken = consumer.index("hk_tile_m = ")
    read = consumer.index("hk_elem_KOFF(hk_tile_m)")
    assert taken < read < consumer.index("for (int u_k")


ROLES = """\
kernel grouped_roles(A: bf16[M, K], B: bf16[N, K], KOFF: i32[G], C: f32[M, N])
    tile(BM = 128, BN = 128, BK = 64) grid(m: M / BM, n: N / BN)
{
    shared sa: bf16[BM, BK] stages 3 swizzle 128B
    shared sb: bf16[BN, BK] stages 3 swizzle 128B
    shared sc: f32[2, 64, 128]
    first: i32 = KOFF[tile.m]
    count: i32 = KOFF[tile.m + 1] - first
    role math: warpgroup x2 regs 232 {
        acc: f32[64, BN] = 0
        for k in 0 .. count {
            acc += sa[wg] @ sb^T
        }
        sc[wg] = acc
        tma C[2 * tile.m + wg, tile.n] <- sc[wg]
    }
    role load: warp regs 40 {
        for k in 0 .. count {
            tma sa <- A[tile.m, first + k]
            tma sb <- B[tile.n, first + k]
        }
    }
}
"""


def test_a_scalar_declared_before_the_roles_bounds_both_roles_loops():
    """The producer's and the consumer's loops have the same bounds (the same
    elements), so connect_role_pipelines pairs them into one ring."""
    text = ir_after(ROLES)
    assert text.count("for k in 0 .. KOFF[tile.m + 1] - KOFF[tile.m]:") == 2
    assert "pipeline load_math: load -> math [sa, sb]" in text, text


def test_scales_read_in_element_wise_math_check_clean():
    """f32 and i32 elements in element-wise math; W, an i32 tensor read as scalars
    but not as offsets, holds small non-negative values."""
    report = driver.simulate(source(SCALE), seeds=4, search=100)
    assert report.ok, "\n".join(line for f in report.findings for line in f.lines())
    assert report.reference == "numpy reference" and report.max_error["Y"] == 0.0
    w = report.problem.inputs["W"]
    assert (w >= 0).all() and (w <= 4).all() and (w == np.round(w)).all()
