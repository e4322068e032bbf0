"""Source names cannot collide with C++, CUDA, NVRTC's built-in declarations or the
names the compiler generates: every kind of name, spelled like each of those, builds."""
from __future__ import annotations

import json
import re

import pytest

from hopperc import driver
from hopperc.backend.cubin_tools import sass_instructions
from hopperc.codegen import names
from hopperc.codegen.launch import tensor_map_label
from hopperc.diagnostics import SourceFile
from hopperc.buildsys.metadata import launch_metadata
from hopperc.runtime.spec import parse_spec
from tests.conftest import ROOT, SAMPLES

# C++ keywords and types, CUDA built-ins, math functions NVRTC declares (j1, y0,
# sinf), macros, and names the generated code or its prelude uses.
HOSTILE = ["int", "class", "float", "unsigned", "char", "short", "long", "size_t", "int8_t",
           "uint32_t", "asm", "return", "template", "this", "NULL",
           "max", "exp", "main", "threadIdx", "blockIdx", "warpSize", "j1", "y0", "sinf",
           "signbit", "fmaxf", "__expf", "erff", "__syncthreads", "__CUDA_ARCH__", "_", "__x",
           "hk_warp", "hk_smem", "hk_smem_base", "hk_k", "hk_t", "hk_r", "hk_c", "hk_i",
           "hk_tile_m", "hk_tensor_map", "hk_kernel", "hk_elect_one", "hk_reg_phase_b_full",
           "tmap_X", "phase_b_full", "x", "u_x"]


def _kernel(params: str, body: str, header: str = "threads 128") -> str:
    return f"kernel k({params}) {header} {{\n{body}}}\n"


def _tensors() -> str:
    """1-D tensors read as vectors: each name is a pointer parameter and a load."""
    params = ", ".join(f"{n}: f32[K]" for n in HOSTILE)
    reads = "".join(f"    v{i}: f32[16] = {n}[0]\n    acc = acc + v{i}[None, :]\n"
                    for i, n in enumerate(HOSTILE))
    return _kernel(params, "    acc: f32[8, 16] = 0.0\n" + reads)


def _dims() -> str:
    """Each name is a runtime dimension: an int parameter and a vector's bound."""
    params = ", ".join(f"t{i}: f32[{n}]" for i, n in enumerate(HOSTILE))
    reads = "".join(f"    v{i}: f32[16] = t{i}[0]\n    acc = acc + v{i}[None, :]\n"
                    for i in range(len(HOSTILE)))
    return _kernel(params, "    acc: f32[8, 16] = 0.0\n" + reads)


def _scalars() -> str:
    params = "V: f32[K], " + ", ".join(f"{n}: i32" for n in HOSTILE)
    body = "    acc: f32[8, 16] = 0.0\n" + "".join(
        f"    v{i}: f32[16] = V[{n}]\n    acc = acc * {n} + v{i}[None, :]\n"
        for i, n in enumerate(HOSTILE))
    return _kernel(params, body)


def _constants() -> str:
    consts = ", ".join(f"{n} = {64 if i == 0 else 1}" for i, n in enumerate(HOSTILE))
    return _kernel("X: f32[M, N]", f"    acc: f32[{HOSTILE[0]}, 64] = 1.0\n",
                   f"tile({consts}) threads 128")


def _buffers() -> str:
    """TMA-loaded buffers: each gets a compiler-made mbarrier and a phase register
    derived from its name, then element-wise reads and writes."""
    decls = "".join(f"    shared {n}: f32[64, 16]\n" for n in HOSTILE)
    uses = "".join(f"    tma {n} <- X[tile.m, {i}]\n    {n} = {n} * 2.0\n"
                   f"    tma Y[tile.m, {i}] <- {n}\n" for i, n in enumerate(HOSTILE))
    return _kernel("X: f32[M, N], Y: f32[M, N]", decls + uses, "grid(m: M / 64) threads 128")


def _mbarriers() -> str:
    decls = "".join(f"    mbarrier {n}[2]\n" for n in HOSTILE)
    init = "".join(f"        mbarrier.init {n}[1], 1\n" for n in HOSTILE)
    waits = "".join(f"    if thread == 0 {{ mbarrier.arrive {n}[1] }}\n"
                    f"    mbarrier.wait {n}[1], 0\n" for n in HOSTILE)
    body = (decls + "    if thread == 0 {\n" + init + "        fence.mbarrier_init\n    }\n"
            "    bar.sync 0, 128\n" + waits)
    return _kernel("X: f32[M, N]", body, "threads 128 manual")


def _tiles() -> str:
    body = "".join(f"    {n}: f32[8, 16] = 1.0\n" for n in HOSTILE)
    body += "".join(f"    {n} += {HOSTILE[i - 1]} * 2.0\n" for i, n in enumerate(HOSTILE))
    return _kernel("X: f32[M, N]", body)


