"""Make-syntax dependency files (`build -MD` / `-MF FILE`): a build's outputs and
everything they depend on, as make includes them and ninja reads them
(`deps = gcc`). The dependencies are the `.hk` file and the compiler itself:
every file of the hopperc package (code, grammar, templates) and the NVRTC
library, so that editing or upgrading the compiler rebuilds."""
from __future__ import annotations

from pathlib import Path

from hopperc.buildsys import toolchain


def depfile_text(targets: list[Path], source: Path, library: Path | None = None) -> str:
    """`targets: source [library] compiler-files`, then an empty rule per compiler
    file so that make does not stop when one is removed by an upgrade (gcc's
    `-MP`). A kernel a library file asks for depends on that file too."""
    compiler = compiler_files()
    deps = [source, *([library] if library else []), *compiler]
    lines = [" ".join(_escape(t) for t in targets) + ":" +
             "".join(f" \\\n  {_escape(d)}" for d in deps)]
    lines += [f"\n{_escape(d)}:" for d in compiler]
    return "\n".join(lines) + "\n"


def compiler_files() -> list[Path]:
    library = toolchain.nvrtc().library
    return [Path(f) for f in toolchain.compiler_files()] + ([library] if library else [])


def _escape(path: Path) -> str:
    """A path as make reads it in a rule: spaces and `#` escaped, `$` doubled."""
    return str(path).replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")
