"""Make-syntax dependency files (`build -MD` / `-MF FILE`): a build's outputs and
everything they depend on, as make includes them and ninja reads them
(`deps = gcc`). The dependencies are the `.hk` file and the compiler itself:
every file of the hopperc package (code, grammar, templates) and the NVRTC
library, so that editing or upgrading the compiler rebuilds."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import hopperc
from hopperc.backend.nvrtc import library_path

_COMPILER_SUFFIXES = (".py", ".lark", ".j2")


def depfile_text(targets: list[Path], source: Path) -> str:
    """`targets: source compiler-files`, then an empty rule per compiler file so
    that make does not stop when one is removed by an upgrade (gcc's `-MP`)."""
    compiler = compiler_files()
    deps = [source, *compiler]
    lines = [" ".join(_escape(t) for t in targets) + ":" +
             "".join(f" \\\n  {_escape(d)}" for d in deps)]
    lines += [f"\n{_escape(d)}:" for d in compiler]
    return "\n".join(lines) + "\n"


def compiler_files() -> list[Path]:
    roots = [Path(hopperc.__file__).parent,
             *(Path(str(resources.files(package))) for package in ("hopperc.grammar",
                                                                    "hopperc.templates"))]
    files = {path.resolve() for root in roots for path in root.rglob("*")
             if path.suffix in _COMPILER_SUFFIXES and "__pycache__" not in path.parts}
    library = library_path()
    return sorted(files) + ([library] if library is not None else [])


def _escape(path: Path) -> str:
    """A path as make reads it in a rule: spaces and `#` escaped, `$` doubled."""
    return str(path).replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")
