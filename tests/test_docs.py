"""The documentation stays true: every complete kernel example (```hk blocks of
docs/*.md, and the kernels of README.md) builds and passes `hopperc check`, and an
example followed by a ```text block showing an error fails with exactly that message.

`check` runs here with a small schedule budget (2 seeds, 40 search runs, where the
command's defaults take some minutes over all the examples); what the examples got
wrong before (a read of shared memory nothing wrote, an mbarrier invalidated while
threads waited on it) is found in the first schedule."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from tests.conftest import ROOT

FENCED = re.compile(r"```(\w*)\n(.*?)```", re.S)
KERNEL = re.compile(r"(?:\s*#[^\n]*\n)*\s*kernel (\w+)\(")
SEEDS, SEARCH = 2, 40


def _examples():
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for page in pages:
        blocks = [(m.group(1), m.group(2)) for m in FENCED.finditer(page.read_text())]
        for i, (lang, text) in enumerate(blocks):
            # The README quotes its kernel in a plain block; docs mark theirs `hk`.
            kernel = KERNEL.match(text)
            if not (lang == "hk" or (page.name == "README.md" and lang == "")) or not kernel:
                continue
            after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            error = after[1] if after[0] == "text" and ": error: " in after[1] else None
            yield pytest.param(text, error, id=f"{page.stem}-{kernel.group(1)}-{i}")


EXAMPLES = list(_examples())


def test_the_readme_kernel_is_among_the_examples():
    assert any(p.id.startswith("README-scale_rows") for p in EXAMPLES)


@pytest.mark.parametrize("text,error", EXAMPLES)
def test_documented_example(text, error):
    source = SourceFile("doc.hk", text)
    if error is not None:
        with pytest.raises(CompileError) as info:
            driver.build(source)
        assert info.value.message in error
        return
    driver.build(source)
    report = driver.simulate(source, seeds=SEEDS, search=SEARCH)
    assert report.ok, [line for f in report.findings for line in f.lines()]
