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
one, a define that is not an integer) is the user's, named with the kernel and
located at its `[[kernel]]` line (a TOML syntax error at the line tomllib names).
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from hopperc.diagnostics import CompileError, SourceFile, Span, read_input

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
        at = _DECODE_POSITION.search(str(exc))
        span = Span(str(path), int(at[1]), int(at[2]), int(at[1]), int(at[2]) + 1) if at \
            else None
        raise LibraryError(span, f"not valid TOML: {exc}", file=str(path),
                           source=SourceFile(str(path), text)) from None
    unknown = set(table) - {"kernel"}
    if unknown:
        _fail(path, f"unknown top-level key {sorted(unknown)[0]!r} (a library has "
                    "[[kernel]] tables)")
    kernels = table.get("kernel", [])
    if not isinstance(kernels, list) or not kernels:
        _fail(path, "no kernels: add a [[kernel]] table with a source")
    builds = []
    for number, kernel in enumerate(kernels, 1):
        try:
            builds += _kernel_builds(path, number, kernel)
        except LibraryError as exc:
            line = _kernel_line(text, number)
            if line is None:
                raise
            header = Span(str(path), line, 1, line, len(text.split("\n")[line - 1]) + 1)
            raise LibraryError(header, exc.message, source=SourceFile(str(path), text)) \
                from None
    return builds


# tomllib names the place of a syntax error only in its message
_DECODE_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_KERNEL_HEADER = re.compile(r"^\s*\[\[\s*kernel\s*\]\]")


def _kernel_line(text: str, number: int) -> int | None:
    """The line of the `number`th `[[kernel]]` header (None where the kernels are
    written otherwise, e.g. as an inline array)."""
    headers = [n for n, line in enumerate(text.split("\n"), 1) if _KERNEL_HEADER.match(line)]
    return headers[number - 1] if number <= len(headers) else None


def _kernel_builds(path: Path, number: int, kernel: dict) -> list[LibraryKernel]:
    source = kernel.get("source") if isinstance(kernel, dict) else None
    where = f"kernel {number}" + (f" ({source})" if isinstance(source, str)
                                  and source.isprintable() else "")
    _check_keys(path, where, kernel, _KERNEL_KEYS)
    if not isinstance(source, str) or not source:
        _fail(path, f"{where}: 'source' (the .hk file, relative to the library) is missing")
    _check_path_text(path, where, "source", source)
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
    _check_path_text(path, where, "name", name)
    return name


def _check_path_text(path: Path, where: str, key: str, text: str) -> None:
    """A string that becomes a path (a source, an output name) can hold no NUL:
    the operating system's paths end at it (Python refuses it with ValueError)."""
    if "\0" in text:
        _fail(path, f"{where}: {key!r} holds a NUL character ({text!r}), which no path "
                    "can hold")


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
