"""The pass pipeline: one ordered table, used by the driver, `emit --after`,
`explain` and the tests. Each pass is IR -> IR; the verifier runs after each.

Each name is both the module under `hopperc/passes/` and the function in it.
The modules load on first use, so the command line can offer the names
(`emit --after`) without loading the compiler.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import import_module
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from hopperc.ir import nodes as ir

    Pass = Callable[[ir.Kernel], ir.Kernel]

PASS_NAMES: tuple[str, ...] = (
    "fold_zero_into_first_product",
    "defer_row_sums",
    "connect_role_pipelines",
    "pipeline_one_role_rings",
    "multicast_cluster_loads",
    "allocate_load_barriers",
    "initialize_mbarriers",
    "complete_async_loads",
    "commit_wgmma_batches",
    "wait_wgmma_batches",
    "drop_implied_stage_waits",
    "complete_bulk_stores",
    "insert_barriers",
    "order_pingpong_turns",
    "order_product_turns",
    "insert_proxy_fences",
    "drop_implied_refill_fences",
    "insert_wgmma_fences",
    "invalidate_pipeline_barriers",
    "reallocate_registers",
    "elect_async_issue",
    "order_semaphores",
    "split_boundary_iterations",
)


@lru_cache(maxsize=1)
def pipeline() -> tuple[tuple[str, Pass], ...]:
    """(name, pass) in order."""
    return tuple((name, getattr(import_module(f"{__name__}.{name}"), name))
                 for name in PASS_NAMES)
