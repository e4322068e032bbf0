"""Inspection of compiled cubins with nvdisasm and cuobjdump.

The tools come from the ``nvidia-cuda-nvdisasm`` and ``nvidia-cuda-cuobjdump``
wheels and are located with ``cuda-pathfinder``.  They are optional: only
checks that look at SASS or ELF metadata need them, so their absence is
reported as ``ToolMissing`` rather than failing at import.  Both tool errors
are ``ToolchainError``s so that the CLI treats them as toolchain failures.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hopperc.diagnostics import ToolchainError

TOOL_TIMEOUT_S = 60
_PACKAGES = {"nvdisasm": "nvidia-cuda-nvdisasm", "cuobjdump": "nvidia-cuda-cuobjdump"}

_RES_FUNCTION_RE = re.compile(r"^\s*Function (?P<name>\S+):\s*$")
_RES_FIELD_RE = re.compile(r"(?P<key>[A-Z]+(?:\[\d+\])?):(?P<value>\d+)")
_INT_RE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_ELF_ATTRIBUTE_RE = re.compile(r"^\s*Attribute:\s*(?P<name>EIATTR_\w+)\s*$")
_ELF_FLAG_FORMAT_RE = re.compile(r"^\s*Format:\s*EIFMT_NVAL\s*$")
_ELF_VALUE_RE = re.compile(r"^\s*Value:\s*(?P<value>.*?)\s*$")
_ELF_FUNCTION_VALUE_RE = re.compile(r"^function: (?P<name>\S+)\(0x[0-9a-fA-F]+\)\s+[^:]+: (?P<value>\S+)$")
_INFO_SECTION = ".nv.info"


class ToolMissing(ToolchainError):
    """A CUDA binary utility is not installed where cuda-pathfinder looks."""


class ToolFailed(ToolchainError):
    """A CUDA binary utility ran but rejected its input or timed out."""

    def __init__(self, tool: str, message: str):
        super().__init__(f"{tool} failed: {message}")
        self.tool = tool


def find_tool(name: str) -> str:
    """Absolute path of ``name`` (``nvdisasm`` or ``cuobjdump``), or ToolMissing saying what to install."""
    package = _PACKAGES.get(name, "the CUDA toolkit")
    hint = (f"{name} was not found; install hopperc's SASS tools: pip install 'hopperc[sass]' "
            f"(the {package} package)")
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        path = find_nvidia_binary_utility(name)
    except Exception as exc:
        raise ToolMissing(f"{hint} ({exc})") from exc
    if not path:
        raise ToolMissing(hint)
    return path


def disassemble(cubin: bytes) -> str:
    """SASS listing as ``nvdisasm -c`` prints it, for humans and golden files."""
    return _run("nvdisasm", ["-c"], cubin)


def sass_instructions(cubin: bytes) -> dict[str, list[str]]:
    """Per function, each SASS instruction as ``"[@PRED ]OPCODE.MODS OPERANDS"``.

    Built from ``nvdisasm -json``, whose output is a two-element list: a
    header dict (ELF, SM, SchemaVersion, ...) and a list of functions, each
    ``{"function-name", "start", "length", "other-attributes",
    "sass-instructions": [{"predicate"?, "opcode", "operands"?,
    "other-attributes"?}]}``.  Operands are kept exactly as nvdisasm writes
    them in JSON, comma-separated without spaces (``URZ,[UR6],UR4``).
    """
    return {
        function["function-name"]: [_instruction_text(i) for i in function.get("sass-instructions", [])]
        for function in sass_functions(cubin)
    }


def sass_functions(cubin: bytes) -> list[dict[str, Any]]:
    """The function records of ``nvdisasm -json`` (see `sass_instructions`)."""
    return _json_functions(json.loads(_run("nvdisasm", ["-json"], cubin)))


def sass_functions_with_lines(cubin: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """The function records of ``nvdisasm -g -json``, whose instructions carry the
    ``source-file-id`` and ``source-line`` of `-lineinfo` (on some; the rest
    continue the one before), and the file names those ids index."""
    listing = json.loads(_run("nvdisasm", ["-g", "-json"], cubin))
    files = next((part["files"] for part in listing
                  if isinstance(part, dict) and "files" in part), [])
    return _json_functions(listing), [f["file"] for f in files]


def opcode(instruction: str) -> str:
    """The opcode with modifiers of an instruction text, without its predicate."""
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per function, ``cuobjdump -res-usage`` counters such as REG, STACK, SHARED, LOCAL.

    The format is ``Function NAME:`` followed by one line of ``KEY:VALUE``
    pairs (``REG:12 STACK:0 SHARED:2056 LOCAL:0 CONSTANT[0]:536 ...``).
    SHARED includes the 1 KiB the driver reserves per block when the module
    uses reserved shared memory, so it can exceed ptxas's ``smem`` figure.
    """
    usage: dict[str, dict[str, int]] = {}
    function = None
    for line in _run("cuobjdump", ["-res-usage"], cubin).splitlines():
        if match := _RES_FUNCTION_RE.match(line):
            function = match["name"]
        elif function is not None and (fields := _RES_FIELD_RE.findall(line)):
            usage[function] = {key: int(value) for key, value in fields}
            function = None
    return usage


