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

import re

USER_PREFIX = "u_"
COMPILER_PREFIX = "hk_"
GRID_STEM = "hk_tile_"
TENSOR_MAP_STEM = "hk_tmap"
CARRIED_STEM = "hk_reg_"
ELEMENT_STEM = "hk_elem_"
DERIVED_STEMS = (GRID_STEM, TENSOR_MAP_STEM, CARRIED_STEM, ELEMENT_STEM)


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


def element_reader(tensor: str) -> str:
    """The kernel's function reading one element of `tensor` (a TensorElement)."""
    return ELEMENT_STEM + tensor


def carried(name: str) -> str:
    """A register the passes carry (a phase bit, a stage index)."""
    return CARRIED_STEM + name


_GENERATED = re.compile(rf"\b({re.escape(USER_PREFIX)}|{re.escape(COMPILER_PREFIX)})(\w+)")


def in_source_words(text: str) -> tuple[str, tuple[str, ...], bool]:
    """`text`, a message of NVRTC's about the generated code, with each source name
    as the source spells it (`u_acc` -> `acc`, the prefix's inverse); the source
    names it mentions, in order; and whether it names something only the compiler
    made (an `hk_` name: code no edit of the source changes)."""
    named: list[str] = []
    generated = False

    def back(match: re.Match) -> str:
        nonlocal generated
        if match[1] == COMPILER_PREFIX:
            generated = True
            return match[0]
        named.append(match[2])
        return match[2]

    return _GENERATED.sub(back, text), tuple(named), generated


_VARIABLE = re.compile(r'variable "(\w+)"')


def source_warning(message: str, line: int, declared: dict[str, int]) -> tuple[str, int] | None:
    """NVRTC's warning `message` at `line` of the .hk file as the user can act on it:
    in source names, and a warning about a variable at the variable's declaration
    (NVRTC puts "declared but never referenced" at the end of its scope). None for a
    warning about what only the compiler made."""
    text, named, generated = in_source_words(message)
    if generated:
        return None
    variable = _VARIABLE.search(text)
    if variable and variable[1] in named and variable[1] in declared:
        line = declared[variable[1]]
    return text, line
