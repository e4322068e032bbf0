"""argmax's C++: (value, column) pairs in hk_v, hk_i, each step keeping the pair
hk_argmax_takes (the prelude) prefers, a strict total order on pairs of distinct
columns whose greatest is numpy.argmax's, so slots, shuffles and warps may
combine in any order."""
from __future__ import annotations

from hopperc.codegen import names
from hopperc.ir import nodes as ir
from hopperc.ir.layout import tile_registers


def row_argmax(name: str, tile: ir.TileDef, integer: bool = False) -> str:
    """Slot hk_k of argmax of a wgmma-layout f32 tile, as f32 (as an int where
    `integer`: ir/integer_exprs.py): (value, column)
    pairs, the thread's slots of the row, then the quad's lanes (xor 1, 2), each
    step keeping the pair hk_argmax_takes prefers (the larger value, NaN above
    all, ties to the lower column: numpy.argmax), so the order is free."""
    tile_name = names.user(name)
    column = "(8 * (({0}) / 4) + 2 * (static_cast<int>(threadIdx.x) % 4) + ({0}) % 2)"
    return (f"[&] {{ float hk_v = {tile_name}[2 * hk_k]; int hk_i = {column.format('2 * hk_k')}; "
            f"for (int hk_s = 2 * hk_k + 1; hk_s < {tile_registers(tile)}; ++hk_s) "
            f"if ((hk_s / 2) % 2 == hk_k) "
            f"{argmax_keep(f'{tile_name}[hk_s]', column.format('hk_s'))} "
            f"{argmax_shuffle(1)} {argmax_shuffle(2)} return {column_value(integer)}; }}()")


def column_value(integer: bool) -> str:
    """argmax's result hk_i as the expression uses it: an int, or an f32."""
    return "hk_i" if integer else "static_cast<float>(hk_i)"


def argmax_keep(value: str, column: str) -> str:
    """Statement: (hk_v, hk_i) becomes (value, column) where argmax prefers it."""
    return (f"if (hk_argmax_takes({value}, {column}, hk_v, hk_i)) "
            f"{{ hk_v = {value}; hk_i = {column}; }}")


def argmax_shuffle(lane: int) -> str:
    """Statement: argmax's step with the pair of the lane `lane` away (xor)."""
    return (f"{{ const float hk_ov = __shfl_xor_sync(0xffffffffu, hk_v, {lane}); "
            f"const int hk_oi = __shfl_xor_sync(0xffffffffu, hk_i, {lane}); "
            f"{argmax_keep('hk_ov', 'hk_oi')} }}")
