"""`hopperc.build`: a kernel to a cubin and its metadata through the command line's
cache (a hit both ways, loading no compiler), errors that print as the command line
prints them, and docs/api.md's examples run as written.

Two cubins are compiled here: scale_rows (BM=128) by the command line, tma_copy by
the API (with its PTX and CUDA); everything else is a hit on those or stops before
NVRTC. The cache is this module's own directory."""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import pickle
import re
import subprocess
import sys

import pytest

import hopperc
from hopperc import driver
from hopperc.backend.nvrtc import NvrtcError
from hopperc.buildsys import artifact as artifact_module
from hopperc.buildsys.cache import BuildCache, CacheError, CachedBuild, build_key
from hopperc.target import DEFAULT_ARCH
from tests.conftest import ROOT

SCALE_ROWS = "samples/scale_rows.hk"
TMA_COPY = "samples/tma_copy.hk"
BAD = """kernel k(X: bf16[M]) threads 128 {
    shared b: bf16[64]
    tma b <- Y[0]
}
"""
# The modules a cache hit must not load: the parser, the passes, the templates, NVRTC.
COMPILER = ("hopperc.frontend.parser", "hopperc.passes", "hopperc.codegen.render",
            "hopperc.backend.nvrtc", "hopperc.driver", "lark", "jinja2")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("api-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOPPERC_CACHE_DIR", str(path))
        patch.delenv("HOPPERC_CACHE_MAX_SIZE", raising=False)
        patch.chdir(ROOT)  # paths as docs/api.md gives them
        yield path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hopperc", *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def cli_built(cache_dir, tmp_path_factory):
    """scale_rows with BM=128, as `hopperc build` writes it (a miss: compiled)."""
    cubin = tmp_path_factory.mktemp("cli") / "scale_rows.cubin"
    proc = cli("build", SCALE_ROWS, "-D", "BM=128", "-o", str(cubin))
    assert proc.returncode == 0 and "cached" not in proc.stdout, proc.stderr
    return cubin


@pytest.fixture(scope="module")
def api_built(cache_dir):
    """tma_copy built by the API (a miss), with its PTX and CUDA."""
    return hopperc.build(TMA_COPY, ptx=True, cuda=True)


def test_a_command_line_build_is_a_hit_for_the_api(cli_built):
    artifact = hopperc.build(SCALE_ROWS, defines={"BM": 128})
    assert artifact.cached
    assert artifact.cubin == cli_built.read_bytes()
    assert artifact.metadata == json.loads(cli_built.with_suffix(".json").read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", artifact.key)
    summary = artifact.summary
    assert (summary.kernel, summary.symbol, summary.shared_bytes) == (
        "scale_rows", "u_scale_rows", artifact.metadata["dynamic_shared_memory_bytes"])
    assert summary.registers == artifact.metadata["resources"]["registers"]
    assert (summary.spill_stores, summary.spill_loads) == (0, 0)
    assert artifact.warnings == () and artifact.ptx is None and artifact.cuda is None
    # The key is the content and the recorded name, not how the source was given.
    text = (ROOT / SCALE_ROWS).read_text()
    again = hopperc.build(text, {"BM": 128}, name=SCALE_ROWS)
    assert again.cached and again.key == artifact.key and again.cubin == artifact.cubin


def test_an_api_build_is_a_hit_for_the_command_line(api_built, tmp_path):
    assert not api_built.cached
    proc = cli("build", TMA_COPY, "-o", str(tmp_path / "t.cubin"))
    assert proc.returncode == 0 and "cached" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "t.cubin").read_bytes() == api_built.cubin
    assert json.loads((tmp_path / "t.json").read_text()) == api_built.metadata


