"""Seeded mutations of the sample kernels: each input is a sample with one to
three edits, chosen to hit a class of bug (token edits, hostile numbers and
names, odd whitespace and line separators, deep nesting, dtype/swizzle/stage/
role changes, statements moved between roles)."""
from __future__ import annotations

import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "samples").glob("*.hk")) + [ROOT / "tests" / "sim" / "manual" / "manual_pipe.hk"]

_TOKEN = re.compile(r"\s+|#[^\n]*|//[^\n]*|[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+"
                    r"|[A-Za-z_][A-Za-z_0-9]*|<-|\.\.|[+=!<>]=|.", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_NUMBER = re.compile(r"[0-9]")

KEYWORDS = {
    "kernel", "tile", "grid", "cluster", "threads", "shared", "stages", "swizzle", "reuses",
    "mbarrier", "role", "warp", "warps", "warpgroup", "regs", "for", "in", "if", "else", "tma",
    "bulk", "via", "elect", "manual", "or", "and", "not", "None", "T",
    "bf16", "f16", "f32", "e4m3", "e5m2", "i32", "none",
}
NUMBERS = ["0", "1", "-1", "2", "3", "7", "1000000", str(2 ** 31 - 1), str(2 ** 31), str(2 ** 32),
           str(2 ** 63), str(2 ** 64), "1e400", "1.0e400", "1.0e-400", "0.0", "9" * 309,
           "9" * 309 + ".0", "9" * 5000, "00", "065"]
HOSTILE_NAMES = [
    # C++ keywords and types
    "int", "float", "double", "class", "return", "template", "auto", "const", "void", "new",
    "delete", "this", "switch", "default", "register", "volatile", "unsigned", "char", "bool",
    "true", "false", "nullptr", "operator", "struct", "namespace", "typename", "asm", "goto",
    # CUDA built-ins and math library names
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "__shared__", "__syncthreads",
    "j1", "y0", "y1", "j0", "sinf", "expf", "exp", "max", "min", "abs", "printf", "malloc",
    "erff", "erf", "tanh", "sigmoid",
    "uint32_t", "uint64_t", "int32_t", "size_t", "half", "float2", "CUtensorMap",
    # names the renderer itself generates
    "hk_warp", "hk_lane", "hk_k", "hk_i", "hk_t", "hk_r", "hk_c", "hk_smem", "hk_smem_base",
    "hk_elect_one", "hk_swizzle", "hk_cdiv", "hk_tensor_map", "hk_warp_index", "hk_tile_m",
    "_", "__x", "x" * 300,
]
WHITESPACE = ["\x0c", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r", "\r\n",
              "\t", "", "\x00", "\u00a0", "\n\n\n", " \\\n"]
DTYPES = ["bf16", "f16", "f32", "e4m3", "e5m2", "i32"]
SWIZZLES = ["none", "32B", "64B", "128B", "16B", "256B"]
ROLE_SIZES = ["warp", "warps 2", "warps 3", "warps 0", "warps 5", "warpgroup", "warpgroup x2",
              "warpgroup x3", "warpgroup x4", "warpgroup x0"]


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _pick(rng: random.Random, toks: list[str], pred) -> int | None:
    places = [i for i, t in enumerate(toks) if pred(t)]
    return rng.choice(places) if places else None


def _significant(tok: str) -> bool:
    return not tok.isspace() and not tok.startswith(("#", "//"))


def delete_token(rng, toks):
    if (i := _pick(rng, toks, _significant)) is not None:
        del toks[i]


def duplicate_token(rng, toks):
    if (i := _pick(rng, toks, _significant)) is not None:
        toks.insert(i, toks[i] + rng.choice(["", " "]))


def swap_tokens(rng, toks):
    places = [i for i, t in enumerate(toks) if _significant(t)]
    if len(places) > 1:
        i = rng.choice(places)
        j = rng.choice(places) if rng.random() < 0.3 else places[min(places.index(i) + 1, len(places) - 1)]
        toks[i], toks[j] = toks[j], toks[i]


def change_number(rng, toks):
    if (i := _pick(rng, toks, lambda t: _NUMBER.match(t) is not None)) is not None:
        toks[i] = rng.choice(NUMBERS)


def rename(rng, toks):
    """Rename one user name everywhere: to a hostile name, or to another name's case variant."""
    names = sorted({t for t in toks if _NAME.fullmatch(t) and t not in KEYWORDS})
    if not names:
        return
    old = rng.choice(names)
    if rng.random() < 0.25:
        other = rng.choice(names)
        new = other.swapcase() if other.swapcase() != other else other.upper() + "_"
    else:
        new = rng.choice(HOSTILE_NAMES)
    for i, t in enumerate(toks):
        if t == old:
            toks[i] = new


def odd_whitespace(rng, toks):
    if (i := _pick(rng, toks, str.isspace)) is not None:
        ws = rng.choice(WHITESPACE)
        toks[i] = ws if rng.random() < 0.5 else toks[i] + ws


def glue(rng, toks):
    """Drop the whitespace between two words (`kernel foo` -> `kernelfoo`)."""
    places = [i for i in range(1, len(toks) - 1)
              if toks[i].isspace() and _NAME.fullmatch(toks[i - 1]) and _NAME.fullmatch(toks[i + 1])]
    if places:
        toks[rng.choice(places)] = ""


def deep_nesting(rng, toks):
    depth = rng.choice([8, 64, 400, 1200])
    form = rng.random()
    if form < 0.5:
        if (i := _pick(rng, toks, lambda t: _NAME.fullmatch(t) or _NUMBER.match(t))) is not None:
            toks[i] = "(" * depth + toks[i] + ")" * depth
    elif form < 0.75:
        if (i := _pick(rng, toks, lambda t: _NUMBER.match(t) is not None)) is not None:
            toks[i] = "-" * depth + toks[i]
    else:
        if (i := _pick(rng, toks, lambda t: t == "{")) is not None:
            toks[i] = "{" + " if 1 == 1 {" * depth
            closing = _matching_brace(toks, i)
            toks[closing] = "}" * depth + "}"


def _matching_brace(toks: list[str], open_index: int) -> int:
    depth = 0
    for j in range(open_index + 1, len(toks)):
        depth += toks[j] == "{"
        if toks[j] == "}":
            if depth == 0:
                return j
            depth -= 1
    return len(toks) - 1


def change_dtype(rng, toks):
    if (i := _pick(rng, toks, lambda t: t in DTYPES)) is not None:
        toks[i] = rng.choice(DTYPES)


def change_swizzle(rng, toks):
    if (i := _pick(rng, toks, lambda t: t in SWIZZLES)) is not None:
        toks[i] = rng.choice(SWIZZLES)
    elif (i := _pick(rng, toks, lambda t: t == "]")) is not None:
        toks[i] += " swizzle " + rng.choice(SWIZZLES)


def change_stages(rng, toks):
    stages = [i for i in range(len(toks) - 2) if toks[i] == "stages"]
    value = rng.choice(["0", "1", "2", "3", "5", "8", "64", str(2 ** 31)])
    if stages:
        toks[rng.choice(stages) + 2] = value
    elif (i := _pick(rng, toks, lambda t: t == "]")) is not None:
        toks[i] += " stages " + value


def change_role(rng, toks):
    roles = [i for i in range(len(toks)) if toks[i] in ("warp", "warps", "warpgroup")]
    if roles:
        i = rng.choice(roles)
        end = i + 1
        if toks[i] != "warp":
            while end < len(toks) and (toks[end].isspace() or re.fullmatch(r"x?[0-9]+", toks[end])):
                end += 1
        toks[i:end] = [rng.choice(ROLE_SIZES) + " "]
    regs = _pick(rng, toks, lambda t: t == "regs")
    if regs is not None and regs + 2 < len(toks) and rng.random() < 0.5:
        i = regs
        toks[i + 2] = rng.choice(["0", "8", "24", "40", "41", "232", "240", "256", "1000"])


def move_statement(text: str, rng: random.Random) -> str:
    """Move one statement line to just after another block's opening line."""
    lines = text.split("\n")
    movable = [i for i, l in enumerate(lines) if l.strip() and not l.strip().startswith(("#", "}"))
               and not l.rstrip().endswith("{") and l.startswith("    ")]
    openers = [i for i, l in enumerate(lines) if l.rstrip().endswith("{")]
    if not movable or not openers:
        return text
    line = lines.pop(rng.choice(movable))
    target = rng.choice([i for i, l in enumerate(lines) if l.rstrip().endswith("{")])
    lines.insert(target + 1, line)
    return "\n".join(lines)


TOKEN_MUTATIONS = [delete_token, duplicate_token, swap_tokens, change_number, change_number,
                   rename, rename, odd_whitespace, glue, deep_nesting, change_dtype,
                   change_swizzle, change_stages, change_role]


def mutate(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """One to three mutations of `text`, and their names."""
    applied = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if rng.random() < 0.08:
            text = move_statement(text, rng)
            applied.append(move_statement.__name__)
            continue
        toks = tokens(text)
        mutation = rng.choice(TOKEN_MUTATIONS)
        mutation(rng, toks)
        applied.append(mutation.__name__)
        text = "".join(toks)
    return text, applied


def mutated_inputs(seed: int, count: int):
    """`count` (name, text) pairs, the same for the same seed; the name says
    which sample, which input and which mutations."""
    rng = random.Random(seed)
    texts = [(path.stem, path.read_text()) for path in CORPUS]
    for n in range(count):
        stem, text = texts[n % len(texts)]
        mutated, applied = mutate(text, rng)
        yield f"{stem}-{seed}-{n}-{'+'.join(applied)}", mutated
