"""hopperc's modules import one another in one direction: no cycle, in the IR or
in the whole package, and the compiler's stages (front end -> IR -> passes ->
codegen -> backend) meet only in the IR: each stage builds, rewrites or reads IR
nodes and imports no other stage, the IR none of them.

Read from the source with `ast`, every import counted (at the top, inside a
function, under TYPE_CHECKING), so an import moved out of sight to dodge a cycle
still counts; nothing is loaded. `import_module` calls (the pass table, the
command table) are not seen."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from tests.conftest import ROOT

STAGES = ("frontend", "ir", "passes", "codegen", "backend")
# What surrounds the compiler: the command line, the library build, the driver
# that strings the stages together, the simulator, the harness.
SURROUNDINGS = ("cli", "buildsys", "driver", "sim", "harness")
# The package root's modules: the entry points (the package with the Python API,
# `python -m` and the driver) and the little that the stages and their surroundings share
# (the target's defaults, where the package data and the cache lie, and the
# temporaries cache files are written through). Another module goes in a room.
ROOT_MODULES = ("__init__", "__main__", "driver", "target", "local_files", "temporaries")
SHARED_ROOT_MODULES = ("target", "local_files", "temporaries")


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def _graph() -> dict[str, frozenset[str]]:
    """Each hopperc module and the hopperc modules it imports."""
    paths = {_name(p): p for p in (ROOT / "hopperc").rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                    if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                # `from hopperc.ir import nodes` imports the module hopperc.ir.nodes
                targets.update(f"{source}.{a.name}" if f"{source}.{a.name}" in paths else source
                               for a in node.names)
        graph[module] = frozenset(t for t in targets if t in paths and t != module)
    return graph


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def _room(module: str) -> str | None:
    """The package folder or root module a module belongs to (`ir`, `driver`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_cycles_are_found():
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({**graph, "c": frozenset()}) == []


def test_the_ir_imports_without_a_cycle():
    ir = {m: frozenset(t for t in targets if _room(t) == "ir")
          for m, targets in _graph().items() if _room(m) == "ir"}
    assert "hopperc.ir.nodes" in ir
    assert _cycles(ir) == []


def test_the_package_imports_without_a_cycle():
    # The root package (the version, the lazy `hopperc.compile`) runs before any
    # module of it: a module reading the version from it orders nothing.
    graph = {m: targets - {"hopperc"} for m, targets in _graph().items()}
    assert _cycles(graph) == []


def test_the_stages_meet_only_in_the_ir():
    crossings = [f"{module} imports {target}" for module, targets in sorted(_graph().items())
                 for target in sorted(targets)
                 if _room(module) in STAGES and _room(target) in STAGES
                 and _room(target) not in (_room(module), "ir")]
    assert crossings == []


def test_the_stages_import_nothing_that_surrounds_the_compiler():
    crossings = [f"{module} imports {target}" for module, targets in sorted(_graph().items())
                 for target in sorted(targets)
                 if _room(module) in STAGES and _room(target) in SURROUNDINGS]
    assert crossings == []


def test_the_package_root_holds_only_its_listed_modules():
    assert sorted(p.stem for p in (ROOT / "hopperc").glob("*.py")) == sorted(ROOT_MODULES)


def test_what_the_stages_share_at_the_root_imports_no_stage_and_no_surrounding():
    """The stages read the grammar and templates and write their caches through
    these modules: through them a stage must not reach the build system."""
    crossings = [f"{module} imports {target}" for module, targets in sorted(_graph().items())
                 for target in sorted(targets)
                 if _room(module) in SHARED_ROOT_MODULES
                 and _room(target) in (*STAGES, *SURROUNDINGS)]
    assert crossings == []


def test_the_build_system_imports_nothing_of_the_command_line():
    """The library build serves the command line and the Python API alike: it
    raises, and the command line turns that into its messages and exit codes."""
    crossings = [f"{module} imports {target}" for module, targets in sorted(_graph().items())
                 for target in sorted(targets)
                 if _room(module) == "buildsys" and _room(target) == "cli"]
    assert "hopperc.buildsys.plan" in _graph()
    assert crossings == []


def test_the_simulator_imports_nothing_of_the_build_system_or_the_command_line():
    """The simulator serves `check`, `sim` and `hopperc.simulate`: it returns its
    findings, outputs and traces, and the command line writes the files."""
    crossings = [f"{module} imports {target}" for module, targets in sorted(_graph().items())
                 for target in sorted(targets)
                 if _room(module) == "sim" and _room(target) in ("buildsys", "cli")]
    assert "hopperc.sim.trace" in _graph()
    assert crossings == []
