"""The 32B/64B/128B swizzle as a function of the absolute shared address, from
CuTe's Swizzle<B,4,3> over every byte of 16 KB, against hopperc's device
helper, its Swizzle.row_mask and the simulator's chunk of every element."""
from __future__ import annotations

import pytest

from hopperc import driver
from hopperc.ir.dtypes import Swizzle
from hopperc.sim.views import CHUNK, Place, SharedSpace
from tests.conftest import source
from tests.oracle import layout_cases as tiled_layouts
from tests.oracle.gmma_cases import SWIZZLE_BYTES
from tests.oracle.hopperc_side import SWIZZLE_BITS

SWIZZLES = (Swizzle.B32, Swizzle.B64, Swizzle.B128)


def bits(swizzle: Swizzle) -> int:
    return SWIZZLE_BITS[swizzle.text]


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=str)
def test_device_helper_matches_cute(gmma, swizzle):
    found = gmma.output.swizzle[bits(swizzle)]
    assert len(found["cute"]) == SWIZZLE_BYTES
    assert found["hopperc"] == found["cute"]


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=str)
def test_row_mask_matches_cute(gmma, swizzle):
    """The 16-byte chunk index XOR the row bits `row_mask` selects, of the address
    (`Swizzle.of_address`, which the simulator uses)."""
    ours = [swizzle.of_address(a) for a in range(SWIZZLE_BYTES)]
    assert ours == gmma.output.swizzle[bits(swizzle)]["cute"]
    assert swizzle.alignment == 8 * swizzle.span  # the repeat of the pattern


# Buffers of every swizzle at offsets and stages that start on their repeat
# (1024/512/256 bytes), 1, 2 and 4 bytes per element, all within 16 KB.
BUFFERS = """kernel k(X: f32[M, N]) grid(m: 1) threads 128 {
    shared pad: f32[4, 32]
    shared w: bf16[16, 64] stages 2 swizzle 128B
    shared x: e4m3[8, 64] stages 3 swizzle 64B
    shared y: f32[16, 8] stages 2 swizzle 32B
    shared z: f32[8, 32] stages 2 swizzle 128B
}
"""


# Stages and planes that do not start on their swizzle's repeat: the pattern is
# that of the address, so stage 1 of `w` is not laid out like stage 0.
MISALIGNED = """kernel k(X: f32[M, N]) grid(m: 1) threads 128 {
    shared pad: f32[4, 32]
    shared w: bf16[4, 64] stages 3 swizzle 128B
    shared x: e4m3[2, 64] stages 3 swizzle 64B
    shared y: f32[2, 8] stages 3 swizzle 32B
    shared r: bf16[2, 4, 64] swizzle 128B
}
"""


@pytest.mark.parametrize("text, misaligned", [(BUFFERS, 0), (MISALIGNED, 6)],
                         ids=["aligned", "misaligned"])
def test_simulator_chunks_match_cute_over_absolute_addresses(gmma, text, misaligned):
    """Every element of every stage and plane: its chunk is where CuTe's swizzle of
    the address puts it."""
    kernel = driver.check(source(text))
    space = SharedSpace(kernel)
    off_repeat = 0
    for buf in kernel.buffers:
        if buf.swizzle is Swizzle.NONE:
            continue
        cute = gmma.output.swizzle[bits(buf.swizzle)]["cute"]
        planes = buf.shape[0] if len(buf.shape) == 3 else 1
        rows, cols = buf.shape[-2:]
        plane_bytes = rows * cols * buf.dtype.nbytes
        for stage in range(buf.stages):
            for plane in range(planes):
                start = space.offsets[buf.name] + stage * buf.stage_bytes + plane * plane_bytes
                assert start + plane_bytes <= SWIZZLE_BYTES
                off_repeat += start % buf.swizzle.alignment != 0
                place = Place(buf.name, stage, plane if planes > 1 else None, planes, False)
                _, chunks = space.index(place)
                for r in range(rows):
                    for c in range(cols):
                        address = start + (r * cols + c) * buf.dtype.nbytes
                        assert chunks[r, c] == cute[address] // CHUNK, (buf.name, stage, plane)
    assert off_repeat == misaligned


def test_wide_buffers_are_cutes_tile_of_swizzle_atoms(gmma):
    """A swizzled buffer wider than its span: the generated code's address of
    every element, and the simulator's chunk of it, are where CuTe's
    tile_to_shape of the K-major swizzle atom puts the element."""
    assert len(gmma.tiled) == 3
    space = SharedSpace(driver.check(source(tiled_layouts.WIDE)))
    for case in gmma.tiled:
        found = gmma.output.tiled[case.buffer]
        rows, cols = case.shape
        assert len(found["cute"]) == rows * cols
        assert found["hopperc"] == found["cute"], case.buffer
        _, chunks = space.index(Place(case.buffer, 0, None, 1, False))
        assert chunks.reshape(-1).tolist() == [a // CHUNK for a in found["cute"]], case.buffer
