"""The pass pipeline: one ordered table, used by the driver, `emit --after`,
`explain` and the tests. Each pass is IR -> IR; the verifier runs after each."""
from __future__ import annotations

from typing import Callable

from hopperc.ir import nodes as ir
from hopperc.passes.allocate_load_barriers import allocate_load_barriers
from hopperc.passes.commit_wgmma_batches import commit_wgmma_batches
from hopperc.passes.complete_async_loads import complete_async_loads
from hopperc.passes.complete_bulk_stores import complete_bulk_stores
from hopperc.passes.connect_role_pipelines import connect_role_pipelines
from hopperc.passes.elect_async_issue import elect_async_issue
from hopperc.passes.initialize_mbarriers import initialize_mbarriers
from hopperc.passes.insert_barriers import insert_barriers
from hopperc.passes.insert_proxy_fences import insert_proxy_fences
from hopperc.passes.insert_wgmma_fences import insert_wgmma_fences
from hopperc.passes.invalidate_pipeline_barriers import invalidate_pipeline_barriers
from hopperc.passes.reallocate_registers import reallocate_registers
from hopperc.passes.wait_wgmma_batches import wait_wgmma_batches

Pass = Callable[[ir.Kernel], ir.Kernel]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    ("connect_role_pipelines", connect_role_pipelines),
    ("allocate_load_barriers", allocate_load_barriers),
    ("initialize_mbarriers", initialize_mbarriers),
    ("complete_async_loads", complete_async_loads),
    ("commit_wgmma_batches", commit_wgmma_batches),
    ("wait_wgmma_batches", wait_wgmma_batches),
    ("complete_bulk_stores", complete_bulk_stores),
    ("insert_barriers", insert_barriers),
    ("insert_proxy_fences", insert_proxy_fences),
    ("insert_wgmma_fences", insert_wgmma_fences),
    ("invalidate_pipeline_barriers", invalidate_pipeline_barriers),
    ("reallocate_registers", reallocate_registers),
    ("elect_async_issue", elect_async_issue),
)

PASS_NAMES: tuple[str, ...] = tuple(name for name, _ in PIPELINE)
