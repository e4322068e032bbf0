"""What can go wrong when loading and launching a kernel, by whose fault."""
from __future__ import annotations

from hopperc.diagnostics import ToolchainError


class GpuUnavailable(ToolchainError):
    """No CUDA driver, no GPU, or a GPU that cannot run sm_90a code."""


class CudaError(ToolchainError):
    """A CUDA driver call failed; carries the call and the driver's error name."""

    def __init__(self, call: str, name: str, description: str):
        super().__init__(f"{call} failed: {name} ({description})")
        self.call = call
        self.name = name


class MetadataError(ValueError):
    """A cubin's launch metadata is missing, unreadable or of another schema."""


class ArgumentError(ValueError):
    """The arguments of a kernel call do not fit the kernel (shape, dtype, layout)."""
