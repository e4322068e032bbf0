"""multicast_cluster_loads: a ring load whose box the blocks of a cluster share
is multicast only when every block provably issues the same loads in the same
iterations (every loop bound and condition around the ring's loads and reads is
uniform over the cluster's ranks); otherwise it stays each block's own, and the
load records why."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.passes import multicast_cluster_loads as mcl
from hopperc.sim.explore import simulate
from hopperc.sim.problem import default_dims, make_problem
from tests.conftest import ROOT, filecheck, ir_after

PASS = "multicast_cluster_loads"
ROWS = driver.read_source(ROOT / "tests" / "sim" / "hazards" / "cluster_rows.hk").text
MATH_LOOP = "        for k in 0 .. 3 {\n            acc = acc + sx * sw\n        }\n"
LOAD_LOOP = ("        for k in 0 .. 3 {\n            tma sx <- X[tile.m, 0]\n"
             "            tma sw <- W[k, 0]\n        }\n")


def _rows(math_loop: str, load_loop: str) -> str:
    assert MATH_LOOP in ROWS and LOAD_LOOP in ROWS
    return ROWS.replace(MATH_LOOP, math_loop).replace(LOAD_LOOP, load_loop)


def _loops(header: str, then: str = "", end: str = "") -> str:
    """cluster_rows with both roles' loops under `header`, their bodies under `then`."""
    inner = "    " if then else ""
    return _rows(f"        {header} {{\n{then and '            ' + then + chr(10)}"
                 f"{inner}            acc = acc + sx * sw\n{end}        }}\n",
                 f"        {header} {{\n{then and '            ' + then + chr(10)}"
                 f"{inner}            tma sx <- X[tile.m, 0]\n"
                 f"{inner}            tma sw <- W[k, 0]\n{end}        }}\n")


# the ring's trip count, or a condition around its loads and reads, per tile
TRIP = _loops("for k in 0 .. tile.m + 1")
CONDITION = _loops("for k in 0 .. 3", "if tile.m % 2 == 0 {", "            }\n")
# uniform over the cluster: dimensions, constants, another loop's variable
UNIFORM_TRIP = _loops("for k in 0 .. T / 32")
UNIFORM_CONDITION = _loops("for k in 0 .. 3", "if k < T / 32 {", "            }\n")


def _lower(text: str) -> tuple:
    front_end = driver.check(SourceFile("rows.hk", text))
    return front_end, driver.lower(front_end)


def _load_of_w(kernel: ir.Kernel) -> ir.AsyncLoad:
    return next(s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.tensor == "W")


def test_a_box_the_cluster_shares_is_multicast(tmp_path):
    """W's box is the same for both blocks: multicast, released in both blocks at
    cluster scope, and the producer acquires those releases at cluster scope."""
    filecheck(ir_after(ROWS, PASS), """
CHECK: mbarrier load_math_empty[2] arrivals 256
CHECK: mbarrier.arrive.release.cluster load_math_empty[{{.*}}] in each of 2 blocks
CHECK: mbarrier.wait.acquire.cluster load_math_empty[load_math_load_stage]
CHECK: tma.load sx{{.*}} <- X[tile.m * 32, 0 * 64]{{.*}}full[load_math_load_stage]  #
CHECK: tma.load sw{{.*}} <- W[k * 32, 0 * 64]{{.*}}, multicast to 2 blocks (each issues 16 rows)
CHECK: barrier.cluster.arrive.release + barrier.cluster.wait.acquire
""", tmp_path)


@pytest.mark.parametrize("text, construct, line", [
    (TRIP, "the trip count of 'for k' in role 'math'", 15),
    (CONDITION, "the condition of 'if' in role 'math'", 16),
])
def test_a_ring_whose_loads_depend_on_the_tile_stays_each_blocks_own(text, construct, line):
    """Block 0 and block 1 of a cluster take tiles m = 2c and 2c + 1: their loops
    run different iterations, so one block's full barrier would wait for a
    peer's slice never loaded. No multicast, no doubled release, no cluster
    barrier at exit; the load says which construct and line."""
    _, kernel = _lower(text)
    load = _load_of_w(kernel)
    assert load.multicast == 1
    assert load.unicast == ir.RankDivergence(construct, "tile.m", load.unicast.span)
    assert load.unicast.span.line == line
    assert kernel.pipelines[0].consumer_arrivals == 128 and kernel.pipelines[0].blocks == 1
    assert not any(isinstance(s, ir.StageRelease) and s.blocks > 1 for s in walk(kernel.body))
    assert not any(getattr(s, "scope", None) is ir.MemoryScope.CLUSTER for s in walk(kernel.body))
    assert not any(isinstance(s, ir.ClusterBarrier) for s in walk(kernel.body))


