"""SARIF 2.1.0 logs (`--diagnostics sarif`): the format code-scanning services
read. One run, hopperc as the tool with every rule it reported, one result per
problem, located in the `.hk` file with its region (and related locations for
a finding's second statement)."""
from __future__ import annotations

from urllib.parse import quote

from hopperc import __version__
from hopperc.diagnostics import Span
from hopperc.diagnostics.problems import Problem

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# What each rule id means; a rule not listed here is described by its id.
RULES = {
    "syntax": "The .hk text does not follow the grammar.",
    "semantics": "The kernel is well formed but means something hopperc refuses.",
    "resource-limit": "The kernel needs more than a Hopper SM has.",
    "lowering": "The synchronization passes cannot lower the kernel as written.",
    "input": "A file, command-line value or simulator input (array, scalar, shape) hopperc "
             "cannot use.",
    "command-line": "The command line: an unknown command or option, a malformed or missing "
                    "value.",
    "toolchain": "NVRTC, ptxas or another tool failed.",
    "internal": "A bug in hopperc.",
    "ptxas-warning": "ptxas warned about the code generated for this line.",
    "nvrtc-warning": "NVRTC warned about the code generated for this line.",
    "ptxas-performance": "ptxas serialized the kernel's wgmma (an overlap the code asks for "
                         "is lost).",
    "ptxas-spill": "ptxas spilled registers to local memory: the kernel's register tiles "
                   "need more registers than a thread has.",
    "library": "A kernel library file hopperc cannot use.",
    "output": "An output hopperc cannot write.",
    "cache": "The build cache cannot be used; builds go on without it.",
    "deadlock": "The CPU model found a schedule where threads wait forever.",
    "race": "The CPU model found unordered conflicting shared-memory accesses.",
    "missing-proxy-fence": "Generic-proxy writes read by the async proxy without a fence.",
    "barrier-misuse": "A barrier used with inconsistent ids, counts or phases.",
    "wrong-result": "The CPU model's output differs from the reference.",
    "out-of-range-access": "An index outside a buffer or barrier array.",
}


def sarif_log(problems: list[Problem]) -> dict:
    rule_ids = sorted({p.rule for p in problems})
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "hopperc", "version": __version__,
                "informationUri": "https://github.com/hopperc/hopperc",
                "rules": [{"id": rule, "shortDescription": {"text": RULES.get(rule, rule)}}
                          for rule in rule_ids],
            }},
            "results": [_result(p, rule_ids) for p in problems],
        }],
    }


def _result(problem: Problem, rule_ids: list[str]) -> dict:
    result = {"ruleId": problem.rule, "ruleIndex": rule_ids.index(problem.rule),
              "level": "error" if problem.severity == "error" else "warning",
              "message": {"text": "\n".join([problem.message, *problem.notes])}}
    where = _location(problem.span, problem.file)
    if where:
        result["locations"] = [where]
    related = [loc for loc in (_location(span, None) for span in problem.related) if loc]
    if related:
        result["relatedLocations"] = [{**loc, "id": i} for i, loc in enumerate(related)]
    return result


def _location(span: Span | None, file: str | None) -> dict | None:
    uri = span.file if span else file
    if not uri:
        return None
    physical: dict = {"artifactLocation": {"uri": quote(uri)}}
    if span is not None:
        physical["region"] = {"startLine": span.line, "startColumn": span.col,
                              "endLine": span.end_line, "endColumn": span.end_col}
    return {"physicalLocation": physical}
