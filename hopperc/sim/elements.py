"""What a warp's element-wise code does: each thread computes its elements of a
tile, a row vector or a shared view (generic proxy), reads shared memory, and
stores a row reduction's partials (RowPartials). A mixin of `warp.Warp`, whose
state it uses: the block, the warp's clock and lanes, its register tiles and its
wgmma queue (a tile may not be touched while a batch uses it)."""
from __future__ import annotations

import numpy as np

from hopperc.ir import nodes as ir
from hopperc.ir.layout import element_threads
from hopperc.sim.findings import Category, fail
from hopperc.sim.memory import Site
from hopperc.sim.row_stores import added_tile_elements, stored_elements, storing_rows
from hopperc.sim.tile_values import elementwise, operands, row_partials, vector_length
from hopperc.sim.values import added
from hopperc.sim.views import Place, owned_elements, owned_parts, owned_rows


class ElementCode:
    def elementwise(self, stmt, lanes) -> None:
        span = stmt.span
        if isinstance(stmt, ir.SharedStore):
            place = self.place(stmt.dst, lanes, stmt.span)
            shape, threads = self.block.space.shape(place), element_threads(self.running_threads)
            dtype, expr = self.block.space.buffers[place.buffer].dtype, stmt.value
        else:
            tile = self.block.program.tiles[stmt.name]
            shape, threads, dtype = tile.shape, tile.threads, tile.dtype
            expr = stmt.init if isinstance(stmt, ir.TileDef) else stmt.value
        parts = not isinstance(stmt, ir.SharedStore) and tile.layout is ir.Layout.ROW_PARTS
        self.check_parts_reads(expr, parts, span)
        row_store = isinstance(stmt, ir.SharedStore) and stmt.row_layout is not None
        if parts:
            shape = (shape[0], 4)  # each row's part in each lane of its quad
            owned = owned_parts(shape[0], threads, self.local, lanes)
        elif row_store:  # each row by one of the threads that hold it
            owned = storing_rows(stmt.row_layout, shape[0], stmt.row_threads, self.local, lanes)
        elif not isinstance(stmt, ir.SharedStore) and tile.layout is ir.Layout.ROWS:
            owned = owned_rows(shape[0], threads, self.local, lanes)
        elif not isinstance(stmt, ir.SharedStore) and tile.layout is ir.Layout.EVERY_ROW:
            owned = np.full(shape, bool(lanes))  # every thread holds every row
        else:
            owned = owned_elements(shape, threads, self.local, lanes)
        selection = (shape, threads, self.local, lanes)
        # A row vector's rows lie in other lanes than a tile's elements of one shape.
        region_key = selection + (stmt.row_layout if isinstance(stmt, ir.SharedStore)
                                  else tile.layout,)

        def use(name: str) -> None:
            self.register_use(name, span)

        def tile(name: str) -> np.ndarray:
            use(name)
            return self.tiles[name]

        def load(read: ir.SharedRead) -> Place:
            where = self.place(read.view, lanes, span)
            # A broadcast vector: every thread may read any of its values.
            region = self.block.space.region(where) if read.broadcast else \
                self.block.space.region(where, owned, region_key)
            self.block.memory.read(self.agent, self.clock, region,
                                   Site(f"ld.shared of {self.label(where)}", span),
                                   self.block.space.dtype(where))
            return where

        def shared(read: ir.SharedRead) -> np.ndarray:
            return self.block.space.read(load(read))

        def integer(e: ir.ScalarExpr) -> int:
            return self.value(e, lanes, span)

        row_vector = len(shape) == 1 and (row_store or not isinstance(stmt, ir.SharedStore))
        self.vector_reads(expr, shape, row_vector, integer, span)
        data = self.block.tensors is not None
        if data:
            values = elementwise(expr, shape, dtype, tile, shared, self.block.tensors, integer,
                                 row_vector, parts, self.block.program.integer_exact)
        else:
            operands(expr, use, load, integer)
        if isinstance(stmt, ir.SharedStore):
            chunks, writers = self.block.space.written(place, selection)
            self.block.memory.write(self.agent, self.clock, chunks,
                                    Site(f"st.shared of {self.label(place)}", span), writers,
                                    self.block.space.dtype(place))
            if data:
                self.block.space.write(place, values, owned)
        else:
            self.register_use(stmt.name, span)
            if data:
                old = self.tiles.get(stmt.name)
                self.tiles[stmt.name] = values.copy() if old is None else \
                    np.where(owned, values, old)

    def row_store(self, stmt: ir.GlobalRowStore, lanes) -> None:
        """The rows this warp's running lanes store (st.global, generic proxy), or
        of a tile's add the elements they hold: another thread's store of the same
        element must be ordered before it (adds among themselves need not be)."""
        span, block = stmt.span, self.block
        tensor = block.kernel.tensor(stmt.tensor)

        def tile(name: str) -> np.ndarray:
            self.register_use(name, span)
            return self.tiles[name]

        def shared_access(read: ir.SharedRead):
            where = self.place(read.view, lanes, span)  # a row reduction's partials
            block.memory.read(self.agent, self.clock, block.space.region(where),
                              Site(f"ld.shared of {self.label(where)}", span),
                              block.space.dtype(where))
            return where

        def shared(read: ir.SharedRead) -> np.ndarray:
            return block.space.read(shared_access(read))

        def integer(e: ir.ScalarExpr) -> int:
            return self.value(e, lanes, span)

        self.check_parts_reads(stmt.value, False, span)
        self.vector_reads(stmt.value, (stmt.rows, stmt.columns) if stmt.columns else
                          (stmt.rows,), not stmt.columns, integer, span)
        shape = tuple(self.env[d] if isinstance(d, str) else d for d in tensor.dims)
        if stmt.columns:  # a tile's add: each thread adds the elements it holds
            value_shape = (stmt.rows, stmt.columns)
            keep, index = added_tile_elements(stmt, shape, integer)
            mine = owned_elements(value_shape, stmt.threads, self.local, lanes)[keep]
            rows = tuple(np.nonzero(keep))
            rows, index = tuple(i[mine] for i in rows), tuple(i[mine] for i in index)
        else:
            value_shape = (stmt.rows,)
            rows, index = stored_elements(stmt, shape, integer)
            mine = storing_rows(stmt.layout, stmt.rows, stmt.threads, self.local, lanes)[rows]
            rows, index = rows[mine], tuple(i[mine] for i in index)
        if block.tensors is not None:
            values = elementwise(stmt.value, value_shape, tensor.dtype, tile, shared,
                                 block.tensors, integer, not stmt.columns,
                                 exact=block.program.integer_exact)
            if stmt.atomic:  # red.global.add: one add per element, rounded to its dtype
                block.tensors[stmt.tensor][index] = added(block.tensors[stmt.tensor][index],
                                                          values[rows], tensor.dtype)
            else:
                block.tensors[stmt.tensor][index] = values[rows]
            if stmt.tensor in block.writers:
                block.writers[stmt.tensor][index] = span
        else:
            # a run without data records the accesses only
            operands(stmt.value, lambda name: self.register_use(name, span), shared_access,
                     integer)
        op = "red.global.add" if stmt.atomic else "st.global"
        site = Site(f"{op} of '{stmt.tensor}' by {self.who}", span)
        written = zip(*(i.tolist() for i in index))
        block.global_writes.store(self.agent, self.clock, stmt.tensor, written, site,
                                  stmt.atomic)
        block.touch_elements(stmt.tensor, index, site, stmt.atomic)
        self.tick()

    def vector_reads(self, expr: ir.TileExpr, shape: tuple[int, ...], row_vector: bool,
                     integer, span) -> None:
        """The elements of 1-D tensors `expr` reads (ld.global), which a store of
        them in the kernel must be ordered against."""
        for vector in self.block.program.global_vectors(expr):
            length = vector_length(vector.axis, shape, row_vector)
            start = integer(vector.start)
            read = Site(f"ld.global of '{vector.tensor}'", span)
            self.block.global_writes.read(self.clock, vector.tensor, (start,), (length,), read,
                                          self)
            self.block.touch_global(vector.tensor, (start,), (length,), None, False, read,
                                    "reads")

    def row_partials(self, stmt: ir.RowPartials, lanes) -> None:
        """Lane 0 of this warp writes its row of the partials (codegen's RowPartials)."""
        place = self.place(stmt.partials, lanes, stmt.span)
        self.register_use(stmt.tile, stmt.span)
        mine = np.zeros(self.block.space.shape(place), dtype=bool)
        warps = mine.shape[0] // (2 if stmt.op == "argmax" else 1)
        mine[self.local % warps::warps] = True  # its row (argmax: and column) of its part
        chunks = self.block.space.region(place, mine, ("partials", self.local))
        self.block.memory.write(self.agent, self.clock, chunks,
                                Site(f"st.shared of {self.label(place)}", stmt.span),
                                np.ones(chunks.shape, dtype=np.uint32),
                                self.block.space.dtype(place))
        if self.block.tensors is not None:
            tile = self.block.program.tiles[stmt.tile]
            values = row_partials(stmt.op, self.tiles[stmt.tile], tile.threads, mine.shape[1])
            self.block.space.write(place, values, mine)

    def check_parts_reads(self, expr: ir.TileExpr, parts: bool, span) -> None:
        """A Layout.ROW_PARTS vector holds in each thread only its part of a row's
        value: read as that value (anywhere but its own updates, `parts`) without
        its quad's sum (RowPartsSum), each thread would see a different, partial
        value."""
        read = () if parts else self.block.program.parts_reads(expr)
        if read:
            raise fail(Category.WRONG_RESULT,
                       f"reads '{read[0]}', whose threads each hold a part of a row sum, as "
                       "the row's value: no quad sum of the parts comes first", span,
                       self.block.program.tiles[read[0]].span)

    def register_use(self, tile: str, span) -> None:
        """Element-wise code touching a tile: not while a wgmma batch may use it."""
        for op in self.wgmma.open + [op for group in self.wgmma.groups for op in group]:
            if tile in (op.acc, op.a):
                raise fail(Category.RACE, f"element-wise code uses register tile '{tile}' while "
                                          f"{op.site} may still use it: no wgmma.wait_group "
                                          "completes that batch first", span, op.site.span)
        self.touched.setdefault(tile, span)

