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

from hopperc.backend.cubin_tools import sass_functions

INSTRUCTION_BYTES = 16
# The wgmma opcodes: HGMMA for 16-bit inputs, QGMMA for fp8 ones.
WGMMA = ("HGMMA", "QGMMA")


@dataclass(frozen=True)
class Instruction:
    opcode: str  # with modifiers: "HGMMA.64x256x16.F32.BF16"
    predicate: str  # "@!P0" or ""
    operands: str

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
    """Per function, its instructions in address order (``nvdisasm -json``)."""
    return {f["function-name"]: [Instruction(i["opcode"], i.get("predicate", ""),
                                             i.get("operands", ""))
                                 for i in f.get("sass-instructions", [])]
            for f in sass_functions(cubin)}


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
