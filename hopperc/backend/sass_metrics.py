"""Figures read from a kernel's SASS: the length of its main loops per source
iteration, the distance from a wgmma wait to the next HGMMA, and what the
epilogue stores. `bench/sass.py` prints them beside CUTLASS's; the SASS tests
hold the targets.

A loop is a conditional backward branch and the straight run of instructions
from its target to it (ptxas puts a try_wait's retry out of line, so the
retry's own branches are not loops that hold the body). Instruction i of a
function sits at byte 16 * i, which is how branch targets are written.
"""
from __future__ import annotations

from dataclasses import dataclass

from hopperc.backend.cubin_tools import sass_functions_with_lines
from hopperc.ir import nodes as ir
from hopperc.ir.dataflow import runs_at_most_once
from hopperc.ir.accesses import bodies, leaves, walk
from hopperc.ir.layout import column_blocks, wgmma_k

INSTRUCTION_BYTES = 16
# The wgmma opcodes: HGMMA for 16-bit and tf32 inputs, QGMMA for fp8 ones.
WGMMA = ("HGMMA", "QGMMA")


@dataclass(frozen=True)
class Instruction:
    opcode: str  # with modifiers: "HGMMA.64x256x16.F32.BF16"
    predicate: str  # "@!P0" or ""
    operands: str
    line: int | None = None  # the kernel source's line it was compiled from (-lineinfo)

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def is_wgmma(self) -> bool:
        return self.base in WGMMA


@dataclass(frozen=True)
class Loop:
    start: int  # index of the first instruction (the branch target)
    end: int  # index of the backward branch

    def __len__(self) -> int:
        return self.end - self.start + 1

    def body(self, code: list[Instruction]) -> list[Instruction]:
        return code[self.start:self.end + 1]


def functions(cubin: bytes) -> dict[str, list[Instruction]]:
    """Per function, its instructions in address order (``nvdisasm -g -json``),
    each with the kernel source line it continues (None in code inlined from
    the prelude's helpers)."""
    records, files = sass_functions_with_lines(cubin)
    kernel_files = {k for k, name in enumerate(files) if name.endswith(".hk")}
    out = {}
    for f in records:
        code, line = [], None
        for i in f.get("sass-instructions", []):
            if "source-file-id" in i:
                line = i["source-line"] if i["source-file-id"] in kernel_files else None
            code.append(Instruction(i["opcode"], i.get("predicate", ""), i.get("operands", ""),
                                    line))
        out[f["function-name"]] = code
    return out


def loops(code: list[Instruction]) -> list[Loop]:
    """Every conditional backward branch as a loop, innermost (shortest) first."""
    out = []
    for index, instruction in enumerate(code):
        if instruction.base == "BRA" and instruction.predicate:
            # the target is the last operand (`BRA !P0, 0x...` also takes a condition)
            target = int(instruction.operands.split(",")[-1], 16) // INSTRUCTION_BYTES
            if target <= index:
                out.append(Loop(target, index))
    return sorted(out, key=len)


def loop_holding(code: list[Instruction], base: str | tuple[str, ...]) -> Loop | None:
    """The innermost loop that holds an instruction with opcode `base` (HGMMA, UTMALDG,
    or one of several: WGMMA)."""
    bases = (base,) if isinstance(base, str) else base
    return next((lp for lp in loops(code)
                 if any(i.base in bases for i in lp.body(code))), None)


def per_iteration(code: list[Instruction], base: str | tuple[str, ...],
                  per_source_iteration: int) -> float | None:
    """Instructions of the innermost loop holding `base`, per source iteration:
    the loop's length divided by how many source iterations it holds (its
    `base` instructions over `per_source_iteration`, in case ptxas unrolled it)."""
    bases = (base,) if isinstance(base, str) else base
    loop = loop_holding(code, bases)
    if loop is None:
        return None
    count = sum(i.base in bases for i in loop.body(code))
    return len(loop) * per_source_iteration / count


def wait_to_mma(code: list[Instruction]) -> int | None:
    """Instructions from the main loop's WARPGROUP.DEPBAR that precedes its first
    HGMMA to that HGMMA (both excluded): the last wait before it in the body,
    else the body's last wait, around the back edge."""
    loop = loop_holding(code, WGMMA)
    if loop is None:
        return None
    body = loop.body(code)
    waits = [k for k, i in enumerate(body) if i.opcode.startswith("WARPGROUP.DEPBAR")]
    mmas = [k for k, i in enumerate(body) if i.is_wgmma]
    if not waits:
        return None
    before = [k for k in waits if k < mmas[0]]
    if before:
        return mmas[0] - before[-1] - 1
    return (len(body) - waits[-1] - 1) + mmas[0]


