"""Kernels generated from `grammar/hk.lark` with hypothesis, steered towards
kernels the front end accepts so the passes and the renderer see them too.

Raw grammar output is almost never meaningful, so every terminal has an explicit
strategy (names from a small pool of what the samples declare plus hostile
ones, small powers of two, real dtypes and swizzles, a space after each token so
keywords never glue onto names), and most inputs are a valid skeleton (a TMA
copy, an element-wise tile kernel, row reductions, a warp-specialized GEMM) with chosen
parameters and one statement or expression drawn from the grammar spliced in.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.extra.lark import LarkStrategy
from lark import Lark
from lark.grammar import NonTerminal

from tests.fuzz.mutate import DTYPES, HOSTILE_NAMES, NUMBERS

GRAMMAR = Path(__file__).resolve().parents[2] / "grammar" / "hk.lark"

SCOPE_NAMES = ["M", "N", "K", "BM", "BN", "BK", "tile", "m", "n", "k", "X", "Y", "A", "B", "C",
               "sa", "sb", "sc", "buf", "acc", "x", "s", "wg", "thread", "lane", "full", "j"]
INTS = ["0", "1", "2", "4", "8", "16", "32", "64", "128", "256"]


def _terminals() -> dict[str, st.SearchStrategy[str]]:
    """An explicit strategy for every terminal, each token followed by a space."""
    parser = Lark(GRAMMAR.read_text(), parser="lalr")
    pools = {
        "NAME": st.one_of(st.sampled_from(SCOPE_NAMES), st.sampled_from(HOSTILE_NAMES)),
        "INT": st.one_of(st.sampled_from(INTS), st.sampled_from([n for n in NUMBERS if n.isdigit()])),
        "FLOAT": st.sampled_from(["0.0", "1.0", "2.5", "0.125", "1.0e400", "1e-3"]),
        "DTYPE": st.sampled_from(DTYPES),
        "SWIZZLE": st.sampled_from(["none", "32B", "64B", "128B"]),
        "WG_COUNT": st.sampled_from(["x1", "x2", "x3"]),
        "SYNC_BARE": st.sampled_from(["fence.proxy.async", "fence.mbarrier_init", "wgmma.fence",
                                      "wgmma.commit", "bulk.commit"]),
        "SYNC_OP": st.sampled_from(["mbarrier.init", "mbarrier.arrive", "mbarrier.expect_tx",
                                    "mbarrier.wait", "mbarrier.inval", "bar.sync", "wgmma.wait",
                                    "bulk.wait_read"]),
        "COMMENT": st.just("# c\n"),
        # Odd separators come from the mutations; here they would end most inputs early.
        "WS": st.sampled_from([" ", "\n", "\t"]),
    }
    explicit = {}
    for terminal in parser.terminals:
        pattern = terminal.pattern
        base = pools.get(terminal.name)
        if base is None:
            base = st.just(pattern.value) if pattern.type == "str" else None
        if base is not None:
            explicit[terminal.name] = base.map(lambda text: text + " ")
    return parser, explicit


_PARSER, _EXPLICIT = _terminals()


@lru_cache(maxsize=None)
def grammar_strategy(start: str) -> st.SearchStrategy[str]:
    """Text derived from rule `start`, with explicit strategies for the terminals it reaches."""
    terminals, _rules, ignored = _PARSER.grammar.compile([start], ())
    reachable = {t.name for t in terminals} | set(ignored)
    return _BoundedLark(_PARSER, start, {k: v for k, v in _EXPLICIT.items() if k in reachable})


class _BoundedLark(LarkStrategy):
    """from_lark with a depth bound: past MAX_DEPTH rules, each rule takes its
    shortest expansion, so derivations end (unbounded, most draws overrun)."""

    MAX_DEPTH = 12

    def __init__(self, grammar, start, explicit):
        super().__init__(grammar, start, explicit, st.characters(codec="utf-8"))
        self.depth = 0
        self.shortest = {name: st.just(min(strategy.elements, key=len))
                         for name, strategy in self.nonterminal_strategies.items()}

    def draw_symbol(self, data, symbol, draw_state):
        if not isinstance(symbol, NonTerminal):
            return super().draw_symbol(data, symbol, draw_state)
        saved = self.nonterminal_strategies
        self.depth += 1
        try:
            if self.depth > self.MAX_DEPTH:
                self.nonterminal_strategies = {**saved, symbol.name: self.shortest[symbol.name]}
            super().draw_symbol(data, symbol, draw_state)
        finally:
            self.nonterminal_strategies = saved
            self.depth -= 1


_SKELETONS = {
    "copy": """\
