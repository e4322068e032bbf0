"""The samples' kernel library (samples/library.toml, what `make build` builds) names
every sample and each of its -D variants; each non-default variant goes through the
front end, the passes and the CUDA render (the cubins of the defaults are
test_samples.py's, and `make build` compiles them all); and the README's kernel
library builds as printed."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from hopperc import driver
from hopperc.buildsys.library import read_library
from tests.conftest import ROOT, SAMPLES

LIBRARY = read_library(ROOT / "samples" / "library.toml")
VARIANTS = [build for build in LIBRARY if build.defines]
# Samples whose subtile loop runs at one BN only, and why.
ONE_BN = {"gemm_fp8_blockscaled": "BN = 128 is B's scale block"}


def test_every_sample_is_in_the_library_under_its_own_name():
    """A new sample cannot be left out of `make build`, and each default keeps its
    output name (build/NAME.cubin, which test_samples.py and bench/ read)."""
    listed = {build.source.resolve() for build in LIBRARY}
    assert not {p.name for p in SAMPLES if p.resolve() not in listed}, "not in the library"
    assert listed <= {p.resolve() for p in SAMPLES}
    defaults = {build.source.stem for build in LIBRARY
                if not build.defines and build.name == build.source.stem}
    assert defaults == {p.stem for p in SAMPLES}


def test_make_build_builds_the_library():
    makefile = (ROOT / "Makefile").read_text()
    build = re.search(r"(?m)^build:.*\n\t(.+)$", makefile).group(1)
    assert build.split()[1:] == ["build", "samples/library.toml", "--out-dir", "build"]


def test_every_subtile_epilogue_is_one_loop_with_its_variants_in_the_library():
    with_variants = {build.source.stem for build in VARIANTS}
    for path in SAMPLES:
        text = path.read_text()
        assert "acc[:, 64 : 128]" not in text, f"{path.name}: a subtile written by hand"
        if "for s in 0 .. BN / 64" in text and path.stem not in ONE_BN:
            assert path.stem in with_variants, f"{path.name}: no -D BN variant in the library"
    assert not with_variants & ONE_BN.keys()


@pytest.mark.parametrize("build", VARIANTS, ids=[build.name for build in VARIANTS])
def test_a_sample_renders_each_variant_of_the_library(build):
    source = driver.read_source(build.source)
    default = dict(driver.check(source).consts)
    assert any(default[k] != v for k, v in build.defines.items()), \
        f"{build.name} is the default build again"
    generated = driver.generate(source, build.defines)
    assert dict(generated.kernel.consts).items() >= build.defines.items()


def test_gemm_bf16_at_bn128_is_right_in_every_schedule():
    """The unrolled epilogue of two subtiles per warpgroup, run by the simulator
    (2 column tiles, 2 k-steps) against numpy."""
    report = driver.simulate(driver.read_source(ROOT / "samples" / "gemm_bf16.hk"),
                             {"BN": 128}, {"M": 128, "N": 256, "K": 128}, seeds=2, search=10)
    assert report.ok, [f.headline() for f in report.findings]


def test_the_readme_library_builds_as_printed(hopperc_cli, tmp_path):
    """README's "In CI" library, beside a copy of gemm_bf16, built to cubins."""
    readme = (ROOT / "README.md").read_text()
    library = re.search(r"## In CI\n.*?```toml\n(.*?)```", readme, re.S).group(1)
    assert 'source = "kernels/gemm_bf16.hk"' in library
    (tmp_path / "kernels").mkdir()
    shutil.copy(ROOT / "samples" / "gemm_bf16.hk", tmp_path / "kernels")
    (tmp_path / "kernels.toml").write_text(library)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "build/kernels", "-j", "2",
                       "--manifest", "build/kernels.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = json.loads((tmp_path / "build" / "kernels.json").read_text())["kernels"]
    assert sorted(r["defines"]["BN"] for r in records) == [128, 256]
    assert all(r["status"] in ("built", "cached") for r in records)
    for name in ("gemm_bf16_bn128", "gemm_bf16_bn256"):
        assert (tmp_path / "build" / "kernels" / f"{name}.cubin").read_bytes()[:4] == b"\x7fELF"