def epilogue_stores(code: list[Instruction]) -> dict[str, int]:
    """Shared-memory store instructions after the last HGMMA, by opcode."""
    last = max((k for k, i in enumerate(code) if i.is_wgmma), default=-1)
    counts: dict[str, int] = {}
    for instruction in code[last + 1:]:
        if instruction.base in ("STS", "STSM"):
            counts[instruction.opcode] = counts.get(instruction.opcode, 0) + 1
    return counts


def epilogue_length(code: list[Instruction]) -> int:
    """Instructions from the last HGMMA to the first EXIT after it: the consumer's
    epilogue as one thread runs it (straight-line code once the main loop is done)."""
    last = max((k for k, i in enumerate(code) if i.is_wgmma), default=-1)
    end = next((k for k in range(last + 1, len(code)) if code[k].base == "EXIT"), len(code))
    return end - last - 1


# Instruction classes of a loop body (docs/perf.md's table per tile), by base opcode.
# The order is the table's; "other" takes what no class names (memory, NOP, ...).
_CLASSES: dict[str, frozenset[str]] = {
    "HGMMA": frozenset(WGMMA),
    "MUFU": frozenset({"MUFU"}),
    "FMNMX": frozenset({"FMNMX"}),
    "SHFL": frozenset({"SHFL"}),
    "FFMA/FMUL/FADD": frozenset({"FFMA", "FMUL", "FADD"}),
    "FSEL": frozenset({"FSEL"}),
    "convert": frozenset({"F2FP", "F2F", "F2I", "I2F", "I2FP", "F2IP", "FRND"}),
    # barriers, wgmma fences and waits, memory fences, and the election of the
    # thread that arrives or issues
    "sync": frozenset({"SYNCS", "WARPGROUP", "BAR", "MEMBAR", "FENCE", "ERRBAR", "DEPBAR",
                       "WARPSYNC", "CCTL", "ELECT"}),
    # integer and uniform-datapath arithmetic: addresses, descriptors, counters
    "address": frozenset({"IADD3", "UIADD3", "IMAD", "UIMAD", "LEA", "ULEA", "MOV", "UMOV",
                          "SHF", "USHF", "LOP3", "ULOP3", "SEL", "USEL", "PRMT", "UPRMT",
                          "R2UR", "S2R", "S2UR", "CS2R", "IABS", "IMNMX", "UFLO", "POPC",
                          "UPOPC", "BMSK", "UBMSK", "SGXT", "USGXT", "ULDC", "LDC", "BREV",
                          "FLO", "IDP", "UIABS", "UIMNMX", "IADD", "UIADD"}),
    "predicate": frozenset({"ISETP", "UISETP", "FSETP", "PLOP3", "UPLOP3", "P2R", "R2P",
                            "UP2UR", "UR2UP", "PSETP", "VOTE", "VOTEU", "FCHK", "HSETP2"}),
    "branch": frozenset({"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY",
                         "BSYNC", "BREAK", "KILL"}),
}
INSTRUCTION_CLASSES = (*_CLASSES, "other")


def instruction_class(instruction: Instruction) -> str:
    """The class of one instruction (one of INSTRUCTION_CLASSES)."""
    return next((name for name, bases in _CLASSES.items() if instruction.base in bases), "other")


def class_counts(body: list[Instruction]) -> dict[str, int]:
    """How many instructions of each class a listing holds, every class present,
    in INSTRUCTION_CLASSES order."""
    counts = dict.fromkeys(INSTRUCTION_CLASSES, 0)
    for instruction in body:
        counts[instruction_class(instruction)] += 1
    return counts


# ---------------------------------------------------------------- cross-block reductions
# How partial results meet in global memory (split-K, stream-K, attention's dQ),
# by kind, in the order the figures print them.
REDUCTION_KINDS = ("TMA reduce", "element reduce", "flag", "flag wait", "GPU fence",
                   "global store", "global load")
