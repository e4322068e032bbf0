"""Small kernels shared by the pass tests; each isolates one situation."""

HEADER = """kernel k(X: bf16[M, N], Y: bf16[M, N])
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
"""

COPY = HEADER + """    shared buf: bf16[BM, BN]
    tma buf <- X[tile.m, tile.n]
    tma Y[tile.m, tile.n] <- buf
}
"""

WRITE_THEN_STORE = HEADER + """    shared sy: bf16[BM, BN]
    sy = 1.0
    tma Y[tile.m, tile.n] <- sy
}
"""

LOAD_THEN_READ = HEADER + """    shared sx: bf16[BM, BN]
    shared sy: bf16[BM, BN]
    tma sx <- X[tile.m, tile.n]
    x: f32[BM, BN] = f32(sx)
}
"""

STORE_LOOP = HEADER + """    shared sc: bf16[2, BM, BN]
    sc = 1.0
    for i in 0 .. 2 {
        tma Y[tile.m, tile.n * 2 + i] <- sc[i]
    }
}
"""

BRANCH_WRITE_THEN_STORE = """kernel k(X: bf16[M, N], Y: bf16[M, N], flag: i32)
    tile(BM = 64, BN = 64) grid(m: M / BM, n: N / BN) threads 128
{
    shared sy: bf16[BM, BN]
    tma sy <- X[tile.m, tile.n]
    if flag > 0 {
        sy = 0.0
    }
    tma Y[tile.m, tile.n] <- sy
}
"""

REWRITE_EACH_ITERATION = HEADER + """    shared sy: bf16[BM, BN]
    for i in 0 .. 4 {
        sy = 1.0
        tma Y[tile.m, tile.n * 4 + i] <- sy
    }
}
"""

READ_THEN_REFILL = HEADER + """    shared sx: bf16[BM, BN]
    for i in 0 .. 4 {
        tma sx <- X[tile.m, tile.n * 4 + i]
        x: f32[BM, BN] = f32(sx)
    }
}
"""
