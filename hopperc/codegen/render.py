"""Render lowered IR as self-contained CUDA C++ through the Jinja templates.

Python walks the statement tree (it knows which role's threads run each
statement); every leaf statement is printed by its macro in `nodes.cu.j2`, and
every statement is preceded by `#line` so NVRTC errors point into the .hk file.
"""
from __future__ import annotations

from functools import lru_cache

import jinja2

from hopperc import __version__
from hopperc.codegen import names
from hopperc.codegen.element_reads import element_reader, elements_to_read, read_elements
from hopperc.codegen.integers import Renderer
from hopperc.codegen.launch import LaunchInfo, launch_info
from hopperc.codegen.loop_descriptors import INVARIANT_DESCRIPTORS, invariant_descriptors
from hopperc.codegen.macro_operands import MacroOperands
from hopperc.codegen.scalars import RoleContext, scalar
from hopperc.codegen.wgmma import WgmmaForm
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import mma_registers, walk
from hopperc.ir.dataflow import overwrites_on_first_iteration, runs_at_most_once
from hopperc.ir.elements import element_tensors
from hopperc.local_files import cache_root, data_directory

GRID_REGISTERS = ("x", "y", "z")
INDENT = "  "


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(data_directory("templates")),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True,
                              bytecode_cache=_compiled_templates())


def _compiled_templates() -> jinja2.FileSystemBytecodeCache | None:
    """Compiling the templates costs each process ~30 ms: Jinja keeps the result in
    the cache directory (checked against the template's text, written atomically)."""
    directory = cache_root() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(directory))


def render(kernel: ir.Kernel, source_name: str) -> tuple[str, LaunchInfo]:
    """The kernel as CUDA C++; every `#line` names `source_name` (what the cubin's
    line table records, after any `--file-prefix-map`)."""
    launch = launch_info(kernel)
    cx = _Context(kernel, launch, source_name)
    lines: list[str] = []
    cx.block(kernel.body, RoleContext(0, kernel.threads), 1, lines)
    params = [_param_decl(p) for p in launch.params]
    grid_axes = [{"name": names.grid_coordinate(g.name), "reg": GRID_REGISTERS[i]}
                 for i, g in enumerate(kernel.grid)]
    text = _environment().get_template("kernel.cu.j2").render(
        version=__version__, source_name=_c_string(source_name),
        kernel_line=_line_directive(kernel.span.line, source_name), kernel=kernel,
        symbol=names.kernel_symbol(kernel.name), params=params, grid_axes=grid_axes,
        carried=[names.carried(r) for r in kernel.carried], alignment=launch.alignment,
        element_readers=[element_reader(kernel.tensor(t)) for t in cx.element_tensors],
        wgmma_forms=list(cx.wgmma_forms), body="\n".join(lines))
    return text, launch


def _c_string(text: str) -> str:
    """`text` as the inside of a C string literal: any file name fits in one. A
    double quote becomes a single one: `-lineinfo` copies the name into the PTX
    `.file` directive, which ptxas reads without escapes."""
    escapes = {"\\": "\\\\", '"': "'", "\n": "\\n", "\r": "\\r"}
    return "".join(escapes.get(ch, ch) for ch in text)


def _line_directive(line: int, file: str) -> str:
    return f'#line {line} "{_c_string(file)}"'


def _param_decl(p) -> str:
    if p.kind == "tensor_map":
        return f"const __grid_constant__ hk_tensor_map {names.tensor_map(p.name)}"
    if p.kind == "pointer" and p.written:  # written_tensors: no promise to break
        return f"{p.ctype} {names.user(p.name)}"
    if p.kind == "pointer":
        return f"const {p.ctype} __restrict__ {names.user(p.name)}"
    return f"const {p.ctype} {names.user(p.name)}"