_ATOMIC = frozenset({"RED", "REDG", "ATOM", "ATOMG", "REDAS"})
_FLOAT_TYPES = (".F32", ".F16", ".BF16", ".F64", ".F16x2", ".BF16x2")


def reduction_kind(instruction: Instruction) -> str | None:
    """The kind of an instruction that takes part in a cross-block reduction, or
    None: a TMA or bulk reduce-add (UTMAREDG, UBLKRED), an element-wise
    floating-point red/atom, an integer one (a flag or counter), a strong
    (acquire or relaxed) load of a flag, a GPU-scope memory fence, or a plain
    global store or load (a fix-up workspace's partials, and any other global
    traffic of the threads)."""
    base, opcode = instruction.base, instruction.opcode
    if base in ("UTMAREDG", "UBLKRED"):
        return "TMA reduce"
    if base in _ATOMIC:
        return "element reduce" if any(t in opcode for t in _FLOAT_TYPES) else "flag"
    if base in ("LDG", "LD") and ".STRONG" in opcode:
        return "flag wait"
    if base == "MEMBAR" and (".GPU" in opcode or ".SYS" in opcode):
        return "GPU fence"
    if base == "STG":
        return "global store"
    if base == "LDG":
        return "global load"
    return None


def reduction_counts(code: list[Instruction]) -> dict[str, dict[str, int]]:
    """Per kind (REDUCTION_KINDS, the present ones), how many of each opcode the
    code holds."""
    counts: dict[str, dict[str, int]] = {}
    for instruction in code:
        kind = reduction_kind(instruction)
        if kind is not None:
            by_opcode = counts.setdefault(kind, {})
            by_opcode[instruction.opcode] = by_opcode.get(instruction.opcode, 0) + 1
    return {kind: counts[kind] for kind in REDUCTION_KINDS if kind in counts}


def flag_waits(code: list[Instruction]) -> list[Loop]:
    """The loops that poll a flag: the innermost ones holding a strong global
    load, in code order."""
    polling = [lp for lp in loops(code)
               if any(reduction_kind(i) == "flag wait" for i in lp.body(code))]
    return sorted((lp for lp in polling if not any(
        o is not lp and lp.start <= o.start and o.end <= lp.end for o in polling)),
        key=lambda lp: lp.start)


# ---------------------------------------------------------------- loops by source loop
SPIN = ("SYNCS", "USETMAXREG", "BRA", "NOP", "PLOP3", "YIELD")  # a wait's or setmaxnreg's retry


@dataclass(frozen=True)
class SourceLoop:
    """A SASS loop matched to the IR loop it compiles: the source `for` at
    `line`, `part` of it ("whole", or "interior" / "boundary" of a loop split
    at its boundary iterations, split_boundary_iterations), its instructions
    outside nested loops (`own`) and those per iteration of the source loop
    (`own` over how many source iterations ptxas unrolled into one)."""

    line: int
    part: str
    loop: Loop
    own: list[Instruction]
    per_iteration: float