def test_ptx_and_cuda_come_on_request(api_built):
    assert ".entry u_tma_copy" in api_built.ptx and ".target sm_90a" in api_built.ptx
    assert re.search(rf'^#line \d+ "{TMA_COPY}"$', api_built.cuda, re.M)
    plain = hopperc.build(TMA_COPY)
    assert plain.cached and (plain.ptx, plain.cuda) == (None, None)
    assert (plain.key, plain.cubin, plain.metadata) == (api_built.key, api_built.cubin,
                                                        api_built.metadata)


def test_a_hit_loads_no_compiler(cli_built):
    code = ("import json, sys, hopperc\n"
            f"artifact = hopperc.build({SCALE_ROWS!r}, defines={{'BM': 128}})\n"
            f"print(json.dumps([artifact.cached, [m for m in {COMPILER!r} "
            "if m in sys.modules]]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert json.loads(proc.stdout) == [True, []]


def test_warnings_are_replayed_on_a_hit_at_their_line(cli_built):
    """A cached entry's warnings come back located in the source, as the command
    line shows them (an entry stored by hand: no kernel here makes ptxas warn)."""
    text = BAD.replace("Y[0]", "X[0]")
    key = build_key(text, "w.hk", {}, "sm_90a")
    cache = BuildCache.from_environment()
    entry = cache.get(build_key((ROOT / SCALE_ROWS).read_text(), SCALE_ROWS, {"BM": 128},
                                "sm_90a"))
    record = {"severity": "warning", "rule": "ptxas-warning", "message": "stack size",
              "file": "w.hk", "line": 3, "column": 1}
    assert cache.put(key, CachedBuild(cubin=entry.cubin, metadata=entry.metadata,
                                      summary=entry.summary, warnings=(record,)))
    (shown,) = hopperc.build(text, name="w.hk").warnings
    assert (shown.severity, shown.rule, shown.file, shown.line) == ("warning", "ptxas-warning",
                                                                     "w.hk", 3)
    assert str(shown) == "w.hk:3:1: warning: stack size\n    tma b <- X[0]\n^"


def test_a_cache_that_cannot_be_written_is_a_warning(cli_built, monkeypatch, tmp_path):
    """As on the command line: the build is returned, with a `cache` warning. (The
    compile is the entry already built: this is about the cache, not the compiler.)"""
    entry = BuildCache.from_environment().get(
        build_key((ROOT / SCALE_ROWS).read_text(), SCALE_ROWS, {"BM": 128}, "sm_90a"))
    monkeypatch.setattr(artifact_module, "build_entry", lambda *args: (entry, (), None))
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    monkeypatch.setenv("HOPPERC_CACHE_DIR", str(not_a_directory))
    artifact = hopperc.build(SCALE_ROWS, defines={"BM": 128})
    assert not artifact.cached and artifact.cubin == entry.cubin
    (shown,) = artifact.warnings
    assert (shown.rule, shown.file) == ("cache", "HOPPERC_CACHE_DIR")
    assert str(shown) == (f"HOPPERC_CACHE_DIR: warning: cannot write the build cache in "
                          f"{not_a_directory}; building without it")


def test_a_failing_remote_tier_is_the_command_lines_warning(cli_built, monkeypatch, tmp_path):
    """A local miss asks the remote tier (a closed port): the build is returned with
    the `cache` warning `hopperc build` prints, from the same function. (The compile
    is the entry already built: this is about the cache, not the compiler.)"""
    entry = BuildCache.from_environment().get(
        build_key((ROOT / SCALE_ROWS).read_text(), SCALE_ROWS, {"BM": 128}, "sm_90a"))
    monkeypatch.setattr(artifact_module, "build_entry", lambda *args: (entry, (), None))
    closed = "http://127.0.0.1:1/x"
    monkeypatch.setenv("HOPPERC_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("HOPPERC_REMOTE_CACHE", closed)
    artifact = hopperc.build(SCALE_ROWS, defines={"BM": 128})
    assert not artifact.cached and artifact.cubin == entry.cubin
    (shown,) = artifact.warnings
    assert (shown.severity, shown.rule, shown.file) == ("warning", "cache",
                                                        "HOPPERC_REMOTE_CACHE")
    assert str(shown).startswith(f"HOPPERC_REMOTE_CACHE: warning: the remote build cache "
                                 f"failed (GET {closed}/")
    store = BuildCache.from_environment()
    assert store.get(artifact.key) == entry and store.remote.failure is None  # stored here
    assert store.remote_warnings() == ()
    store.remote.failure = "GET x: refused"
    (warned,) = store.remote_warnings()
    assert warned.text == ("HOPPERC_REMOTE_CACHE: warning: the remote build cache failed "
                           "(GET x: refused); building without it")


def test_an_error_prints_as_the_command_line_prints_it(cache_dir, tmp_path):
    path = tmp_path / "bad.hk"
    path.write_text(BAD)
    with pytest.raises(hopperc.CompileError) as info:
        hopperc.build(path)
    error = info.value
    assert str(error) == cli("build", str(path), "-o", str(tmp_path / "b.cubin")).stderr.strip()
    assert (error.file, error.line, error.column, error.rule) == (str(path), 3, 14, "semantics")
    assert error.message == "unknown name 'Y'" and error.source_line == "    tma b <- Y[0]"
    (located,) = error.diagnostics
    assert (located.severity, located.end_line, located.end_column) == ("error", 3, 15)
    assert located.text == str(error)


def test_kernel_text_is_named_string_or_its_name(cache_dir):
    for name, shown in ((None, "<string>"), ("k.hk", "k.hk")):
        with pytest.raises(hopperc.CompileError) as info:
            hopperc.build(BAD, name=name)
        assert str(info.value).startswith(f"{shown}:3:14: error: unknown name 'Y'\n")
        assert info.value.file == shown


def test_input_errors_are_compile_errors_without_a_line(cache_dir, tmp_path):
    missing = tmp_path / "missing.hk"
    with pytest.raises(hopperc.CompileError) as info:
        hopperc.build(missing)
    assert str(info.value) == f"{missing}: error: no such file"
    assert (info.value.rule, info.value.line) == ("input", None)
    with pytest.raises(hopperc.CompileError, match="^--arch: error: unsupported target"):
        hopperc.build(BAD, arch="sm_90")
    with pytest.raises(hopperc.CompileError) as info:
        hopperc.build(TMA_COPY, {"BX": 1})
    assert str(info.value).startswith(f"{TMA_COPY}: error: -D BX: the kernel has no tile "
                                      "constant 'BX'")


def test_wrong_arguments_are_python_errors(cache_dir):
    with pytest.raises(TypeError, match="BM must be an int, not str"):
        hopperc.build(TMA_COPY, {"BM": "64"})
    with pytest.raises(ValueError, match="'B M' is not a name"):
        hopperc.build(TMA_COPY, {"B M": 64})
    with pytest.raises(TypeError, match="a path or a kernel's text, not bytes"):
        hopperc.build(BAD.encode())
    with pytest.raises(TypeError, match="name must be a str .*, not int"):
        hopperc.build(TMA_COPY, name=3)
    with pytest.raises(ValueError, match="name is empty"):
        hopperc.build(TMA_COPY, name="")
    with pytest.raises(ValueError, match="the source is an empty string: give a .hk file's"):
        hopperc.build("")
    with pytest.raises(TypeError, match="defines must be a mapping of names to ints"):
        hopperc.build(TMA_COPY, [("BM", 64)])


def test_a_str_naming_a_file_or_ending_in_hk_is_a_path(cache_dir, tmp_path):
    """A `{` in a path does not make it kernel text: a str without a newline that
    names a file or ends in `.hk` is a path; one-line text with a `{` is text."""
    for name in ("k{BM}.hk", "k{BM}.txt"):
        path = tmp_path / name
        path.write_text(BAD)
        with pytest.raises(hopperc.CompileError) as info:
            hopperc.build(str(path))
        assert (info.value.file, info.value.line) == (str(path), 3)
    with pytest.raises(hopperc.CompileError, match=r"^.*k\{M\}\.hk: error: no such file"):
        hopperc.build(str(tmp_path / "k{M}.hk"))
    with pytest.raises(hopperc.CompileError, match="^<string>:1:"):
        hopperc.build("kernel k(X: bf16[M]) { y = 1 }")


def test_an_unusable_cache_setting_says_so(cache_dir, monkeypatch):
    monkeypatch.setenv("HOPPERC_CACHE_MAX_SIZE", "nan")
    with pytest.raises(CacheError, match="HOPPERC_CACHE_MAX_SIZE='nan'"):
        hopperc.build(TMA_COPY)


def test_nvrtc_failing_is_a_toolchain_error(cache_dir, monkeypatch):
    def reject(*_args, **_kwargs):
        raise NvrtcError("rejected", "the log", [])

    monkeypatch.setattr(driver, "compile_cuda", reject)
    with pytest.raises(hopperc.ToolchainError, match="NVRTC failed on generated code:\nthe log"):
        hopperc.build(BAD.replace("Y[0]", "X[0]"), cache=False)


def test_a_compile_error_survives_pickling(cache_dir):
    with pytest.raises(hopperc.CompileError) as info:
        hopperc.build(BAD)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is hopperc.CompileError
    assert (str(copy), copy.line, copy.diagnostics) == (str(info.value), 3,
                                                         info.value.diagnostics)


def test_the_public_names():
    import hopperc.buildsys.cache  # noqa: F401 - the build machinery leaves the function alone

    assert callable(hopperc.build) and hopperc.build.__module__ == "hopperc"
    assert {name: getattr(hopperc, name).__name__ for name in hopperc.__all__
            if name != "__version__"} == {name: name for name in hopperc.__all__
                                          if name != "__version__"}
    assert issubclass(hopperc.CompileError, hopperc.diagnostics.CompileError)
    from hopperc.sim import interpreter  # raised by hopperc.simulate, exported as they are

    assert (hopperc.SimulationFailed, hopperc.SimulationIncomplete) == (
        interpreter.SimulationFailed, interpreter.SimulationIncomplete)
    for function in (hopperc.build, hopperc.compile):  # spelt out: importing hopperc is light
        assert inspect.signature(function).parameters["arch"].default == DEFAULT_ARCH
    # py.typed ships in the wheel: tests/test_install.py


def test_import_hopperc_loads_nothing_else():
    code = ("import sys, hopperc; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hopperc'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "['hopperc']"


FENCED = re.compile(r"```(\w*)\n(.*?)```", re.S)
GPU_MARK = "# needs a GPU"


def run_documented_examples(gpu: bool) -> dict:
    """docs/api.md's ```python blocks in order, in one namespace (returned), from
    the current directory, those marked as needing a GPU only if `gpu`; each
    ```text block after one is what it prints."""
    blocks = [(m.group(1), m.group(2)) for m in FENCED.finditer(
        (ROOT / "docs" / "api.md").read_text())]
    namespace: dict = {}
    for index, (lang, code) in enumerate(blocks):
        if lang != "python" or (code.startswith(GPU_MARK) and not gpu):
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"docs/api.md block {index}", "exec"), namespace)
        after = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
        if after[0] == "text":
            assert printed.getvalue() == after[1], f"block {index}"
    return namespace


def test_the_documented_examples_run_as_written(cli_built):
    namespace = run_documented_examples(gpu=False)
    assert {"artifact", "out", "KERNEL"} <= set(namespace)  # the GPU-free blocks all ran


def test_a_path_with_a_nul_is_a_compile_error():
    with pytest.raises(hopperc.CompileError, match="a path cannot hold a NUL character"):
        hopperc.build("a\0b.hk")
