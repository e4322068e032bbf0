"""The command line: every command, exit codes, atomic outputs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hopperc import __version__
from hopperc.passes import PASS_NAMES
from tests.conftest import ROOT

SCALE_ROWS = str(ROOT / "samples" / "scale_rows.hk")
TMA_COPY = str(ROOT / "samples" / "tma_copy.hk")


def test_version(hopperc_cli):
    """The pinned NVRTC 13.0 writes PTX ISA 9.0 (read from a compile, not a table);
    CUDA 13 cubins load on drivers from 580 on."""
    proc = hopperc_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [f"hopperc {__version__}",
                                        "NVRTC 13.0, PTX ISA 9.0, target sm_90a",
                                        "minimum driver: 580 (CUDA 13.x)"]


@pytest.mark.parametrize("command", [[], ["build"], ["emit"], ["explain"], ["sim"], ["check"],
                                     ["run"], ["bench"]])
def test_help_on_every_command(hopperc_cli, command):
    proc = hopperc_cli(*command, "--help")
    assert proc.returncode == 0 and "Usage:" in proc.stdout


def test_after_choices_are_the_pipeline(hopperc_cli):
    proc = hopperc_cli("emit", "--help")
    for name in PASS_NAMES:
        assert name in proc.stdout


@pytest.mark.parametrize("after", ("front-end",) + PASS_NAMES)
def test_emit_ir_after_every_pass(hopperc_cli, after):
    proc = hopperc_cli("emit", "--ir", "--after", after, SCALE_ROWS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kernel scale_rows")
    assert ("fence.proxy.async" in proc.stdout) == (
        after != "front-end" and PASS_NAMES.index(after) >= PASS_NAMES.index("insert_proxy_fences"))


def test_emit_ptx_has_fence_before_barrier_before_store(hopperc_cli):
    proc = hopperc_cli("emit", "--ptx", SCALE_ROWS)
    assert proc.returncode == 0
    ptx = proc.stdout
    fence = ptx.index("fence.proxy.async.shared::cta")
    assert fence < ptx.index("bar.sync 1, 128", fence) < ptx.index("bulk_group", fence)


def test_emit_cu_is_self_contained_and_mapped(hopperc_cli):
    cu = hopperc_cli("emit", "--cu", SCALE_ROWS).stdout
    assert "#include" not in cu
    assert '#line 14 "' in cu and 'scale_rows.hk"' in cu
    sync_lines = [x for x in cu.splitlines() if "fence.proxy.async" in x or "bar.sync" in x]
    assert sync_lines and all("// " in x for x in sync_lines)


def test_emit_ast_and_sass(hopperc_cli):
    assert hopperc_cli("emit", "--ast", TMA_COPY).stdout.startswith("Kernel @4:1")
    sass = hopperc_cli("emit", "--sass", TMA_COPY)
    assert sass.returncode == 0 and "UTMALDG" in sass.stdout


def test_emit_sass_without_disassembler(monkeypatch, capsys):
    """Without nvdisasm, `emit --sass` names the extra that provides it."""
    from hopperc import cli

    pathfinder = pytest.importorskip("cuda.pathfinder")
    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", lambda name: None)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["emit", "--sass", TMA_COPY], standalone_mode=True)
    assert exit_info.value.code == 2
    assert "pip install 'hopperc[sass]'" in capsys.readouterr().err


def test_emit_to_file(hopperc_cli, tmp_path):
    out = tmp_path / "k.ir"
    assert hopperc_cli("emit", "--ir", TMA_COPY, "-o", str(out)).returncode == 0
    assert out.read_text().startswith("kernel tma_copy")


def test_build_many_files_into_out_dir(hopperc_cli, tmp_path):
    proc = hopperc_cli("build", SCALE_ROWS, TMA_COPY, "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "scale_rows.cubin", "scale_rows.json", "tma_copy.cubin", "tma_copy.json"]
    assert "regs" in proc.stdout and "spills 0/0" in proc.stdout


def test_build_define_overrides_tile_constant(hopperc_cli, tmp_path):
    out = tmp_path / "t.cubin"
    proc = hopperc_cli("build", TMA_COPY, "-o", str(out), "-D", "BN=32")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["tensor_maps"][0]["box"] == [32, 64] and meta["defines"] == {"BN": 32}


def test_build_one_failure_keeps_the_others(hopperc_cli, tmp_path):
    bad = tmp_path / "bad.hk"
    bad.write_text("kernel k(")
    proc = hopperc_cli("build", TMA_COPY, str(bad), "--out-dir", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert (tmp_path / "o" / "tma_copy.cubin").exists()
    assert not (tmp_path / "o" / "bad.cubin").exists()


def test_build_json_diagnostics(hopperc_cli, tmp_path):
    bad = tmp_path / "bad.hk"
    bad.write_text("kernel k(X: bf16[M]) {\n    y = 1\n}\n")
    proc = hopperc_cli("build", str(bad), "--diagnostics", "json", "-o", str(tmp_path / "x.cubin"))
    record = json.loads(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 1 and record["line"] == 2 and record["file"] == str(bad)


def test_usage_errors_are_errors_in_the_input(hopperc_cli, tmp_path):
    """Exit 1, like a bad .hk file: 2 is kept for internal and toolchain errors."""
    assert hopperc_cli("build", SCALE_ROWS, TMA_COPY, "-o", "x.cubin").returncode == 1
    assert hopperc_cli("emit", SCALE_ROWS).returncode == 1
    proc = hopperc_cli("build", SCALE_ROWS, "-D", "BM", "-o", str(tmp_path / "a.cubin"))
    assert proc.returncode == 1 and "NAME=INTEGER" in proc.stderr
    assert hopperc_cli("build", SCALE_ROWS, "--arch", "sm90").returncode == 1
    assert hopperc_cli("build", SCALE_ROWS, "--no-such-option").returncode == 1
    assert hopperc_cli("no-such-command").returncode == 1
    proc = hopperc_cli("build", str(tmp_path))
    assert proc.returncode == 1 and "is a directory" in proc.stderr
    assert hopperc_cli("build", "--help").returncode == 0


def test_explain_lists_every_inserted_sync_in_source_order(hopperc_cli):
    proc = hopperc_cli("explain", SCALE_ROWS)
    assert proc.returncode == 0
    lines = [x for x in proc.stdout.splitlines() if not x.startswith("    why:")]
    numbers = [int(x.split(":")[1]) for x in lines]
    assert numbers == sorted(numbers)
    assert any("fence.proxy.async.shared::cta" in x for x in lines)
    assert "generic write -> async read: sy written by st.shared (scale_rows.hk:13), read by " \
           "TMA store (scale_rows.hk:14)" in proc.stdout


def test_building_loads_neither_the_simulator_nor_numpy(tmp_path):
    """`build` never simulates: the simulator and numpy load only for `sim`/`check`."""
    code = ("import sys\nfrom hopperc.cli import main\ntry:\n"
            f"    main(['build', {str(ROOT / 'samples' / 'tma_copy.hk')!r}, '-o', "
            f"{str(tmp_path / 'k.cubin')!r}, '-q'])\nexcept SystemExit as done:\n"
            "    assert not done.code, done.code\n"
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('hopperc.sim')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    assert (tmp_path / "k.cubin").stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["build", "{k}", "-o", "{k}"], "k.hk would overwrite the input"),
    (["build", "{k}", "-o", "{dir}/k.json"], "name the cubin (e.g. {dir}/k.cubin)"),
    (["emit", "--cu", "{k}", "-o", "{dir}/./k.hk"], "would overwrite the input"),
    (["build", "{k}", "{dir}/b/k.hk", "--out-dir", "{dir}/out"],
     "would both write {dir}/out/k.cubin"),
])
def test_outputs_never_overwrite_an_input_or_each_other(hopperc_cli, tmp_path, args, message):
    """Refused before anything is written: the input is intact, no output exists."""
    kernel = tmp_path / "k.hk"
    text = (ROOT / "samples" / "tma_copy.hk").read_text()
    kernel.write_text(text)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "k.hk").write_text(text)
    proc = hopperc_cli(*[a.format(k=kernel, dir=tmp_path) for a in args])
    assert proc.returncode == 1 and message.format(dir=tmp_path) in proc.stderr, proc.stderr
    assert kernel.read_text() == text
    assert not list(tmp_path.glob("*.cubin")) and not list(tmp_path.glob("*.json"))
    assert not (tmp_path / "out").exists()
