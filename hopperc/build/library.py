"""Kernel library files: the TOML a CI script keeps beside its `.hk` files,
listing each kernel, its `-D` variants and their output names.

    [[kernel]]
    source = "gemm_bf16.hk"          # relative to the library file
    name = "gemm_bf16"               # output base name (default: the source's stem)
    defines = { STAGES = 4 }         # -D values for every variant (optional)

    [[kernel.variant]]               # optional: one build per variant
    name = "gemm_bf16_bn64"
    defines = { BN = 64 }            # merged over the kernel's defines

Read with the standard `tomllib`. Every mistake (a missing key, an unknown
one, a define that is not an integer) is the user's, named with the kernel.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from hopperc.diagnostics import CompileError, read_input

_KERNEL_KEYS = {"source", "name", "defines", "variant"}
_VARIANT_KEYS = {"name", "defines"}


class LibraryError(CompileError):
    rule = "library"


@dataclass(frozen=True)
class LibraryKernel:
    """One build the library asks for: a source, its defines, its output name."""

    source: Path
    name: str
    defines: dict[str, int] = field(default_factory=dict)


def read_library(path: Path) -> list[LibraryKernel]:
    text = read_input(path)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LibraryError(None, f"not valid TOML: {exc}", file=str(path)) from None
    unknown = set(table) - {"kernel"}
    if unknown:
        _fail(path, f"unknown top-level key {sorted(unknown)[0]!r} (a library has "
                    "[[kernel]] tables)")
    kernels = table.get("kernel", [])
    if not isinstance(kernels, list) or not kernels:
        _fail(path, "no kernels: add a [[kernel]] table with a source")
    builds = []
    for number, kernel in enumerate(kernels, 1):
        builds += _kernel_builds(path, number, kernel)
    return builds


def _kernel_builds(path: Path, number: int, kernel: dict) -> list[LibraryKernel]:
    source = kernel.get("source") if isinstance(kernel, dict) else None
    where = f"kernel {number}" + (f" ({source})" if isinstance(source, str) else "")
    _check_keys(path, where, kernel, _KERNEL_KEYS)
    if not isinstance(source, str) or not source:
        _fail(path, f"{where}: 'source' (the .hk file, relative to the library) is missing")
    source_path = path.parent / source
    base = _name(path, where, kernel.get("name", Path(source).stem))
    defines = _defines(path, where, kernel.get("defines", {}))
    variants = kernel.get("variant")
    if variants is None:
        return [LibraryKernel(source_path, base, defines)]
    if not isinstance(variants, list) or not variants:
        _fail(path, f"{where}: 'variant' must be [[kernel.variant]] tables")
    builds = []
    for index, variant in enumerate(variants, 1):
        at = f"{where}, variant {index}"
        _check_keys(path, at, variant, _VARIANT_KEYS)
        if "name" not in variant:
            _fail(path, f"{at}: each variant needs a 'name' (its output base name)")
        builds.append(LibraryKernel(source_path, _name(path, at, variant["name"]),
                                    {**defines, **_defines(path, at, variant.get("defines",
                                                                                 {}))}))
    return builds


def _check_keys(path: Path, where: str, table, allowed: set[str]) -> None:
    if not isinstance(table, dict):
        _fail(path, f"{where}: expected a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        _fail(path, f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(allowed))})")


def _name(path: Path, where: str, name) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        _fail(path, f"{where}: 'name' must be a file base name, not {name!r}")
    return name


def _defines(path: Path, where: str, defines) -> dict[str, int]:
    if not isinstance(defines, dict):
        _fail(path, f"{where}: 'defines' must be a table like {{ BM = 128 }}")
    for key, value in defines.items():
        if not key.isidentifier():
            _fail(path, f"{where}: define {key!r} is not a name")
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, f"{where}: define {key} must be an integer, not {value!r}")
    return dict(defines)


def _fail(path: Path, message: str):
    raise LibraryError(None, message, file=str(path))
