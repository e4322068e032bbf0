"""`hopperc build` over many kernels: library files (TOML), `-j`, one summary
line per kernel and a count, failures that stop nothing, and `--manifest`."""
from __future__ import annotations

import hashlib
import json

import pytest

from tests.builds.helpers import (FAILING_SOURCES, FAILING_VARIANTS, THREE_VARIANTS, TMA_COPY,
                                  write_library)


def _outputs(directory, names):
    return {name: (directory / f"{name}.cubin").read_bytes() for name in names}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_library_builds_each_variant_with_its_defines(hopperc_cli, tmp_path, jobs):
    write_library(tmp_path, THREE_VARIANTS)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "-j", jobs, "--no-cache",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["tma_copy", "scale_rows", "scale_rows"]
    assert lines[2].endswith("-> out/scale_bm128.cubin")
    assert lines[-1] == "3 kernels: 3 built"
    meta = json.loads((tmp_path / "out" / "scale_bm128.json").read_text())
    assert meta["defines"] == {"BN": 64, "BM": 128}
    assert meta["constants"]["BM"] == 128 and meta["source"] == "scale.hk"


def test_one_worker_and_two_build_the_same_bytes(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS)
    names = ["copy", "scale_bm64", "scale_bm128"]
    for jobs in ("1", "2"):
        proc = hopperc_cli("build", "kernels.toml", "--out-dir", f"j{jobs}", "-j", jobs,
                           "--no-cache", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert _outputs(tmp_path / "j1", names) == _outputs(tmp_path / "j2", names)


def test_a_failing_kernel_stops_nothing_and_is_counted(hopperc_cli, tmp_path):
    broken = TMA_COPY.replace("shared buf", "shared 1buf")
    write_library(tmp_path, THREE_VARIANTS.replace('"copy.hk"', '"broken.hk"'))
    (tmp_path / "broken.hk").write_text(broken)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "-j", "2", "--no-cache",
                       cwd=tmp_path)
    assert proc.returncode == 1
    assert "broken.hk:7:12: error:" in proc.stderr
    assert (tmp_path / "out" / "scale_bm64.cubin").exists()
    assert (tmp_path / "out" / "scale_bm128.json").exists()
    assert not (tmp_path / "out" / "broken.cubin").exists()
    assert proc.stdout.splitlines()[-1] == "3 kernels: 2 built, 1 failed"


def test_command_line_defines_override_the_library(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "-D", "BN=32", "-q",
                       "--no-cache", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "out" / "scale_bm64.json").read_text())
    assert meta["defines"] == {"BN": 32, "BM": 64}


@pytest.mark.parametrize("body, where, message", [
    ("[[kernel]]\nsource = 'copy.hk'\nsourse = 'x'\n", ":1:1",
     "kernel 1 (copy.hk): unknown key 'sourse'"),
    ("[[kernel]]\nsource = 'copy.hk'\n[[kernel]]\nname = 'x'\n", ":3:1",
     "kernel 2: 'source' (the .hk file, relative to the library) is missing"),
    ("[[kernel]]\nsource = 'copy.hk'\ndefines = { BM = '64' }\n", ":1:1",
     "define BM must be an integer, not '64'"),
    ("[[kernel]]\nsource = 'copy.hk'\ndefines = { BM = true }\n", ":1:1", "must be an integer"),
    ("[[kernel]]\nsource = 'copy.hk'\nname = '../x'\n", ":1:1", "'name' must be a file base name"),
    ("[[kernel]]\nsource = 'copy.hk'\n[[kernel.variant]]\ndefines = {}\n", ":1:1",
     "variant 1: each variant needs a 'name'"),
    ("kernel = [{ source = 1 }]\n", "", "kernel 1: 'source' (the .hk file"),
    ("[[kernel]]\nsource = 'copy.hk'\n\n[kernel\n", ":4:8", "not valid TOML"),
    ("", "", "no kernels"),
    ("[[kernels]]\nsource = 'copy.hk'\n", "", "unknown top-level key 'kernels'"),
    ('# lib\n[[kernel]]\nsource = "sub/copy\\u0000.hk"\n', ":2:1",
     "kernel 1: 'source' holds a NUL character ('sub/copy\\x00.hk'), which no path can hold"),
    ('[[kernel]]\nsource = "copy.hk"\nname = "a\\u0000b"\n', ":1:1",
     "kernel 1 (copy.hk): 'name' holds a NUL character"),
    ('[[kernel]]\nsource = "copy.hk"\n[[kernel.variant]]\nname = "a\\u0000b"\n', ":1:1",
     "kernel 1 (copy.hk), variant 1: 'name' holds a NUL character"),
])
def test_library_mistakes_are_named_and_nothing_is_written(hopperc_cli, tmp_path, body,
                                                           where, message):
    """Located at the kernel's `[[kernel]]` line (a syntax error at its place)."""
    write_library(tmp_path, body)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"kernels.toml{where}: error: ") and message in proc.stderr, \
        proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [("build", "a\0b.hk"), ("build", "k.toml", "-o", "k\0.cubin"),
                                  ("build", "k.hk", "--manifest", "m\0.json"),
                                  ("--diagnostics", "json", "check", "a\0b.hk")])
