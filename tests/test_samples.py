"""End to end: every sample compiles for sm_90a; the SASS shows the syncs the IR has."""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import re

import pytest

from hopperc import driver
from hopperc.backend import cubin_tools
from hopperc.backend.cubin_tools import opcode
from hopperc.codegen.names import kernel_symbol
from hopperc.ir import nodes as ir
from hopperc.ir.accesses import bodies, walk
from hopperc.ir.dataflow import overwrites_on_first_iteration, runs_at_most_once
from tests.conftest import SAMPLES

SAMPLE_IDS = [p.stem for p in SAMPLES]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each sample built once for the whole run: name -> (Built, {function: [SASS
    instruction]}). The test workers of one run share the builds through a file
    in the run's temporary directory: the first to take its lock builds them."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(run / "samples.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = run / "samples.pickle"
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        out = {}
        for path in SAMPLES:
            b = driver.build(driver.read_source(path))
            out[path.stem] = (b, cubin_tools.sass_instructions(b.result.cubin))
        saved.write_bytes(pickle.dumps(out))
        return out


def _opcodes(sass: dict[str, list[str]], kernel: str) -> list[str]:
    return [opcode(i) for i in sass[kernel_symbol(kernel)]]


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_sample_builds_a_cubin_without_spills(built, name):
    b, _ = built[name]
    assert b.result.cubin[:4] == b"\x7fELF"
    assert b.result.resources.spill_stores == 0 and b.result.resources.spill_loads == 0
    usage = cubin_tools.resource_usage(b.result.cubin)[kernel_symbol(b.generated.kernel.name)]
    assert usage["STACK"] == 0 and usage["LOCAL"] == 0


def test_sample_cli_build_writes_cubin_and_metadata(hopperc_cli, tmp_path):
    """`hopperc build samples/*.hk --out-dir DIR`: a cubin and its launch metadata for
    every sample's default (one process for all of them; `make build` builds these and
    the -D variants from samples/library.toml, test_sample_variants.py)."""
    proc = hopperc_cli("build", *map(str, SAMPLES), "--out-dir", str(tmp_path), "--no-cache",
                       "-q")
    assert proc.returncode == 0, proc.stderr
    for path in SAMPLES:
        assert (tmp_path / f"{path.stem}.cubin").read_bytes()[:4] == b"\x7fELF", path.stem
        meta = json.loads((tmp_path / f"{path.stem}.json").read_text())
        threads = driver.check(driver.read_source(path)).threads
        assert meta["kernel"] == path.stem and meta["block"] == [threads, 1, 1], path.stem
        assert meta["dynamic_shared_memory_bytes"] > 0, path.stem


def test_tma_copy_sass(built):
    b, sass = built["tma_copy"]
    ops = _opcodes(sass, "tma_copy")
    # init, arm, load, wait; then store, commit, wait for its reads
    for expected in ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "UTMALDG.2D",
                     "SYNCS.PHASECHK.TRANS64.TRYWAIT", "UTMASTG.2D", "UTMACMDFLUSH", "DEPBAR.LE"):
        assert expected in ops, expected
    assert "FENCE.VIEW.ASYNC.S" not in ops[ops.index("SYNCS.EXCH.64") + 1:]  # async -> async only
    assert ops.index("UTMALDG.2D") < ops.index("UTMASTG.2D") < ops.index("UTMACMDFLUSH")


def test_scale_rows_fence_barrier_store_order(built):
    b, sass = built["scale_rows"]
    ops = _opcodes(sass, "scale_rows")
    store = ops.index("UTMASTG.2D")
    fences = [i for i, op in enumerate(ops) if op == "FENCE.VIEW.ASYNC.S"]
    barriers = [i for i, op in enumerate(ops) if op == "BAR.SYNC.DEFER_BLOCKING"]
    # one fence for the mbarrier init (added by ptxas) and one proxy fence for sy
    assert len(fences) == 2
    handoff_fence = max(f for f in fences if f < store)
    handoff_barrier = max(x for x in barriers if x < store)
    assert handoff_fence < handoff_barrier < store
    assert b.result.ptx.count("fence.proxy.async.shared::cta;") == 1


