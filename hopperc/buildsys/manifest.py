"""`hopperc build --manifest`: one record per kernel, for a runtime or a packager
to find the library without globbing (the schema is in docs/ci.md)."""
from __future__ import annotations

import json
import re
from pathlib import Path

# `kernel NAME(`, the first declaration outside a comment (the grammar's COMMENT)
_COMMENT = re.compile(r"(#|//)[^\n]*")
_KERNEL = re.compile(r"\bkernel\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def declared_kernel(text: str) -> str | None:
    """The kernel's name as its source declares it, read without the parser, so a
    build that fails (even at the syntax) is still recorded under its kernel."""
    match = _KERNEL.search(_COMMENT.sub("", text))
    return match[1] if match else None


def manifest_text(results: list, arch: str, shard=None) -> str:
    """One record per kernel: where it came from, what was built, and whether;
    with `--shard I/N`, which shard this manifest is of."""
    from hopperc import __version__
    from hopperc.buildsys import toolchain

    nvrtc = toolchain.nvrtc().version
    records = []
    for result in results:
        summary = result.entry.summary if result.entry else {}
        records.append({
            "name": result.job.cubin.stem,
            "source": result.recorded_name, "defines": result.job.defines, "arch": arch,
            # a source that cannot be read declares nothing: its file name stands in
            "kernel": summary.get("kernel") or result.kernel or Path(result.job.source).stem,
            "symbol": summary.get("symbol"),
            "status": "failed" if result.exit_code else "cached" if result.cached else "built",
            "outputs": [{"path": path, "sha256": digest}
                        for path, digest in result.hashes.items()],
            "errors": [p.message for p in result.problems if p.severity == "error"],
            "hopperc": __version__, "nvrtc": nvrtc,
        })
    sharded = {"shard": {"index": shard.index, "total": shard.total}} if shard else {}
    return json.dumps({"schema": "hopperc.buildsys.manifest/1", **sharded, "kernels": records},
                      indent=2) + "\n"
