"""`--diagnostics json|sarif`: every error, warning and finding with its rule and
its whole region; SARIF 2.1.0 as code-scanning services read it; ptxas
warnings located at the .hk line."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from hopperc.backend.nvrtc import ptx_source_line
from hopperc.diagnostics import SourceFile
from hopperc.diagnostics.sarif import RULES
from tests.builds.helpers import TMA_COPY, hopperc
from tests.conftest import ROOT
from tests.sim.test_manual_kernels import variant

BAD = "kernel k(X: bf16[M]) {\n    y = 1\n}\n"  # a name never declared
SYNTAX = "kernel k(X: bf16[M]) {\n    tma = = 1\n}\n"


def test_json_errors_carry_a_rule_and_the_end_of_their_region(tmp_path):
    (tmp_path / "bad.hk").write_text(BAD)
    proc = hopperc("build", "bad.hk", "--diagnostics", "json", cwd=tmp_path)
    record = json.loads(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 1 and record["severity"] == "error"
    assert record["rule"] == "semantics" and record["file"] == "bad.hk"
    assert (record["line"], record["column"]) == (2, 5)
    assert record["end_line"] == 2 and record["end_column"] > record["column"]


def _sarif(stdout: str) -> dict:
    """The one run of a SARIF 2.1.0 log, its shape checked: what the standard
    requires (version, runs, tool.driver.name, each result's message.text) and what
    code-scanning services read (ruleId with its ruleIndex, level, locations)."""
    log = json.loads(stdout)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "hopperc"
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning") and result["message"]["text"]
        for where in result.get("locations", []):
            assert where["physicalLocation"]["artifactLocation"]["uri"]
    return run


def test_sarif_for_a_failed_build(tmp_path):
    (tmp_path / "bad.hk").write_text(SYNTAX)
    (tmp_path / "good.hk").write_text(TMA_COPY)
    proc = hopperc("build", "good.hk", "bad.hk", "--diagnostics", "sarif", "--no-cache",
                   cwd=tmp_path)
    assert proc.returncode == 1
    run = _sarif(proc.stdout)  # stdout holds the log and nothing else
    assert "tma_copy" in proc.stderr and "2 kernels: 1 built, 1 failed" in proc.stderr
    (result,) = run["results"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert result["ruleId"] == "syntax" and rules[result["ruleIndex"]] == "syntax"
    assert result["level"] == "error"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "bad.hk"
    assert location["region"] == {"startLine": 2, "startColumn": 9, "endLine": 2,
                                  "endColumn": 10}


def test_sarif_for_a_clean_build_has_no_results(tmp_path):
    (tmp_path / "good.hk").write_text(TMA_COPY)
    proc = hopperc("build", "good.hk", "--diagnostics", "sarif", cwd=tmp_path)
    assert proc.returncode == 0 and _sarif(proc.stdout)["results"] == []


def test_sarif_for_check_findings_with_the_related_statement(tmp_path):
    broken = tmp_path / "broken.hk"
    broken.write_text(variant(28, "fence.proxy.async", None).text)
    proc = hopperc("sim", "broken.hk", "--seeds", "2", "--search", "0", "--diagnostics",
                   "sarif", cwd=tmp_path)
    assert proc.returncode == 1
    (result,) = _sarif(proc.stdout)["results"]
    assert result["ruleId"] == "missing-proxy-fence" and result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (27, 13)
    related = result["relatedLocations"][0]["physicalLocation"]["region"]
    assert (related["startLine"], related["startColumn"]) == (30, 17)
    assert "FAILED: 1 finding" in proc.stderr


PTX = """\t.file\t1 "/src/k.hk"
\t.file\t2 "/k.cu"
.visible .entry k(
{
\t.loc\t1 7 3
\tmov.u32 %r1, 0;
\t.loc\t2 40 1, function_name $L__info_string0, inlined_at 1 9 5
\tadd.s32 %r2, %r1, 1;
\t.loc\t2 41 1
\tst.u32 [%rd1], %r2;
}
"""


def test_ptx_lines_lead_back_to_the_hk_line():
    lines = PTX.split("\n")
    assert ptx_source_line(PTX, lines.index("\tmov.u32 %r1, 0;") + 1, "src/k.hk") == 7
    # inlined code is located at the line it was inlined at; code of another
    # file, not inlined from the .hk file, at no .hk line
    assert ptx_source_line(PTX, lines.index("\tadd.s32 %r2, %r1, 1;") + 1, "src/k.hk") == 9
    assert ptx_source_line(PTX, lines.index("\tst.u32 [%rd1], %r2;") + 1, "src/k.hk") is None
    assert ptx_source_line(PTX, 3, "src/k.hk") is None


def test_ptxas_warnings_are_shown_at_the_hk_line():
    from types import SimpleNamespace

    from hopperc.buildsys.jobs import _warnings
    log = "ptxas /tmp/x.ptx, line 6; warning : Unused register %r9\n"
    built = SimpleNamespace(result=SimpleNamespace(log=log, ptx=PTX))
    source = SourceFile("src/k.hk", "\n".join(f"line {n}" for n in range(1, 12)))
    (warning,) = _warnings(built, source, "src/k.hk")
    assert warning.rule == "ptxas-warning" and warning.severity == "warning"
    assert warning.span.line == 7 and warning.exit_code == 0
    assert warning.text.splitlines()[:2] == ["src/k.hk:7:1: warning: Unused register %r9",
                                             "line 7"]


# Tile a's S is read after `wait_group 1` while the previous iteration's P V may
# still be in flight at the loop's head: the PTX is right (the wait completes
# every batch but S_b), but ptxas cannot tell and serializes every wgmma (C7514).
SERIALIZED = """kernel overlap(Q: bf16[L, 64], K: bf16[L, 64], V: bf16[L, 64], O: bf16[L, 64])
    tile(BM = 64, BN = 64) grid(m: L / BM)
{
    shared sq: bf16[BM, 64] swizzle 128B
    shared ska: bf16[BN, 64] stages 2 swizzle 128B
    shared skb: bf16[BN, 64] stages 2 swizzle 128B
    shared sv: bf16[BN, 64] stages 2 swizzle 128B
    shared so: bf16[BM, 64] swizzle 128B
    role math: warpgroup regs 240 {
        tma sq <- Q[tile.m, 0]
        o: f32[64, 64] = 0
        for j in 0 .. L / BN {
            sa: f32[64, BN] = sq @ ska^T
            sb: f32[64, BN] = sq @ skb^T
            t: f32[64, BN] = sa * 2.0
            p: bf16[64, BN] = bf16(sb)
            o = o * 0.5 + t
            o += p @ sv
        }
        so = bf16(o)
        tma O[tile.m, 0] <- so
    }
    role load: warp regs 24 {
        for j in 0 .. L / BN {
            tma ska <- K[j, 0]
            tma skb <- K[j, 0]
            tma sv <- V[j, 0]
        }
    }
}
"""


def test_ptxas_serialized_wgmma_is_a_warning_at_the_kernel_line(tmp_path):
    """ptxas reports a lost wgmma overlap as info with no line; hopperc shows it
    as a warning at the kernel (rule ptxas-performance), and the build succeeds.
    Ordered with a full wait first in the iteration (t read after p), it is gone."""
    (tmp_path / "k.hk").write_text(SERIALIZED)
    proc = hopperc("build", "k.hk", "-o", "k.cubin", "--diagnostics", "json", cwd=tmp_path)
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    (record,) = [r for r in records if r["rule"] == "ptxas-performance"]
    assert proc.returncode == 0 and (tmp_path / "k.cubin").stat().st_size > 0
    assert record["severity"] == "warning" and record["line"] == 1
    assert record["message"].startswith("ptxas C7514: wgmma.mma_async instructions are "
                                        "serialized")
    reordered = SERIALIZED.replace("            t: f32[64, BN] = sa * 2.0\n", "").replace(
        "            p: bf16[64, BN] = bf16(sb)\n",
        "            p: bf16[64, BN] = bf16(sb)\n            t: f32[64, BN] = sa * 2.0\n")
    (tmp_path / "k.hk").write_text(reordered)
    proc = hopperc("build", "k.hk", "-o", "k.cubin", "--no-cache", cwd=tmp_path)
    assert proc.returncode == 0 and "C7514" not in proc.stderr, proc.stderr


def test_ptxas_performance_reports_are_parsed_without_the_function_name():
    from hopperc.backend.nvrtc import PTXAS_PERFORMANCE_FILE, parse_diagnostics
    log = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions "
           "are serialized due to X in the function 'u_k'\nptxas info    : Used 90 registers\n")
    (found,) = parse_diagnostics(log)
    assert found.file == PTXAS_PERFORMANCE_FILE and found.severity == "warning"
    assert found.message == "ptxas C7515: wgmma.mma_async instructions are serialized due to X"


# Command lines refused before (or while) the command runs: click's usage
# errors, the build's own refusals, an unreadable input, a bad library file.
REFUSED = [
    (["build", "k.hk", "--bogus"], "command-line", "No such option '--bogus'", None),
    (["build", "k.hk", "-D", "X"], "command-line", "expected NAME=INTEGER, got 'X'", None),
    (["sim", "k.hk", "--shape", "M"], "command-line", "expected NAME=INTEGER, got 'M'", None),
    (["check"], "command-line", "Missing argument 'FILE'", None),
    (["buld", "k.hk"], "command-line", "No such command 'buld'", None),
    (["build", "k.hk", "-o", "k.hk"], "command-line", "would overwrite the input k.hk", None),
    (["build", "gone.hk"], "input", "no such file", "gone.hk"),
    (["build", "lib.toml"], "library", "not valid TOML", "lib.toml"),
]


def _run_in_process(tmp_path, monkeypatch, args):
    from hopperc.cli import main
    (tmp_path / "k.hk").write_text(BAD)
    (tmp_path / "lib.toml").write_text("[[kernel]]\nsource = 'k.hk'\n[kernel\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOPPERC_CACHE_DIR", str(tmp_path / "cache"))
    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("args, rule, message, uri", REFUSED)
def test_every_refused_command_line_is_a_sarif_result(tmp_path, monkeypatch, args, rule,
                                                      message, uri):
    result = _run_in_process(tmp_path, monkeypatch, [*args, "--diagnostics", "sarif"])
    assert result.exit_code == 1, result.output
    (found,) = _sarif(result.stdout)["results"]
    assert found["ruleId"] == rule and found["level"] == "error"
    assert message in found["message"]["text"]
    if uri is None:
        assert "locations" not in found  # an option is in no file
    else:
        assert found["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri
    assert "Usage:" not in result.stderr


def test_a_bad_library_file_is_located_in_sarif(tmp_path, monkeypatch):
    result = _run_in_process(tmp_path, monkeypatch, ["build", "lib.toml", "--diagnostics=sarif"])
    (found,) = _sarif(result.stdout)["results"]
    region = found["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (3, 8)


@pytest.mark.parametrize("args, rule, message, uri", REFUSED[:2])
def test_a_refused_command_line_is_one_json_record(tmp_path, monkeypatch, args, rule, message,
                                                   uri):
    result = _run_in_process(tmp_path, monkeypatch, [*args, "--diagnostics", "json"])
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()  # nothing but the record
    record = json.loads(line)
    assert (record["severity"], record["rule"], record["exit_code"]) == ("error", rule, 1)
    assert message in record["message"] and record["file"] is None


def test_a_refused_command_line_in_text_keeps_clicks_usage(tmp_path, monkeypatch):
    result = _run_in_process(tmp_path, monkeypatch, ["build", "k.hk", "--bogus"])
    assert result.exit_code == 1 and "Usage:" in result.stderr and result.stdout == ""


def test_every_rule_hopperc_raises_is_described():
    """A rule id a diagnostic spells in hopperc/ (`rule="..."`, `rule = "..."`) is
    one SARIF describes: no second spelling of a rule, no undescribed one."""
    spelled = {match for path in (ROOT / "hopperc").rglob("*.py")
               for match in re.findall(r'\brule ?= ?"([a-z-]+)"', path.read_text())}
    assert spelled and spelled <= set(RULES), sorted(spelled - set(RULES))