def test_scale_rows_ptx_order(built):
    ptx = built["scale_rows"][0].result.ptx
    order = ["fence.proxy.async.shared::cta;", "bar.sync 1, 128;",
             "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
             "cp.async.bulk.commit_group;", "cp.async.bulk.wait_group.read 0;"]
    positions = [ptx.index(token) for token in order]
    assert positions == sorted(positions)
    # the fence is not under a per-thread predicate: no `@%p` on its line
    line = next(x for x in ptx.splitlines() if "fence.proxy.async" in x)
    assert not re.match(r"\s*@", line)


# ---------------------------------------------------------------- every sample's syncs
def _nodes(b, kind) -> list:
    return [s for s in walk(b.generated.kernel.body) if isinstance(s, kind)]


def _rendered(block: ir.Block, kind, copies: int = 1) -> int:
    """How many `kind` statements the C++ holds: codegen renders the first
    iteration of a loop whose product overwrites its accumulator apart from the
    rest (scale-d an immediate), so that loop's body appears twice (once where
    it runs at most once)."""
    count = 0
    for stmt in block.stmts:
        count += copies if isinstance(stmt, kind) else 0
        inner = copies
        if isinstance(stmt, ir.ForLoop) and overwrites_on_first_iteration(stmt) \
                and not runs_at_most_once(stmt):
            inner = 2 * copies
        count += sum(_rendered(body, kind, inner) for body in bodies(stmt))
    return count


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_proxy_fences_in_ptx_and_sass_match_the_ir(built, name):
    b, sass = built[name]
    # attention_bwd's dS^T and dQ handoffs sit in such a loop: 5 in the IR, 7 rendered
    fences = _rendered(b.generated.kernel.body, ir.ProxyFence)
    assert b.result.ptx.count("fence.proxy.async.shared::cta;") == fences
    assert "fence.proxy.async;" not in b.result.ptx  # never the unqualified, global form
    # ptxas adds one FENCE.VIEW.ASYNC.S of its own before the mbarrier inits
    init_fence = 1 if _nodes(b, ir.MBarrierInitFence) else 0
    # a release to another block of the cluster is a release fence
    # (fence.release.sync_restrict::shared::cta.cluster), which ptxas makes a
    # MEMBAR.ALL.CTA and a FENCE.VIEW.ASYNC.S; the C++ may render a release twice
    # (a peeled first iteration)
    remote = [s for s in _nodes(b, ir.StageRelease) if s.scope is ir.MemoryScope.CLUSTER]
    release_fences = b.result.ptx.count("fence.release.sync_restrict::shared::cta.cluster;")
    assert (release_fences >= len(remote)) and (release_fences == 0) == (not remote)
    instructions = sass[kernel_symbol(b.generated.kernel.name)]
    in_sass = [i for i in instructions if opcode(i) == "FENCE.VIEW.ASYNC.S"]
    assert len(in_sass) == fences + init_fence + release_fences
    # not predicated per thread: every thread that wrote executes its fence
    assert not any(i.lstrip().startswith("@") for i in in_sass)


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_store_handoff_order_in_ptx(built, name):
    """fence -> bar.sync -> TMA store -> commit_group -> wait_group.read, for each
    store whose source was written by st.shared."""
    b, _ = built[name]
    ptx = b.result.ptx
    fences = _nodes(b, ir.ProxyFence)
    if not fences:  # e.g. TMA load -> TMA store: async -> async
        assert "fence.proxy.async" not in ptx
        return
    if not any(f.reason and f.reason.after == "read by TMA store" for f in fences):
        return  # its fences order generic reads before TMA loads (cross_entropy: no store)
    # any rank: a ragged box's store is a 4-d or 5-d copy of an overlapping view
    store = re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta", ptx).start()
    fence = ptx.rindex("fence.proxy.async.shared::cta;", 0, store)
    barrier = ptx.rindex("bar.sync", 0, store)
    commit = ptx.index("cp.async.bulk.commit_group;", store)
    wait = ptx.index("cp.async.bulk.wait_group.read 0;", commit)
    assert fence < barrier < store < commit < wait


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_ptxas_neither_injects_nor_serializes_wgmma_syncs(built, name):
    """ptxas injects a warpgroup.arrive where wgmma registers were touched
    without a wgmma.fence (C7519), and warns when wgmma gets serialized
    (C7515): both mean our fence/wait placement is off."""
    log = built[name][0].result.log
    assert "C7519" not in log and "C7515" not in log and "serialized" not in log


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_explain_lists_every_inserted_sync(hopperc_cli, built, name):
    b, _ = built[name]
    proc = hopperc_cli("explain", str(next(p for p in SAMPLES if p.stem == name)))
    assert proc.returncode == 0, proc.stderr
    inserted = [s for s in walk(b.generated.kernel.body) if getattr(s, "reason", None)]
    assert proc.stdout.count("    why: ") == len(inserted) > 0


