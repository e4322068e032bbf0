"""reallocate_registers

Requires: roles with register budgets (`regs`), padded to whole warpgroups
by the front end, which also checked that the budgets fit the register file.
Establishes: each budgeted role starts with `setmaxnreg.dec` (a budget below
what every thread gets at launch) or `setmaxnreg.inc` (above it), executed by
every warp of its warpgroups, padding warps included; a budget equal to the
launch share needs none.

Hardware rule: `__launch_bounds__(threads, 1)` caps each thread at its share
of the 64K-register file (rounded down to a multiple of 8); setmaxnreg moves a
warpgroup's registers to or from the pool, so producers must release theirs
(.dec) for consumers to grow (.inc); all threads of the warpgroup execute the
same one (PTX ISA, setmaxnreg).
"""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.layout import launch_registers


def reallocate_registers(kernel: ir.Kernel) -> ir.Kernel:
    at_launch = launch_registers(kernel.threads)
    body = []
    for stmt in kernel.body.stmts:
        if isinstance(stmt, ir.RoleBlock) and stmt.role.regs not in (None, at_launch):
            role = stmt.role
            reason = ir.Reason(ir.Hazard.REGISTER_BUDGET, role.name,
                               f"{at_launch} registers per thread at launch ({kernel.threads} "
                               "threads)", None, f"budget regs {role.regs}", role.span)
            grow = ir.SetMaxRegisters(role.regs, role.regs > at_launch, role.span, reason)
            stmt = replace(stmt, body=ir.Block((grow,) + stmt.body.stmts))
        body.append(stmt)
    return replace(kernel, body=ir.Block(tuple(body)))
