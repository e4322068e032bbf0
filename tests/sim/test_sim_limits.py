"""What `check` does with problems too big to simulate whole: a clear error for
tensors that do not fit in memory, a representative subset of a large grid,
and an out-of-range plane reported at its line, never a crash."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from hopperc.sim.problem import representative_blocks, shared_axes
from tests.conftest import ROOT

COPY = (Path(__file__).parent / "manual" / "single_thread_copy.hk").read_text()
HEADER = "kernel single_thread_copy(X: bf16[M, N], Y: bf16[M, N]) tile(BM = 64, BN = 64)\n" \
         "    grid(m: M / BM, n: N / BN)"


def one_store_along_z(text: str) -> str:
    """The copy with only the blocks of tile.z 0 storing: Y's boxes do not name
    z, and two blocks storing one box race."""
    return re.sub(r"( +)(tma Y\[tile.m, tile.n\] <- [^\n]+)\n",
                  r"\1if tile.z == 0 {\n\1    \2\n\1}\n", text)


def copy_kernel(tmp_path, header: str, body=lambda text: text) -> str:
    assert HEADER in COPY
    path = tmp_path / "k.hk"
    path.write_text(body(COPY.replace(HEADER, header)))
    return str(path)


def test_tensors_too_big_for_host_memory_are_refused_at_the_tensor(hopperc_cli, tmp_path):
    path = copy_kernel(tmp_path, "kernel big(X: bf16[M, 1048576], Y: bf16[M, 1048576]) "
                                 "tile(BM = 64, BN = 64)\n    grid(m: M / BM, n: 16384)")
    proc = hopperc_cli("check", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{path}:4:12: error: simulating this kernel at M=97 needs about "
                            "3.0 GiB"), first  # 64 rows and a partial tile of 33
    assert "'X' alone has 101,711,872 elements" in first and "--shape" in first


def test_running_out_of_memory_while_simulating_is_an_error_not_a_crash(monkeypatch):
    def exhausted(*_args, **_kwargs):
        raise MemoryError
    monkeypatch.setattr("hopperc.sim.explore.simulate", exhausted)
    with pytest.raises(CompileError, match="ran out of host memory"):
        driver.simulate(SourceFile("k.hk", COPY), seeds=1, search=0)


def test_a_large_grid_is_simulated_on_a_representative_subset(hopperc_cli, tmp_path):
    path = copy_kernel(tmp_path, "kernel wide(X: bf16[M, N], Y: bf16[M, N]) "
                                 "tile(BM = 64, BN = 64)\n    grid(m: M / BM, n: N / BN, z: 512)",
                       one_store_along_z)
    proc = hopperc_cli("sim", path, "-q", "--seeds", "2", "--search", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shapes: M=97 N=96, 2048 blocks, 8 simulated (the first, the last" in proc.stdout
    assert "Y max error 0 against the numpy reference" in proc.stdout


def test_a_bug_in_the_last_block_of_a_large_grid_is_still_found(hopperc_cli, tmp_path):
    """Only the grid's last block reads a plane past the buffer's end: the subset
    always holds the last block."""
    def last_block_overruns(text: str) -> str:
        text = text.replace("shared buf: bf16[BM, BN]", "shared buf: bf16[2, BM, BN]")
        index = "buf[(tile.m + tile.n + tile.z) / 513]"  # rounds up: 0 in block 0, else 1
        return one_store_along_z(text.replace("tma buf <- X", f"tma {index} <- X").replace(
            "<- buf\n", f"<- {index}\n"))
    path = copy_kernel(tmp_path, "kernel wide(X: bf16[M, N], Y: bf16[M, N]) "
                                 "tile(BM = 64, BN = 64)\n    grid(m: M / BM, n: N / BN, z: 512)",
                       last_block_overruns)
    proc = hopperc_cli("sim", path, "-q", "--seeds", "1", "--search", "0")
    assert proc.returncode == 0, proc.stdout
    overrun = Path(path).read_text().replace("/ 513]", "/ 512]")  # 2 in block (1, 1, 511) only
    Path(path).write_text(overrun)
    proc = hopperc_cli("sim", path, "-q", "--seeds", "1", "--search", "0")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert "out-of-range access: index 2 of 'buf' is out of range" in proc.stdout


@pytest.mark.parametrize("extents, limit", [([2, 2, 2], 8), ([4, 4], 8), ([512], 8),
                                            ([3, 7, 512], 8), ([1000, 1000], 5)])
def test_representative_blocks(extents, limit):
    blocks = representative_blocks(extents, limit)
    total = math.prod(extents)
    assert len(blocks) == min(limit, total) and len(set(blocks)) == len(blocks)
    assert blocks[0] == (0,) * len(extents) and blocks[-1] == tuple(e - 1 for e in extents)
    if limit >= len(extents) + 2:
        for axis, extent in enumerate(extents):
            edge = tuple(extent - 1 if i == axis else 0 for i in range(len(extents)))
            assert edge in blocks
    assert all(0 <= c < e for block in blocks for c, e in zip(block, extents))
    assert blocks == sorted(blocks)


def test_an_mbarrier_index_past_the_array_is_an_out_of_range_access(hopperc_cli, tmp_path):
    """Block (0, 1) waits on full[2] of a 2-barrier array; block 0 on full[0]."""
    def overrun(text: str) -> str:
        text = text.replace("mbarrier full[1]", "mbarrier full[2]")
        return text.replace("mbarrier.wait full[0], 0", "mbarrier.wait full[2 * (tile.m + tile.n)], 0")
    path = copy_kernel(tmp_path, HEADER, overrun)
    proc = hopperc_cli("sim", path, "-q", "--seeds", "1", "--search", "0")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert f"{path}:14:9: out-of-range access: mbarrier index 2 is out of range for 'full' " \
           "(2 barriers, indexed 0 to 1)" in proc.stdout


def test_representative_blocks_take_the_neighbours_that_share_boxes():
    """Split-K's grid (m, n, s): C's boxes do not name s, so the blocks kept
    come with a neighbour along s; without shared axes, none is added."""
    blocks = representative_blocks([3, 5, 4], 8, [2])
    assert (0, 0, 1) in blocks and (2, 4, 2) in blocks
    assert len(blocks) == 8 and blocks == sorted(blocks)
    assert (0, 0, 1) not in representative_blocks([3, 5, 4], 8)


def test_shared_axes_are_those_a_stores_coordinates_do_not_name():
    kernel = driver.lower(driver.check(driver.read_source(ROOT / "samples" / "gemm_splitk.hk")))
    assert [kernel.grid[i].name for i in shared_axes(kernel)] == ["s"]
    bf16 = driver.lower(driver.check(driver.read_source(ROOT / "samples" / "gemm_bf16.hk")))
    assert shared_axes(bf16) == []
