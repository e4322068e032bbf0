"""Which blocks run in one schedule: a cluster at a time (each block's own
work, the fast path), or, for a kernel whose blocks wait on each other's flags,
every block of the grid together (`semaphores.py`)."""
from __future__ import annotations

from hopperc.sim.block import Program
from hopperc.sim.schedule import run_blocks, run_cluster
from hopperc.sim.semaphores import make_grid, uses_semaphores
from hopperc.sim.warp import Warp


def run_clusters(program: Program, clusters: list[list[dict[str, int]]], tensors, chooser,
                 writers=None, between=None) -> None:
    """Run the blocks of `clusters` (each cluster's block environments) to their
    end; raises SimFailure at the first finding (see `schedule.run_cluster`)."""
    if uses_semaphores(program.kernel):
        run_blocks(program, make_grid(program, clusters, tensors, writers, Warp,
                                      between=between), chooser, 0)
        return
    for index, envs in enumerate(clusters):
        run_cluster(program, envs, tensors, chooser, index, writers, between=between)


def searched_clusters(program: Program, clusters: list[list[dict[str, int]]]
                      ) -> list[list[dict[str, int]]]:
    """What the exhaustive search runs: block 0's cluster (the others run the same
    code on other tiles), or every block where they wait on each other."""
    return clusters if uses_semaphores(program.kernel) else clusters[:1]