kernel fz(X: {dt}[M, N], Y: {dt}[M, N])
    tile(BM = {bm}, BN = {bn}) grid(m: M / BM, n: N / BN) threads {threads}
{{
    shared buf: {dt}[BM, BN] swizzle {sw}
    tma buf <- X[tile.m, tile.n]
    {stmt}
    tma Y[tile.m, tile.n] <- buf
}}
""",
    "elementwise": """\
kernel fz(X: bf16[M, N], S: f32[M], Y: {dt}[M, N])
    tile(BM = {bm}, BN = {bn}) grid(m: M / BM, n: N / BN) threads {threads}
{{
    shared sx: bf16[BM, BN] swizzle {sw}
    shared sy: {dt}[BM, BN] swizzle {sw}
    tma sx <- X[tile.m, tile.n]
    s: f32[BM] = S[tile.m]
    x: f32[BM, BN] = {expr}
    {stmt}
    sy = {dt}(x)
    tma Y[tile.m, tile.n] <- sy
}}
""",
    "rows": """\
kernel fz(X: bf16[M, N], S: f32[M], Y: {dt}[M, N])
    tile(BM = {rows}, BN = {bn}) grid(m: M / BM) threads {threads}
{{
    shared sx: bf16[BM, BN] swizzle {sw}
    shared sy: {dt}[BM, BN] swizzle {sw}
    s: f32[BM] = S[tile.m]
    m: f32[BM] = -inf
    for j in 0 .. N / BN {{
        tma sx <- X[tile.m, j]
        x: f32[BM, BN] = {expr}
        m = max(m, rowmax(x))
        l: f32[BM] = rowsum(x)
        {stmt}
        sy = {dt}(x - m[:, None] + l[:, None])
        tma Y[tile.m, j] <- sy
    }}
}}
""",
    "gemm": """\
kernel fz(A: bf16[M, K], B: bf16[N, K], C: {dt}[M, N])
    tile(BM = 128, BN = {bn}, BK = 64) grid(m: M / BM, n: N / BN) {schedule}
{{
    shared sa: bf16[BM, BK] stages {stages} swizzle 128B
    shared sb: bf16[BN, BK] stages {stages} swizzle 128B
    shared sc: {dt}[BM, BN]
    role math: warpgroup x2 regs {regs} {{
        acc: f32[64, BN] = 0
        for k in 0 .. K / BK {{
            acc += sa[wg] @ sb^T
        }}
        {stmt}
        sc[wg] = {dt}(acc)
        tma C[tile.m, tile.n] <- sc
    }}
    role load: {role} {{
        for k in 0 .. K / BK {{
            tma sa <- A[tile.m, k]
            tma sb <- B[tile.n, k]
        }}
    }}
}}
""",
}
_SAFE_EXPRS = ["f32(sx)", "f32(sx) * s[:, None]", "f32(sx) + 1.0", "max(f32(sx), 0.0)",
               "f32(sx) * 2.0 - s[:, None]",
               "tanh(f32(sx)) * sigmoid(f32(sx)) + erf(sin(f32(sx)) - cos(s[:, None]))"]


@st.composite
def skeleton_kernels(draw) -> str:
    """A valid kernel with chosen parameters; often one grammar-drawn piece spliced in."""
    family = draw(st.sampled_from(sorted(_SKELETONS)))
    stmt = draw(st.one_of(st.just(""), st.just(""), grammar_strategy("stmt")))
    expr = draw(st.one_of(st.sampled_from(_SAFE_EXPRS), grammar_strategy("expr")))
    return _SKELETONS[family].format(
        dt=draw(st.sampled_from(DTYPES)), bm=draw(st.sampled_from(["64", "64", "128", "32"])),
        rows=draw(st.sampled_from(["64", "16", "4", "1", "8"])),
        bn=draw(st.sampled_from(["64", "64", "128", "256", "32", "8"])),
        threads=draw(st.sampled_from(["128", "128", "256", "32", "96"])),
        sw=draw(st.sampled_from(["128B", "128B", "64B", "32B", "none"])),
        stages=draw(st.sampled_from(["2", "4", "1", "3"])),
        regs=draw(st.sampled_from(["232", "240", "168"])),
        role=draw(st.sampled_from(["warp regs 40", "warp", "warps 2 regs 40", "warpgroup regs 40"])),
        schedule=draw(st.sampled_from(["", "", "persistent", "persistent pingpong",
                                       "cluster(2, 1)", "cluster(2) persistent",
                                       "cluster(2, 1) persistent pingpong", "cluster(1, 2)"])),
        stmt=stmt, expr=expr)


def kernels() -> st.SearchStrategy[str]:
    """Mostly skeletons; a quarter whole kernels straight from the grammar."""
    return st.one_of(skeleton_kernels(), skeleton_kernels(), skeleton_kernels(),
                     grammar_strategy("start"))