class _Context(MacroOperands):
    """The statement walk, and what the node macros call back into (MacroOperands)."""

    def __init__(self, kernel: ir.Kernel, launch: LaunchInfo, source_name: str):
        self.kernel = kernel
        self.source_name = source_name
        self.launch = launch
        self.exprs = Renderer(kernel, launch)
        self.macros = _environment().get_template("nodes.cu.j2").make_module({"cx": self})
        self.role = RoleContext(0, kernel.threads)
        self.divergent = 0  # depth of bodies only some lanes of a warp may run
        self.declared: list[set[str]] = [set()]
        # `k == start` of each peeled loop being rendered: whether this copy of
        # the body is the first iteration
        self.first_iteration: dict[ir.ScalarExpr, bool] = {}
        self.loop_windows = 0  # depth of loop bodies that declare hk_loop_window
        self.wgmma_forms: dict[WgmmaForm, None] = {}  # in order of first use
        self.tiles = self.exprs.tiles
        # registers holding elements read before the statement or loop that uses them
        self.element_registers: list[str] = []
        self.element_tensors = element_tensors(kernel)
        self.wgmma_operands = {t for s in walk(kernel.body) if isinstance(s, ir.Mma)
                               for t in mma_registers(s)}

    # ---- walking
    def block(self, block: ir.Block, role: RoleContext, depth: int, lines: list[str]) -> None:
        previous = None
        for stmt in block.stmts:
            if isinstance(stmt, ir.RoleBlock):
                self.role_branch(stmt, isinstance(previous, ir.RoleBlock), depth, lines)
            else:
                self.stmt(stmt, role, depth, lines)
            previous = stmt

    def role_branch(self, stmt: ir.RoleBlock, chained: bool, depth: int, lines: list[str]) -> None:
        """One branch of the role dispatch: an if/else chain on the warp index, so
        setmaxnreg sits in exactly one branch per warpgroup. Every warp of the
        role's warpgroups runs its leading setmaxnreg; only active warps go on."""
        pad, r = INDENT * depth, stmt.role
        lines.append(_line_directive(stmt.span.line, self.source_name))
        active = "" if r.active_warps == r.warps else f", {r.active_warps} active"
        lines.append(f"{pad}{'else ' if chained else ''}if (hk_warp < {r.first_warp + r.warps}) "
                     f"{{  // role {r.name}: warps {r.first_warp}..{r.first_warp + r.warps - 1}"
                     f"{active}")
        context = RoleContext(r.first_warp, r.active_warps * 32)
        head = [s for s in stmt.body.stmts if isinstance(s, ir.SetMaxRegisters)]
        rest = ir.Block(stmt.body.stmts[len(head):])
        self.declared.append(set())
        self.block(ir.Block(tuple(head)), context, depth + 1, lines)
        if active:
            lines.append(f"{pad}{INDENT}if (hk_warp < {r.first_warp + r.active_warps}) {{")
            self._scoped(rest, context, depth + 2, lines)
            lines.append(f"{pad}{INDENT}}}")
        else:
            self.block(rest, context, depth + 1, lines)
        self.declared.pop()
        lines.append(f"{pad}}}")

    def stmt(self, stmt: ir.Stmt, role: RoleContext, depth: int, lines: list[str]) -> None:
        pad = INDENT * depth
        span = getattr(stmt, "span", None)
        if span is not None:
            lines.append(_line_directive(span.line, self.source_name))
        read = elements_to_read(stmt) if self.element_tensors else []
        if any(element not in role.elements for element in read):
            role, reads = read_elements(read, role, self.element_registers)
            lines += [pad + line for line in reads]
            if span is not None:  # the statement's own directive ends the lines before it
                lines.append(_line_directive(span.line, self.source_name))
        self.role = role
        match stmt:
            case ir.ForLoop(var=var, start=start, stop=stop, body=body) if overwrites_on_first_iteration(stmt):
                # The first iteration is rendered apart, so each wgmma's scale-d is an
                # immediate: a predicate computed per iteration costs the main loop
                # an instruction per k-step.
                var, first = names.user(var), stmt.first_iteration
                start_c, stop_c = scalar(start, role), scalar(stop, role)
                lines.append(f"{pad}if ({start_c} < {stop_c}) {{")
                lines.append(f"{pad}{INDENT}{{  // the first iteration: products overwrite")
                # The loop's copy: unused where the body never names the variable.
                lines.append(f"{pad}{INDENT * 2}[[maybe_unused]] const int {var} = {start_c};")
                self.first_iteration[first] = True
                self._scoped(body, role, depth + 2, lines)
                lines.append(f"{pad}{INDENT}}}")
                if not runs_at_most_once(stmt):
                    lines.append(f"{pad}{INDENT}for (int {var} = {start_c} + 1; {var} < "
                                 f"{stop_c}; ++{var}) {{")
                    self.first_iteration[first] = False
                    self._loop_body(body, role, depth + 2, lines)
                    lines.append(f"{pad}{INDENT}}}")
                del self.first_iteration[first]
                lines.append(f"{pad}}}")
            case ir.ForLoop(var=var, start=start, stop=stop, body=body):
                var = names.user(var)
                lines.append(f"{pad}for (int {var} = {scalar(start, role)}; {var} < "
                             f"{scalar(stop, role)}; ++{var}) {{")
                self._loop_body(body, role, depth + 1, lines)
                lines.append(f"{pad}}}")
            case ir.IfThen(cond=cond, then=ir.Block(stmts=(ir.ElectLane() as elect,)),
                           orelse=ir.Block(stmts=())) if _only_releases(elect):
                # A conditional release is predicated on the condition too.
                for release in elect.body.stmts:
                    self._leaf(release, pad, lines, elected=True, when=scalar(cond, role))
            case ir.IfThen(cond=cond, then=then, orelse=orelse):
                lines.append(f"{pad}if ({scalar(cond, role)}) {{")
                divergent = _lane_dependent(cond)
                self._scoped(then, role, depth + 1, lines, divergent)
                if orelse.stmts:
                    lines.append(f"{pad}}} else {{")
                    self._scoped(orelse, role, depth + 1, lines, divergent)
                lines.append(f"{pad}}}")
            case ir.OneThread(body=body, per_warpgroup=True):
                warp = scalar(ir.Scalar(ir.ScalarKind.BUILTIN, "warp"), role)
                lines.append(f"{pad}if ({warp} % 4 == 0 && hk_elect_one()) "
                             "{  // one elected thread of each warpgroup issues")
                self._scoped(body, role, depth + 1, lines, divergent=True)
                lines.append(f"{pad}}}")
            case ir.OneThread(body=body):
                lines.append(f"{pad}if (hk_warp == {role.first_warp} && hk_elect_one()) {{"
                             "  // one elected thread issues")
                self._scoped(body, role, depth + 1, lines, divergent=True)
                lines.append(f"{pad}}}")
            case ir.ElectLane(body=body) if _only_releases(stmt):
                # elect.sync and a predicated arrive: no branch around the release
                for release in body.stmts:
                    self._leaf(release, pad, lines, elected=True)
            case ir.ElectLane(body=body):
                lines.append(f"{pad}if (hk_elect_one()) {{")
                self._scoped(body, role, depth + 1, lines, divergent=True)
                lines.append(f"{pad}}}")
            case ir.ManualRegion(body=body):
                # Hand-written code may branch on anything: no warp-collective stores.
                lines.append(f"{pad}{{  // manual synchronization: written by hand")
                self._scoped(body, role, depth + 1, lines, divergent=True)
                lines.append(f"{pad}}}")
            case ir.TileDef(name=name):
                self.declared[-1].add(name)
                self._leaf(stmt, pad, lines)
            case _:
                self._leaf(stmt, pad, lines)

    def _leaf(self, stmt: ir.Stmt, pad: str, lines: list[str], elected: bool = False,
              when: str | None = None) -> None:
        macro = getattr(self.macros, type(stmt).__name__)
        text = str(macro(stmt, self, True, when) if elected else macro(stmt, self))
        span = getattr(stmt, "span", None)
        for i, line in enumerate(text.splitlines()):
            # NVRTC counts lines on from a directive: every line of the statement
            # restates its line, and a #pragma takes the line before it, so that
            # the loop it governs (no directive may come between) is on the line.
            if span is not None and line.lstrip().startswith("#pragma"):
                if i:
                    lines.append(_line_directive(max(span.line - 1, 1), self.source_name))
                elif span.line > 1:
                    lines[-1] = _line_directive(span.line - 1, self.source_name)
            elif span is not None and i and not lines[-1].lstrip().startswith("#pragma"):
                lines.append(_line_directive(span.line, self.source_name))
            lines.append(pad + line)

    def _scoped(self, body: ir.Block, role: RoleContext, depth: int, lines: list[str],
                divergent: bool = False) -> None:
        """A C++ block: tiles declared in it are out of scope after it. `divergent`:
        only some lanes of a warp may run it."""
        self.declared.append(set())
        self.divergent += divergent
        self.block(body, role, depth, lines)
        self.divergent -= divergent
        self.declared.pop()

    def _loop_body(self, body: ir.Block, role: RoleContext, depth: int,
                   lines: list[str]) -> None:
        """A loop's body. ptxas keeps each loop-invariant wgmma descriptor (one per
        k-step of a shared operand that no stage or loop variable moves) in a
        register across the loop; past INVARIANT_DESCRIPTORS of them, the uniform
        registers (63) run out, the rest go to ordinary registers and spill. Such a
        body reads the shared window's address through hk_opaque once per
        iteration and forms its descriptors from that, so ptxas computes each next
        to its wgmma with a uniform add. (Below the limit hoisting is cheaper:
        attention_fwd's key loop would grow by 17 instructions.)"""
        products = invariant_descriptors(self.kernel, body) > INVARIANT_DESCRIPTORS
        if products:
            lines.append(f"{INDENT * depth}const unsigned hk_loop_window = "
                         f"hk_opaque(hk_smem_base >> 4);")
        self.loop_windows += products
        self._scoped(body, role, depth, lines)
        self.loop_windows -= products


def _lane_dependent(cond: ir.ScalarExpr) -> bool:
    """Whether a condition may differ between the lanes of a warp (it names the
    lane or the thread)."""
    match cond:
        case ir.Scalar(kind=ir.ScalarKind.BUILTIN, name=name):
            return name in ("lane", "thread")
    return any(_lane_dependent(operand) for operand in ir.operands(cond))


def _only_releases(elect: ir.ElectLane) -> bool:
    return all(isinstance(s, ir.StageRelease) for s in elect.body.stmts)