def test_a_nul_in_a_command_line_argument_is_a_usage_error(tmp_path, args):
    """Only a caller in the process can pass one (execve's arguments end at a NUL):
    a message, exit 1, never click's os.stat raising ValueError."""
    import subprocess
    import sys
    code = f"from hopperc.cli import main; main({list(args)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "holds a NUL character, which no path or option value can hold" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_source_fails_that_kernel_only(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS.replace('"scale.hk"', '"gone.hk"'))
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--no-cache", cwd=tmp_path)
    assert proc.returncode == 1 and "gone.hk: error: no such file" in proc.stderr
    assert (tmp_path / "out" / "copy.cubin").exists()


@pytest.mark.parametrize("body, files, clash", [
    (THREE_VARIANTS.replace('"scale_bm128"', '"scale_bm64"'), None,
     "would both write out/scale_bm64.cubin"),
    ("[[kernel]]\nsource = 'copy.hk'\n[[kernel]]\nsource = 'sub/copy.hk'\n", None,
     "copy.hk and sub/copy.hk would both write out/copy.cubin"),
])
def test_output_name_collisions_are_refused_before_anything_is_written(
        hopperc_cli, tmp_path, body, files, clash):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "copy.hk").write_text(TMA_COPY)
    write_library(tmp_path, body)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", cwd=tmp_path)
    assert proc.returncode == 1 and clash in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options, output", [(("--out-dir", "out"), "out/k.cubin"),
                                             ((), "k.cubin"), (("--shard", "1/2"), "k.cubin")])