def _loop_variables() -> str:
    body = "    acc: f32[8, 16] = 0.0\n" + "".join(
        f"    for {n} in 0 .. 2 {{\n        v{i}: f32[16] = V[{n}]\n"
        f"        if {n} > 0 {{ acc = acc + v{i}[None, :] }}\n    }}\n"
        for i, n in enumerate(HOSTILE))
    return _kernel("V: f32[K]", body)


def _roles() -> str:
    """A consumer role and a producer role per name pair, with a ring under an outer
    loop, so the pipelines carry stage and phase registers named after the roles."""
    pairs = list(zip(HOSTILE[0::2], HOSTILE[1::2]))[:3]
    decls = "".join(f"    shared s{i}: f32[64, 16] stages 2\n" for i in range(len(pairs)))
    roles = ""
    for i, (consumer, producer) in enumerate(pairs):
        loop = "for o in 0 .. 2 {{ for j in 0 .. N / 16 {{ {} }} }}"
        roles += (f"    role {consumer}: warpgroup {{ "
                  + loop.format(f"x: f32[64, 16] = s{i}") + " }\n"
                  f"    role {producer}: warp {{ "
                  + loop.format(f"tma s{i} <- X[tile.m, j]") + " }\n")
    return _kernel("X: f32[M, N]", decls + roles, "grid(m: M / 64)")


def _grid_axes() -> str:
    axes = HOSTILE[:3]
    grid = ", ".join(f"{a}: M / 64" for a in axes)
    loads = "".join(f"    tma b <- X[tile.{a}, 0]\n" for a in axes)
    return _kernel("X: f32[M, N]", "    shared b: f32[64, 64]\n" + loads,
                   f"grid({grid}) threads 128")


KINDS = {"tensor": _tensors, "dimension": _dims, "scalar": _scalars, "constant": _constants,
         "buffer": _buffers, "mbarrier": _mbarriers, "tile": _tiles,
         "loop variable": _loop_variables, "role": _roles, "grid axis": _grid_axes}


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_names_of_every_kind_build(kind):
    built = driver.build(SourceFile("names.hk", KINDS[kind]()))
    assert built.result.cubin


@pytest.mark.parametrize("name", ["main", "int", "hk_kernel", "threadIdx", "j1", "__CUDA_ARCH__",
                                  "hk_warp_index", "_"])
def test_kernel_name_is_a_safe_symbol_recorded_in_the_metadata(name):
    source = SourceFile("k.hk", f"kernel {name}(X: f32[M, N]) threads 128 {{\n"
                                "    shared b: f32[64, 64]\n    tma b <- X[0, 0]\n}\n")
    built = driver.build(source)
    meta = launch_metadata(built.generated.kernel, built.generated.launch, source.name,
                           built.arch, {}, built.result.resources)
    assert meta["kernel"] == name and meta["symbol"] == names.kernel_symbol(name)
    assert b"\0" + meta["symbol"].encode() + b"\0" in built.result.cubin  # the ELF's symbol


def test_build_of_a_kernel_named_main_exits_0_and_records_its_symbol(tmp_path, hopperc_cli):
    path = tmp_path / "k.hk"
    path.write_text("kernel main(X: f32[M, N]) threads 128 {\n"
                    "    shared b: f32[64, 64]\n    tma b <- X[0, 0]\n}\n")
    proc = hopperc_cli("build", str(path), "-o", str(tmp_path / "k.cubin"))
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "k.json").read_text())
    assert (meta["schema"], meta["kernel"], meta["symbol"]) == ("hopperc.launch/3", "main",
                                                                  "u_main")
    assert parse_spec(meta).symbol == "u_main"
    assert list(sass_instructions((tmp_path / "k.cubin").read_bytes())) == ["u_main"]


def test_loop_variable_named_like_the_warp_index_does_not_shadow_it():
    """`for hk_warp` used to shadow the generated warp index: `warp == 1` then never
    held and the statement never stored."""
    text = """kernel k(X: f32[M, N], Y: f32[M, N]) threads 64 {
    shared sx: f32[64, 64]
    tma sx <- X[0, 0]
    manual {
        for hk_warp in 0 .. 1 {
            if warp == 1 { sx = sx * 2.0 }
        }
        fence.proxy.async
        bar.sync 2, 64
    }
    tma Y[0, 0] <- sx
}
"""
    cuda = driver.build(SourceFile("shadow.hk", text)).generated.cuda
    loop = cuda.index("for (int u_hk_warp = 0; u_hk_warp < 1; ++u_hk_warp) {")
    assert cuda.index("if ((hk_warp == 1)) {", loop) < cuda.index("hk_st_shared_f32", loop)
    assert "int hk_warp =" not in cuda[loop:]


