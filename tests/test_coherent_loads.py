"""Element-wise reads of global memory (`v: f32[BM] = T[tile.m]`): the
non-coherent path (`ld.global.nc`, `__ldg`, a `const __restrict__` pointer) is
valid only for data read-only for the whole kernel (PTX ISA, ld.global.nc), so a
tensor the kernel stores into, reduce-adds into or stores from registers is
declared plain and read back with a coherent `ld.global`; read-only tensors
keep the `.nc` path (ir/global_accesses.written_tensors)."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.diagnostics import SourceFile

# Reads back the rows it added into L, then stores R from registers.
ADD_THEN_READ = """kernel add_then_read(X: f32[M, 64], L: f32[M], R: f32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sx: f32[BM, 64]
    shared sl: f32[BM]
    tma sx <- X[tile.m, 0]
    x: f32[BM, 64] = sx
    sl = rowmax(x)
    tma L[tile.m] += sl
    t: f32[BM] = L[tile.m]
    u: f32[BM] = t
    R[tile.m] = u * 2.0
}
"""

# The same in i32 (the integer path of codegen/integers.py): Z is read-only.
ADD_THEN_READ_I32 = """kernel add_then_read_i32(Z: i32[M], L: i32[M], R: i32[M])
    tile(BM = 64) grid(m: M / BM) threads 128
{
    shared sl: i32[BM]
    z: i32[BM] = Z[tile.m]
    sl = z
    tma L[tile.m] += sl
    t: i32[BM] = L[tile.m]
    R[tile.m] = t + 1
}
"""


def _built(text: str, name: str):
    return driver.build(SourceFile(name, text))


def _loads(ptx: str) -> list[str]:
    return re.findall(r"\bld\.global[.\w]*", ptx)


@pytest.mark.parametrize("text, name", [(ADD_THEN_READ, "f32.hk"),
                                        (ADD_THEN_READ_I32, "i32.hk")])
def test_reading_back_what_the_kernel_adds_is_a_coherent_load(text, name):
    built = _built(text, name)
    kernel = re.match(r"kernel (\w+)", text).group(1)
    params = re.search(rf"\bu_{kernel}\(([^)]*)\)", built.generated.cuda).group(1)
    storage = "float" if "f32" in name else "int"
    assert f"{storage}* u_L" in params and f"const {storage}* __restrict__ u_L" not in params
    assert f"{storage}* u_R" in params and f"const {storage}* __restrict__ u_R" not in params
    assert "__ldg(u_L" not in built.generated.cuda
    loads = _loads(built.result.ptx)
    coherent = [x for x in loads if ".nc" not in x]
    assert coherent, loads


def test_negative_a_read_only_vector_keeps_the_non_coherent_path():
    """Z is never written: `const int* __restrict__` and `ld.global.nc`, next to
    L's coherent loads."""
    built = _built(ADD_THEN_READ_I32, "i32.hk")
    assert "const int* __restrict__ u_Z" in built.generated.cuda
    assert "__ldg(u_Z" in built.generated.cuda
    assert any(".nc" in x for x in _loads(built.result.ptx))


def test_negative_without_the_read_back_every_load_is_non_coherent():
    """Only reads of a written tensor changed: a kernel that reads just its
    read-only vector loads it through `.nc` alone."""
    text = ADD_THEN_READ_I32.replace("    t: i32[BM] = L[tile.m]\n", "") \
        .replace("R[tile.m] = t + 1", "R[tile.m] = z + 1")
    loads = _loads(_built(text, "i32.hk").result.ptx)
    assert loads and all(".nc" in x for x in loads), loads
