"""What the build tests share: small kernels and a library of their variants."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

TMA_COPY = (ROOT / "samples" / "tma_copy.hk").read_text()
SCALE_ROWS = (ROOT / "samples" / "scale_rows.hk").read_text()


# Two variants of a source that fails at one line (a tensor the kernel lacks).
FAILING_VARIANTS = """[[kernel]]
source = "copy.hk"
defines = { BN = 64 }
[[kernel.variant]]
name = "copy_bm32"
defines = { BM = 32 }
[[kernel.variant]]
name = "copy_bm256"
defines = { BM = 256 }
"""
FAILING_SOURCES = {"copy.hk": TMA_COPY.replace("tma buf <- X", "tma buf <- Z")}


def write_library(directory: Path, body: str, kernels: dict[str, str] | None = None) -> Path:
    """`directory/kernels.toml` with `body`, beside the .hk files it names."""
    for name, text in (kernels or {"copy.hk": TMA_COPY, "scale.hk": SCALE_ROWS}).items():
        (directory / name).write_text(text)
    path = directory / "kernels.toml"
    path.write_text(body)
    return path


THREE_VARIANTS = '''
[[kernel]]
source = "copy.hk"

[[kernel]]
source = "scale.hk"
defines = { BN = 64 }

[[kernel.variant]]
name = "scale_bm64"
defines = { BM = 64 }

[[kernel.variant]]
name = "scale_bm128"
defines = { BM = 128 }
'''


def hopperc(*args: str, cwd: Path, cache: Path | None = None, **env: str):
    """`python -m hopperc ARGS` with its own cache directory (and other variables)."""
    import os
    import subprocess
    import sys

    environment = {**os.environ, **env}
    if cache is not None:
        environment["HOPPERC_CACHE_DIR"] = str(cache)
    return subprocess.run([sys.executable, "-m", "hopperc", *args], capture_output=True,
                          text=True, cwd=cwd, env=environment)
