"""commit_wgmma_batches

Requires: wgmma products in automatic code, not yet committed.
Establishes: each run of consecutive wgmma products (one product, or several
fused in one loop body) is closed by exactly one wgmma.commit_group, so they
complete as one batch and one wait covers them all.

Hardware rule: wgmma.mma_async is asynchronous; only wgmma.commit_group turns
the products issued so far into a group that wgmma.wait_group can wait for
(PTX ISA, wgmma.commit_group). A commit per product would make every later
wait count batches that could have been one.
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.rewrite import close_runs


def commit_wgmma_batches(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=close_runs(kernel.body, ir.Mma, _commit))


def _commit(run: list[ir.Stmt]) -> ir.WgmmaCommit:
    accs = ", ".join(dict.fromkeys(m.acc for m in run))
    return ir.WgmmaCommit(run[-1].span, ir.Reason(
        ir.Hazard.ASYNC_WRITE_READ, accs, "written by wgmma", run[0].span,
        f"{len(run)} product{'s' * (len(run) > 1)} tracked as one batch", None))