def test_registers_the_passes_name_after_a_buffer_are_not_shadowed_by_source_names():
    """The phase bit of `b`'s load barrier was `phase_b_full`, and a loop variable of
    that name turned the wait's parity into the loop counter."""
    text = """kernel k(X: f32[M, N], Y: f32[M, N]) threads 128 {
    shared b: f32[64, 64]
    for phase_b_full in 0 .. 4 {
        tma b <- X[phase_b_full, 0]
        b = b * 2.0
        tma Y[phase_b_full, 0] <- b
    }
}
"""
    cuda = driver.build(SourceFile("carried.hk", text)).generated.cuda
    phase = names.carried("phase_b_full")
    assert f"unsigned {phase} = 0u;" in cuda
    assert re.search(rf"hk_mbarrier_try_wait\([^;]*, {phase}\)", cuda)
    assert "for (int u_phase_b_full = 0; u_phase_b_full < 4; ++u_phase_b_full)" in cuda


def test_tensor_map_labels_are_unique():
    """A tensor's second map and a tensor named like it used to share `tmap_X_2`."""
    labels = {tensor_map_label(t, n) for t in ("X", "X_2", "tmap_X", "2_X") for n in (1, 2, 3)}
    assert len(labels) == 12
    text = """kernel k(X: f32[M, N], X_2: f32[M, N], tmap_X: f32[M, N]) threads 128 {
    shared a: f32[64, 64]
    shared b: f32[32, 64]
    tma a <- X[0, 0]
    tma b <- X[0, 0]
    tma a <- X_2[0, 0]
    tma b <- tmap_X[0, 0]
}
"""
    built = driver.build(SourceFile("maps.hk", text))
    params = [m.param for m in built.generated.launch.tensor_maps]
    assert params == ["tmap_X", "tmap2_X", "tmap_X_2", "tmap_tmap_X"]


# Words the templates and the renderer write themselves (C++, CUDA, asm operands).
FIXED_WORDS = set("""
alignas asm auto blockIdx gridDim min max const else extern float for if int maybe_unused memory pragma return
static_cast struct unroll unsigned void volatile while x y z threadIdx
__align__ __cvta_generic_to_shared __expf __float2int_rn __forceinline__ __global__
__grid_constant__ __host__ __device__ __launch_bounds__ __ldg __restrict__ __shared__
__shfl_sync __shfl_xor_sync __syncthreads __trap __uint_as_float __int_as_float char constexpr rsqrtf
erff fabsf fmaxf fminf long opaque short
bool n r l f h _Pragma""".split())
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|^#line[^\n]*', re.M)


def _identifiers(cuda: str) -> set[str]:
    code = _STRINGS_AND_COMMENTS.sub(" ", cuda)
    code = re.sub(r"\b\d+\.?\d*(?:e-?\d+)?[uf]*(?:ll)?\b", " ", code)  # numbers: 1.0f, 16u
    return set(re.findall(r"\b[A-Za-z_]\w*\b", code))


@pytest.mark.parametrize("path", SAMPLES + [ROOT / "tests" / "sim" / "manual" / "manual_pipe.hk"],
                         ids=lambda p: p.stem)
def test_every_generated_identifier_is_fixed_or_in_a_prefixed_space(path):
    """Each identifier is a word the templates write, or starts with hk_ (made by the
    compiler) or u_ (a source name): a source name can never be printed bare."""
    cuda = driver.generate(driver.read_source(path)).cuda
    kernel = cuda[cuda.index('extern "C"'):]  # the prelude's locals are its functions' own
    stray = {w for w in _identifiers(kernel) - FIXED_WORDS
             if not w.startswith((names.COMPILER_PREFIX, names.USER_PREFIX))}
    assert not stray
    prelude = cuda[:cuda.index('extern "C"')]
    prelude_globals = (re.findall(r"^__[^(]*?(\w+)\(", prelude, re.M)
                       + re.findall(r"^struct alignas\(\d+\) (\w+)", prelude, re.M))
    assert prelude_globals and all(g.startswith(names.COMPILER_PREFIX) for g in prelude_globals)


def test_derived_stems_are_not_prefixes_of_fixed_generated_names():
    """Names derived from source names (hk_tile_m, hk_tmap_X, hk_reg_...) live under
    stems that no fixed name of the prelude or the templates starts with."""
    templates = "".join(p.read_text() for p in (ROOT / "templates").glob("*.j2"))
    renderer = "".join(p.read_text() for p in (ROOT / "hopperc" / "codegen").glob("*.py"))
    fixed = set(re.findall(r"\bhk_\w+", templates + renderer))
    for stem in names.DERIVED_STEMS:
        assert not [w for w in fixed if w.startswith(stem) and w not in names.DERIVED_STEMS]
    assert not names.COMPILER_PREFIX.startswith(names.USER_PREFIX)
    assert not names.USER_PREFIX.startswith(names.COMPILER_PREFIX)
