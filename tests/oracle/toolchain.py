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
import sys
import time
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


# generous: the compile itself takes under a minute of CPU
SHARED_BUILD_TIMEOUT = 900


class Build:
    """`source` compiling in the background (with the headers already written in
    `out_dir`), so the oracle's programs build side by side. The compile records
    how it ended in `out_dir/status` as soon as it ends, for the test workers of
    the run that share this build (`SharedBuild`), whatever this worker is doing."""

    def __init__(self, tools: Toolchain, source: Path, out_dir: Path, flags: tuple[str, ...]):
        self.source = source
        self.binary = out_dir / source.stem
        self.status = out_dir / "status"
        includes = [f"-I{out_dir}"] + [f"-I{i}" for i in tools.includes]
        command = [tools.compiler, *flags, *includes, str(source), "-o", str(self.binary)]
        self.process = subprocess.Popen([sys.executable, "-c", _RECORDED, str(self.status),
                                         *command], stdout=subprocess.DEVNULL,
                                        start_new_session=True)  # killed with its compiler
        (out_dir / "pid").write_text(str(self.process.pid))

    def run(self) -> str:
        """Wait for the build, run the program, return what it printed."""
        self.process.wait()
        return _run(self.source, self.binary, self.status)


# Runs a compile command and writes "ok", or "failed" and its stderr's end, to the
# status file named first (renamed into place: a reader sees all of it or none).
_RECORDED = """
import os, subprocess, sys
status, command = sys.argv[1], sys.argv[2:]
done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
with open(status + ".partial", "w") as out:
    out.write("ok" if done.returncode == 0 else "failed\\n" + done.stderr[-6000:])
os.rename(status + ".partial", status)
"""


class SharedBuild:
    """Another test worker's `Build` of the same program in `out_dir`: waited for
    through its status file, then run here (a compile of tens of seconds of CPU
    is made once per run, not once per worker)."""

    def __init__(self, source: Path, out_dir: Path):
        self.source = source
        self.binary = out_dir / source.stem
        self.status = out_dir / "status"

    def run(self) -> str:
        deadline = time.monotonic() + SHARED_BUILD_TIMEOUT
        while not self.status.exists():
            if not self._compiling() and not self.status.exists():
                raise AssertionError(f"{self.source.name}: its build was stopped (the run "
                                     "stopped the worker that made it)")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.source.name}: the worker building it did not "
                                     f"finish in {SHARED_BUILD_TIMEOUT} s")
            time.sleep(0.1)
        return _run(self.source, self.binary, self.status)

    def _compiling(self) -> bool:
        """Whether the owner's compile process still runs (or has not said its pid yet)."""
        try:
            os.kill(int((self.status.parent / "pid").read_text()), 0)
        except (FileNotFoundError, ValueError):
            return True
        except ProcessLookupError:
            return False
        return True


def _run(source: Path, binary: Path, status: Path) -> str:
    outcome = status.read_text()
    if outcome != "ok":
        raise AssertionError(f"building {source.name} {outcome}")
    return subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
