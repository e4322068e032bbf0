"""Multicast encodings against CuTe: the part of a ring stage each block of a
cluster issues (first global row and shared byte offset, from CuTe's partition
of a make_tma_copy with a multicast count), the cluster rank of each block
(CuTe's layout of the cluster, as %cluster_ctarank) and the multicast mask
(create_tma_multicast_mask). The tensor map of each part is checked with the
other tensor maps (test_tensor_maps.py)."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.layout import multicast_slice
from hopperc.sim.problem import make_problem
from tests.conftest import source
from tests.oracle.tma_cases import CASES, CLUSTERS, multicast_kernel

MULTICAST = [c for c in CASES if getattr(c, "multicast", 0)]


def _multicast_load(text: str) -> tuple[ir.Kernel, ir.AsyncLoad]:
    kernel = driver.lower(driver.check(source(text)))
    (load,) = [s for s in walk(kernel.body) if isinstance(s, ir.AsyncLoad) and s.multicast > 1
               and s.dst.buffer == "s"]
    return kernel, load


@pytest.mark.parametrize("case", MULTICAST, ids=[c.name for c in MULTICAST])
def test_each_rank_issues_the_part_cute_gives_it(tma, case):
    kernel, load = _multicast_load(case.kernel())
    assert load.multicast == case.multicast
    buf = kernel.buffer(load.dst.buffer)
    for rank in range(case.multicast):
        assert multicast_slice(buf, load, rank) == tma[case.name][f"slice {rank}"], rank


@pytest.mark.parametrize("case", CLUSTERS, ids=[c.name for c in CLUSTERS])
def test_cluster_ranks_and_masks_match_cute(tma, case):
    """Ranks: the simulator's blocks of one cluster (codegen reads the rank from
    %cluster_ctarank). Mask: the compiler's for a load shared along the axis."""
    x, y, _ = case.shape
    kernel, load = _multicast_load(multicast_kernel(f"c_{case.name}", "bf16", (64, 64), " swizzle 128B",
                                                    (x, y)))
    problem = make_problem(kernel, {"R": 64, "C": 64, "M": 64 * x, "N": 64 * y})
    cute = tma[f"cluster {case.name}"]
    first = problem.clusters()[0]
    assert len(first) == x * y
    for block in first:
        rank, mask = cute[(block["m"], block["n"], 0)]
        assert block["@rank"] == rank
        assert load.multicast_mask == mask