def elf_attributes(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per function, the integer-valued ``EIATTR_*`` entries of the cubin's ``.nv.info`` sections.

    ``cuobjdump -elf`` prints each attribute as (tab-separated)::

        <0x9>
        Attribute:  EIATTR_NUM_MBARRIERS
        Format:     EIFMT_HVAL
        Value:      0x1

    Per-function attributes (EIATTR_NUM_MBARRIERS, EIATTR_NUM_BARRIERS,
    EIATTR_MAXREG_COUNT, EIATTR_CBANK_PARAM_SIZE, ...) live in the section
    ``.nv.info.NAME``.  Presence flags such as EIATTR_REG_RECONFIG (setmaxnreg
    used) or EIATTR_EXPLICIT_CLUSTER have format EIFMT_NVAL and no Value line;
    they are reported as 1.  The global ``.nv.info`` section holds
    EIATTR_REGCOUNT, EIATTR_FRAME_SIZE and EIATTR_MIN_STACK_SIZE with values
    of the form ``function: NAME(0xSYM)<TAB>register count: 10``; non-inlined
    device functions appear there as ``$KERNEL$NAME``.  Skipped: values that
    are not a single integer (parameter info, ``0x180 0x1 0x1`` triples) and
    the ``*_OFFSETS`` instruction-offset lists, whose length varies.
    """
    attributes: dict[str, dict[str, int]] = {}
    section = attribute = None
    for line in _run("cuobjdump", ["-elf"], cubin).splitlines():
        if line.startswith("."):
            section, attribute = line.strip(), None
        elif section is None or not section.startswith(_INFO_SECTION):
            continue
        elif match := _ELF_ATTRIBUTE_RE.match(line):
            attribute = None if match["name"].endswith("_OFFSETS") else match["name"]
        elif attribute is None:
            continue
        elif _ELF_FLAG_FORMAT_RE.match(line):
            _store(attributes, attribute, _elf_entry(section, "1"))
            attribute = None
        elif match := _ELF_VALUE_RE.match(line):
            _store(attributes, attribute, _elf_entry(section, match["value"]))
            attribute = None
    return attributes


def _store(attributes: dict[str, dict[str, int]], attribute: str, entry: tuple[str, int] | None) -> None:
    if entry is not None:
        attributes.setdefault(entry[0], {})[attribute] = entry[1]


def _elf_entry(section: str, value: str) -> tuple[str, int] | None:
    """(function, integer value) of one attribute, or None when it is not a single integer."""
    if section == _INFO_SECTION:
        match = _ELF_FUNCTION_VALUE_RE.match(value)
        if match is None:
            return None
        function, value = match["name"], match["value"]
    elif section.startswith(_INFO_SECTION + "."):
        function = section[len(_INFO_SECTION) + 1 :]
    else:
        return None
    number = _parse_int(value)
    return None if number is None else (function, number)


def _parse_int(text: str) -> int | None:
    if not _INT_RE.fullmatch(text):
        return None
    return int(text, 16) if text.startswith("0x") else int(text)


def _json_functions(listing: Any) -> list[dict[str, Any]]:
    """Function records of ``nvdisasm -json``, wherever in the top-level list they sit."""
    return [
        item
        for part in listing
        if isinstance(part, list)
        for item in part
        if isinstance(item, dict) and "function-name" in item
    ]


def _instruction_text(instruction: dict[str, Any]) -> str:
    parts = (instruction.get("predicate"), instruction["opcode"], instruction.get("operands"))
    return " ".join(part for part in parts if part)


def _run(tool: str, args: list[str], cubin: bytes) -> str:
    """Run ``tool`` on ``cubin`` written to a temporary file, since both tools only read files."""
    executable = find_tool(tool)
    with tempfile.TemporaryDirectory(prefix="hopperc-") as directory:
        path = Path(directory) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            completed = subprocess.run(
                [executable, *args, str(path)],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=TOOL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ToolFailed(tool, f"timed out after {TOOL_TIMEOUT_S} s") from exc
    if completed.returncode != 0:
        detail = (completed.stderr or completed.stdout).strip()
        raise ToolFailed(tool, f"exit status {completed.returncode}: {detail}")
    return completed.stdout
