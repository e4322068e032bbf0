"""Rendering: templates are strict, NVRTC errors in generated code are located."""
from __future__ import annotations

import jinja2
import pytest

from hopperc import driver
from hopperc.codegen import render as render_module
from hopperc.diagnostics import SourceFile
from hopperc.ir.explain import inserted_syncs
from hopperc.ir.printer import print_kernel
from tests.conftest import ROOT


def test_templates_are_strict():
    env = render_module._environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_every_sync_is_rendered_from_an_ir_node():
    """The templates print no sync of their own: each one in the .cu has a reason comment."""
    generated = driver.generate(driver.read_source(ROOT / "samples" / "scale_rows.hk"))
    body = generated.cuda[generated.cuda.index('extern "C"'):]
    syncs = [x for x in body.splitlines() if any(
        k in x for k in ("fence.proxy", "fence.mbarrier_init", "bar.sync", "__syncthreads",
                         "mbarrier.init", "expect_tx", "bulk.commit", "wait_group", "try_wait"))]
    assert len(syncs) == len(inserted_syncs(generated.kernel))
    assert all("// " in x for x in syncs)


def test_nvrtc_error_is_located_in_hk_and_generated_code(monkeypatch):
    source = SourceFile("bad.hk", (ROOT / "samples" / "tma_copy.hk").read_text())
    real = driver.render

    def broken(kernel, name):
        cuda, launch = real(kernel, name)
        return cuda.replace("cp.async.bulk.commit_group;", "cp.async.bulk.commit_group;\"); "
                                                            "undefined_symbol(); asm(\""), launch

    monkeypatch.setattr(driver, "render", broken)
    with pytest.raises(driver.GeneratedCodeError) as info:
        driver.build(source)
    message = str(info.value)
    assert message.startswith("bad.hk:10: error: NVRTC rejected")
    assert "undefined_symbol" in message
    assert "bad.cu:" in message and "generated code:" in message


def test_bulk_copies_compile_to_cp_async_bulk():
    text = """kernel k(V: f32[N], W: f32[N])
    tile(BN = 256) grid(n: N / BN) threads 128
{
    shared sv: f32[BN]
    bulk sv <- V[tile.n]
    bulk W[tile.n] <- sv
}
"""
    built = driver.build(SourceFile("bulk.hk", text))
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in built.result.ptx
    assert "cp.async.bulk.global.shared::cta.bulk_group" in built.result.ptx
    assert "mbarrier.arrive.expect_tx sv_full[0], 1024" in print_kernel(built.generated.kernel)


def test_a_reload_of_a_stored_box_compiles_to_the_plain_wait():
    """cp.async.bulk.wait_group (no .read) before the load; .read at the exit."""
    built = driver.build(driver.read_source(
        ROOT / "tests" / "sim" / "hazards" / "residual_store_then_reload.hk"))
    ptx = built.result.ptx
    assert "cp.async.bulk.wait_group 0;" in ptx and "cp.async.bulk.wait_group.read 0;" in ptx
    assert ptx.index("cp.async.bulk.wait_group 0;") < ptx.rindex("cp.async.bulk.tensor.2d.shared")


def test_two_warpgroups_each_cover_their_own_rows():
    text = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 128, BN = 64) grid(m: M / BM, n: N / BN) threads 256
{
    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    sy[wg] = bf16(f32(sx[wg]) * 2.0)
    tma Y[tile.m, tile.n] <- sy
}
"""
    built = driver.build(SourceFile("wg.hk", text))
    cu = built.generated.cuda
    # 64 x 64 elements of one warpgroup's rows, in the wgmma layout over its 128
    # threads: each warp stores its 16 rows with 64 / 16 = 4 stmatrix.x4
    assert "for (int hk_i = 0; hk_i < 4; ++hk_i)" in cu
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in built.result.ptx
    assert "(static_cast<int>(threadIdx.x) % 128)" in cu
    assert "bar.sync 1, 256" in built.result.ptx


@pytest.mark.parametrize("name", ["new\nline.hk", "back\\slash.hk", "it's.hk", 'quo"te.hk',
                                  "sp ace é.hk"])
def test_any_file_name_fits_the_line_directives(name):
    """The file name is printed in #line and the header comment as C string text: a
    newline in it no longer ends the directive or the comment."""
    text = (ROOT / "samples" / "tma_copy.hk").read_text()
    built = driver.build(SourceFile(name, text))  # ptxas reads the program name too
    assert built.result.cubin
    if '"' not in name:
        escaped = name.replace("\\", "\\\\").replace("\n", "\\n")
        assert f'#line 10 "{escaped}"' in built.generated.cuda
