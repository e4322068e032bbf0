"""What a warp hands to the asynchronous units: TMA and bulk loads (a
multicast delivered to each block of the cluster), bulk stores (one in-order
queue per issuing lane), and wgmma products, with a product's execution when the
scheduler completes it. A mixin of `warp.Warp`, whose state it uses: the block,
the warp's clock and environment, its register tiles and queues."""
from __future__ import annotations

from dataclasses import replace

from hopperc.ir import nodes as ir
from hopperc.ir.layout import multicast_slice
from hopperc.sim.block import InOrderQueue, Load, Product, Store
from hopperc.sim.findings import Category, fail, line
from hopperc.sim.memory import GlobalWrite, Site
from hopperc.sim.values import Clip, clipped_box, matrix_product
from hopperc.sim.views import Place


class AsyncIssue:
    def issue_load(self, stmt: ir.AsyncLoad, lanes) -> None:
        """A load with its mbarrier (the warp refuses one without)."""
        block, span = self.block, stmt.span
        index = self.value(stmt.barrier.index, lanes, span)
        place = self.place(stmt.dst, lanes, stmt.span)
        origin = tuple(self.value(c, lanes, span) for c in stmt.coords)
        clip = self.ragged_clip(stmt, origin, lanes)
        read = Site(f"{stmt.engine.label} load of '{stmt.tensor}'", span)
        block.global_writes.read(self.clock, stmt.tensor, origin,
                                 clipped_box(origin, stmt.box, clip), read, self, True)
        block.touch_global(stmt.tensor, origin, stmt.box, clip, False, read, "reads")
        box, nbytes, targets = stmt.box, stmt.nbytes, [block]
        if stmt.multicast > 1:  # this block's slice of rows, into every block's stage
            box, nbytes = stmt.issued_box, stmt.nbytes // stmt.multicast
            first_row, _ = multicast_slice(block.kernel.buffer(stmt.dst.buffer), stmt, block.rank)
            origin = (origin[0] + first_row, *origin[1:])
            place = replace(place, part=first_row // box[0], parts=stmt.multicast)
            targets = [block.peer(r, f"the multicast load{line(span)}", span)
                       for r in range(16) if stmt.multicast_mask >> r & 1]
        for target in targets:
            barrier = target.mbarrier(stmt.barrier.array, index, span)
            barrier.usable(f"{stmt.engine.label} load", self.clock, span)
            site = Site(f"{stmt.engine.label} load into {target.label}{self.label(place)}", span)
            agent = block.agents.add(f"{stmt.engine.label} load{line(span)}", generic=False)
            barrier.in_flight += 1
            target.loads.append(Load(agent, {**self.clock, agent: 1}, place, stmt.tensor, origin,
                                     box, nbytes, barrier, site, clip))
            block.event(self.name, span, f"issues {site.what} on {target.label}{barrier.name}")
        self.tick()

    def ragged_clip(self, stmt: ir.AsyncLoad | ir.AsyncStore, origin: tuple[int, ...],
                    lanes) -> Clip:
        """A ragged copy's (axis, END). Its tensor map's view clips rows at or past
        END but cannot clip below the tensor: a START < 0 would read or write the
        memory before it (runtime/ragged_view.py)."""
        if stmt.ragged is None:
            return None
        axis = stmt.ragged.dim
        if origin[axis] < 0:
            raise fail(Category.OUT_OF_RANGE, f"the {stmt.engine.label} "
                       f"{'load' if isinstance(stmt, ir.AsyncLoad) else stmt.verb} of "
                       f"'{stmt.tensor}' starts at element {origin[axis]} of dimension {axis}: "
                       "a START : END copy clips only at END, so its rows before 0 would "
                       "touch the memory before the tensor", stmt.span)
        return axis, self.value(stmt.ragged.end, lanes, stmt.span)

    def store_queue(self, lane: int) -> InOrderQueue:
        if lane not in self.stores:
            agents = self.block.agents
            self.stores[lane] = InOrderQueue(
                agents.add(f"bulk stores of {self.who} lane {lane}", False),
                writer=agents.add(f"global writes of {self.who} lane {lane}'s bulk stores",
                                  False))
        return self.stores[lane]

    def issue_store(self, stmt: ir.AsyncStore, lane: int) -> None:
        queue = self.store_queue(lane)
        place = self.place(stmt.src, (lane,), stmt.span)
        origin = tuple(self.value(c, (lane,), stmt.span) for c in stmt.coords)
        clip = self.ragged_clip(stmt, origin, (lane,))
        queue.issued += 1
        clock = {**self.clock, queue.agent: queue.issued}
        site = Site(f"{stmt.engine.label} {stmt.verb} from {self.label(place)}", stmt.span)
        queue.add(Store(clock, place, stmt.tensor, origin, stmt.box, site, clip=clip,
                        reduce_add=stmt.reduce_add))
        self.block.touch_global(stmt.tensor, origin, stmt.box, clip, stmt.reduce_add, site,
                                "stores")
        # Its global writes may land any time until a plain wait completes its group.
        self.block.global_writes.write(GlobalWrite(stmt.tensor, origin,
                                                   clipped_box(origin, stmt.box, clip),
                                                   queue.writer, queue.issued, site,
                                                   stmt.reduce_add), self.clock)
        self.block.event(self.name, stmt.span, f"issues {site.what}")
        self.tick()

    def issue_mma(self, stmt: ir.Mma, lanes) -> None:
        span = stmt.span
        used = [stmt.acc] + ([stmt.a.name] if isinstance(stmt.a, ir.TileRef) else [])
        if not self.fenced:
            raise fail(Category.MISSING_FENCE, "the warpgroup's first wgmma has no wgmma.fence "
                                               "before it", span)
        for tile in used:
            if tile in self.touched:
                raise fail(Category.MISSING_FENCE,
                           f"wgmma uses register tile '{tile}', which other code used"
                           f"{line(self.touched[tile])}, with no wgmma.fence in between",
                           span, self.touched[tile])
        a = stmt.a.name if isinstance(stmt.a, ir.TileRef) else self.place(stmt.a, lanes, span)
        b = self.place(stmt.b, lanes, span)
        queue = self.wgmma
        queue.issued += 1
        clock = {**self.clock, queue.agent: queue.issued}
        operands = " and ".join(self.label(p) for p in (a, b) if isinstance(p, Place))
        overwrite = stmt.overwrite_when is not None and self.value(stmt.overwrite_when, lanes, span)
        inputs = self.block.kernel.buffer(stmt.b.buffer).dtype
        queue.add(Product(clock, stmt.acc, a, b, inputs, stmt.accumulate and not overwrite,
                          Site(f"wgmma read of {operands}", span)))
        self.block.event(self.name, span, f"issues wgmma on {stmt.acc}")

    def run_product(self) -> None:
        """Execute this warp's oldest pending wgmma: its 16 rows of the product."""
        op: Product = self.wgmma.pending.popleft()
        space, memory = self.block.space, self.block.memory
        rows = slice(16 * (self.local % 4), 16 * (self.local % 4) + 16)
        if isinstance(op.a, Place):
            memory.read(self.wgmma.agent, op.clock, space.region(op.a), op.site,
                        space.dtype(op.a))
        memory.read(self.wgmma.agent, op.clock, space.region(op.b), op.site, space.dtype(op.b))
        if self.block.tensors is not None:
            a = space.view(op.a)[rows] if isinstance(op.a, Place) else self.tiles[op.a][rows]
            product = matrix_product(a, space.view(op.b), op.inputs)  # converts: no copy
            acc = self.tiles[op.acc]
            acc[rows] = (acc[rows] + product) if op.accumulate else product
        op.done = True
