"""A forward dataflow rewriter over structured IR, shared by the sync passes.

A pass supplies a state (any hashable value), a join, and two hooks:
`before(stmt, state)` returns the statements to insert before `stmt` (which
sees the accesses of everything nested in it, so a sync needed by a loop as a
whole lands before the loop, not in every iteration) and the state after them;
`transfer(stmt, state)` steps over a leaf statement. Loops iterate to a
fixpoint; an if joins its branches; a role starts from the initial state.
A sync `before` puts ahead of a loop is kept only where it saves syncs: when
the loop entered without it gets the same syncs in its body and leaves the
same state (its body already orders that hazard before the access, on every
iteration), the sync ahead of it would only be paid once more.
A pingpong turn (the warpgroups of a role run its body in turn) gets its
syncs inside: its branches run on different warpgroups, at different times.
Manual code gets no sync inside it, but `before` sees its accesses (as any
thread's), and `manual` gives the state after it.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Generic, TypeVar

from hopperc.ir import nodes as ir
from hopperc.ir.accesses import walk
from hopperc.ir.raster import turn_warpgroups
from hopperc.ir.rewrite import scalar_op

S = TypeVar("S")


class ForwardRewrite(Generic[S]):
    def initial(self) -> S:
        raise NotImplementedError

    def join(self, a: S, b: S) -> S:
        raise NotImplementedError

    def before(self, stmt: ir.Stmt, state: S) -> tuple[list[ir.Stmt], S]:
        return [], state

    def transfer(self, stmt: ir.Stmt, state: S) -> S:
        return state

    def first_iteration(self, state: S, loop: ir.ForLoop) -> S:
        """The state before a loop, seen from its first iteration."""
        return state

    def next_iteration(self, state: S, loop: ir.ForLoop) -> S:
        """The state at the end of a loop body, seen from the next iteration."""
        return state

    def widen(self, entry: S, state: S) -> S:
        """The next entry state of a loop's fixpoint, from the last one and the
        state seen around the back edge. A pass whose syncs can shrink what
        flows around the loop when what enters grows joins the two, so the
        entries only grow and the fixpoint ends."""
        return state

    def last_iteration(self, state: S, loop: ir.ForLoop) -> S:
        """The state at the end of a loop body, seen after the loop."""
        return state

    def manual(self, region: ir.ManualRegion, state: S) -> S:
        """The state after hand-written code: nothing known, unless a pass that
        can follow its accesses says more."""
        return self.initial()

    def commitments(self) -> int:
        """How many syncs the pass has decided to put elsewhere than before the
        statement it is at (a fence before an earlier barrier): a loop that adds
        some when entered without a sync ahead of it needs that sync."""
        return 0

    def at_exit(self, state: S) -> list[ir.Stmt]:
        """Statements to append where a role (or the kernel) ends in `state`."""
        return []

    def place(self, out: list[ir.Stmt], inserted: list[ir.Stmt]) -> None:
        out.extend(inserted)

    # ---------------------------------------------------------------- driver
    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        # Each loop's result per entry state: an outer loop's fixpoint enters an
        # inner loop with the same state again and again, so nested loops cost
        # their depth times the distinct entry states, not 2^depth.
        self.loops: dict[tuple[int, S], tuple[ir.ForLoop, S]] = {}
        body, state = self.block(kernel.body, self.initial())
        if not any(isinstance(s, ir.RoleBlock) for s in body.stmts):
            body = ir.Block(body.stmts + tuple(self.at_exit(state)))
        return replace(kernel, body=body)

    def block(self, block: ir.Block, state: S) -> tuple[ir.Block, S]:
        out: list[ir.Stmt] = []
        for stmt in block.stmts:
            inserted, synced = ([], state) if turn_warpgroups(stmt) else self.before(stmt, state)
            if inserted and isinstance(stmt, ir.ForLoop) and self._needless(stmt, state, synced):
                inserted, synced = [], state
            state = synced
            self.place(out, inserted)
            if isinstance(stmt, ir.ManualRegion):
                state = self.manual(stmt, state)
            else:
                stmt, state = self.step(stmt, state)
            out.append(stmt)
        return ir.Block(tuple(out)), state

    def step(self, stmt: ir.Stmt, state: S) -> tuple[ir.Stmt, S]:
        match stmt:
            case ir.ForLoop():
                return self.loop(stmt, state)
            case ir.IfThen():
                then, s1 = self.block(stmt.then, state)
                orelse, s2 = self.block(stmt.orelse, state)
                return replace(stmt, then=then, orelse=orelse), self.join(s1, s2)
            case ir.RoleBlock():
                body, end = self.block(stmt.body, self.initial())
                body = ir.Block(body.stmts + tuple(self.at_exit(end)))
                return replace(stmt, body=body), state
            case ir.OneThread() | ir.ElectLane():
                body, state = self.block(stmt.body, state)
                return replace(stmt, body=body), state
        return stmt, self.transfer(stmt, state)

    def _needless(self, stmt: ir.ForLoop, state: S, synced: S) -> bool:
        """Whether the loop entered in `state` gets the syncs it gets entered in
        `synced` (the state after the syncs `before` would put ahead of it), at
        the same places, and ends in the same state."""
        committed = self.commitments()
        raw, raw_end = self.loop(stmt, state)
        if self.commitments() != committed:
            return False
        kept, kept_end = self.loop(stmt, synced)
        return raw_end == kept_end and _skeleton(raw) == _skeleton(kept)

    def loop(self, stmt: ir.ForLoop, state: S) -> tuple[ir.ForLoop, S]:
        key = (id(stmt), state)
        if key not in self.loops:
            first = entry = self.first_iteration(state, stmt)
            while True:
                body, end = self.block(stmt.body, entry)
                widened = self.widen(entry, self.join(first, self.next_iteration(end, stmt)))
                if widened == entry:
                    break
                entry = widened
            # The loop runs zero times (the state before it) or ends after a last iteration.
            end = self.last_iteration(end, stmt)
            after = end if runs_at_least_once(stmt) else self.join(state, end)
            self.loops[key] = replace(stmt, body=body), after
        return self.loops[key]


def runs_at_least_once(loop: ir.ForLoop) -> bool:
    """Whether the loop runs at least once: constant bounds, start below stop."""
    start, stop = loop.start, loop.stop
    return all(isinstance(e, ir.Scalar) and e.kind is ir.ScalarKind.CONST for e in (start, stop)) \
        and start.value < stop.value


def runs_at_most_once(loop: ir.ForLoop) -> bool:
    """`for j in a .. min(a + 1, b)` (split_boundary_iterations' part that holds a
    first iteration apart): no iteration after the first."""
    stop, after_first = loop.stop, scalar_op("+", loop.start, ir.const(1))
    return isinstance(stop, ir.ScalarOp) and stop.op == "min" and after_first in (stop.left,
                                                                                  stop.right)


def overwrites_on_first_iteration(loop: ir.ForLoop) -> bool:
    """Whether a product of the loop overwrites its accumulator on the loop's
    first iteration (fold_zero_into_first_product)."""
    return any(isinstance(s, ir.Mma) and s.overwrite_when == loop.first_iteration
               for s in walk(loop.body))


def _skeleton(node) -> tuple:
    """A statement or block without the reasons of its syncs: what runs, where."""
    if isinstance(node, ir.Block):
        return tuple(_skeleton(s) for s in node.stmts)
    return (type(node), *(_skeleton(v) if isinstance(v, ir.Block) else v
                          for f in fields(node) if f.name != "reason"
                          for v in (getattr(node, f.name),)))


def insert_before_trailing(out: list[ir.Stmt], inserted: list[ir.Stmt],
                           kinds: tuple[type, ...]) -> None:
    """Insert before the trailing `kinds` statements of `out`: e.g. before the
    arrive.expect_tx that belongs to the load the inserted sync precedes."""
    at = len(out)
    while at > 0 and isinstance(out[at - 1], kinds):
        at -= 1
    out[at:at] = inserted
