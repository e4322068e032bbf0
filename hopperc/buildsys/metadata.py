"""Launch metadata: everything a host program needs to launch a built cubin.

Written as JSON beside the cubin; the schema is documented in docs/metadata.md
and versioned by the `schema` field.
"""
from __future__ import annotations

from typing import Any

from hopperc import __version__
from hopperc.backend.nvrtc import Resources
from hopperc.codegen.launch import LaunchInfo
from hopperc.codegen.names import kernel_symbol
from hopperc.ir import nodes as ir
from hopperc.ir.printer import scalar as print_scalar
from hopperc.ir.raster import launch_grid
from hopperc.runtime import ragged_view
from hopperc.runtime.launch_rules import GridShape, extent_text

SCHEMA = "hopperc.launch/3"
GRID_AXES = ("x", "y", "z")
_DATA_TYPE_NAMES = {
    ir.DType.BF16: "BFLOAT16", ir.DType.F16: "FLOAT16", ir.DType.F32: "FLOAT32",
    ir.DType.E4M3: "UINT8", ir.DType.E5M2: "UINT8", ir.DType.I32: "INT32",
}


def launch_metadata(kernel: ir.Kernel, launch: LaunchInfo, source: str, arch: str,
                    defines: dict[str, int], resources: Resources | None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "compiler": f"hopperc {__version__}",
        "source": source,
        "arch": arch,
        "kernel": kernel.name,
        "symbol": kernel_symbol(kernel.name),
        "block": [kernel.threads, 1, 1],
        "cluster": list(kernel.cluster),
        "grid": [_grid_axis(axis, shape) for axis, shape in
                 zip(kernel.grid, launch_grid(kernel.grid))],
        # persistent: launch min(SMs, tiles) blocks along x (one per SM for a ragged
        # grid); each loops over tiles
        "persistent": kernel.persistent,
        "dynamic_shared_memory_bytes": launch.dynamic_shared_bytes,
        "constants": dict(kernel.consts),
        "defines": dict(defines),
        "tensors": [{"name": t.name, "dtype": t.dtype.text, "dims": list(t.dims)}
                    for t in kernel.tensors],
        "params": [_param(p, kernel) for p in launch.params],
        "tensor_maps": [_tensor_map(m) for m in launch.tensor_maps],
        "resources": None if resources is None else {
            "registers": resources.registers, "spill_stores": resources.spill_stores,
            "spill_loads": resources.spill_loads, "stack_bytes": resources.stack_bytes,
        },
    }


def _grid_axis(axis: ir.GridAxis, shape: GridShape) -> dict[str, Any]:
    return {"axis": GRID_AXES[shape.axis], "name": axis.name, "tiles": shape.extent,
            "extent": print_scalar(axis.extent) if shape.extent is None
            else extent_text(shape.extent)}


def _param(p, kernel: ir.Kernel) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": p.name, "kind": p.kind}
    if p.tensor is not None:
        entry["tensor"] = p.tensor
        entry["dtype"] = kernel.tensor(p.tensor).dtype.text
    if p.kind in ("dim", "scalar"):
        entry["ctype"] = p.ctype
    return entry


def _tensor_map(m) -> dict[str, Any]:
    box = m.box if m.ragged is None else ragged_view.view_box(m.box)
    ragged = {} if m.ragged is None else {"ragged": {
        "dim": m.ragged, "rows": ragged_view.ROWS, "lead": ragged_view.LEAD,
        "wrap": ragged_view.WRAP}}
    return {
        "param": m.param,
        "tensor": m.tensor,
        "dtype": m.dtype.text,
        "data_type": f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPE_NAMES[m.dtype]}",
        "rank": len(box),
        "box": list(reversed(box)),
        "box_shape": list(box),
        "element_strides": [1] * len(box),
        **ragged,
        "swizzle": m.swizzle.text,
        "swizzle_enum": f"CU_TENSOR_MAP_SWIZZLE_{m.swizzle.text.upper()}",
        "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE",
        "l2_promotion": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        "oob_fill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
    }
