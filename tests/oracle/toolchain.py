"""Where the oracle's compilers and headers are: g++ and nvcc on PATH, CuTe's
headers from the installed nvidia-cutlass wheel, CUDA's own headers (CuTe
includes cuda_runtime_api.h and libcu++ from cccl) from the toolkit beside
nvcc. A missing piece is a reason to skip, given in words."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Toolchain:
    compiler: str | None  # g++ or nvcc, None when absent
    includes: tuple[Path, ...]
    missing: str | None  # why the oracle cannot be built here


@lru_cache(maxsize=1)
def cute_include() -> Path | None:
    """cutlass_library/source/include in the nvidia-cutlass wheel (its package is
    located, not imported: importing it needs more than the headers)."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    include = Path(next(iter(spec.submodule_search_locations))) / "source" / "include"
    return include if (include / "cute" / "tensor.hpp").is_file() else None


@lru_cache(maxsize=1)
def cuda_include() -> Path | None:
    """The toolkit's include directory: $CUDA_HOME / $CUDA_PATH, else where nvcc
    says it looks (nvcc may be a wrapper script, so its path says nothing)."""
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH")
                  if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        proc = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull],
                              capture_output=True, text=True)
        candidates += [Path(p) for p in re.findall(r'-I"?([^"\s]+)', proc.stderr)]
    return next((c for c in candidates if (c / "cuda_runtime_api.h").is_file()), None)


def toolchain(compiler: str) -> Toolchain:
    path = shutil.which(compiler)
    if path is None:
        return Toolchain(None, (), f"no {compiler} on PATH")
    cute, cuda = cute_include(), cuda_include()
    if cute is None:
        return Toolchain(path, (), "CuTe's headers not found (pip install nvidia-cutlass)")
    if cuda is None:
        return Toolchain(path, (), "no CUDA toolkit headers (set CUDA_HOME or put nvcc on PATH)")
    return Toolchain(path, (cute, cuda / "cccl", cuda), None)


class Build:
    """`source` compiling in the background (with the headers already written in
    `out_dir`), so the oracle's programs build side by side."""

    def __init__(self, tools: Toolchain, source: Path, out_dir: Path, flags: tuple[str, ...]):
        self.source = source
        self.binary = out_dir / source.stem
        includes = [f"-I{out_dir}"] + [f"-I{i}" for i in tools.includes]
        self.process = subprocess.Popen(
            [tools.compiler, *flags, *includes, str(source), "-o", str(self.binary)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def run(self) -> str:
        """Wait for the build, run the program, return what it printed."""
        _, stderr = self.process.communicate()
        if self.process.returncode:
            raise AssertionError(f"building {self.source.name} failed:\n{stderr[-6000:]}")
        return subprocess.run([str(self.binary)], capture_output=True, text=True,
                              check=True).stdout