@pytest.mark.parametrize("text", [UNIFORM_TRIP, UNIFORM_CONDITION])
def test_negative_uniform_bounds_and_conditions_keep_the_multicast(text):
    """A trip count over a dimension and a condition on the loop's own variable
    are the same in every block of the cluster."""
    _, kernel = _lower(text)
    assert _load_of_w(kernel).multicast == 2 and _load_of_w(kernel).unicast is None


def test_negative_a_tile_dependent_condition_away_from_the_ring_keeps_the_multicast():
    """A per-tile branch that neither loads nor reads the ring changes nothing
    the cluster's blocks share."""
    text = ROWS.replace("        sy = acc\n",
                        "        if tile.m % 2 == 0 {\n            acc = acc * 2.0\n        }\n"
                        "        sy = acc\n")
    assert text != ROWS
    _, kernel = _lower(text)
    assert _load_of_w(kernel).multicast == 2


def test_negative_unicast_is_recorded_only_for_a_box_the_cluster_shares():
    """X[tile.m, 0] moves with the tile: each block's own anyway, nothing to explain."""
    _, kernel = _lower(TRIP)
    (x_load,) = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.tensor == "X"]
    assert x_load.unicast is None


def test_a_box_that_moves_with_the_tile_is_not_shared():
    """The rule of the trip counts applies to the box too: its coordinates must
    be uniform over the cluster's ranks."""
    text = ROWS.replace("tma sw <- W[k, 0]", "tma sw <- W[tile.m + k, 0]")
    _, kernel = _lower(text)
    assert _load_of_w(kernel).multicast == 1 and _load_of_w(kernel).unicast is None


@pytest.mark.parametrize("text", [TRIP, CONDITION])
def test_the_unicast_ring_checks_clean(text):
    front_end, kernel = _lower(text)
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 4, 100)
    assert report.ok, [f.headline() for f in report.findings]


@pytest.mark.parametrize("text", [TRIP, CONDITION])
def test_multicast_despite_a_per_tile_trip_count_hangs_in_the_simulator(text, monkeypatch):
    """The rule is needed: forced to multicast, a block waits forever on its full
    barrier for the bytes of a slice its peer never loads."""
    monkeypatch.setattr(mcl, "_divergence", lambda *args: None)
    front_end, kernel = _lower(text)
    assert _load_of_w(kernel).multicast == 2
    report = simulate(kernel, front_end, make_problem(kernel, default_dims(kernel)), 8, 200,
                      first_finding=True)
    assert report.findings, "the simulator found nothing"
    assert report.findings[0].category.value in ("deadlock", "barrier misuse")


def test_explain_names_the_construct_and_its_line(tmp_path, hopperc_cli):
    path = tmp_path / "rows.hk"
    path.write_text(TRIP)
    proc = hopperc_cli("explain", str(path))
    assert proc.returncode == 0, proc.stderr
    assert (f"{path}:6: cluster: W's loads into sw (line 24) are not multicast, each block "
            "loads its own: the trip count of 'for k' in role 'math' (line 15), around the "
            "ring's loads or reads, depends on tile.m, which differs between the blocks of a "
            "cluster, so they might not issue the same loads") in proc.stdout
    assert "are multicast to" not in proc.stdout


def test_manual_code_touching_the_ring_keeps_it_each_blocks_own(tmp_path, hopperc_cli):
    """The compiler does not analyse a 'manual' block: a ring it reads stays each
    block's own, and `explain` says so without claiming the block differs
    between the cluster's blocks."""
    text = ROWS.replace("            acc = acc + sx * sw\n",
                        "            acc = acc + sx * sw\n"
                        "            manual {\n                acc = acc + sw\n            }\n")
    assert text != ROWS
    _, kernel = _lower(text)
    load = _load_of_w(kernel)
    assert load.multicast == 1
    assert load.unicast == ir.RankDivergence("a 'manual' block in role 'math'", None,
                                             load.unicast.span)
    assert load.unicast.span.line == 17
    path = tmp_path / "rows.hk"
    path.write_text(text)
    proc = hopperc_cli("explain", str(path))
    assert proc.returncode == 0, proc.stderr
    assert ("each block loads its own: a 'manual' block in role 'math' (line 17) loads, waits "
            "for, reads or releases the ring in code the compiler does not analyse, so they "
            "might not issue the same loads") in proc.stdout
    assert "which differs between the blocks" not in proc.stdout


def test_a_specialized_kernel_names_no_role_it_did_not_write():
    """With `specialize` the roles are the compiler's: the reason names the user's
    loop alone."""
    text = driver.read_source(ROOT / "samples" / "gemm_pipelined.hk").text
    text = text.replace("threads 256 specialize", "threads 256 cluster(2) specialize")
    text = text.replace("for k in 0 .. K / BK {", "for k in 0 .. K / BK + tile.m {")
    assert text.count("cluster(2)") == 1 and text.count("tile.m {") == 1
    _, kernel = _lower(text)
    (load,) = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.tensor == "B"]
    assert load.multicast == 1
    assert load.unicast.construct == "the trip count of 'for k'"
    assert load.unicast.scalar == "tile.m"