def test_gemm_relu_sass(built):
    b, sass = built["gemm_relu"]
    ops = _opcodes(sass, "gemm_relu")
    assert "HGMMA.64x128x16.F32.BF16" in ops
    code = sass[kernel_symbol("gemm_relu")]
    hgmma = [i for i, op in enumerate(ops) if op.startswith("HGMMA")]
    # K = 64 in k16 steps, one batch; the loop's first iteration is rendered
    # apart, so its body (and each sync in it) appears twice
    assert len(hgmma) == 8
    assert all("gsb0" in code[hgmma[k]] for k in (3, 7))  # the commit closes each batch
    # the first iteration's first product ignores the unset accumulator (scale-d 0:
    # a zero register and a false predicate), every other one accumulates
    assert code[hgmma[0]].endswith("RZ,!UPT")
    assert not any("RZ" in code[i] for i in hgmma[1:])
    depbars = [i for i, x in enumerate(code) if x == "WARPGROUP.DEPBAR.LE gsb0,0x0"]
    assert len(_nodes(b, ir.WgmmaWait)) == 2 and len(depbars) == 3
    # the flush comes after the last product and before the epilogue's store
    assert hgmma[-1] < depbars[-1] < ops.index("UTMASTG.2D")
    arrives = [i for i, op in enumerate(ops) if op == "WARPGROUP.ARRIVE"]
    assert len(_nodes(b, ir.WgmmaFence)) == 1 and len(arrives) == 2


def test_gemm_tf32_sass(built):
    """f32 operands run as HGMMA .TF32, k8: BK = 32 is four per product, and the
    loop's first iteration is rendered apart, so eight in all."""
    _, sass = built["gemm_tf32"]
    hgmma = [op for op in _opcodes(sass, "gemm_tf32") if op.startswith("HGMMA")]
    assert hgmma == ["HGMMA.64x128x8.F32.TF32"] * 8


def test_gemm_bias_gelu_sass(built):
    """Exact GELU is erff per element, branch-free: one MUFU.EX2 for each of the 128
    elements a consumer thread holds (64 x 256 per warpgroup), no call, no loop in
    the epilogue; the stores stay gemm_bias_relu's 16 stmatrix.x4."""
    _, sass = built["gemm_bias_gelu"]
    ops = _opcodes(sass, "gemm_bias_gelu")
    assert ops.count("MUFU.EX2") == 128 and "CALL.REL.NOINC" not in ops
    assert ops.count("STSM.16.M88.4") == 16 and ops.count("UTMASTG.2D") == 4

def test_every_sample_has_a_gpu_test_with_a_torch_reference():
    from tests.gpu.test_gpu_samples import TORCH_REFERENCE

    assert sorted(TORCH_REFERENCE) == sorted(p.stem for p in SAMPLES)
