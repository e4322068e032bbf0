"""The targets hopperc builds for, and the defaults the commands share.

Kept free of the compiler's heavy modules so that the command line can check
`--arch` (and answer `--help`) without loading the parser or the passes.
"""
from __future__ import annotations

from hopperc.diagnostics import CompileError

DEFAULT_ARCH = "sm_90a"
# wgmma, setmaxnreg and the TMA forms hopperc emits exist only on sm_90a; a cubin
# (not PTX for a virtual compute_ target) is what the runtime loads.
SUPPORTED_ARCHS = ("sm_90a",)
DEFAULT_SEEDS = 16
DEFAULT_SEARCH = 3000  # schedules of the exhaustive search before it stops
# Steps of one `check` (scheduler steps: a warp running to its next
# synchronization, an asynchronous operation completing; and loop iterations).
DEFAULT_STEPS = 1_000_000


class UnsupportedArchError(CompileError, ValueError):
    """A target other than sm_90a: the user's input, refused before any work."""

    rule = "input"


def check_arch(arch: str) -> None:
    if arch not in SUPPORTED_ARCHS:
        raise UnsupportedArchError(
            None, f"unsupported target architecture {arch!r}: hopperc generates wgmma, "
                  f"setmaxnreg and TMA code, which only {', '.join(SUPPORTED_ARCHS)} runs",
            file="--arch")
