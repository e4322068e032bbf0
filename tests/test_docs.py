"""The language reference stays true: every ```hk example builds, and an example
followed by a ```text block showing an error fails with exactly that message."""
from __future__ import annotations

import re

import pytest

from hopperc import driver
from hopperc.diagnostics import CompileError, SourceFile
from tests.conftest import ROOT

FENCED = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _examples():
    blocks = [(m.group(1), m.group(2)) for m in FENCED.finditer(
        (ROOT / "docs" / "language.md").read_text())]
    for i, (lang, text) in enumerate(blocks):
        if lang != "hk":
            continue
        after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
        error = after[1] if after[0] == "text" and ": error: " in after[1] else None
        name = re.search(r"kernel (\w+)", text).group(1)
        yield pytest.param(text, error, id=f"{name}-{i}")


@pytest.mark.parametrize("text,error", list(_examples()))
def test_language_reference_example(text, error):
    source = SourceFile("doc.hk", text)
    if error is None:
        driver.build(source)
        return
    with pytest.raises(CompileError) as info:
        driver.build(source)
    assert info.value.message in error
