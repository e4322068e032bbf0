"""Each sample builds for the -D variants its header documents (`# variants: BN=64;
BN=128`), through the front end, the passes and the CUDA render (the cubins of the
defaults are test_samples.py's); and the README's kernel library builds as printed."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from hopperc import driver
from tests.conftest import ROOT, SAMPLES


def documented_variants(text: str) -> list[dict[str, int]]:
    """The defines of each variant a sample's `# variants:` line lists."""
    line = re.search(r"(?m)^# variants: (.+)$", text)
    if line is None:
        return []
    return [{name.strip(): int(value) for name, value in
             (define.split("=") for define in variant.split(","))}
            for variant in line.group(1).split(";")]


def _non_default(path) -> list[tuple[str, dict[str, int]]]:
    return [(path.stem, defines) for defines in documented_variants(path.read_text())]


VARIANTS = [case for path in SAMPLES for case in _non_default(path)]


def test_every_subtile_epilogue_is_one_loop_with_its_variants_documented():
    for path in SAMPLES:
        text = path.read_text()
        assert "acc[:, 64 : 128]" not in text, f"{path.name}: a subtile written by hand"
        if "for s in 0 .. BN / 64" in text:
            assert documented_variants(text), f"{path.name}: no '# variants:' line"
    assert len({name for name, _ in VARIANTS}) >= 11


@pytest.mark.parametrize("name, defines", VARIANTS,
                         ids=[f"{n}-" + ",".join(f"{k}{v}" for k, v in d.items())
                              for n, d in VARIANTS])
def test_a_sample_renders_each_documented_variant(name, defines):
    source = driver.read_source(ROOT / "samples" / f"{name}.hk")
    default = dict(driver.check(source).consts)
    if all(default[k] == v for k, v in defines.items()):
        pytest.skip("the default: test_samples.py builds its cubin")
    generated = driver.generate(source, defines)
    assert dict(generated.kernel.consts).items() >= defines.items()


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
