"""The C++ identifier of every name in a kernel.

A `.hk` name may be any identifier: `int`, `main`, `threadIdx`, `j1` (NVRTC
declares the C math library), or `hk_warp`. Printed as is, it would fail to
compile or, worse, shadow a name the generated code relies on. So the
generated code uses two disjoint spaces, each closed by its prefix:

- every name from the source gets `u_` (`acc` -> `u_acc`): prefixing is
  injective, and neither C++, CUDA nor NVRTC's built-in declarations name
  anything `u_...` (their reserved names start with `__` or `_` + capital);
- every name the compiler makes starts with `hk_`: the prelude's helpers, the
  renderer's locals, and the names it derives from source names through a stem
  of their own (`hk_tile_`, `hk_tmap`, `hk_reg_`), which no fixed name starts with.
"""
from __future__ import annotations

USER_PREFIX = "u_"
COMPILER_PREFIX = "hk_"
GRID_STEM = "hk_tile_"
TENSOR_MAP_STEM = "hk_tmap"
CARRIED_STEM = "hk_reg_"
DERIVED_STEMS = (GRID_STEM, TENSOR_MAP_STEM, CARRIED_STEM)


def user(name: str) -> str:
    """A name from the source: tensor, dimension, scalar, tile, loop variable."""
    return USER_PREFIX + name


def kernel_symbol(name: str) -> str:
    """The kernel's `extern "C"` entry symbol, recorded in the launch metadata."""
    return user(name)


def grid_coordinate(axis: str) -> str:
    """The block's coordinate along grid axis `axis` (`tile.axis` in the source)."""
    return GRID_STEM + axis


def tensor_map(label: str) -> str:
    """The tensor-map parameter labelled `label` in the metadata (`tmap_X`, `tmap2_X`)."""
    return COMPILER_PREFIX + label


def carried(name: str) -> str:
    """A register the passes carry (a phase bit, a stage index)."""
    return CARRIED_STEM + name
