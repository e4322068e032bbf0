"""`hopperc run` / `bench` and `hopperc.compile` where there is no GPU: clear
errors and exit codes, and checks that need no GPU still made."""
import subprocess
import sys

import pytest

import hopperc
from hopperc.diagnostics import as_source
from hopperc.runtime import GpuUnavailable, gpu_available
from tests.runtime.helpers import SCALED_COPY

no_gpu = pytest.mark.skipif(gpu_available(), reason="checks the no-GPU path")


@no_gpu
@pytest.mark.parametrize("command", ["run", "bench"])
def test_without_a_gpu_the_command_says_so(hopperc_cli, command):
    proc = hopperc_cli(command, "samples/tma_copy.hk", "--shape", "M=128,N=128")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no CUDA driver on this machine")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["run", "bench"])
def test_shape_errors_come_before_the_gpu(hopperc_cli, command):
    proc = hopperc_cli(command, "samples/tma_copy.hk", "--shape", "M=128,K=3")
    assert proc.returncode == 1
    assert "--shape: the kernel has no dimension 'K' (it has: M, N)" in proc.stderr


def test_source_errors_are_located(hopperc_cli, tmp_path):
    bad = tmp_path / "bad.hk"
    bad.write_text("kernel k(X: bf16[M]) {\n  tma X <- \n}\n")
    proc = hopperc_cli("run", str(bad))
    assert proc.returncode == 1 and f"{bad}:" in proc.stderr


@no_gpu
def test_compile_builds_then_needs_the_gpu():
    with pytest.raises(GpuUnavailable, match="no CUDA driver"):
        hopperc.compile(SCALED_COPY)
    # The build itself succeeded and is in the cache for the next call.
    artifact = hopperc.build(SCALED_COPY)
    assert artifact.cached and artifact.cubin[:4] == b"\x7fELF"


def test_compile_takes_a_path_or_text(tmp_path):
    path = tmp_path / "k.hk"
    path.write_text(SCALED_COPY)
    assert as_source(path).text == as_source(str(path)).text == SCALED_COPY
    assert as_source(path).name == str(path)
    assert as_source(SCALED_COPY).name == "<string>"


def test_runtime_imports_without_torch_or_the_compiler():
    code = ("import sys, hopperc.runtime; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('hopperc.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)
    assert "torch" not in loaded
    assert not [m for m in loaded if m.split(".")[1] in ("frontend", "passes", "codegen", "sim")]