def source_loops(code: list[Instruction], kernel: ir.Kernel) -> list[SourceLoop]:
    """Every SASS loop (but a wait's retry, and loops of the prelude's helpers,
    which hold no kernel line) matched to a source loop: innermost first, the
    smallest source loop whose body lines hold at least half of its own
    instructions (else the one holding most), among the source loops around
    those its nested SASS loops matched (or those). The parts of one source
    loop are laid out in program order (a part of a constant trip count, as a
    one-role ring's prologue, may be unrolled away); where the count differs
    still (a helper's loop matched too), each is part "?"."""
    sass = sorted((lp for lp in loops(code) if not _spin(lp, code)), key=len)
    groups: dict[int, list[ir.ForLoop]] = {}
    lines: dict[int, set[int]] = {}
    around: dict[int, set[int]] = {}  # the source loops around each
    _source_loops(kernel.body, (), groups, lines, around)
    matched: dict[int, tuple[int, list[Instruction]]] = {}  # SASS loop index -> (line, own)
    for index, lp in enumerate(sass):
        inner = [k for k, o in enumerate(sass[:index]) if lp.start <= o.start and o.end <= lp.end]
        own = [i for k, i in enumerate(lp.body(code), lp.start)
               if not any(sass[o].start <= k <= sass[o].end for o in inner)]
        candidates = set(lines)
        for k in inner:
            if k in matched:
                candidates &= around[matched[k][0]] | {matched[k][0]}
        votes = {line: sum(i.line in lines[line] for i in own) for line in candidates}
        lined = sum(i.line is not None for i in own)
        half = [line for line in votes if votes[line] and 2 * votes[line] >= lined]
        best = min(half, key=lambda line: len(lines[line])) if half else \
            max(votes, key=lambda line: votes[line], default=None)
        if best is not None and votes[best]:
            matched[index] = (best, own)
    # a loop inside another of the same source loop is a helper's (a tile walk's search)
    for k in [k for k in matched if any(
            o != k and matched[o][0] == matched[k][0] and sass[o].start <= sass[k].start
            and sass[k].end <= sass[o].end for o in matched)]:
        del matched[k]
    out = []
    for line in groups:
        found = sorted(((sass[k], own) for k, (at, own) in matched.items() if at == line),
                       key=lambda item: item[0].start)
        parts = groups[line]
        if len(parts) != len(found):  # ptxas unrolls a constant trip count (a prologue)
            parts = [p for p in parts if not _constant_trips(p)] or parts
        for k, (lp, own) in enumerate(found):
            ir_loop = parts[k] if len(parts) == len(found) else None
            part = "?" if ir_loop is None else (
                "whole" if ir_loop.split is None else
                "interior" if ir_loop.split.interior else "boundary")
            out.append(SourceLoop(line, part, lp, own,
                                  len(own) / _unrolled(own, ir_loop or parts[0], kernel)))
    return sorted(out, key=lambda s: s.loop.start)


def _source_loops(block: ir.Block, outer: tuple[int, ...], groups, lines, around) -> None:
    for stmt in block.stmts:
        inside = outer
        if isinstance(stmt, ir.ForLoop):
            line = stmt.span.line
            groups.setdefault(line, []).append(stmt)
            lines.setdefault(line, {line}).update(
                s.span.line for s in walk(stmt.body) if hasattr(s, "span"))
            around.setdefault(line, set()).update(outer)
            inside = outer + (line,)
        for body in bodies(stmt):
            _source_loops(body, inside, groups, lines, around)


def issued_per_iteration(loop: ir.ForLoop, kernel: ir.Kernel) -> tuple[int, int]:
    """(HGMMA, TMA load instructions) one iteration of the loop's body issues,
    nested loops' included."""
    stmts = list(leaves(loop))
    hgmma = sum(s.shape[2] // wgmma_k(_a_dtype(kernel, s)) for s in stmts if isinstance(s, ir.Mma))
    tma = sum(column_blocks(kernel.buffer(s.dst.buffer)) for s in stmts
              if isinstance(s, ir.AsyncLoad))  # one instruction per column block
    return hgmma, tma


def _unrolled(own: list[Instruction], loop: ir.ForLoop, kernel: ir.Kernel) -> float:
    """Source iterations in one pass of the SASS loop: its HGMMA (or TMA loads)
    over one source iteration's, where the body issues any and holds no loop."""
    if any(isinstance(s, ir.ForLoop) for s in walk(loop.body)):
        return 1
    hgmma, tma = issued_per_iteration(loop, kernel)
    if hgmma:
        return max(sum(i.is_wgmma for i in own), hgmma) / hgmma
    if tma:
        return max(sum(i.base == "UTMALDG" for i in own), tma) / tma
    return 1


def _constant_trips(loop: ir.ForLoop) -> bool:
    """A trip count ptxas may unroll away: constant bounds, `start .. start + n`, or
    at most one iteration (a split loop's first iteration, rendered apart)."""
    stop = loop.stop
    if runs_at_most_once(loop):
        return True
    return all(isinstance(e, ir.Scalar) and e.kind is ir.ScalarKind.CONST
               for e in (loop.start, stop)) or (
        isinstance(stop, ir.ScalarOp) and stop.op == "+" and stop.left == loop.start
        and isinstance(stop.right, ir.Scalar) and stop.right.kind is ir.ScalarKind.CONST)


def _spin(loop: Loop, code: list[Instruction]) -> bool:
    return len(loop) <= 4 and all(i.base in SPIN for i in loop.body(code))


def _a_dtype(kernel: ir.Kernel, mma: ir.Mma):
    if isinstance(mma.a, ir.BufferView):
        return kernel.buffer(mma.a.buffer).dtype
    return kernel.buffer(mma.b.buffer).dtype
