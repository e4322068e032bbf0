"""The launch metadata a cubin comes with (docs/metadata.md), read back into
typed records. Everything a launch needs is checked here, once, so a stale or
foreign JSON file fails at load with the field it lacks, not at launch."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda.bindings import driver

from hopperc.ir.dtypes import DType
from hopperc.runtime import ragged_view
from hopperc.runtime.errors import MetadataError
from hopperc.runtime.launch_rules import Extent, evaluate_extent, extent_names

SCHEMA = "hopperc.launch/3"
PARAM_KINDS = ("tensor_map", "pointer", "dim", "scalar")
SCALAR_CTYPES = ("float", "int")
RAGGED_BLOCKS = 132  # an H100 SXM's SMs: a ragged grid's blocks where the device is unknown


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: DType
    dims: tuple[str | int, ...]  # a runtime dimension's name, or a fixed extent


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str  # one of PARAM_KINDS
    tensor: str | None = None
    ctype: str | None = None


@dataclass(frozen=True)
class TensorMapSpec:
    """The arguments of cuTensorMapEncodeTiled that the kernel fixes (innermost first)."""

    param: str
    tensor: str
    data_type: str
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: str
    interleave: str
    l2_promotion: str
    oob_fill: str
    # A ragged copy's map: the tensor dimension (outermost first) its view clips
    # (runtime/ragged_view.py); `box` and `element_strides` are the view's.
    ragged: int | None = None


@dataclass(frozen=True)
class GridSpec:
    name: str
    tiles: Extent | None  # None: a ragged axis (its extent depends on the data)

    def extent(self, values: dict[str, int]) -> int:
        assert self.tiles is not None, "a ragged axis has no extent the host knows"
        return evaluate_extent(self.tiles, values)


@dataclass(frozen=True)
class LaunchSpec:
    kernel: str  # the kernel's name in its source
    symbol: str  # its entry symbol in the cubin
    arch: str
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    grid: tuple[GridSpec, ...]
    dynamic_shared_bytes: int
    tensors: tuple[TensorSpec, ...]
    scalars: tuple[ParamSpec, ...]
    params: tuple[ParamSpec, ...]
    tensor_maps: tuple[TensorMapSpec, ...]
    persistent: bool = False  # the grid is min(SMs, tiles) blocks, each looping over tiles

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.kind == "dim")

    def tensor(self, name: str) -> TensorSpec:
        return next(t for t in self.tensors if t.name == name)

    def tensor_map(self, param: str) -> TensorMapSpec:
        return next(m for m in self.tensor_maps if m.param == param)

    @property
    def ragged(self) -> bool:
        return any(axis.tiles is None for axis in self.grid)

    def grid_dims(self, dims: dict[str, int], sms: int | None = None,
                  scalars: dict[str, int] | None = None) -> tuple[int, int, int]:
        """The launch grid; a persistent kernel's is one block per SM (`sms`; one per
        tile when unknown), never more blocks than tiles; with clusters of C blocks
        (along x), as many whole clusters as fit, never more than runs of C tiles.
        A ragged grid's tiles are known only to the kernel: one block per SM
        (RAGGED_BLOCKS when unknown)."""
        if self.ragged:
            return (sms or RAGGED_BLOCKS, 1, 1)
        extents = [axis.extent({**dims, **(scalars or {})}) for axis in self.grid]
        if self.persistent:
            size = self.cluster[0]
            runs = math.prod([-(-extents[0] // size), *extents[1:]])
            clusters = min(runs, max(1, sms // size)) if sms else runs
            return (clusters * size, 1, 1)
        return tuple(extents + [1] * (3 - len(extents)))  # type: ignore[return-value]


def read_spec(path: str | Path) -> LaunchSpec:
    """The metadata JSON at `path` (NAME.json beside NAME.cubin)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MetadataError(f"{path}: no launch metadata (hopperc build writes it beside "
                            "the cubin)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"{path}: unreadable launch metadata ({exc})") from None
    return parse_spec(record, str(path))


def parse_spec(record: Any, where: str = "launch metadata") -> LaunchSpec:
    if not isinstance(record, dict):
        raise MetadataError(f"{where}: expected a JSON object")
    if record.get("schema") != SCHEMA:
        raise MetadataError(f"{where}: schema {record.get('schema')!r}, this runtime reads "
                            f"{SCHEMA!r}; rebuild the kernel with this hopperc")
    try:
        return _spec(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"{where}: malformed launch metadata ({type(exc).__name__}: "
                            f"{exc})") from None


def _spec(r: dict[str, Any]) -> LaunchSpec:
    tensors = tuple(TensorSpec(t["name"], _dtype(t["dtype"]),
                               tuple(d if isinstance(d, int) else str(d) for d in t["dims"]))
                    for t in r["tensors"])
    params = tuple(ParamSpec(p["name"], p["kind"], p.get("tensor"), p.get("ctype"))
                   for p in r["params"])
    names = {t.name for t in tensors}
    for p in params:
        if p.kind not in PARAM_KINDS:
            raise ValueError(f"parameter {p.name}: unknown kind {p.kind!r}")
        if p.kind in ("tensor_map", "pointer") and p.tensor not in names:
            raise ValueError(f"parameter {p.name}: unknown tensor {p.tensor!r}")
        if p.kind == "scalar" and p.ctype not in SCALAR_CTYPES:
            raise ValueError(f"parameter {p.name}: unsupported scalar type {p.ctype!r}")
    maps = tuple(TensorMapSpec(
        m["param"], m["tensor"], _enum(driver.CUtensorMapDataType, m["data_type"]),
        _ints(m["box"]), _ints(m["element_strides"]),
        _enum(driver.CUtensorMapSwizzle, m["swizzle_enum"]),
        _enum(driver.CUtensorMapInterleave, m["interleave"]),
        _enum(driver.CUtensorMapL2promotion, m["l2_promotion"]),
        _enum(driver.CUtensorMapFloatOOBfill, m["oob_fill"]), _ragged(m))
        for m in r["tensor_maps"])
    for p in params:
        if p.kind == "tensor_map" and all(m.param != p.name for m in maps):
            raise ValueError(f"parameter {p.name}: no tensor_maps entry")
    grid = tuple(GridSpec(g["name"], g["tiles"]) for g in r["grid"])
    known = {p.name for p in params if p.kind == "dim" or p.kind == "scalar" and p.ctype == "int"}
    for axis in grid:
        if axis.tiles is not None and not set(extent_names(axis.tiles)) <= known:
            raise ValueError(f"grid axis {axis.name}: its extent reads an unknown name")
    return LaunchSpec(
        kernel=str(r["kernel"]), symbol=str(r["symbol"]), arch=str(r["arch"]),
        block=_triple(r["block"]), cluster=_triple(r["cluster"]), grid=grid,
        dynamic_shared_bytes=int(r["dynamic_shared_memory_bytes"]), tensors=tensors,
        scalars=tuple(p for p in params if p.kind == "scalar"), params=params,
        tensor_maps=maps, persistent=bool(r.get("persistent", False)))


def _ragged(m: dict[str, Any]) -> int | None:
    """A ragged map's clipped dimension; its view's constants must be this
    runtime's (a map built with others would clip elsewhere)."""
    if "ragged" not in m:
        return None
    r = m["ragged"]
    if (r["rows"], r["lead"], r["wrap"]) != (ragged_view.ROWS, ragged_view.LEAD,
                                             ragged_view.WRAP):
        raise ValueError(f"tensor map {m['param']}: ragged view constants {r!r} differ from "
                         "this runtime's")
    dim = r["dim"]
    if not isinstance(dim, int) or not 0 <= dim < len(m["box"]) - ragged_view.EXTRA_DIMS - 1:
        raise ValueError(f"tensor map {m['param']}: bad ragged dimension {dim!r}")
    return dim


def _dtype(text) -> DType:
    for dtype in DType:
        if dtype.text == text:
            return dtype
    raise ValueError(f"unknown element type {text!r}")


def _enum(enum, name) -> str:
    """`name` if it names a member of the driver enum `enum`."""
    if not isinstance(name, str) or not isinstance(getattr(enum, name, None), enum):
        raise ValueError(f"{name!r} is not a {enum.__name__}")
    return name


def _ints(values) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(isinstance(v, int) for v in values):
        raise ValueError(f"expected a list of integers, got {values!r}")
    return tuple(values)


def _triple(values) -> tuple[int, int, int]:
    ints = _ints(values)
    if len(ints) != 3 or min(ints) < 1:
        raise ValueError(f"expected three positive integers, got {values!r}")
    return ints  # type: ignore[return-value]
