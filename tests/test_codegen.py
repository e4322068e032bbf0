"""Rendering: templates are strict, NVRTC errors in generated code are located."""
from __future__ import annotations

import jinja2
import pytest

from hopperc import driver
from hopperc.codegen import render as render_module
from hopperc.diagnostics import SourceFile
from hopperc.explain import inserted_syncs
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