def test_two_files_with_one_name_are_refused(hopperc_cli, tmp_path, options, output):
    """Every cubin of a command goes to one directory (--out-dir, else the current
    one), so no two of its kernels share an output name: --shard splits by it."""
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "k.hk").write_text(TMA_COPY)
    proc = hopperc_cli("build", "a/k.hk", "b/k.hk", *options, cwd=tmp_path)
    assert proc.returncode == 1 and f"a/k.hk and b/k.hk would both write {output}" in \
        proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_the_manifest_lists_every_kernel_with_hashes_and_status(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS.replace('"copy.hk"', '"gone.hk"'))
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--manifest", "lib.json",
                       "-q", cwd=tmp_path)
    assert proc.returncode == 1
    manifest = json.loads((tmp_path / "lib.json").read_text())
    assert manifest["schema"] == "hopperc.buildsys.manifest/1"
    gone, bm64, bm128 = manifest["kernels"]
    assert gone["status"] == "failed" and gone["outputs"] == [] and gone["errors"]
    # a source that cannot be read declares no kernel: its file name stands in
    assert (gone["name"], gone["kernel"]) == ("gone", "gone")
    assert (bm64["name"], bm128["name"]) == ("scale_bm64", "scale_bm128")
    assert bm64["status"] == "built" and bm64["defines"] == {"BN": 64, "BM": 64}
    meta = json.loads((tmp_path / "out" / "scale_bm64.json").read_text())
    assert bm64["symbol"] == meta["symbol"] and bm64["kernel"] == "scale_rows"
    assert bm64["arch"] == "sm_90a"
    assert bm64["source"] == "scale.hk" and bm64["hopperc"] and bm64["nvrtc"].startswith("13.")
    for record in (bm64, bm128):
        for output in record["outputs"]:
            data = (tmp_path / output["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == output["sha256"]
    assert [o["path"] for o in bm128["outputs"]] == ["out/scale_bm128.cubin",
                                                     "out/scale_bm128.json"]
    again = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--manifest", "lib.json",
                        "-q", cwd=tmp_path)
    assert again.returncode == 1
    statuses = [k["status"] for k in json.loads((tmp_path / "lib.json").read_text())["kernels"]]
    assert statuses == ["failed", "cached", "cached"]


def test_the_manifest_may_not_overwrite_an_input(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--manifest",
                       "kernels.toml", cwd=tmp_path)
    assert proc.returncode == 1 and "would overwrite the input" in proc.stderr
    assert "[[kernel]]" in (tmp_path / "kernels.toml").read_text()


def test_a_library_kernels_depfile_names_the_library(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "-MD", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rule = (tmp_path / "out" / "scale_bm64.d").read_text().split("\n\n")[0]
    targets, deps = rule.split(": \\\n", 1)
    assert targets == "out/scale_bm64.cubin out/scale_bm64.json"
    assert [d.strip(" \\") for d in deps.splitlines()[:2]] == ["scale.hk", "kernels.toml"]


def test_a_manifest_that_cannot_be_written_is_a_clear_error(hopperc_cli, tmp_path):
    write_library(tmp_path, THREE_VARIANTS)
    (tmp_path / "notes").write_text("a file")
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--manifest",
                       "notes/lib.json", "-q", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot write notes/lib.json: notes is a file, not a directory" in proc.stderr
    assert (tmp_path / "out" / "copy.cubin").exists()


def test_a_failing_variant_is_named_in_its_errors_and_the_manifest(hopperc_cli, tmp_path):
    """Both variants of a source fail at one line: each error names its variant,
    and the manifest records its name and the kernel the source declares. Not on a
    terminal, no progress line: nothing is rewritten with a carriage return."""
    write_library(tmp_path, FAILING_VARIANTS, FAILING_SOURCES)
    proc = hopperc_cli("build", "kernels.toml", "--out-dir", "out", "--manifest", "lib.json",
                       "--no-cache", cwd=tmp_path)
    assert proc.returncode == 1 and "\r" not in proc.stderr + proc.stdout
    assert "kernels.toml: variant copy_bm32 (BN=64, BM=32):\ncopy.hk:9:16: error: " in \
        proc.stderr, proc.stderr
    assert "kernels.toml: variant copy_bm256 (BN=64, BM=256):\ncopy.hk:9:16: error: " in \
        proc.stderr
    records = json.loads((tmp_path / "lib.json").read_text())["kernels"]
    assert [(r["name"], r["kernel"], r["status"]) for r in records] == [
        ("copy_bm32", "tma_copy", "failed"), ("copy_bm256", "tma_copy", "failed")]
    assert records[0]["errors"][0].startswith("kernels.toml: variant copy_bm32 (BN=64, BM=32): ")


def test_the_kernel_is_read_from_its_declaration_without_the_parser():
    from hopperc.buildsys.manifest import declared_kernel
    assert declared_kernel("# kernel old(\n// kernel older(\nkernel  new_one (X: f32[M])") == \
        "new_one"
    assert declared_kernel("kernel(") is None
