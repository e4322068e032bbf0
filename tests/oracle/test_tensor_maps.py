"""cuTensorMapEncodeTiled's arguments: CuTe's make_tma_copy for a global tensor
and the shared box hopperc's load writes, recorded by the oracle program,
against hopperc's (launch metadata + runtime/tensor_maps.py) for the same
tensor."""
from __future__ import annotations

import pytest
from cuda.bindings import driver

from tests.oracle.tma_cases import CASES

ENUMS = {"data_type": driver.CUtensorMapDataType, "interleave": driver.CUtensorMapInterleave,
         "swizzle": driver.CUtensorMapSwizzle, "l2_promotion": driver.CUtensorMapL2promotion,
         "oob_fill": driver.CUtensorMapFloatOOBfill}
# Every argument that decides which bytes are read and where they land in
# shared memory (out-of-bounds fill included: it decides what lands for
# elements past the tensor's end). L2 promotion is left out: a cache hint
# that moves no byte, which each side may tune on its own (both use 128B today).
LAYOUT_FIELDS = ("data_type", "rank", "global_address", "global_dim", "global_strides",
                 "box_dim", "element_strides", "interleave", "swizzle", "oob_fill")
CUTE_NAMES = {"global_address": "address"}


def hopperc_values(args, field: str) -> tuple[int, ...]:
    value = getattr(args, field)
    if field in ENUMS:
        return (int(getattr(ENUMS[field], value)),)
    return tuple(value) if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tensor_map_arguments_match_cute(tma, case):
    cute = tma[case.name]
    ours = case.hopperc_args()
    mismatched = {f: (cute[CUTE_NAMES.get(f, f)], hopperc_values(ours, f))
                  for f in LAYOUT_FIELDS
                  if cute[CUTE_NAMES.get(f, f)] != hopperc_values(ours, f)}
    assert not mismatched, f"(CuTe, hopperc) differ in {mismatched}"
